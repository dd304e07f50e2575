"""Classification: front matter, then folder, then default; anything doubtful is restricted."""

from __future__ import annotations

import io
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from governed_evidence.config import Classification
from governed_evidence.ingest import frontmatter
from governed_evidence.ingest.classify import classify
from governed_evidence.ingest.frontmatter import (
    FRONT_MATTER_LIMIT,
    FrontMatter,
    FrontMatterError,
    parse_front_matter,
    read_front_matter,
)

PUBLIC, INTERNAL, RESTRICTED = Classification.PUBLIC, Classification.INTERNAL, Classification.RESTRICTED


def make(root: Path, rel: str, content: str | bytes) -> tuple[Path, PurePosixPath]:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    return path, PurePosixPath(rel)


def level_of(root: Path, rel: str, content: str | bytes, default: Classification = INTERNAL) -> Classification:
    path, relative = make(root, rel, content)
    return classify(path, relative, default).level


@pytest.mark.parametrize(
    ("rel", "label", "expected"),
    [
        ("restricted/handbook.md", "public", PUBLIC),
        ("public/merger.md", "restricted", RESTRICTED),
        ("internal/notes.txt", "public", PUBLIC),
        ("public/team.markdown", "internal", INTERNAL),
    ],
)
def test_front_matter_wins_over_folder(tmp_path: Path, rel: str, label: str, expected: Classification) -> None:
    content = f"---\ntitle: Doc\nclassification: {label}\n---\n# Doc\n\nBody text.\n"
    assert level_of(tmp_path, rel, content) is expected


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        ("public/a.md", PUBLIC),
        ("internal/a.md", INTERNAL),
        ("restricted/a.md", RESTRICTED),
        ("Public/a.md", PUBLIC),
        ("INTERNAL/a.txt", INTERNAL),
        # The first folder named after a level decides, wherever it sits in the path.
        ("teams/finance/internal/a.md", INTERNAL),
        ("public/archive/restricted/a.md", PUBLIC),
        ("restricted/public/a.md", RESTRICTED),
    ],
)
def test_first_folder_named_after_a_level_decides(tmp_path: Path, rel: str, expected: Classification) -> None:
    assert level_of(tmp_path, rel, "# Doc\n\nBody text.\n") is expected


def test_folder_applies_to_binary_formats_too(tmp_path: Path) -> None:
    assert level_of(tmp_path, "public/form.pdf", b"%PDF-1.4 not really") is PUBLIC
    assert level_of(tmp_path, "restricted/plan.docx", b"PK\x03\x04") is RESTRICTED


@pytest.mark.parametrize("default", list(Classification))
def test_default_applies_when_neither_front_matter_nor_folder_says(tmp_path: Path, default: Classification) -> None:
    assert level_of(tmp_path, "policies/travel.md", "# Travel\n\nBody.\n", default) is default
    # A file *named* like a level is not a folder.
    assert level_of(tmp_path, "public.md", "# Public\n\nBody.\n", default) is default
    assert level_of(tmp_path, "guide.pdf", b"%PDF-1.4", default) is default


@pytest.mark.parametrize(
    "label",
    ["confidential", "SECRET", "3", "0", "[public]", "null", '""', "top secret", "{level: public}"],
)
def test_unknown_label_is_restricted(tmp_path: Path, label: str) -> None:
    content = f"---\nclassification: {label}\n---\nBody.\n"
    assert level_of(tmp_path, "public/doc.md", content, default=PUBLIC) is RESTRICTED


@pytest.mark.parametrize("label", ["Public", " internal ", "RESTRICTED"])
def test_known_labels_are_case_and_space_insensitive(tmp_path: Path, label: str) -> None:
    content = f"---\nclassification: '{label}'\n---\nBody.\n"
    expected = Classification[label.strip().upper()]
    assert level_of(tmp_path, "restricted/doc.md", content) is expected


