"""PDF via pypdf, one page at a time so every passage knows its page.

Scanned (image-only) PDFs have no text layer and are refused with that reason: OCR is
out of scope, and indexing an empty document would only hide the gap. Section titles come
from the PDF outline when it has one.

pypdf runs in a child process under the per-file memory and processor budgets
(``bounded``): one content stream can make a page take minutes and gigabytes, and pages
can share that stream. Within those budgets the work is paced by the page count, so a
small file cannot spend the whole per-file allowance, and the page count and the
extracted text are limited too. The child returns plain text per page; the blocks are
built here, and three things pypdf's text carries are mended on the way:

* running headers and footers (a document number, a date, a page number printed on most
  pages) are dropped, so they neither fill passages nor split a sentence at every page;
* a sentence that runs on over a page break is kept in one block spanning both pages (and
  one cut by a blank line pypdf put inside it, in one block), so no passage ends
  mid-sentence just because the page did;
* without an outline, a line is taken for a heading only when it does not read as the
  first line of a wrapped sentence (it ends in a joining word such as "of the", or the
  next line carries on in lower case).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.document import Block, LoadedDocument
from governed_evidence.ingest.guards import sanitize
from governed_evidence.ingest.loaders.bounded import limit_cpu, run_bounded
from governed_evidence.ingest.loaders.text import looks_like_heading

__all__ = [
    "CPU_BASE_SECONDS",
    "CPU_SECONDS_PER_PAGE",
    "MAX_CHARS",
    "MAX_PAGES",
    "load_pdf",
    "running_lines",
    "strip_running",
]

#: A page with fewer extractable characters than this counts as having no text layer.
_MIN_PAGE_CHARS = 20
#: Lines at the top and bottom of a page that are looked at for running headers and footers.
_EDGE_LINES = 4
#: A line (digits ignored) printed at a page edge on at least this share of the pages, and
#: on at least three of them, is a running header or footer.
_RUNNING_SHARE = 0.3
#: A lone page number at a page edge: "12", "Page 12", "12 of 40", "- 12 -", "iv".
_PAGE_NUMBER = re.compile(r"^\s*(?:page\s+)?[-–]?\s*(?:\d{1,4}|[ivxlcdm]{1,6})\s*[-–]?(?:\s+of\s+\d{1,4})?\s*$", re.I)
#: Sentence ends (a closing quote or bracket may follow the mark).
_ENDS_SENTENCE = re.compile(r"[.!?:;][\"'”’)\]]*\s*$")
#: Where one sentence ends and the next begins (the mark stays with the first).
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
#: Words a heading does not end with but a wrapped line often does.
_JOINING = frozenset("a an and as at by for from in into of on or the to with that which".split())
#: The largest policy publications issued as one PDF (a whole regulation, a codified
#: title) run to one or two thousand pages; at the slowest sample's 32 ms a page, 3,000
#: pages still fit the per-file processor budget.
MAX_PAGES = 3_000
#: Extracted characters per file: 3,000 pages of dense text at 4,000 characters (the
#: samples average 1,800-2,100 a page). A page whose content stream yields more is not
#: prose, and the text is held in memory twice over while blocks are built.
MAX_CHARS = 12_000_000
#: Processor time paced by pages read: a fixed allowance for opening the file, its outline
#: and the first pages, plus eight times the slowest sample's cost per page (IRS
#: Publication 5616: 4 s for 127 pages). A page that takes seconds is refused within a
#: few pages instead of after the whole file.
CPU_BASE_SECONDS = 10.0
CPU_SECONDS_PER_PAGE = 0.25


@dataclass
class _Extracted:
    """What the parser process returns: plain data, so it pickles small and safely."""

    #: Raw text of each page, or None when pypdf failed on that page.
    pages: list[str | None]
    outline: dict[int, list[list[str]]]
    xfa: bool
    meta_title: str | None


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


def _edges(text: str) -> list[str]:
    lines = [ln for ln in text.split("\n") if ln.strip()]
    return lines[:_EDGE_LINES] + lines[_EDGE_LINES:][-_EDGE_LINES:]


def running_lines(pages: list[str]) -> set[str]:
    """Lines (as :func:`_title_key`) printed at a page edge on many pages: headers and footers.

    Only lines repeated word for word count: "Amendment 7", "Amendment 8" at the top of
    successive pages are content, "UFC 3-580-01 / 01 Jun 2016" on every page is not.
    """
    counts: Counter[str] = Counter()
    for text in pages:
        counts.update({_title_key(ln) for ln in _edges(text)})
    needed = max(3, math.ceil(_RUNNING_SHARE * len(pages)))
    return {key for key, n in counts.items() if n >= needed and key}


def strip_running(text: str, running: set[str]) -> str:
    """``text`` without the running lines and lone page numbers at its top and bottom."""
    lines = text.split("\n")
    content = [i for i, ln in enumerate(lines) if ln.strip()]

    def is_running(i: int) -> bool:
        return _title_key(lines[i]) in running or bool(_PAGE_NUMBER.match(lines[i]))

    drop: set[int] = set()
    for i in content[:_EDGE_LINES]:
        if not is_running(i):
            break
        drop.add(i)
    for i in reversed(content[-_EDGE_LINES:]):
        if i in drop or not is_running(i):
            break
        drop.add(i)
    return "\n".join(ln for i, ln in enumerate(lines) if i not in drop)


def _wrapped_fragment(line: str, following: str | None) -> bool:
    """True when ``line`` reads as the first line of a wrapped sentence, not as a heading."""
    words = line.split()
    if words and words[-1].casefold() in _JOINING:
        return True
    return following is not None and following.lstrip()[:1].islower()


def _runs_on(previous: Block, text: str) -> bool:
    """True when ``text``, first on a page, carries on the sentence ``previous`` left open."""
    tail = previous.text.rstrip()
    if not tail or _ENDS_SENTENCE.search(tail):
        return False
    last = tail.split()[-1]
    return text.lstrip()[:1].islower() or tail[-1] in ",-" or last.casefold() in _JOINING


def _extract(path: Path) -> _Extracted:
    """Run in the bounded child: open the file and extract every page's text."""
    import pypdf
    from pypdf.errors import PdfReadError

    limit_cpu(CPU_BASE_SECONDS, "while opening the file")
    try:
        reader = pypdf.PdfReader(path, strict=False)
        if reader.is_encrypted:
            try:
                ok = bool(reader.decrypt(""))
            except Exception:  # noqa: BLE001 - unsupported encryption schemes raise varied errors
                ok = False
            if not ok:
                raise FileRejectedError("PDF is encrypted and needs a password")
        count = len(reader.pages)
        if count > MAX_PAGES:
            # Counted from the page tree, before a page object is made for each.
            raise FileRejectedError(f"PDF has {count} pages, over the {MAX_PAGES}-page limit")
        pages = list(reader.pages)
    except FileRejectedError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError, AssertionError) as exc:
        raise FileRejectedError(f"PDF cannot be read ({type(exc).__name__})") from None

    root: Any = reader.trailer.get("/Root", {})
    acro = root.get("/AcroForm") if hasattr(root, "get") else None
    xfa = acro is not None and hasattr(acro, "get") and acro.get("/XFA") is not None
    outline = _outline_pages(reader)
    texts: list[str | None] = []
    chars = 0
    for index, page in enumerate(pages):
        limit_cpu(
            CPU_BASE_SECONDS + CPU_SECONDS_PER_PAGE * (index + 1),
            f"at page {index + 1} of {len(pages)}, "
            f"with {CPU_BASE_SECONDS:g} s plus {CPU_SECONDS_PER_PAGE:g} s a page allowed",
        )
        try:
            raw: str | None = page.extract_text() or ""
        except MemoryError:
            raise
        except Exception:  # noqa: BLE001 - one bad page must not lose the document
            raw = None
        chars += len(raw or "")
        if chars > MAX_CHARS:
            raise FileRejectedError(f"PDF yields more than {MAX_CHARS} characters of text, over the per-file limit")
        texts.append(raw)
    try:
        meta_title = reader.metadata.title if reader.metadata else None
    except Exception:  # noqa: BLE001
        meta_title = None
    return _Extracted(texts, outline, xfa, str(meta_title) if isinstance(meta_title, str) else None)


