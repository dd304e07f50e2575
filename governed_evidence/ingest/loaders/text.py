"""Plain text: paragraphs separated by blank lines; short title-like lines become headings."""

from __future__ import annotations

import re

from governed_evidence.ingest.document import Block, LoadedDocument
from governed_evidence.ingest.frontmatter import front_matter_title, parse_front_matter

__all__ = ["looks_like_heading", "parse_text"]

_UNDERLINE = re.compile(r"^\s*(=+|-+)\s*$")
_NUMBERED = re.compile(r"^(?:\d+(?:\.\d+)*\.?|[A-Z]\.|Section \d+[.:]?)\s+\S")


def looks_like_heading(line: str) -> bool:
    """A short line without sentence punctuation, numbered or in title/upper case."""
    s = line.strip()
    if not s or len(s) > 80 or len(s.split()) > 10 or s[-1] in ".,;:!?)\"'":
        return False
    if _NUMBERED.match(s) or s.isupper():
        return True
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z'-]*", s) if len(w) > 3]
    return bool(words) and all(w[0].isupper() for w in words)


def parse_text(text: str, fallback_title: str) -> LoadedDocument:
    matter = parse_front_matter(text)
    front, offset = matter.values, matter.lines
    lines = text.split("\n")
    paragraphs: list[tuple[int, int]] = []  # 0-based [start, end)
    start: int | None = None
    for n in range(offset, len(lines) + 1):
        blank = n == len(lines) or not lines[n].strip()
        if blank and start is not None:
            paragraphs.append((start, n))
            start = None
        elif not blank and start is None:
            start = n
    blocks: list[Block] = []
    headings: tuple[str, ...] = ()
    title = front_matter_title(front)
    for a, b in paragraphs:
        chunk = lines[a:b]
        heading: str | None = None
        if (len(chunk) == 2 and _UNDERLINE.match(chunk[1])) or (len(chunk) == 1 and looks_like_heading(chunk[0])):
            heading = chunk[0].strip()
        elif title is None and not blocks and looks_like_heading(chunk[0]):
            # A document that opens with a title line directly above its first paragraph.
            title = chunk[0].strip()
        if heading is not None:
            if title is None and not blocks:
                title = heading
                headings = ()
            else:
                headings = (heading,)
            blocks.append(Block("heading", "\n".join(chunk), headings or (heading,), a + 1, b))
            continue
        blocks.append(Block("paragraph", "\n".join(chunk), headings, a + 1, b))
    return LoadedDocument(title=title or fallback_title, format="text", blocks=blocks, front_matter=matter)
