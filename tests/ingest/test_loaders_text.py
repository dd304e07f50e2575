"""Markdown and plain-text loading: exact line spans, heading paths, template tags."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.guards import decode_text
from governed_evidence.ingest.loaders import load_document
from governed_evidence.ingest.loaders.markdown import parse_markdown
from governed_evidence.ingest.loaders.text import looks_like_heading, parse_text
from governed_evidence.ingest.templates import strip_template_tags
from tests.helpers import SHARED_DATA

HANDBOOK = SHARED_DATA / "corpora" / "gsa-tts-handbook" / "pages"
SOC2 = SHARED_DATA / "corpora" / "strongdm-comply-soc2"

MARKDOWN = textwrap.dedent(
    """\
    ---
    title: Information handling standard
    owner: security
    ---
    # Information handling

    Intro paragraph that sits under the top heading
    and runs over two lines.

    ## Storage

    Data at rest is encrypted.

    ### Laptops

    - Full-disk encryption is mandatory.
    - Screens lock after five minutes
      of inactivity.

    ### Removable media

    > USB sticks are not allowed.

    ## Transfer

    | Channel | Allowed |
    |---|---|
    | Email | internal only |
    | SFTP | yes |

    ```sh
    gpg --encrypt file
    ```

    # Appendix

    See the glossary.
    """
)


def source_at(text: str, start: int, end: int) -> str:
    lines = text.split("\n")
    return "\n".join(lines[start - 1 : end]).strip("\n")


def test_markdown_block_text_is_exactly_the_source_lines_of_its_span() -> None:
    doc = parse_markdown(MARKDOWN, "fallback")
    assert doc.blocks
    lines = MARKDOWN.split("\n")
    for block in doc.blocks:
        assert block.line_start is not None and block.line_end is not None
        assert block.line_start <= block.line_end
        assert block.text == source_at(MARKDOWN, block.line_start, block.line_end)
        assert lines[block.line_start - 1].strip() and lines[block.line_end - 1].strip()


def test_markdown_line_numbers_count_the_front_matter() -> None:
    doc = parse_markdown(MARKDOWN, "fallback")
    first = doc.blocks[0]
    assert (first.kind, first.text, first.line_start, first.line_end) == ("heading", "# Information handling", 5, 5)
    intro = doc.blocks[1]
    assert (intro.line_start, intro.line_end) == (7, 8)
    assert doc.front_matter.values == {"title": "Information handling standard", "owner": "security"}
    assert doc.title == "Information handling standard"


def test_markdown_heading_paths_nest_and_close() -> None:
    doc = parse_markdown(MARKDOWN, "fallback")
    by_text = {b.text.split("\n")[0]: b for b in doc.blocks}
    assert by_text["# Information handling"].headings == ("Information handling",)
    assert by_text["## Storage"].headings == ("Information handling", "Storage")
    assert by_text["Data at rest is encrypted."].headings == ("Information handling", "Storage")
    assert by_text["### Laptops"].headings == ("Information handling", "Storage", "Laptops")
    assert by_text["- Full-disk encryption is mandatory."].headings == ("Information handling", "Storage", "Laptops")
    # A sibling h3 replaces the previous h3.
    assert by_text["> USB sticks are not allowed."].headings == ("Information handling", "Storage", "Removable media")
    # An h2 closes the h3 below the previous h2.
    assert by_text["| Channel | Allowed |"].headings == ("Information handling", "Transfer")
    assert by_text["```sh"].headings == ("Information handling", "Transfer")
    # A new h1 closes everything.
    assert by_text["See the glossary."].headings == ("Appendix",)


def test_markdown_block_kinds_and_one_block_per_list_item() -> None:
    doc = parse_markdown(MARKDOWN, "fallback")
    kinds = [b.kind for b in doc.blocks]
    assert kinds.count("list") == 2
    items = [b for b in doc.blocks if b.kind == "list"]
    assert items[1].text == "- Screens lock after five minutes\n  of inactivity."
    assert (items[1].line_start, items[1].line_end) == (17, 18)
    assert [b.kind for b in doc.blocks if b.text.startswith(">")] == ["quote"]
    assert [b.kind for b in doc.blocks if b.text.startswith("```")] == ["code"]


def test_markdown_table_block_keeps_header_delimiter_and_rows_with_lines() -> None:
    doc = parse_markdown(MARKDOWN, "fallback")
    (table,) = [b for b in doc.blocks if b.kind == "table"]
    assert table.table_header == ["| Channel | Allowed |", "|---|---|"]
    assert table.table_rows == [("| Email | internal only |", 28), ("| SFTP | yes |", 29)]
    assert (table.line_start, table.line_end) == (26, 29)


def test_markdown_skipped_heading_levels_still_nest() -> None:
    text = "# Top\n\n### Deep\n\nbody one\n\n## Middle\n\nbody two\n"
    doc = parse_markdown(text, "fallback")
    paths = {b.text: b.headings for b in doc.blocks}
    assert paths["body one"] == ("Top", "Deep")
    assert paths["body two"] == ("Top", "Middle")


def test_markdown_title_falls_back_to_first_h1_then_file_name() -> None:
    assert parse_markdown("intro\n\n# The Title\n\n## Sub\n", "fb").title == "The Title"
    assert parse_markdown("just text\n", "fallback name").title == "fallback name"


def test_markdown_with_broken_front_matter_is_refused_by_the_loader(tmp_path: Path) -> None:
    path = tmp_path / "broken.md"
    path.write_text("---\ntitle: [unclosed\n---\n# Body\n\ntext\n")
    with pytest.raises(FileRejectedError, match="front matter"):
        load_document(path, "broken")
    path.write_text("---\ntitle: never closed\n\n# Body\n\ntext\n")
    with pytest.raises(FileRejectedError, match="front matter"):
        load_document(path, "broken")


def _markdown_files(root: Path) -> list[Path]:
    if not root.is_dir():
        pytest.skip(f"{root} not present")
    files = sorted(root.rglob("*.md"))
    if not files:
        pytest.skip(f"no Markdown files in {root}")
    return files


@pytest.mark.parametrize("root", [HANDBOOK, SOC2], ids=["gsa-handbook", "soc2-policies"])
def test_real_corpus_line_spans_reproduce_block_text(root: Path) -> None:
    checked = 0
    for path in _markdown_files(root):
        text = decode_text(path.read_bytes())
        lines = text.split("\n")
        doc = parse_markdown(text, path.stem)
        for block in doc.blocks:
            assert block.line_start is not None and block.line_end is not None
            expected = strip_template_tags(source_at(text, block.line_start, block.line_end)).strip("\n")
            where = f"{path.name}: lines {block.line_start}-{block.line_end}"
            assert block.text == expected, where
            # The span is tight: it neither starts nor ends on a blank line.
            assert lines[block.line_start - 1].strip() and lines[block.line_end - 1].strip(), where
            checked += 1
    assert checked > 100


def test_liquid_tags_are_stripped_from_gsa_handbook_pages() -> None:
    files = [p for p in _markdown_files(HANDBOOK) if "{% page" in p.read_text(encoding="utf-8")]
    if not files:
        pytest.skip("no handbook page with a {% page %} tag present")
    for path in files:
        doc = load_document(path, path.stem)
        for block in doc.blocks:
            assert "{%" not in block.text and "%}" not in block.text, path.name
            assert "{{" not in block.text and "}}" not in block.text, path.name
        assert "{%" not in doc.title


def test_liquid_stripping_keeps_the_surrounding_words() -> None:
    path = HANDBOOK / "travel-and-leave" / "overtime.md"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    raw = path.read_text(encoding="utf-8")
    assert '{% page "/tools/hrlinks/' in raw
    doc = load_document(path, "overtime")
    text = "\n".join(b.text for b in doc.blocks)
    assert "manually request these hours in HR Links" in text
    assert "/tools/hrlinks/" not in text
    assert doc.title == "Compensation for working extra hours"


def test_strip_template_tags_handles_both_tag_kinds_and_multiline_tags() -> None:
    text = "Before {% include x.html %} middle {{ site.name }} after {%- raw\nstuff -%} end"
    assert strip_template_tags(text) == "Before  middle  after  end"


PLAIN_TEXT = textwrap.dedent(
    """\
    ACCEPTABLE USE POLICY

    This policy covers every laptop and phone issued by the company.

    Scope
    =====

    It applies to staff and contractors alike.

    1.2 Data Retention

    Records are kept for seven years, then destroyed.

    This line is an ordinary sentence, not a heading.

    Incident Reporting
    Report incidents to the service desk within one hour.
    """
)


def test_text_loader_detects_title_and_headings() -> None:
    doc = parse_text(PLAIN_TEXT, "fallback")
    assert doc.format == "text"
    assert doc.title == "ACCEPTABLE USE POLICY"
    headings = [(b.text.split("\n")[0], b.line_start, b.line_end) for b in doc.blocks if b.kind == "heading"]
    assert headings == [("ACCEPTABLE USE POLICY", 1, 1), ("Scope", 5, 6), ("1.2 Data Retention", 10, 10)]
    by_first_line = {b.text.split("\n")[0]: b for b in doc.blocks}
    assert by_first_line["This policy covers every laptop and phone issued by the company."].headings == ()
    assert by_first_line["It applies to staff and contractors alike."].headings == ("Scope",)
    assert by_first_line["Records are kept for seven years, then destroyed."].headings == ("1.2 Data Retention",)
    # A title-case line followed by text in the same paragraph is not a heading block.
    assert by_first_line["Incident Reporting"].kind == "paragraph"


def test_text_loader_line_spans_are_exact() -> None:
    doc = parse_text(PLAIN_TEXT, "fallback")
    for block in doc.blocks:
        assert block.line_start is not None and block.line_end is not None
        assert block.text == source_at(PLAIN_TEXT, block.line_start, block.line_end)


def test_text_loader_reads_front_matter_and_offsets_lines(tmp_path: Path) -> None:
    path = tmp_path / "note.txt"
    path.write_text("---\ntitle: Clean desk rule\n---\nLeave nothing on desks overnight, ever.\n")
    doc = load_document(path, "note")
    assert doc.title == "Clean desk rule"
    assert [(b.text, b.line_start, b.line_end) for b in doc.blocks] == [
        ("Leave nothing on desks overnight, ever.", 4, 4)
    ]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("INFORMATION SECURITY", True),
        ("4.1 Access Control", True),
        ("Section 3: Roles", True),
        ("Working From Home", True),
        ("Staff must lock their screens.", False),
        ("the quick brown fox jumps", False),
        ("A" * 90, False),
        ("", False),
    ],
)
def test_looks_like_heading(line: str, expected: bool) -> None:
    assert looks_like_heading(line) is expected


def test_unsupported_suffix_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "handbook.odt"
    path.write_bytes(b"PK\x03\x04")
    with pytest.raises(FileRejectedError, match=r"unsupported file type \.odt"):
        load_document(path, "handbook")
