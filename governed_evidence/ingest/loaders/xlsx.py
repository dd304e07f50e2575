"""Excel workbooks via openpyxl: each sheet a section, each row read with its header's names.

A rate table's row "Paris | 210" means nothing alone; "City: Paris | Nightly limit (EUR):
210" can be found by its header words and quoted on its own. The header row of a sheet is
its first row with two or more values; rows above it (a sheet title, a note) are kept as
plain text, and a sheet whose rows never hold two values is read as plain lines. Positions
are row numbers, reported as ``lines``, and the heading is the sheet's name, so a citation
reads ``rates.xlsx#hotels:L12-19``: the sheet and its rows 12 to 19. Each row is a block of
its own, so a credential-shaped cell costs its row, not the sheet.

Cells are read as Excel last saved them (``data_only``: a formula's cached result, not its
text; a formula never calculated by Excel reads as empty). Numbers are written with
Excel's 15 significant digits, dates in ISO form; number formats (currency, percent) are
not applied.

The archive is judged and copied before openpyxl sees it (``ooxml``), and openpyxl reads
in its streaming mode, which never loads images, charts or pivot caches. The parse runs in
a child process under the per-file memory and processor budgets (``bounded``), paced by the
XML size, and rows and cells are counted as they stream, padding included: a sheet that
declares one cell in its last column still yields 16,384 values a row, and one far-down row
yields every empty row above it.
"""

from __future__ import annotations

import datetime as dt
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.document import Block, LoadedDocument
from governed_evidence.ingest.guards import sanitize
from governed_evidence.ingest.loaders.bounded import limit_cpu, run_bounded
from governed_evidence.ingest.loaders.labelled_rows import cell_text, labelled_row
from governed_evidence.ingest.loaders.ooxml import PackageLimits, read_package

__all__ = ["CPU_BASE_SECONDS", "CPU_SECONDS_PER_MIB", "LIMITS", "MAX_CELLS", "MAX_ROWS", "load_xlsx"]

#: Excel writes tens of members for a workbook, hundreds with many sheets and images;
#: the XML cap: openpyxl's streaming reader costs about 0.4 s a MiB of sheet XML (a
#: 20,000-row sheet of 8 columns: 8.6 MB, 3.6 s), so 48 MiB fits the processor budget.
LIMITS = PackageLimits(
    label="XLSX", max_members=5_000, max_uncompressed_bytes=200 * 1024 * 1024, max_xml_bytes=48 * 1024 * 1024
)
#: Rows visited in the whole workbook, empty ones included: a rate or contact table runs to
#: hundreds or thousands; 100,000 is a data export, not a policy.
MAX_ROWS = 100_000
#: Values visited, padding included (each row is as wide as its last cell): 1,000,000 is
#: 50,000 rows of 20 columns, about 22 s of parsing.
MAX_CELLS = 1_000_000
#: Processor time paced by the XML size: an allowance for opening the workbook, then five
#: times the measured cost of a MiB of sheet XML.
CPU_BASE_SECONDS = 10.0
CPU_SECONDS_PER_MIB = 2.0
#: A header row has at least this many values; a sheet's title row has one.
_HEADER_MIN_VALUES = 2


@dataclass
class _Sheet:
    """One sheet as the parser process returns it: plain strings, so it pickles small."""

    name: str
    #: Non-empty rows: (row number, the text of each cell).
    rows: list[tuple[int, list[str]]]


def _value_text(value: Any) -> str:
    """A cell as Excel shows it without number formats."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        # Excel keeps and shows 15 significant digits: 0.1 + 0.2 is 0.3 there.
        return format(value, ".15g")
    if isinstance(value, dt.datetime):
        if value.time() == dt.time(0, 0):
            return value.date().isoformat()
        return value.isoformat(sep=" ", timespec="seconds" if value.microsecond == 0 else "auto")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return cell_text(sanitize(str(value)))


def _extract(path: Path) -> tuple[list[_Sheet], str | None]:
    """Run in the bounded child: the archive checks, then openpyxl's streaming reader."""
    import openpyxl

    package, xml_bytes = read_package(path, LIMITS)
    xml_mib = xml_bytes / (1024 * 1024)
    limit_cpu(
        CPU_BASE_SECONDS + CPU_SECONDS_PER_MIB * xml_mib,
        f"for {xml_mib:.1f} MiB of XML, with {CPU_BASE_SECONDS:g} s plus {CPU_SECONDS_PER_MIB:g} s a MiB allowed",
    )
    sheets: list[_Sheet] = []
    rows_seen = cells_seen = 0
    try:
        with warnings.catch_warnings():
            # openpyxl warns about parts it does not support (data validation, slicers...).
            warnings.simplefilter("ignore")
            workbook = openpyxl.load_workbook(package, read_only=True, data_only=True, keep_links=False)
            try:
                for sheet in workbook.worksheets:
                    # The declared dimensions are the file's word: rows are read as they are.
                    sheet.reset_dimensions()
                    rows: list[tuple[int, list[str]]] = []
                    for number, values in enumerate(sheet.iter_rows(values_only=True), start=1):
                        rows_seen += 1
                        cells_seen += len(values)
                        if rows_seen > MAX_ROWS:
                            raise FileRejectedError(f"XLSX has more than {MAX_ROWS} rows, over the per-file limit")
                        if cells_seen > MAX_CELLS:
                            raise FileRejectedError(f"XLSX has more than {MAX_CELLS} cells, over the per-file limit")
                        texts = [_value_text(v) for v in values]
                        if any(texts):
                            rows.append((number, texts))
                    sheets.append(_Sheet(str(sheet.title), rows))
                title = workbook.properties.title
            finally:
                workbook.close()
    except (FileRejectedError, MemoryError):
        raise
    except Exception as exc:  # noqa: BLE001 - the parser raises many unrelated types
        raise FileRejectedError(f"XLSX cannot be parsed ({type(exc).__name__})") from None
    return sheets, title if isinstance(title, str) else None


def load_xlsx(path: Path, fallback_title: str) -> LoadedDocument:
    # Imported here so the parser process starts with it loaded rather than importing it.
    import openpyxl  # noqa: F401

    sheets, core_title = run_bounded("XLSX", _extract, path)
    return _build(sheets, core_title, fallback_title)


def _build(sheets: list[_Sheet], core_title: str | None, fallback_title: str) -> LoadedDocument:
    blocks: list[Block] = []
    names: set[str] = set()
    for index, sheet in enumerate(sheets, start=1):
        name = cell_text(sanitize(sheet.name)) or f"Sheet {index}"
        if name in names:
            # Excel's names are unique, but two can read alike once invisible characters
            # are gone; one heading for two sheets would join their rows in one section.
            name = f"{name} (sheet {index})"
        names.add(name)
        headings = (name,)
        header: list[str] | None = None
        for number, cells in sheet.rows:
            if header is None and sum(1 for c in cells if c) >= _HEADER_MIN_VALUES:
                header = cells
                continue
            if header is None:
                text = " ".join(c for c in cells if c)
                blocks.append(Block("paragraph", text, headings, number, number))
                continue
            row = labelled_row(header, cells)
            blocks.append(Block("table", row, headings, number, number, table_rows=[(row, number)]))
    if not blocks:
        raise FileRejectedError("XLSX has no text (no sheet has a row below its header)")
    title = core_title.strip() if core_title is not None and core_title.strip() else fallback_title
    return LoadedDocument(title=sanitize(title), format="xlsx", blocks=blocks, separate_sections=True)
