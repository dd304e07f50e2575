"""Heading-aware chunking sized for the embedder.

Passages stay within one section (a heading change always starts a new passage), aim for
:data:`TARGET_WORDS`-:data:`MAX_WORDS` words (MiniLM reads 256 tokens, roughly 190 words),
and never split a table row or a code fence. A table that must be split repeats its header
rows in every piece, so each piece still says what its columns mean.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from governed_evidence.ingest.document import Block

__all__ = ["MAX_WORDS", "MIN_WORDS", "TARGET_WORDS", "Chunk", "chunk_blocks"]

TARGET_WORDS = 120
MAX_WORDS = 200
#: A trailing piece smaller than this is folded into the previous passage of its section.
MIN_WORDS = 30

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")


@dataclass
class Chunk:
    text: str
    headings: tuple[str, ...]
    line_start: int | None
    line_end: int | None
    page_start: int | None
    page_end: int | None
    #: False for a passage of headings only (no evidence of its own).
    has_content: bool = True

    @property
    def words(self) -> int:
        return len(self.text.split())


def _span(values: Iterable[int | None]) -> tuple[int | None, int | None]:
    present = [v for v in values if v is not None]
    return (min(present), max(present)) if present else (None, None)


def _split_table(block: Block) -> list[Block]:
    header_words = sum(len(h.split()) for h in block.table_header)
    pieces: list[Block] = []
    rows: list[tuple[str, int | None]] = []
    words = header_words

    def flush() -> None:
        if not rows:
            return
        text = "\n".join([*block.table_header, *(r for r, _ in rows)])
        lines = [n for _, n in rows]
        start, end = _span(lines)
        pieces.append(
            Block(
                "table", text, block.headings, start, end, block.page, block.table_header, list(rows),
                page_end=block.page_end,
            )
        )  # fmt: skip

    for row, line in block.table_rows:
        row_words = len(row.split())
        if rows and words + row_words > MAX_WORDS:
            flush()
            rows = []
            words = header_words
        rows.append((row, line))
        words += row_words
    flush()
    if pieces and block.table_header and pieces[0].line_start is not None and block.line_start is not None:
        # The first piece also covers the header lines.
        pieces[0].line_start = block.line_start
    return pieces or [block]


def _split_paragraph(block: Block) -> list[Block]:
    sentences = _SENTENCE_END.split(block.text)
    pieces: list[Block] = []
    current: list[str] = []
    words = 0
    for sentence in sentences:
        n = len(sentence.split())
        if current and words + n > MAX_WORDS:
            pieces.append(
                Block(
                    block.kind, " ".join(current), block.headings, block.line_start, block.line_end, block.page,
                    page_end=block.page_end,
                )
            )  # fmt: skip
            current, words = [], 0
        if n > MAX_WORDS:
            # A run-on "sentence" (or extraction without punctuation): cut by words.
            tokens = sentence.split()
            for i in range(0, len(tokens), MAX_WORDS):
                pieces.append(
                    Block(
                        block.kind,
                        " ".join(tokens[i : i + MAX_WORDS]),
                        block.headings,
                        block.line_start,
                        block.line_end,
                        block.page,
                        page_end=block.page_end,
                    )
                )
            continue
        current.append(sentence)
        words += n
    if current:
        pieces.append(
            Block(
                block.kind, " ".join(current), block.headings, block.line_start, block.line_end, block.page,
                page_end=block.page_end,
            )
        )  # fmt: skip
    return pieces


def _pieces(block: Block) -> list[Block]:
    if block.words <= MAX_WORDS or block.kind == "code":
        return [block]
    if block.kind == "table" and block.table_rows:
        return _split_table(block)
    if block.kind in ("paragraph", "list", "quote"):
        return _split_paragraph(block)
    return [block]


def _make_chunk(blocks: list[Block]) -> Chunk:
    line_start, _ = _span(b.line_start for b in blocks)
    _, line_end = _span(b.line_end for b in blocks)
    page_start, page_end = _span(p for b in blocks for p in (b.page, b.page_end))
    text = "\n\n".join(b.text for b in blocks)
    has_content = any(b.kind != "heading" for b in blocks)
    return Chunk(text, blocks[-1].headings, line_start, line_end, page_start, page_end, has_content)


def chunk_blocks(blocks: list[Block], *, separate_sections: bool = False) -> list[Chunk]:
    """Group a document's blocks into passages.

    With ``separate_sections`` a small passage is never folded into the next section's:
    where positions restart in each section (a workbook's sheets) one span across two would
    be meaningless, and where each section is a unit (a slide) it keeps its own citation.
    """
    sections: list[list[Block]] = []
    for block in blocks:
        if block.kind == "heading" or not sections or sections[-1][-1].headings != block.headings:
            sections.append([])
        sections[-1].append(block)

    chunks: list[Chunk] = []
    for section in sections:
        section_chunks: list[list[Block]] = []
        current: list[Block] = []
        words = 0
        for block in section:
            for piece in _pieces(block):
                n = piece.words
                if current and (words >= TARGET_WORDS or words + n > MAX_WORDS):
                    section_chunks.append(current)
                    current, words = [], 0
                current.append(piece)
                words += n
        if current:
            tail_words = sum(b.words for b in current)
            if (
                section_chunks
                and tail_words < MIN_WORDS
                and sum(b.words for b in section_chunks[-1]) + tail_words <= MAX_WORDS
            ):
                section_chunks[-1].extend(current)
            else:
                section_chunks.append(current)
        chunks.extend(_make_chunk(group) for group in section_chunks)
    return _merge_small(chunks, separate_sections)


def _common_headings(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    prefix: list[str] = []
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        prefix.append(x)
    return tuple(prefix)


def _merge_small(chunks: list[Chunk], separate_sections: bool = False) -> list[Chunk]:
    """Fold passages too small to stand alone (a heading and a line) into the next one.

    The merged passage is cited under the headings both share, so a citation never claims
    a narrower section than the text it holds.
    """
    merged: list[Chunk] = []
    for chunk in chunks:
        prev = merged[-1] if merged else None
        if (
            prev is not None
            and prev.words < MIN_WORDS
            and prev.words + chunk.words <= MAX_WORDS
            and not (separate_sections and prev.headings != chunk.headings)
        ):
            line_start, line_end = _span([prev.line_start, prev.line_end, chunk.line_start, chunk.line_end])
            page_start, page_end = _span([prev.page_start, prev.page_end, chunk.page_start, chunk.page_end])
            merged[-1] = Chunk(
                prev.text + "\n\n" + chunk.text,
                _common_headings(prev.headings, chunk.headings),
                line_start,
                line_end,
                page_start,
                page_end,
                prev.has_content or chunk.has_content,
            )
        else:
            merged.append(chunk)
    # A passage of headings only (a heading whose first piece did not fit beside it, or a
    # document that is only headings) has no evidence to offer; later passages still name
    # the heading in their heading path.
    return [c for c in merged if c.has_content and c.text.strip()]
