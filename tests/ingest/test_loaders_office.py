"""XLSX and PPTX loading on real files made here with openpyxl and python-pptx, and the
archive checks that run before either library sees a file."""

from __future__ import annotations

import datetime as dt
import random
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from openpyxl import Workbook
from pptx import Presentation
from pptx.util import Inches

from governed_evidence.config import Classification
from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.loaders import load_document
from governed_evidence.ingest.loaders import pptx as pptx_loader
from governed_evidence.ingest.loaders import xlsx as xlsx_loader
from governed_evidence.ingest.loaders.ooxml import PackageLimits, read_package
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.store.connection import connect
from tests.helpers import HashEmbedder

# --- files made with the libraries the loaders read them with --------------------------------------


def rates_workbook(path: Path) -> Path:
    """Two sheets: a titled rate table with mixed cell types, and a plain allowance table."""
    wb = Workbook()
    hotels = wb.active
    hotels.title = "Hotel rates"
    hotels.append(["Hotel rates for business travel, 2024"])
    hotels.append([])
    hotels.append(["City", "Country", "Nightly limit (EUR)", "Valid from", "Breakfast", "Notes"])
    hotels.append(["Paris", "France", 210, dt.date(2024, 1, 1), True, None])
    hotels.append(["Berlin", "Germany", 165.5, dt.datetime(2024, 4, 1, 9, 30), False, "Book through the portal"])
    hotels.append(["Lisbon", "Portugal", 0.1 + 0.2, None, None, None])
    meals = wb.create_sheet("Meals")
    meals.append(["Band", "Daily allowance (EUR)"])
    meals.append(["A", 45])
    meals.append(["B", 60])
    wb.properties.title = "Travel rates"
    wb.save(path)
    return path


def induction_deck(path: Path) -> Path:
    """Three slides: a title slide, one with bullets, a table, speaker notes and a footer,
    and one with no title whose text sits in a group shape."""
    deck = Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[0])
    first.shapes.title.text = "Induction for new staff"
    first.placeholders[1].text = "Welcome to the organisation"
    second = deck.slides.add_slide(deck.slide_layouts[1])
    second.shapes.title.text = "Expenses"
    second.placeholders[1].text_frame.text = "Claims go through the expenses portal\nReceipts are required"
    table = second.shapes.add_table(3, 2, Inches(1), Inches(5), Inches(4), Inches(1)).table
    for r, row in enumerate([["Band", "Meal limit (EUR)"], ["A", "45"], ["B", "60"]]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    second.notes_slide.notes_text_frame.text = "Claims older than sixty days need a director's approval."
    # The running placeholders (date 16, footer 15, slide number 13), as PowerPoint adds them.
    for placeholder in deck.slide_layouts[1].placeholders:
        if int(placeholder.placeholder_format.type) in (13, 15, 16):
            second.shapes.clone_placeholder(placeholder)
    for shape in second.placeholders:
        if int(shape.placeholder_format.type) in (13, 15, 16):
            shape.text_frame.text = "Runningword: people team, confidential"
    third = deck.slides.add_slide(deck.slide_layouts[6])
    group = third.shapes.add_group_shape()
    box = group.shapes.add_textbox(Inches(1), Inches(1), Inches(4), Inches(1))
    box.text_frame.text = "Questions go to the people team"
    deck.save(path)
    return path


def rewrite_member(path: Path, member: str, data: bytes) -> None:
    """Replace one member of the archive at ``path`` with ``data``, keeping the others."""
    with zipfile.ZipFile(path) as source:
        members = [(info, source.read(info)) for info in source.infolist()]
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for info, content in members:
            out.writestr(info.filename, data if info.filename == member else content)


def without_declaration(xml: bytes) -> str:
    """The XML of a part without its ``<?xml ...?>`` line (openpyxl writes none)."""
    text = xml.decode()
    return text.split("?>", 1)[1] if text.startswith("<?xml") else text


def add_member(path: Path, member: str, data: bytes) -> None:
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(member, data)


BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{n} "{f"&lol{n - 1};" * 10 if n > 1 else "&lol;" * 10}">' for n in range(1, 10))
    + "]>"
)


