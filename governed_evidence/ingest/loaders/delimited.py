"""CSV and TSV files, read like a sheet: each row with its header's names.

Shared drives hold many exports (a contact list, a rate table, a register) as CSV. Read as
plain text, "Paris,210" means nothing; read like an XLSX sheet it is "City: Paris | Nightly
limit (EUR): 210". The header is the first row with two or more values; rows above it (a
title, a note) are kept as plain text. Each row is a block of its own, cited by the lines
of the file it spans (a quoted value may run over several), so a credential-shaped cell
costs its row, not the file.

The delimiter is a tab for ``.tsv``; for ``.csv`` it is the one of ``,``, ``;``, tab and
``|`` that splits the first lines alike (spreadsheets in many European locales write
``;``), else a comma. The encoding is UTF-8 (with or without a byte order mark) or UTF-16
with its byte order mark; anything else is read as Windows-1252, what Excel writes on
Windows, and the ingest report says so, so an export whose accents read wrongly is noticed.

Bounded like XLSX: at most ``MAX_ROWS`` rows and ``MAX_CELLS`` values per file, and
``MAX_DELIMITED_BYTES`` of text; a file past a bound is refused with the reason, not cut.
"""

from __future__ import annotations

import codecs
import csv
import io
from pathlib import Path

from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.document import Block, LoadedDocument
from governed_evidence.ingest.guards import sanitize
from governed_evidence.ingest.loaders.labelled_rows import cell_text, labelled_row

__all__ = ["MAX_CELLS", "MAX_DELIMITED_BYTES", "MAX_FIELD_CHARS", "MAX_ROWS", "load_delimited"]

#: As for a workbook (``xlsx``): a rate or contact table runs to thousands of rows; 100,000
#: is a data export, not a policy.
MAX_ROWS = 100_000
MAX_CELLS = 1_000_000
#: 32 MiB of text is 100,000 rows of 300 characters: held as rows in memory twice over.
MAX_DELIMITED_BYTES = 32 * 1024 * 1024
#: Longest value in one cell (the csv module's own default limit).
MAX_FIELD_CHARS = 131_072
#: A header row has at least this many values; a title row has one.
_HEADER_MIN_VALUES = 2
_CANDIDATES = ",;\t|"
#: How much of the file the delimiter is judged on.
_SAMPLE_CHARS = 64 * 1024


def _decode(data: bytes) -> tuple[str, str | None]:
    """The text and, when it is not UTF-8, a warning naming the encoding it was read in."""
    if b"\x00" in data and not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise FileRejectedError("file contains NUL bytes (binary data, not text)")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16"), None
        except UnicodeDecodeError as exc:
            raise FileRejectedError(f"file is not valid UTF-16 (first bad byte at offset {exc.start})") from None
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as exc:
        bad = exc.start
    try:
        text = data.decode("cp1252")
    except UnicodeDecodeError as exc:
        raise FileRejectedError(
            f"file is neither UTF-8 (first bad byte at offset {bad}) nor Windows-1252 "
            f"(byte {data[exc.start]:#04x} at offset {exc.start}): save it as UTF-8"
        ) from None
    return (
        text,
        f"not UTF-8 (first bad byte at offset {bad}): read as Windows-1252; save it as UTF-8 if accents look wrong",
    )


def _delimiter(text: str, suffix: str) -> str:
    if suffix == ".tsv":
        return "\t"
    sample = text[:_SAMPLE_CHARS]
    if "\n" in sample:
        # Whole lines only: a cut line would count its delimiters short.
        sample = sample[: sample.rfind("\n")]
    try:
        return csv.Sniffer().sniff(sample, delimiters=_CANDIDATES).delimiter
    except csv.Error:
        return ","


def _rows(text: str, delimiter: str) -> list[tuple[int, int, list[str]]]:
    """Non-empty rows as (first line, last line, cells), bounded."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=False)
    rows: list[tuple[int, int, list[str]]] = []
    seen_rows = seen_cells = 0
    start = 1
    # The csv module's limit is process-wide; it is set here, not left to whoever set it last.
    csv.field_size_limit(MAX_FIELD_CHARS)
    try:
        for record in reader:
            end = reader.line_num
            seen_rows += 1
            seen_cells += len(record)
            if seen_rows > MAX_ROWS:
                raise FileRejectedError(f"file has more than {MAX_ROWS} rows, over the per-file limit")
            if seen_cells > MAX_CELLS:
                raise FileRejectedError(f"file has more than {MAX_CELLS} cells, over the per-file limit")
            cells = [cell_text(sanitize(value)) for value in record]
            if any(cells):
                rows.append((start, end, cells))
            start = end + 1
    except csv.Error as exc:
        raise FileRejectedError(f"cannot be read as delimited text near line {reader.line_num + 1}: {exc}") from None
    return rows


def load_delimited(path: Path, fallback_title: str) -> LoadedDocument:
    size = path.stat().st_size
    if size > MAX_DELIMITED_BYTES:
        raise FileRejectedError(f"file is {size} bytes, over the {MAX_DELIMITED_BYTES}-byte limit for CSV and TSV")
    text, encoding_warning = _decode(path.read_bytes())
    delimiter = _delimiter(text, path.suffix.lower())
    blocks: list[Block] = []
    header: list[str] | None = None
    for first, last, cells in _rows(text, delimiter):
        if header is None and sum(1 for c in cells if c) >= _HEADER_MIN_VALUES:
            header = cells
            continue
        if header is None:
            blocks.append(Block("paragraph", " ".join(c for c in cells if c), (), first, last))
            continue
        row = labelled_row(header, cells)
        blocks.append(Block("table", row, (), first, last, table_rows=[(row, first)]))
    if not blocks:
        raise FileRejectedError("file has no text (no row below its header)")
    doc = LoadedDocument(title=fallback_title, format="csv", blocks=blocks, separate_sections=True)
    if encoding_warning:
        doc.warnings.append(encoding_warning)
    return doc
