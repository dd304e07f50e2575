"""PDF via pypdf, one page at a time so every passage knows its page.

Scanned (image-only) PDFs have no text layer and are refused with that reason: OCR is
out of scope, and indexing an empty document would only hide the gap. Section titles come
from the PDF outline when it has one.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.document import Block, LoadedDocument
from governed_evidence.ingest.guards import sanitize
from governed_evidence.ingest.loaders.text import looks_like_heading

__all__ = ["load_pdf"]

#: A page with fewer extractable characters than this counts as having no text layer.
MIN_PAGE_CHARS = 20


def _outline_pages(reader: Any) -> dict[int, list[list[str]]]:
    """Page index -> the outline entries (each with its parents' titles) starting on it, in order."""
    found: dict[int, list[list[str]]] = {}

    def walk(items: list[Any], parents: list[str]) -> None:
        last: list[str] = parents
        for item in items:
            if isinstance(item, list):
                walk(item, last)
                continue
            try:
                title = str(item.title).strip()
                page = reader.get_destination_page_number(item)
            except Exception:  # noqa: BLE001, S112 - a broken outline entry is just skipped
                continue
            if title and page is not None and page >= 0:
                last = [*parents, title]
                found.setdefault(page, []).append(last)

    try:
        walk(list(reader.outline), [])
    except Exception:  # noqa: BLE001 - outlines are optional decoration
        return {}
    return found


def _title_key(line: str) -> str:
    return " ".join(line.split()).casefold()


def load_pdf(path: Path, fallback_title: str) -> LoadedDocument:
    import pypdf
    from pypdf.errors import PdfReadError

    try:
        reader = pypdf.PdfReader(path, strict=False)
        if reader.is_encrypted:
            try:
                ok = bool(reader.decrypt(""))
            except Exception:  # noqa: BLE001 - unsupported encryption schemes raise varied errors
                ok = False
            if not ok:
                raise FileRejectedError("PDF is encrypted and needs a password")
        pages = list(reader.pages)
    except FileRejectedError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError, AssertionError) as exc:
        raise FileRejectedError(f"PDF cannot be read ({type(exc).__name__})") from None

    warnings: list[str] = []
    root: Any = reader.trailer.get("/Root", {})
    acro = root.get("/AcroForm") if hasattr(root, "get") else None
    if acro is not None and hasattr(acro, "get") and acro.get("/XFA") is not None:
        warnings.append("XFA form: only its static text is extracted; form fields are not indexed")

    outline = _outline_pages(reader)
    blocks: list[Block] = []
    headings: tuple[str, ...] = ()
    empty_pages = 0
    for index, page in enumerate(pages):
        try:
            raw = page.extract_text() or ""
        except Exception:  # noqa: BLE001 - one bad page must not lose the document
            raw = ""
            warnings.append(f"page {index + 1}: text could not be extracted")
        text = sanitize(raw)
        entries = outline.get(index, [])
        if len(text.strip()) < MIN_PAGE_CHARS:
            empty_pages += 1
            if entries:
                headings = tuple(entries[-1])
            continue
        # A page can start several sections: switch at the line that prints each title.
        # Text above the first title still belongs to the section carried from before;
        # when no title is found on the page, the page goes under its first entry.
        pending = list(entries)
        page_lines = {_title_key(ln) for ln in text.split("\n")}
        if pending and not any(_title_key(e[-1]) in page_lines for e in pending):
            headings = tuple(pending[0])
            pending = []
        for para in re.split(r"\n\s*\n", text):
            para_lines = [ln.rstrip() for ln in para.split("\n") if ln.strip()]
            buffer: list[str] = []
            for line in para_lines:
                starts = next((k for k, e in enumerate(pending) if _title_key(e[-1]) == _title_key(line)), None)
                if starts is not None:
                    if buffer:
                        blocks.append(Block("paragraph", "\n".join(buffer), headings, page=index + 1))
                        buffer = []
                    headings = tuple(pending[starts])
                    del pending[: starts + 1]
                if not outline and looks_like_heading(line) and re.match(r"^\s*(\d+(\.\d+)*\.?\s+)?[A-Z]", line):
                    if buffer:
                        blocks.append(Block("paragraph", "\n".join(buffer), headings, page=index + 1))
                        buffer = []
                    headings = (line.strip(),)
                    blocks.append(Block("heading", line.strip(), headings, page=index + 1))
                else:
                    buffer.append(line)
            if buffer:
                blocks.append(Block("paragraph", "\n".join(buffer), headings, page=index + 1))
        if entries:
            # The following pages continue the last section that starts on this one.
            headings = tuple(entries[-1])
    if not blocks:
        raise FileRejectedError("PDF has no extractable text layer (scanned or image-only; OCR is not supported)")
    if empty_pages:
        warnings.append(f"{empty_pages} of {len(pages)} pages have no text layer and were skipped")
    title = fallback_title
    try:
        meta_title = reader.metadata.title if reader.metadata else None
    except Exception:  # noqa: BLE001
        meta_title = None
    # Producers often leave placeholders ("TA", "untitled", a file name) in /Title.
    if isinstance(meta_title, str) and len(meta_title.split()) >= 2 and len(meta_title.strip()) >= 8:
        title = sanitize(meta_title).strip()
    return LoadedDocument(title=title, format="pdf", blocks=blocks, warnings=warnings)