# --- XLSX ------------------------------------------------------------------------------------------


def test_xlsx_sheets_are_sections_and_rows_carry_their_header_names(tmp_path: Path) -> None:
    doc = load_document(rates_workbook(tmp_path / "rates.xlsx"), "fallback")
    assert doc.format == "xlsx" and doc.title == "Travel rates" and doc.separate_sections
    by_row = {(b.headings, b.line_start): b for b in doc.blocks}
    # The title row above the header is plain text; the header row is not a block of its own.
    assert by_row[(("Hotel rates",), 1)].kind == "paragraph"
    assert by_row[(("Hotel rates",), 1)].text == "Hotel rates for business travel, 2024"
    assert (("Hotel rates",), 3) not in by_row
    paris = by_row[(("Hotel rates",), 4)]
    assert paris.kind == "table" and paris.line_end == 4
    # Empty cells are left out; dates in ISO form, booleans as Excel shows them.
    assert (
        paris.text
        == "City: Paris | Country: France | Nightly limit (EUR): 210 | Valid from: 2024-01-01 | Breakfast: TRUE"
    )
    assert by_row[(("Hotel rates",), 5)].text == (
        "City: Berlin | Country: Germany | Nightly limit (EUR): 165.5 | Valid from: 2024-04-01 09:30:00 "
        "| Breakfast: FALSE | Notes: Book through the portal"
    )
    # Excel's 15 significant digits: 0.1 + 0.2 is 0.3.
    assert by_row[(("Hotel rates",), 6)].text == "City: Lisbon | Country: Portugal | Nightly limit (EUR): 0.3"
    assert [b.text for b in doc.blocks if b.headings == ("Meals",)] == [
        "Band: A | Daily allowance (EUR): 45",
        "Band: B | Daily allowance (EUR): 60",
    ]


def test_xlsx_sheet_without_a_header_row_is_read_as_lines(tmp_path: Path) -> None:
    wb = Workbook()
    wb.active.title = "Rules"
    for rule in ["Receipts are kept for seven years.", None, "Claims are filed within thirty days."]:
        wb.active.append([rule])
    doc = load_document(_saved(wb, tmp_path / "rules.xlsx"), "Rules of thumb")
    assert doc.title == "Rules of thumb"
    assert [(b.kind, b.text, b.line_start) for b in doc.blocks] == [
        ("paragraph", "Receipts are kept for seven years.", 1),
        ("paragraph", "Claims are filed within thirty days.", 3),
    ]


def _saved(wb: Workbook, path: Path) -> Path:
    wb.save(path)
    return path


def _passages(db: Path) -> list[tuple[str, str, int | None, int | None, int | None, int | None, str]]:
    conn = connect(db, readonly=True)
    try:
        return [
            tuple(r)  # type: ignore[misc]
            for r in conn.execute(
                "SELECT citation_id, heading, line_start, line_end, page_start, page_end, text FROM passages "
                "ORDER BY citation_id"
            )
        ]
    finally:
        conn.close()


def _ingest(corpus: Path, db: Path) -> None:
    report = ingest_corpus(corpus, db, HashEmbedder(), ceiling=Classification.RESTRICTED, progress=None)
    assert not report.rejected, report.rejected


