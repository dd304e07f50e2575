"""Front matter in the forms corpora really use: bare YAML, TOML, `name:` titles, one-line titles.

A bare block (YAML with no opening ``---``) is only front matter when it cannot be read as
anything else, and its label is honoured exactly like a fenced one; lines that might be
front matter but are not recognised still make the document restricted when they carry
the label (fail closed on doubt).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from governed_evidence.config import Classification
from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest import frontmatter
from governed_evidence.ingest.classify import classify
from governed_evidence.ingest.frontmatter import FrontMatter, FrontMatterError, parse_front_matter, read_front_matter
from governed_evidence.ingest.loaders import load_document
from governed_evidence.ingest.loaders.markdown import parse_markdown
from governed_evidence.ingest.loaders.text import parse_text
from governed_evidence.ingest.passages import prepare_document
from governed_evidence.ingest.report import IngestReport

PUBLIC, INTERNAL, RESTRICTED = Classification.PUBLIC, Classification.INTERNAL, Classification.RESTRICTED

SOC2_STYLE = """name: Password Policy
acronym: PWP
satisfies:
  TSC:
    - CC6.1
majorRevisions:
  - date: Jun 1 2018
    comment: Initial document
---
# Purpose and Scope

a. This policy sets the rules for passwords.
"""


def make(root: Path, rel: str, content: str) -> tuple[Path, PurePosixPath]:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    return path, PurePosixPath(rel)


def decide(root: Path, rel: str, content: str, default: Classification = PUBLIC) -> tuple[Classification, FrontMatter]:
    decided = classify(*make(root, rel, content), default)
    return decided.level, decided.front


# -- bare YAML -----------------------------------------------------------------------


def test_a_bare_yaml_block_is_front_matter() -> None:
    matter = parse_front_matter(SOC2_STYLE)
    assert matter.values["name"] == "Password Policy"
    assert matter.values["satisfies"] == {"TSC": ["CC6.1"]}
    assert matter.lines == 9
    assert matter.doubts == ()


def test_a_bare_block_gives_the_title_and_stays_out_of_the_text() -> None:
    doc = parse_markdown(SOC2_STYLE, "fallback")
    assert doc.title == "Password Policy"
    assert doc.blocks[0].kind == "heading" and doc.blocks[0].text == "# Purpose and Scope"
    # Line numbers still count the front matter: the heading is line 10 of the file.
    assert doc.blocks[0].line_start == 10
    assert all("acronym" not in b.text and "majorRevisions" not in b.text for b in doc.blocks)


def test_the_text_loader_reads_a_bare_block_too() -> None:
    doc = parse_text("name: Clean desk rule\nowner: facilities\n---\nLeave nothing on desks overnight.\n", "fb")
    assert doc.title == "Clean desk rule"
    assert [b.text for b in doc.blocks] == ["Leave nothing on desks overnight."]
    assert doc.blocks[0].line_start == 4


def test_crlf_and_quoted_values_in_a_bare_block() -> None:
    matter = parse_front_matter('id: "offboard"\r\nname: "Offboard User"\r\n---\r\nBody\r\n')
    assert matter.values == {"id": "offboard", "name": "Offboard User"}
    assert matter.lines == 3


@pytest.mark.parametrize(
    "text",
    [
        "Note: this is a setext heading\n---\nBody.\n",  # one line above --- is a Markdown heading
        "title: A\n\nowner: B\n---\nBody.\n",  # a blank line: paragraphs, not metadata
        "title: A\nThis line is prose.\n---\nBody.\n",
        "In short: we do this\nand: that\n---\n",  # a key with a space is prose
        "title: A\nowner: B\n\nNo closing line at all.\n",
        "# Heading\ntitle: A\nowner: B\n---\n",  # not at the very start
        "title: A\n# comment or heading?\nowner: B\n---\n",
        "author: Jane: Doe\ndate: 2024\n---\nBody.\n",  # not valid YAML, and no label in it
        "note: *important*\nowner: B\n---\nBody.\n",  # an alias, were it YAML
    ],
    ids=["one-line", "blank-line", "prose-line", "key-with-space", "not-closed", "not-first", "hash-line",
         "invalid-yaml", "alias-without-label"],
)  # fmt: skip
def test_lines_that_might_not_be_front_matter_stay_text(text: str) -> None:
    assert parse_front_matter(text) == FrontMatter()
    first = text.split("\n")[0]
    assert any(first in b.text for b in parse_markdown(text, "fb").blocks)


def test_a_bare_block_must_close_within_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frontmatter, "FRONT_MATTER_LIMIT", 64)
    text = "title: A\n" + "".join(f"key{i}: value {i}\n" for i in range(20)) + "---\nBody.\n"
    assert parse_front_matter(text) == FrontMatter()


# -- the label in a bare block --------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "label", "expected"),
    [("restricted/a.md", "public", PUBLIC), ("public/b.md", "restricted", RESTRICTED), ("c.txt", "internal", INTERNAL)],
)
def test_a_bare_label_wins_over_folder_and_default_like_a_fenced_one(
    tmp_path: Path, rel: str, label: str, expected: Classification
) -> None:
    bare = f"title: Doc\nclassification: {label}\n---\nBody.\n"
    assert decide(tmp_path / "bare", rel, bare)[0] is expected
    assert decide(tmp_path / "fenced", rel, "---\n" + bare)[0] is expected


@pytest.mark.parametrize(
    ("content", "doubt"),
    [
        ("title: Doc\nclаssification: public\n---\nBody.\n", "resembles"),  # Cyrillic a
        ("title: Doc\ndata_classification: public\n---\nBody.\n", "resembles"),
        ("classification: restricted\nClassification: public\n---\nBody.\n", "more than once"),
        ("classification: public\n---\nBody.\n", "not front matter"),  # one line: a heading or a label?
        ("classification: public\n\nBody.\n", "not front matter"),
        ("Classification: Public\nThis document is for everyone.\n", "not front matter"),
        ("title: Doc\nclassification: public\nBody without a closing line.\n", "not front matter"),
    ],
    ids=["lookalike", "near-miss", "twice", "one-line", "blank-after", "prose-after", "not-closed"],
)
def test_a_label_in_doubtful_first_lines_makes_the_document_restricted(
    tmp_path: Path, content: str, doubt: str
) -> None:
    decided = classify(*make(tmp_path, "public/doc.md", content), PUBLIC)
    assert decided.level is RESTRICTED
    assert any(doubt in d for d in decided.doubts), decided.doubts
    # The loader reads the same doubt, so its own reading cannot lower the level either.
    assert parse_front_matter(content).doubts == decided.doubts


def test_an_unreadable_bare_block_with_a_label_fails_closed(tmp_path: Path) -> None:
    content = "classification: public\ntitle: [unclosed\n---\nBody.\n"
    with pytest.raises(FrontMatterError, match="not valid YAML"):
        parse_front_matter(content)
    path, rel = make(tmp_path, "public/doc.md", content)
    assert classify(path, rel, PUBLIC).level is RESTRICTED
    with pytest.raises(FileRejectedError, match="front matter"):
        load_document(path, "fb")


def test_aliases_are_refused_in_a_bare_block_with_a_label(tmp_path: Path) -> None:
    content = "classification: public\nx: &a [1, 1, 1]\ny: [*a, *a]\n---\nBody.\n"
    with pytest.raises(FrontMatterError, match="aliases"):
        parse_front_matter(content)
    assert decide(tmp_path, "public/doc.md", content)[0] is RESTRICTED


def test_a_bare_label_past_the_window_is_restricted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frontmatter, "FRONT_MATTER_LIMIT", 128)
    content = "classification: public\n" + "".join(f"key{i}: value {i}\n" for i in range(20)) + "---\nBody.\n"
    level, front = decide(tmp_path, "public/doc.md", content)
    assert level is RESTRICTED and front.values == {}


# -- TOML ----------------------------------------------------------------------------


def test_a_toml_block_is_front_matter() -> None:
    text = '+++\ntitle = "Hugo page"\nclassification = "internal"\ntags = ["a", "b"]\n+++\n# Body\n\nText.\n'
    matter = parse_front_matter(text)
    assert matter.values == {"title": "Hugo page", "classification": "internal", "tags": ["a", "b"]}
    assert matter.lines == 5
    doc = parse_markdown(text, "fb")
    assert doc.title == "Hugo page"
    assert all("+++" not in b.text and "tags" not in b.text for b in doc.blocks)


def test_a_toml_label_is_honoured_and_read_within_the_window(tmp_path: Path) -> None:
    content = '+++\nclassification = "public"\n+++\nBody.\n'
    path, rel = make(tmp_path, "restricted/doc.md", content)
    assert classify(path, rel, RESTRICTED).level is PUBLIC
    assert read_front_matter(path) == parse_front_matter(content)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ('+++\nclassification = "public"\ntitle = [\n+++\nBody.\n', "not valid TOML"),
        ('+++\nclassification = "public"\nclassification = "internal"\n+++\nBody.\n', "not valid TOML"),
        ('+++\nclassification = "public"\nBody without a closing fence.\n', r"not closed with \+\+\+"),
        ("+++\nx = " + "[" * 5000 + "]" * 5000 + "\n+++\nBody.\n", "nests too deeply|not valid TOML"),
    ],
    ids=["invalid", "given-twice", "not-closed", "deep"],
)
def test_broken_toml_fails_closed(tmp_path: Path, content: str, match: str) -> None:
    with pytest.raises(FrontMatterError, match=match):
        parse_front_matter(content)
    assert decide(tmp_path, "public/doc.md", content)[0] is RESTRICTED


def test_two_spellings_of_the_label_in_toml_are_a_doubt(tmp_path: Path) -> None:
    content = '+++\nclassification = "restricted"\nClassification = "public"\n+++\nBody.\n'
    decided = classify(*make(tmp_path, "public/doc.md", content), PUBLIC)
    assert decided.level is RESTRICTED
    assert any("more than once" in d for d in decided.doubts)


# -- the window and the loader read alike ---------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        SOC2_STYLE,
        "---\ntitle: A\nclassification: internal\n---\nBody.\n",
        '+++\ntitle = "A"\n+++\nBody.\n',
        "classification: internal\n\nBody.\n",
        "title: Doc\nclаssification: public\n---\nBody.\n",
        "# Plain\n\nBody.\n",
    ],
)
def test_the_classification_window_reads_what_the_loader_reads(tmp_path: Path, content: str) -> None:
    path, _ = make(tmp_path, "doc.md", content)
    assert read_front_matter(path) == parse_front_matter(content)


# -- titles --------------------------------------------------------------------------


def test_title_comes_from_title_then_name_then_the_first_heading() -> None:
    assert parse_markdown("---\ntitle: T\nname: N\n---\n# H\n", "fb").title == "T"
    assert parse_markdown("---\nname: N\n---\n# H\n", "fb").title == "N"
    assert parse_markdown("---\nname: 42\n---\n# H\n", "fb").title == "H"  # only a string is a title
    assert parse_markdown("---\ntitle: '  '\nname: N\n---\n# H\n", "fb").title == "N"


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("block-scalar.md", "---\ntitle: |\n  Remote work\n  policy\n---\nBody text here.\n"),
        ("setext.md", "Remote work\npolicy\n===\n\nBody text here.\n"),
        ("text.txt", '---\ntitle: "Remote\\nwork\\r\\npolicy"\n---\nBody text here.\n'),
    ],
)
def test_no_title_carries_a_line_break(tmp_path: Path, name: str, content: str) -> None:
    path, rel = make(tmp_path, name, content)
    prepared = prepare_document(path, rel, classify(path, rel, PUBLIC), "test/model", IngestReport())
    assert prepared.row.title == "Remote work policy"
    assert all(p.title == "Remote work policy" for p in prepared.passages)


def test_no_heading_carries_a_line_break(tmp_path: Path) -> None:
    # Long enough to be a passage of its own rather than merged into its neighbour.
    body = "Staff lock their screens whenever they leave their desks. " * 20
    content = f"# Policy\n\n{body}\n\nSection one\ncontinued\n---\n\n{body}\n"
    path, rel = make(tmp_path, "doc.md", content)
    prepared = prepare_document(path, rel, classify(path, rel, PUBLIC), "test/model", IngestReport())
    assert [p.heading for p in prepared.passages] == ["", "Section one continued"]
    assert "section-one-continued" in prepared.passages[1].citation_id