def load_pdf(path: Path, fallback_title: str) -> LoadedDocument:
    # Imported here so the parser process starts with pypdf loaded rather than importing it.
    import pypdf  # noqa: F401

    return _build(run_bounded("PDF", _extract, path), fallback_title)


def _build(extracted: _Extracted, fallback_title: str) -> LoadedDocument:
    warnings: list[str] = []
    if extracted.xfa:
        warnings.append("XFA form: only its static text is extracted; form fields are not indexed")

    outline = extracted.outline
    pages = extracted.pages
    running = running_lines([sanitize(raw or "") for raw in pages])
    blocks: list[Block] = []
    headings: tuple[str, ...] = ()
    empty_pages = 0

    def emit(block: Block) -> None:
        # A paragraph that carries on an open sentence joins it: across a page break (the
        # block then spans both pages) or across a blank line pypdf put inside a sentence.
        previous = blocks[-1] if blocks else None
        if (
            previous is not None
            and block.kind == previous.kind == "paragraph"
            and block.headings == previous.headings
            # One page break at most: a list running over pages stays one block a page.
            and (previous.page_end is None or block.page == previous.page_end)
            and _runs_on(previous, block.text)
        ):
            # Only the end of the open sentence joins; the rest stays a block of its own
            # page, so a passage is never cited for more pages than its text is printed on.
            end = _SENTENCE_BREAK.search(block.text)
            head, tail = (block.text, "") if end is None else (block.text[: end.start()], block.text[end.end() :])
            previous.text = previous.text.rstrip() + "\n" + head.rstrip()
            if block.page != previous.page:
                previous.page_end = block.page
            if tail.strip():
                blocks.append(Block("paragraph", tail, block.headings, page=block.page))
        else:
            blocks.append(block)

    for index, raw in enumerate(pages):
        if raw is None:
            raw = ""
            warnings.append(f"page {index + 1}: text could not be extracted")
        text = strip_running(sanitize(raw), running)
        entries = outline.get(index, [])
        if len(text.strip()) < _MIN_PAGE_CHARS:
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
            for number, line in enumerate(para_lines):
                starts = next((k for k, e in enumerate(pending) if _title_key(e[-1]) == _title_key(line)), None)
                if starts is not None:
                    if buffer:
                        emit(Block("paragraph", "\n".join(buffer), headings, page=index + 1))
                        buffer = []
                    headings = tuple(pending[starts])
                    del pending[: starts + 1]
                following = para_lines[number + 1] if number + 1 < len(para_lines) else None
                if (
                    not outline
                    and looks_like_heading(line)
                    and re.match(r"^\s*(\d+(\.\d+)*\.?\s+)?[A-Z]", line)
                    and not _wrapped_fragment(line, following)
                ):
                    if buffer:
                        emit(Block("paragraph", "\n".join(buffer), headings, page=index + 1))
                        buffer = []
                    headings = (line.strip(),)
                    emit(Block("heading", line.strip(), headings, page=index + 1))
                else:
                    buffer.append(line)
            if buffer:
                emit(Block("paragraph", "\n".join(buffer), headings, page=index + 1))
        if entries:
            # The following pages continue the last section that starts on this one.
            headings = tuple(entries[-1])
    if not blocks:
        raise FileRejectedError("PDF has no extractable text layer (scanned or image-only; OCR is not supported)")
    if empty_pages:
        warnings.append(f"{empty_pages} of {len(pages)} pages have no text layer and were skipped")
    title = fallback_title
    meta_title = extracted.meta_title
    # Producers often leave placeholders ("TA", "untitled", a file name) in /Title.
    if isinstance(meta_title, str) and len(meta_title.split()) >= 2 and len(meta_title.strip()) >= 8:
        title = sanitize(meta_title).strip()
    return LoadedDocument(title=title, format="pdf", blocks=blocks, warnings=warnings)
