"""Template tags (ERB, Handlebars/Go, Liquid/Jinja) are site plumbing: never a heading, a
title or a citation id.

A documentation site built by a static generator starts its pages with a heading such as
``# <%= current_page.data.title %>``: the page's title comes from front matter when the site
is built. Indexed as written, every citation of such a page named the template.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from governed_evidence.config import Classification
from governed_evidence.ingest.classify import classify
from governed_evidence.ingest.loaders.markdown import parse_markdown
from governed_evidence.ingest.passages import prepare_document
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.ingest.report import IngestReport
from governed_evidence.ingest.templates import strip_template_tags
from governed_evidence.store.connection import connect
from tests.helpers import SHARED_DATA, HashEmbedder, write

GDS_WAY = SHARED_DATA / "corpora" / "gds-way"
TAG_MARKS = ("<%", "%>", "{{", "{%")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("# <%= current_page.data.title %>", "# "),
        ("a <% if x %>b<% end %> c", "a b c"),
        ("<%# a comment %>kept", "kept"),
        ("Hello {{ name }}!", "Hello !"),
        ("Hello {{{ raw_html }}}!", "Hello !"),
        ("{{- .Title -}} page", " page"),
        ("{% raw %}x{% endraw %}", "x"),
        ("5 <% of 10", "5 <% of 10"),
        ("a < b and c % d > e", "a < b and c % d > e"),
    ],
)
def test_template_tags_of_every_kind_are_removed(text: str, expected: str) -> None:
    assert strip_template_tags(text) == expected


def test_an_unclosed_tag_costs_linear_time_and_keeps_the_text() -> None:
    text = "<%" * 20_000 + "{{{" * 20_000
    assert strip_template_tags(text) == text


def test_a_heading_that_is_only_a_template_takes_the_front_matter_title() -> None:
    doc = parse_markdown(
        "---\ntitle: How to store logs\n---\n\n# <%= current_page.data.title %>\n\nKeep logs.\n\n"
        "## Retention <%= partial 'x' %>\n\nNinety days.\n",
        "logging",
    )
    assert doc.title == "How to store logs"
    headings = {h for b in doc.blocks for h in b.headings}
    assert headings == {"How to store logs", "Retention"}
    assert not any(mark in b.text for b in doc.blocks for mark in TAG_MARKS)


def test_a_heading_that_is_only_a_template_without_front_matter_takes_the_file_name() -> None:
    doc = parse_markdown("# {{ page.title }}\n\nKeep logs.\n", "store logs")
    assert doc.title == "store logs"
    assert [b.headings for b in doc.blocks if b.kind != "heading"] == [("store logs",)]


def test_headings_titles_and_citation_ids_hold_no_tags_in_any_format(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write(
        corpus,
        "page.html",
        "<html><head><title>{{ site.title }}</title></head><body><main>"
        "<h1>Travel {% if x %}rules{% endif %}</h1><p>Book rail for trips under four hours.</p>"
        "<h2><%= t('heading') %></h2><p>Hotels are capped at the city rate.</p></main></body></html>",
    )
    write(corpus, "notes.md", "---\ntitle: <%= current_page.data.title %>\n---\n# {{ title }}\n\nSome text.\n")
    prepared = {}
    for path in sorted(corpus.iterdir()):
        rel = PurePosixPath(path.name)
        prepared[path.name] = prepare_document(
            path, rel, classify(path, rel, Classification.PUBLIC), "m", IngestReport()
        )
    assert prepared["notes.md"].row.title == "notes"
    for p in prepared.values():
        served = [p.row.title] + [s.title for s in p.passages] + [s.heading for s in p.passages]
        served += [s.citation_id for s in p.passages]
        assert not [s for s in served if any(mark in s for mark in TAG_MARKS)], served
    html = prepared["page.html"]
    assert html.row.title == "Travel rules"
    assert all("#travel-rules" in s.citation_id for s in html.passages)


def test_ingesting_the_gds_way_leaves_no_template_in_headings_titles_or_citations(tmp_path: Path) -> None:
    if not GDS_WAY.is_dir():
        pytest.skip(f"shared corpus not present: {GDS_WAY}")
    db = tmp_path / "gds.sqlite"
    report = ingest_corpus(GDS_WAY, db, HashEmbedder(), ceiling=Classification.RESTRICTED, progress=None)
    assert report.passages > 500
    conn = connect(db, readonly=True)
    try:
        rows = list(conn.execute("SELECT citation_id, title, heading FROM passages"))
        rows += [(t, t, t) for (t,) in conn.execute("SELECT title FROM documents")]
    finally:
        conn.close()
    leaked = [r for r in rows if any(mark in field for field in r for mark in TAG_MARKS)]
    assert leaked == []
    # The pages' titles come from their front matter, and name their citations.
    ids = {cid for cid, _, _ in rows}
    assert any("#how-to-store-and-query-logs" in cid for cid in ids), sorted(ids)[:20]