@pytest.mark.parametrize(
    "content",
    [
        "---\nclassification: public\ntitle: [unclosed\n---\nBody.\n",  # invalid YAML
        "---\nclassification: public\n\nBody without a closing marker.\n",  # unterminated
        "---\n- public\n- internal\n---\nBody.\n",  # not a mapping
        "---\nclassification: public\n  bad: indentation\n---\nBody.\n",
    ],
)
def test_broken_front_matter_fails_closed(tmp_path: Path, content: str) -> None:
    decided = classify(*make(tmp_path, "public/doc.md", content), PUBLIC)
    level, front = decided.level, decided.front.values
    assert level is RESTRICTED
    assert front == {}


def test_front_matter_not_closed_within_the_limit_fails_closed(tmp_path: Path) -> None:
    content = "---\nclassification: public\n" + "# filler\n" * (FRONT_MATTER_LIMIT // 9 + 10) + "---\nBody.\n"
    assert level_of(tmp_path, "public/long.md", content, default=PUBLIC) is RESTRICTED


def test_front_matter_is_returned_with_the_level(tmp_path: Path) -> None:
    path, rel = make(tmp_path, "internal/remote.md", "---\ntitle: Remote\nsuperseded_by: internal/new.md\n---\nBody.\n")
    decided = classify(path, rel, PUBLIC)
    level, front = decided.level, decided.front.values
    assert level is INTERNAL
    assert front == {"title": "Remote", "superseded_by": "internal/new.md"}


def test_body_with_invalid_utf8_after_front_matter_still_classifies(tmp_path: Path) -> None:
    content = b"---\nclassification: internal\n---\n# Notes\n\n" + b"\xff\xfe\xc3\x28 broken bytes " * 10_000
    assert level_of(tmp_path, "public/notes.md", content, default=PUBLIC) is INTERNAL


def test_front_matter_with_bom_and_crlf_is_read(tmp_path: Path) -> None:
    content = "\ufeff---\r\nclassification: public\r\n---\r\nBody.\r\n".encode()
    assert level_of(tmp_path, "restricted/win.md", content) is PUBLIC


class _CountingReader(io.BufferedReader):
    bytes_read = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        type(self).bytes_read += len(data)
        return data


def test_front_matter_is_read_without_reading_the_whole_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    body = b"x" * (4 * FRONT_MATTER_LIMIT)
    path, rel = make(tmp_path, "public/big.md", b"---\nclassification: restricted\n---\n" + body)
    real_open = Path.open

    def counting_open(self: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if self == path and mode == "rb":
            return _CountingReader(io.FileIO(self, "rb"))
        return real_open(self, mode, *args, **kwargs)

    _CountingReader.bytes_read = 0
    monkeypatch.setattr(Path, "open", counting_open)
    assert classify(path, rel, PUBLIC).level is RESTRICTED
    assert 0 < _CountingReader.bytes_read <= FRONT_MATTER_LIMIT
    assert path.stat().st_size > 4 * FRONT_MATTER_LIMIT


def test_unreadable_text_file_fails_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, rel = make(tmp_path, "public/locked.md", "---\nclassification: public\n---\nBody.\n")

    def refuse(_: Path) -> FrontMatter:
        raise PermissionError("denied")

    monkeypatch.setattr("governed_evidence.ingest.classify.read_front_matter", refuse)
    assert classify(path, rel, PUBLIC).level is RESTRICTED


def test_parse_front_matter_reports_the_lines_it_occupies() -> None:
    matter = parse_front_matter("---\ntitle: A\ntags: [x, y]\n---\n# A\n")
    assert matter.values == {"title": "A", "tags": ["x", "y"]}
    assert matter.lines == 4
    assert parse_front_matter("# No front matter\n---\n") == FrontMatter({}, 0)
    assert parse_front_matter("---\n---\nBody\n") == FrontMatter({}, 2)
    # A YAML document end marker also closes front matter.
    assert parse_front_matter("---\ntitle: B\n...\nBody\n") == FrontMatter({"title": "B"}, 3)


def test_parse_front_matter_errors() -> None:
    with pytest.raises(FrontMatterError, match="not closed"):
        parse_front_matter("---\ntitle: A\n")
    with pytest.raises(FrontMatterError, match="not valid YAML"):
        parse_front_matter("---\ntitle: [\n---\n")
    with pytest.raises(FrontMatterError, match="not a mapping"):
        parse_front_matter("---\njust a string\n---\n")


def test_read_front_matter_uses_the_module_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "doc.md"
    path.write_text("---\ntitle: " + "a" * 200 + "\n---\nBody\n")
    assert read_front_matter(path).values["title"] == "a" * 200
    monkeypatch.setattr(frontmatter, "FRONT_MATTER_LIMIT", 64)
    with pytest.raises(FrontMatterError, match="not closed"):
        read_front_matter(path)


# -- labels that must not fail open (security review, finding 3) --------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("---\nClassification: restricted\n---\nBody.\n", RESTRICTED),
        ("---\nCLASSIFICATION: RESTRICTED\n---\nBody.\n", RESTRICTED),
        ("---\nClassification: internal\n---\nBody.\n", INTERNAL),
        ("---\nclassi\u200bfication: restricted\n---\nBody.\n", RESTRICTED),
        ("\u200b---\nclassification: internal\n---\nBody.\n", INTERNAL),
        ("\ufeff\ufeff---\nclassification: internal\n---\nBody.\n", INTERNAL),
        (" ---\nclassification: internal\n---\nBody.\n", INTERNAL),
        ("---\nｃｌａｓｓｉｆｉｃａｔｉｏｎ: internal\n---\nBody.\n", INTERNAL),  # fullwidth: NFKC folds it
    ],
    ids=["title-case", "upper-case", "title-case-internal", "zero-width-in-key", "zero-width-before-fence",
         "second-bom", "indented-fence", "fullwidth-key"],
)  # fmt: skip
def test_label_spellings_are_read_as_the_label(tmp_path: Path, content: str, expected: Classification) -> None:
    decided = classify(*make(tmp_path, "public/doc.md", content), PUBLIC)
    assert decided.level is expected
    assert decided.doubts == ()


