"""Word documents via docx2python: heading styles and tables kept.

Positions are paragraph numbers in the extracted text (reported as ``lines``), since a
DOCX has no stable pages. The archive is checked before parsing: a zip bomb is refused by
its declared uncompressed size, not after it has filled memory.
"""

from __future__ import annotations

import re
import warnings
import zipfile
from pathlib import Path
from typing import Any

from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.document import Block, BlockKind, LoadedDocument
from governed_evidence.ingest.guards import sanitize

__all__ = ["MAX_UNCOMPRESSED_BYTES", "load_docx"]

MAX_UNCOMPRESSED_BYTES = 200 * 1024 * 1024
_HEADING_STYLE = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)


def _check_archive(path: Path) -> None:
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            names = {i.filename for i in infos}
    except (zipfile.BadZipFile, OSError) as exc:
        raise FileRejectedError(f"DOCX is not a valid archive ({type(exc).__name__})") from None
    total = sum(i.file_size for i in infos)
    if total > MAX_UNCOMPRESSED_BYTES:
        raise FileRejectedError(f"DOCX expands to {total} bytes, over the {MAX_UNCOMPRESSED_BYTES}-byte limit")
    if "word/document.xml" not in names:
        raise FileRejectedError("DOCX has no word/document.xml part")


# docx2python writes images and similar objects into the text as ----media/image1.png----.
_PLACEHOLDER = re.compile(r"----(?:media/|Image alt text---->)[^\n]*?----")


def _par_text(par: Any) -> str:
    return _PLACEHOLDER.sub("", sanitize("".join(run.text for run in par.runs))).strip()


def load_docx(path: Path, fallback_title: str) -> LoadedDocument:
    from docx2python import docx2python

    _check_archive(path)
    try:
        with warnings.catch_warnings():
            # Missing optional parts (e.g. docProps/core.xml from Google Docs) only warn.
            warnings.simplefilter("ignore")
            with docx2python(path) as content:
                groups = content.body_pars
                core = content.core_properties
    except Exception as exc:  # noqa: BLE001 - the parser raises many unrelated types
        raise FileRejectedError(f"DOCX cannot be parsed ({type(exc).__name__})") from None

    blocks: list[Block] = []
    stack: list[tuple[int, str]] = []
    title: str | None = None
    line = 0
    for group in groups:
        first = next((p for row in group for cell in row for p in cell), None)
        is_table = first is not None and "tbl" in (first.lineage or ())
        headings = tuple(t for _, t in stack)
        if is_table:
            rows: list[tuple[str, int | None]] = []
            for row in group:
                cells = [" ".join(filter(None, (_par_text(p) for p in cell))) for cell in row]
                if any(cells):
                    line += 1
                    rows.append(("| " + " | ".join(cells) + " |", line))
            if rows:
                header = [rows[0][0]]
                text = "\n".join(r for r, _ in rows)
                blocks.append(
                    Block("table", text, headings, rows[0][1], rows[-1][1], table_header=header, table_rows=rows[1:])
                )
            continue
        for row in group:
            for cell in row:
                for par in cell:
                    text = _par_text(par)
                    if not text:
                        continue
                    line += 1
                    style = (par.style or "").strip()
                    match = _HEADING_STYLE.match(style)
                    if style.lower() == "title" and title is None:
                        title = text
                        continue
                    if match:
                        level = int(match.group(1))
                        while stack and stack[-1][0] >= level:
                            stack.pop()
                        stack.append((level, text))
                        blocks.append(Block("heading", text, tuple(t for _, t in stack), line, line))
                        continue
                    kind: BlockKind = "list" if style.lower().startswith("list") else "paragraph"
                    blocks.append(Block(kind, text, tuple(t for _, t in stack), line, line))
    if not blocks:
        raise FileRejectedError("DOCX has no text")
    if title is None:
        core_title = core.get("title") if isinstance(core, dict) else None
        title = core_title.strip() if isinstance(core_title, str) and core_title.strip() else fallback_title
    return LoadedDocument(title=title, format="docx", blocks=blocks)
