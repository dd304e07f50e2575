"""A shared drive's mix of formats, ingested end to end: HTML, XLSX and PPTX indexed and
found, every other file listed as skipped with its reason, hostile files refused alone,
and restricted office files never visible at a public ceiling."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from openpyxl import Workbook

from governed_evidence.config import Classification
from governed_evidence.errors import NotFoundError
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.search.service import SearchService
from governed_evidence.store.connection import connect
from tests.helpers import HashEmbedder, run_cli, write
from tests.ingest.test_loader_html import INTRANET_PAGE
from tests.ingest.test_loaders_office import (
    BILLION_LAUGHS,
    add_member,
    induction_deck,
    rates_workbook,
    rewrite_member,
    without_declaration,
)

PUBLIC, INTERNAL, RESTRICTED = Classification.PUBLIC, Classification.INTERNAL, Classification.RESTRICTED

#: What no loader reads, and the reason the report gives for each.
SKIPPED = {
    "public/minutes.rtf": "unsupported format .rtf",
    "public/handbook.odt": "unsupported format .odt",
    "public/archive.zip": "unsupported format .zip",
    "public/org-chart.png": "unsupported format .png",
    "public/old-rates.xls": "unsupported format .xls (the pre-2007 binary format: save it as .xlsx)",
    "public/README": "unsupported format (no file extension)",
    "public/~$rates.xlsx": "Office lock file (~$ prefix): not a document",
}


def mixed_corpus(root: Path) -> Path:
    """One of each: the three new formats, Markdown, and the files no loader reads."""
    public = root / "public"
    public.mkdir(parents=True)
    (public / "travel.html").write_text(INTRANET_PAGE, encoding="utf-8")
    rates_workbook(public / "rates.xlsx")
    induction_deck(public / "induction.pptx")
    write(root, "public/leave.md", "# Leave\n\nFull-time staff receive twenty-five days of annual leave.\n")
    for name in SKIPPED:
        (root / name).write_bytes(b"not read")
    # Hidden files are the system's, not documents: not considered at all, as before.
    (public / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    return root


@pytest.fixture
def mixed(tmp_path: Path) -> Iterator[tuple[Path, SearchService]]:
    corpus = mixed_corpus(tmp_path / "corpus")
    db = tmp_path / "index.sqlite"
    report = ingest_corpus(corpus, db, HashEmbedder(), ceiling=RESTRICTED, progress=None)
    assert not report.rejected, report.rejected
    assert report.documents_indexed == 4
    service = SearchService(db, ceiling=PUBLIC, embedder_factory=HashEmbedder, gate_enabled=False)
    yield corpus, service
    service.reader.close()


def test_every_file_no_loader_reads_is_listed_with_its_reason(tmp_path: Path) -> None:
    corpus = mixed_corpus(tmp_path / "corpus")
    report = ingest_corpus(corpus, tmp_path / "index.sqlite", HashEmbedder(), ceiling=RESTRICTED, progress=None)
    assert dict(report.skipped) == SKIPPED
    assert report.unsupported_files == len(SKIPPED) and report.skipped_above_ceiling == 0
    data = report.as_dict()
    assert {(s["document"], s["reason"]) for s in data["skipped"]} == set(SKIPPED.items())
    assert data["unsupported_files"] == len(SKIPPED)
    assert report.by_classification == {"public": {"indexed": 4}}


def test_a_search_finds_a_spreadsheet_row_by_its_header_words(mixed: tuple[Path, SearchService]) -> None:
    _, service = mixed
    for mode in ("keyword", "hybrid"):
        response = service.search("nightly limit Paris", mode=mode)  # type: ignore[arg-type]
        top = response.results[0]
        assert top.document == "public/rates.xlsx", (mode, top)
        assert "City: Paris | Country: France | Nightly limit (EUR): 210" in top.text
        # Cited by the sheet and its rows.
        assert top.heading == "Hotel rates" and top.lines is not None and top.pages is None
        assert top.citation_id == f"public/rates.xlsx#hotel-rates:L{top.lines.start}-{top.lines.end}"
        assert top.lines.start <= 4 <= top.lines.end


def test_a_search_finds_a_slides_speaker_notes(mixed: tuple[Path, SearchService]) -> None:
    _, service = mixed
    response = service.search("claims older than sixty days director approval", mode="keyword")
    top = response.results[0]
    assert top.document == "public/induction.pptx"
    assert "Speaker notes: Claims older than sixty days need a director's approval." in top.text
    assert top.heading == "Expenses" and top.pages is not None and (top.pages.start, top.pages.end) == (2, 2)
    assert top.citation_id == "public/induction.pptx#expenses:p2"


def test_a_search_finds_an_html_table_row_under_its_heading(mixed: tuple[Path, SearchService]) -> None:
    _, service = mixed
    # The workbook holds Berlin's limit too; the page's row is found beside it.
    results = service.search("Berlin nightly limit hotels", mode="keyword").results
    page = next(r for r in results if r.document == "public/travel.html")
    assert "City: Berlin | Nightly limit (EUR): 165" in page.text
    assert page.lines is not None and page.heading.startswith("Travel and expenses")
    formats = {d.document: d.format for d in service.list_sources().documents}
    assert formats == {
        "public/travel.html": "html",
        "public/rates.xlsx": "xlsx",
        "public/induction.pptx": "pptx",
        "public/leave.md": "markdown",
    }


def test_a_skipped_file_above_the_ceiling_is_counted_not_named(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, "public/leave.md", "# Leave\n\nStaff receive twenty-five days of annual leave.\n")
    (corpus / "public" / "notes.rtf").write_bytes(b"{\\rtf1 public}")
    (corpus / "restricted").mkdir()
    (corpus / "restricted" / "merger-codename-falcon.rtf").write_bytes(b"{\\rtf1 secret}")
    report = ingest_corpus(corpus, tmp_path / "index.sqlite", HashEmbedder(), ceiling=PUBLIC, progress=None)
    assert report.skipped == [("public/notes.rtf", "unsupported format .rtf")]
    assert report.skipped_above_ceiling == 1 and report.unsupported_files == 2
    assert "falcon" not in json.dumps(report.as_dict())


def test_hostile_office_and_html_files_fail_alone_with_a_reason(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, "leave.md", "# Leave\n\nFull-time staff receive twenty-five days of annual leave.\n")
    bomb = rates_workbook(corpus / "bomb.xlsx")
    add_member(bomb, "xl/media/image1.png", b"\0" * 30_000_000)
    deck = induction_deck(corpus / "lol.pptx")
    with zipfile.ZipFile(deck) as archive:
        slide = without_declaration(archive.read("ppt/slides/slide1.xml"))
    rewrite_member(deck, "ppt/slides/slide1.xml", (BILLION_LAUGHS.replace("lolz", "p:sld") + slide).encode())
    (corpus / "lol.html").write_text('<!DOCTYPE html [<!ENTITY a "aaaa">]><html><body><p>&a;</p></body></html>')
    (corpus / "fake.pptx").write_text("a text file with the wrong name")
    report = ingest_corpus(corpus, tmp_path / "index.sqlite", HashEmbedder(), ceiling=RESTRICTED, progress=None)
    reasons = dict(report.rejected)
    assert set(reasons) == {"bomb.xlsx", "lol.pptx", "lol.html", "fake.pptx"}
    assert reasons["bomb.xlsx"].startswith("XLSX has a member that expands")
    assert reasons["lol.pptx"].startswith("PPTX has an XML part with a document type declaration")
    assert reasons["lol.html"].startswith("HTML declares XML entities")
    assert reasons["fake.pptx"] == "PPTX is not a valid archive (BadZipFile)"
    assert report.documents_indexed == 1


#: Words that occur only in the restricted office files.
RESTRICTED_MARKERS = ["quillmoor", "brackenfield", "zephyrine", "osprey"]


def test_restricted_office_and_html_files_are_never_visible_at_a_public_ceiling(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, "public/leave.md", "# Leave\n\nFull-time staff receive twenty-five days of annual leave.\n")
    restricted = corpus / "restricted"
    restricted.mkdir()
    wb = Workbook()
    wb.active.title = "Quillmoor salaries"
    wb.active.append(["Employee", "Salary (EUR)", "Project"])
    wb.active.append(["Brackenfield", 98_000, "Osprey"])
    wb.save(restricted / "salaries.xlsx")
    deck = induction_deck(restricted / "board.pptx")
    from pptx import Presentation

    board = Presentation(str(deck))
    board.slides[1].notes_slide.notes_text_frame.text = "Zephyrine acquisition closes before the Osprey audit."
    board.save(str(deck))
    (restricted / "merger.html").write_text(
        "<html><head><title>Quillmoor merger</title></head><body><main><h1>Brackenfield terms</h1>"
        "<p>The zephyrine offer values the osprey unit at nine million.</p></main></body></html>"
    )
    db = tmp_path / "index.sqlite"
    ingest_corpus(corpus, db, HashEmbedder(), ceiling=RESTRICTED, progress=None)

    def service(ceiling: Classification) -> SearchService:
        return SearchService(db, ceiling=ceiling, embedder_factory=HashEmbedder, gate_enabled=False)

    top = service(RESTRICTED)
    found = {r.document for m in RESTRICTED_MARKERS for r in top.search(m, mode="keyword").results}
    # Indexed, so the checks below would see a leak.
    assert found == {"restricted/salaries.xlsx", "restricted/board.pptx", "restricted/merger.html"}
    cited = [r.citation_id for m in RESTRICTED_MARKERS for r in top.search(m, mode="keyword").results]
    top.reader.close()
    for ceiling in (PUBLIC, INTERNAL):
        svc = service(ceiling)
        try:
            for marker in [*RESTRICTED_MARKERS, "salary employee project", "speaker notes acquisition"]:
                for mode in ("keyword", "semantic", "hybrid"):
                    for result in svc.search(marker, mode=mode).results:  # type: ignore[arg-type]
                        assert result.document == "public/leave.md", (ceiling, marker, mode, result)
                        assert not any(m in result.text.lower() for m in RESTRICTED_MARKERS)
            assert [d.document for d in svc.list_sources().documents] == ["public/leave.md"]
            for cid in cited:
                with pytest.raises(NotFoundError):
                    svc.read_passage(cid)
        finally:
            svc.reader.close()
    conn = connect(db, readonly=True)
    try:
        levels = dict(conn.execute("SELECT path, classification FROM documents").fetchall())
    finally:
        conn.close()
    assert {p: int(v) for p, v in levels.items() if p.startswith("restricted/")} == dict.fromkeys(
        ["restricted/salaries.xlsx", "restricted/board.pptx", "restricted/merger.html"], int(RESTRICTED)
    )


@pytest.mark.model
def test_ingest_json_and_the_terminal_list_every_skipped_file(tmp_path: Path) -> None:
    corpus = mixed_corpus(tmp_path / "corpus")
    db = tmp_path / "index.sqlite"
    args = ("ingest", "--corpus", str(corpus), "--db", str(db), "--ceiling", "restricted", "--quiet")
    done = run_cli(*args, "--json", log_level="WARNING")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert {(s["document"], s["reason"]) for s in report["skipped"]} == set(SKIPPED.items())
    assert report["unsupported_files"] == len(SKIPPED) and report["documents_indexed"] == 4
    assert report["rejected"] == []
    # Unchanged since: the index is kept, and the skipped files are still listed.
    done = run_cli(*args, log_level="WARNING")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Index unchanged since ")
    for name, reason in SKIPPED.items():
        assert f"  skipped {name}: {reason}\n" in done.stdout
    assert ".DS_Store" not in done.stdout