def test_xlsx_citations_name_the_sheet_and_its_rows(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    rates_workbook(corpus / "rates.xlsx")
    _ingest(corpus, tmp_path / "index.sqlite")
    passages = _passages(tmp_path / "index.sqlite")
    # Each sheet is small enough for one passage; neither is folded into the other (their
    # row numbers restart, so one span over both would point nowhere).
    assert [(cid, heading, start, end, page) for cid, heading, start, end, page, _, _ in passages] == [
        ("rates.xlsx#hotel-rates:L1-6", "Hotel rates", 1, 6, None),
        ("rates.xlsx#meals:L2-3", "Meals", 2, 3, None),
    ]
    assert "Nightly limit (EUR): 210" in passages[0][6]


def test_xlsx_large_sheet_is_split_into_row_spans_that_keep_the_header_names(tmp_path: Path) -> None:
    wb = Workbook()
    wb.active.title = "Per diem"
    wb.active.append(["City", "Hotel limit (EUR)", "Meal limit (EUR)"])
    for n in range(2, 202):
        wb.active.append([f"City {n}", 100 + n, 30 + n % 20])
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _saved(wb, corpus / "allowances.xlsx")
    _ingest(corpus, tmp_path / "index.sqlite")
    passages = _passages(tmp_path / "index.sqlite")
    assert len(passages) > 5
    covered: list[int] = []
    for cid, heading, start, end, _, _, text in passages:
        assert heading == "Per diem" and start is not None and end is not None
        assert re.fullmatch(rf"allowances\.xlsx#per-diem:L{start}-{end}(~\d+)?", cid)
        rows = text.split("\n\n")
        # Every row of every passage still says what its numbers are.
        assert all(row.startswith("City: City ") and "Hotel limit (EUR): " in row for row in rows)
        assert [int(re.match(r"City: City (\d+)", row).group(1)) for row in rows] == list(range(start, end + 1))  # type: ignore[union-attr]
        covered.extend(range(start, end + 1))
    assert sorted(covered) == list(range(2, 202))


def test_xlsx_compression_bomb_is_refused_before_decompressing(tmp_path: Path) -> None:
    path = rates_workbook(tmp_path / "bomb.xlsx")
    add_member(path, "xl/media/image1.png", b"\0" * 30_000_000)
    assert path.stat().st_size < 200_000
    with pytest.raises(FileRejectedError, match=r"XLSX has a member that expands \d+:1, over the 200:1 limit"):
        load_document(path, "bomb")


def test_xlsx_sheet_declaring_false_sizes_is_refused_by_the_bytes_it_yields(tmp_path: Path) -> None:
    path = rates_workbook(tmp_path / "falsified.xlsx")
    data = path.read_bytes()
    # Patch the declared size of sheet1.xml in both headers to 10 bytes: the decompression
    # must stop at the cap the loader counts, whatever the archive claims.
    with zipfile.ZipFile(path) as archive:
        actual = archive.getinfo("xl/worksheets/sheet1.xml").file_size
    from tests.ingest.test_loader_bounds import falsify_size

    falsify_size(path, "xl/worksheets/sheet1.xml", 10)
    assert path.read_bytes() != data and actual > 10
    with pytest.raises(FileRejectedError, match=r"XLSX archive is damaged or declares false sizes"):
        load_document(path, "falsified")


def test_xlsx_over_the_xml_cap_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = rates_workbook(tmp_path / "big.xlsx")
    monkeypatch.setattr(xlsx_loader, "LIMITS", PackageLimits("XLSX", 5_000, 200 << 20, max_xml_bytes=2_000))
    with pytest.raises(FileRejectedError, match="XLSX XML parts expand past the 2000-byte limit"):
        load_document(path, "big")


def test_xlsx_with_too_many_members_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = rates_workbook(tmp_path / "many.xlsx")
    monkeypatch.setattr(xlsx_loader, "LIMITS", PackageLimits("XLSX", 5, 200 << 20, 48 << 20))
    with pytest.raises(FileRejectedError, match=r"XLSX has \d+ archive members, over the 5-member limit"):
        load_document(path, "many")


def _sheet_xml(rows: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
        f"<sheetData>{rows}</sheetData></worksheet>"
    ).encode()


def test_xlsx_row_far_down_the_sheet_is_refused_by_the_row_cap(tmp_path: Path) -> None:
    # Two rows in the XML; the reader yields every empty row between them (a million).
    path = rates_workbook(tmp_path / "far.xlsx")
    rewrite_member(
        path,
        "xl/worksheets/sheet1.xml",
        _sheet_xml('<row r="1"><c r="A1" t="inlineStr"><is><t>City</t></is></c></row>'
                   '<row r="1048576"><c r="A1048576" t="inlineStr"><is><t>Paris</t></is></c></row>'),
    )  # fmt: skip
    with pytest.raises(FileRejectedError, match="XLSX has more than 100000 rows, over the per-file limit"):
        load_document(path, "far")


def test_xlsx_cell_in_the_last_column_is_refused_by_the_cell_cap(tmp_path: Path) -> None:
    # One cell a row in column XFD: each row is read 16,384 values wide.
    rows = "".join(f'<row r="{n}"><c r="XFD{n}"><v>{n}</v></c></row>' for n in range(1, 101))
    path = rates_workbook(tmp_path / "wide.xlsx")
    rewrite_member(path, "xl/worksheets/sheet1.xml", _sheet_xml(rows))
    with pytest.raises(FileRejectedError, match="XLSX has more than 1000000 cells, over the per-file limit"):
        load_document(path, "wide")


def test_xlsx_with_an_entity_declaration_is_refused_and_openpyxl_would_not_expand_it(tmp_path: Path) -> None:
    path = rates_workbook(tmp_path / "lol.xlsx")
    with zipfile.ZipFile(path) as archive:
        sheet = without_declaration(archive.read("xl/worksheets/sheet1.xml"))
    assert "<v>210</v>" in sheet
    hostile = BILLION_LAUGHS.replace("lolz", "worksheet") + sheet.replace("<v>210</v>", "<v>&lol9;</v>")
    rewrite_member(path, "xl/worksheets/sheet1.xml", hostile.encode())
    with pytest.raises(FileRejectedError, match="XLSX has an XML part with a document type declaration"):
        load_document(path, "lol")
    # The second line holds too: openpyxl itself refuses the entity (through defusedxml).
    import openpyxl

    with pytest.raises(ValueError, match="Unable to read workbook") as caught:
        openpyxl.load_workbook(path, read_only=True)
    assert type(caught.value.__cause__).__name__ == "EntitiesForbidden"


def test_xlsx_that_is_not_a_zip_or_is_an_ole_file_is_refused_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "text.xlsx").write_text("City,Limit\nParis,210\n")
    with pytest.raises(FileRejectedError, match=r"XLSX is not a valid archive \(BadZipFile\)"):
        load_document(tmp_path / "text.xlsx", "text")
    (tmp_path / "locked.xlsx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 512)
    with pytest.raises(FileRejectedError, match=r"OLE compound file.*password-protected"):
        load_document(tmp_path / "locked.xlsx", "locked")


def test_xlsx_parse_is_paced_by_the_processor_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No allowance at all: the parser process is stopped at its first look and says why.
    monkeypatch.setattr(xlsx_loader, "CPU_BASE_SECONDS", 0.0)
    monkeypatch.setattr(xlsx_loader, "CPU_SECONDS_PER_MIB", 0.0)
    with pytest.raises(FileRejectedError, match="XLSX exceeded the per-file processor budget"):
        load_document(rates_workbook(tmp_path / "rates.xlsx"), "rates")


#: Loads one file with the per-file memory budget lowered, in a fresh interpreter: the budget
#: counts address space the parse adds, and a long test session's freed heap (which a parse
#: in a child forked from it reuses without growing) would make the outcome depend on what ran
#: before.
_LOAD_UNDER_A_SMALL_BUDGET = """
import sys
from pathlib import Path
from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.loaders import bounded, load_document
bounded.PER_FILE_MEMORY_BYTES = 8 << 20
try:
    load_document(Path(sys.argv[1]), "doc")
except FileRejectedError as exc:
    print("rejected:", exc)
else:
    print("loaded")
"""


def _load_under_a_small_budget(path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_UNDER_A_SMALL_BUDGET, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    return done.stdout.strip()


def test_xlsx_parse_over_the_memory_budget_is_refused(tmp_path: Path) -> None:
    # 20,000 distinct rows: within every size limit, over a per-file budget of 8 MiB, which a
    # small workbook fits (so it is this file's parse that the budget stops).
    wb = Workbook(write_only=True)
    sheet = wb.create_sheet("Big")
    for n in range(20_000):
        sheet.append([f"Row {n} of a long export", n, n * 1.5, f"Note {n * 7919 % 10007}"])
    path = _saved(wb, tmp_path / "big.xlsx")  # type: ignore[arg-type]
    assert _load_under_a_small_budget(rates_workbook(tmp_path / "small.xlsx")) == "loaded"
    outcome = _load_under_a_small_budget(path)
    assert re.fullmatch(r"rejected: XLSX exceeded the per-file memory budget \(8 MiB\).*", outcome), outcome


# --- PPTX ------------------------------------------------------------------------------------------


def test_pptx_one_section_per_slide_with_its_title_notes_and_number(tmp_path: Path) -> None:
    doc = load_document(induction_deck(tmp_path / "induction.pptx"), "fallback")
    assert doc.format == "pptx" and doc.separate_sections
    # No title in the deck's properties: its first slide's title is the deck's.
    assert doc.title == "Induction for new staff"
    assert [(b.kind, b.headings, b.page, b.text) for b in doc.blocks] == [
        ("heading", ("Induction for new staff",), 1, "Induction for new staff"),
        ("paragraph", ("Induction for new staff",), 1, "Welcome to the organisation"),
        ("heading", ("Expenses",), 2, "Expenses"),
        ("paragraph", ("Expenses",), 2, "Claims go through the expenses portal"),
        ("paragraph", ("Expenses",), 2, "Receipts are required"),
        ("table", ("Expenses",), 2, "Band: A | Meal limit (EUR): 45\nBand: B | Meal limit (EUR): 60"),
        ("paragraph", ("Expenses",), 2, "Speaker notes: Claims older than sixty days need a director's approval."),
        # No title placeholder: named by its number; the group shape's text is read.
        ("heading", ("Slide 3",), 3, "Slide 3"),
        ("paragraph", ("Slide 3",), 3, "Questions go to the people team"),
    ]
    assert all(b.line_start is None for b in doc.blocks)
    # The footer, date and slide number are left out.
    assert not any("Runningword" in b.text for b in doc.blocks)


def test_pptx_citations_are_slide_numbers_under_the_slide_title(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    induction_deck(corpus / "induction.pptx")
    _ingest(corpus, tmp_path / "index.sqlite")
    passages = _passages(tmp_path / "index.sqlite")
    # Every slide is small, and still none is folded into another: each keeps its title and number.
    assert [(cid, heading, start, page, end) for cid, heading, start, _, page, end, _ in passages] == [
        ("induction.pptx#expenses:p2", "Expenses", None, 2, 2),
        ("induction.pptx#induction-for-new-staff:p1", "", None, 1, 1),
        ("induction.pptx#slide-3:p3", "Slide 3", None, 3, 3),
    ]
    expenses = passages[0][6]
    assert "Speaker notes: Claims older than sixty days" in expenses and "Meal limit (EUR): 45" in expenses


def test_pptx_core_title_is_kept_unless_it_is_powerpoints_placeholder(tmp_path: Path) -> None:
    path = induction_deck(tmp_path / "deck.pptx")
    deck = Presentation(str(path))
    deck.core_properties.title = "People team induction deck"
    deck.save(str(path))
    assert load_document(path, "fallback").title == "People team induction deck"
    deck.core_properties.title = "PowerPoint Presentation"
    deck.save(str(path))
    assert load_document(path, "fallback").title == "Induction for new staff"


def test_pptx_media_reach_the_parser_empty(tmp_path: Path) -> None:
    path = induction_deck(tmp_path / "deck.pptx")
    # Video is already compressed: it does not deflate further (random bytes stand in for it).
    add_member(path, "ppt/media/video1.mp4", random.Random(14).randbytes(2_000_000))
    package, xml_bytes = read_package(path, pptx_loader.LIMITS)
    with zipfile.ZipFile(package) as copy:
        sizes = {i.filename: i.file_size for i in copy.infolist()}
    assert sizes["ppt/media/video1.mp4"] == 0
    assert sizes["ppt/slides/slide2.xml"] > 0
    assert xml_bytes == sum(size for name, size in sizes.items() if name.endswith((".xml", ".rels")))
    assert load_document(path, "deck").title == "Induction for new staff"


def test_pptx_media_bomb_is_refused_by_ratio(tmp_path: Path) -> None:
    path = induction_deck(tmp_path / "bomb.pptx")
    add_member(path, "ppt/media/image9.png", b"\0" * 50_000_000)
    with pytest.raises(FileRejectedError, match=r"PPTX has a member that expands \d+:1"):
        load_document(path, "bomb")


def test_pptx_with_too_many_slides_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pptx_loader, "MAX_SLIDES", 2)
    with pytest.raises(FileRejectedError, match="PPTX has 3 slides, over the 2-slide limit"):
        load_document(induction_deck(tmp_path / "long.pptx"), "long")


def test_pptx_with_an_entity_declaration_is_refused(tmp_path: Path) -> None:
    path = induction_deck(tmp_path / "lol.pptx")
    with zipfile.ZipFile(path) as archive:
        slide = without_declaration(archive.read("ppt/slides/slide2.xml"))
    assert "Receipts" in slide
    hostile = BILLION_LAUGHS.replace("lolz", "p:sld") + slide.replace("Receipts", "&lol9;")
    rewrite_member(path, "ppt/slides/slide2.xml", hostile.encode())
    with pytest.raises(FileRejectedError, match="PPTX has an XML part with a document type declaration"):
        load_document(path, "lol")
    # The second line holds too: python-pptx's parser does not substitute entities (a
    # small one stays a reference), and libxml2 stops the bomb's amplification.
    from lxml import etree
    from pptx.oxml import parse_xml

    small = '<!DOCTYPE p:sld [<!ENTITY x "EXPANDED">]>' + slide.replace("Receipts", "&x;")
    texts = list(parse_xml(small.encode()).itertext())
    assert "&x;" in texts and not any("EXPANDED" in t for t in texts)
    with pytest.raises(etree.XMLSyntaxError, match="amplification"):
        parse_xml(hostile.encode())


def test_pptx_parse_is_paced_by_the_processor_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pptx_loader, "CPU_BASE_SECONDS", 0.0)
    monkeypatch.setattr(pptx_loader, "CPU_SECONDS_PER_MIB", 0.0)
    with pytest.raises(FileRejectedError, match="PPTX exceeded the per-file processor budget"):
        load_document(induction_deck(tmp_path / "deck.pptx"), "deck")


def test_pptx_that_is_not_a_deck_is_refused_with_the_reason(tmp_path: Path) -> None:
    # A workbook renamed .pptx: a valid package, not a presentation.
    shutil.copyfile(rates_workbook(tmp_path / "rates.xlsx"), tmp_path / "renamed.pptx")
    with pytest.raises(FileRejectedError, match=r"PPTX cannot be parsed \(\w+\)"):
        load_document(tmp_path / "renamed.pptx", "renamed")
    (tmp_path / "empty-zip.pptx").write_bytes(b"PK\x05\x06" + b"\0" * 18)
    with pytest.raises(FileRejectedError, match=r"PPTX has no \[Content_Types\]\.xml part"):
        load_document(tmp_path / "empty-zip.pptx", "empty")