@pytest.mark.parametrize(
    ("content", "doubt"),
    [
        ("---\nclаssification: public\n---\nBody.\n", "resembles"),  # Cyrillic a
        ("---\nсlаssifiсаtion: public\n---\nBody.\n", "resembles"),  # several Cyrillic letters
        ("---\nclasification: public\n---\nBody.\n", "resembles"),  # a typo
        ("---\ndata_classification: public\n---\nBody.\n", "resembles"),
        ("---\nclassification: restricted\nclassification: public\n---\nBody.\n", "more than once"),
        ("---\nclassification: restricted\nClassification: public\n---\nBody.\n", "more than once"),
    ],
)
def test_a_label_that_cannot_be_trusted_makes_the_document_restricted(tmp_path: Path, content: str, doubt: str) -> None:
    decided = classify(*make(tmp_path, "public/doc.md", content), PUBLIC)
    assert decided.level is RESTRICTED
    assert any(doubt in d for d in decided.doubts), decided.doubts


def test_ordinary_keys_raise_no_doubt(tmp_path: Path) -> None:
    content = "---\ntitle: T\nowner: security\nclassified_by: ops\nlast_reviewed: 2024-01-01\n---\nBody.\n"
    decided = classify(*make(tmp_path, "internal/doc.md", content), PUBLIC)
    assert decided.level is INTERNAL
    assert decided.doubts == ()


def test_yaml_aliases_are_refused_before_they_expand() -> None:
    bomb = "---\nsuperseded_by: &a [x, x, x, x, x, x, x, x, x]\nother: [*a, *a, *a]\n---\nBody.\n"
    with pytest.raises(FrontMatterError, match="aliases"):
        parse_front_matter(bomb)


def test_front_matter_nested_past_the_parser_recursion_is_refused() -> None:
    with pytest.raises(FrontMatterError, match=r"not valid YAML|nests too deeply"):
        parse_front_matter("---\nx: " + "[" * 50_000 + "]" * 50_000 + "\n---\nBody.\n")
