"""DOCX loading on real Word files, and the archive checks that run before parsing."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.loaders import docx as docx_loader
from governed_evidence.ingest.loaders import load_document
from governed_evidence.ingest.loaders.docx import load_docx
from tests.helpers import SHARED_DATA

DOCX_DIR = SHARED_DATA / "ingest-samples" / "docx"
CHARTER = "GSA_TTS_TEMPLATE_Team_charter.docx"
README = "GSA_TTS_TEMPLATE_Project_README.docx"
KICKOFF = "GSA_TTS_TEMPLATE_Internal_kickoff_agenda.docx"
WEEKLY = "GSA_TTS_TEMPLATE_Weekly_ship_template.docx"
ALL_DOCX = [CHARTER, README, KICKOFF, WEEKLY]


def sample(name: str) -> Path:
    path = DOCX_DIR / name
    if not path.is_file():
        pytest.skip(f"{path} not present")
    return path


@pytest.mark.parametrize("name", ALL_DOCX)
def test_docx_yields_headings_with_paths_and_tables_with_header_rows(name: str) -> None:
    doc = load_docx(sample(name), "fallback")
    assert doc.format == "docx"
    headings = [b for b in doc.blocks if b.kind == "heading"]
    tables = [b for b in doc.blocks if b.kind == "table"]
    assert headings and tables

    for block in headings:
        # A heading's path ends with the heading itself.
        assert block.headings and block.headings[-1] == block.text

    for table in tables:
        rows = table.text.split("\n")
        assert table.table_header == [rows[0]]
        assert [r for r, _ in table.table_rows] == rows[1:]
        assert all(r.startswith("| ") and r.endswith(" |") for r in rows)

    # Every block has a position (paragraph numbers stand in for lines), in order.
    starts = [b.line_start for b in doc.blocks]
    assert all(s is not None for s in starts)
    assert starts == sorted(starts)  # type: ignore[type-var]
    assert all(b.line_end is not None and b.line_end >= b.line_start for b in doc.blocks)  # type: ignore[operator]


def test_team_charter_structure_matches_the_document() -> None:
    doc = load_docx(sample(CHARTER), "fallback")
    assert doc.title == "[Project name] team charter"
    headings = [b.headings for b in doc.blocks if b.kind == "heading"]
    # 13 styled headings in the file: the Title plus twelve Heading 1/2 paragraphs.
    assert len(headings) == 12
    assert ("Our team", "18F team members") in headings
    assert ("Our project", "Concerns we have") in headings
    # A Heading 1 after Heading 2s closes them.
    assert ("Our rituals",) in headings

    tables = [b for b in doc.blocks if b.kind == "table"]
    assert len(tables) == 5
    members = next(t for t in tables if t.headings == ("Our team", "18F team members"))
    assert members.table_header == ["| Name | Role | Location | Pronouns | Allocation |"]
    rituals = next(t for t in tables if t.headings == ("Our rituals",))
    assert rituals.table_header == ["| Ritual | Frequency/Day | Notes |"]
    assert any("Standups" in row for row, _ in rituals.table_rows)


def test_project_readme_nests_heading_2_under_heading_1() -> None:
    doc = load_docx(sample(README), "fallback")
    paths = [b.headings for b in doc.blocks if b.kind == "heading"]
    assert ("Links",) in paths
    assert ("Partner details", "Key contacts") in paths
    assert ("Partner details", "Background reading") in paths
    # Paragraphs under a heading inherit its path.
    contacts = next(b for b in doc.blocks if b.kind == "table" and "Organization" in b.text)
    assert contacts.headings == ("Partner details", "Key contacts")
    assert contacts.table_header == ["| Name | Title | Organization | Contact | Notes |"]
    # Image placeholders from the extractor never reach the text.
    assert not any("----media/" in b.text for b in doc.blocks)


def test_docx_through_the_dispatcher(tmp_path: Path) -> None:
    copy = tmp_path / "weekly.DOCX"
    shutil.copyfile(sample(WEEKLY), copy)
    doc = load_document(copy, "weekly")
    assert doc.format == "docx"
    assert any(b.kind == "heading" and b.text == "How to use" for b in doc.blocks)


def test_docx_that_is_not_a_zip_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "fake.docx"
    path.write_text("Just some text, not a Word archive.\n")
    with pytest.raises(FileRejectedError, match="not a valid archive"):
        load_docx(path, "fake")


def test_zip_without_a_word_document_part_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.docx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("readme.txt", "not a word document")
    with pytest.raises(FileRejectedError, match=r"word/document\.xml"):
        load_docx(path, "empty")


def test_docx_expanding_past_the_limit_is_refused_before_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "bomb.docx"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", b"<w:document/>")
        archive.writestr("word/media/padding.bin", b"\0" * 2_000_000)
    assert path.stat().st_size < 50_000  # small on disk, large when expanded
    monkeypatch.setattr(docx_loader, "MAX_UNCOMPRESSED_BYTES", 1_000_000)

    def parser_must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the archive was parsed before its size was checked")

    import docx2python

    monkeypatch.setattr(docx2python, "docx2python", parser_must_not_run)
    with pytest.raises(FileRejectedError, match=r"expands to \d+ bytes, over the 1000000-byte limit"):
        load_docx(path, "bomb")


def test_real_docx_over_a_lowered_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    path = sample(KICKOFF)
    monkeypatch.setattr(docx_loader, "MAX_UNCOMPRESSED_BYTES", 10_000)
    with pytest.raises(FileRejectedError, match="over the 10000-byte limit"):
        load_docx(path, "kickoff")


def test_docx_with_a_broken_document_part_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "broken.docx"
    with zipfile.ZipFile(sample(WEEKLY)) as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == "word/document.xml":
                data = data[: len(data) // 2]
            dst.writestr(info, data)
    with pytest.raises(FileRejectedError, match="DOCX"):
        load_docx(path, "broken")
