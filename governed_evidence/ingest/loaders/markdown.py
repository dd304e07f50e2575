"""Markdown: block structure from markdown-it-py, text and line spans from the source.

Blocks keep the source's own lines (so a citation's line span shows exactly what was
cited); Liquid/Jinja template tags are removed because they are site plumbing, not text.
"""

from __future__ import annotations

from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from governed_evidence.ingest.document import Block, BlockKind, LoadedDocument
from governed_evidence.ingest.frontmatter import front_matter_title, parse_front_matter

__all__ = ["parse_markdown", "strip_template_tags"]

#: Template tags and where each ends. Found by scanning, not by a lazy regex: a lazy
#: ``\{\{.*?\}\}`` rescans the rest of the text from every unclosed opener (64 KB of
#: ``{{`` took two minutes); the scan below reads the text once.
_TAG_DELIMITERS = (("{%", "%}"), ("{{", "}}"))
_BLOCK_KINDS: dict[str, BlockKind] = {
    "paragraph_open": "paragraph",
    "bullet_list_open": "list",
    "ordered_list_open": "list",
    "blockquote_open": "quote",
    "fence": "code",
    "code_block": "code",
    "html_block": "paragraph",
}


def strip_template_tags(text: str) -> str:
    """``text`` without Liquid/Jinja tags (``{% ... %}``, ``{{ ... }}``), in one pass.

    A tag runs from its opener to the first closer after it, as a lazy match would. Once an
    opener has no closer after it, no later opener of that kind can close either, so that
    kind is no longer looked for: the work is linear in the text.
    """
    if "{" not in text:
        return text
    out: list[str] = []
    pos = 0
    live = list(_TAG_DELIMITERS)
    while live:
        starts = [(text.find(opener, pos), opener, closer) for opener, closer in live]
        found = [s for s in starts if s[0] >= 0]
        if not found:
            break
        start, opener, closer = min(found)
        end = text.find(closer, start + len(opener))
        if end < 0:
            live.remove((opener, closer))
            continue
        out.append(text[pos:start])
        pos = end + len(closer)
    out.append(text[pos:])
    return "".join(out)


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True}).enable("table")


def _close_index(tokens: list[Token], start: int) -> int:
    """Index of the token closing the one at ``start`` (same nesting level)."""
    depth = 0
    for j in range(start, len(tokens)):
        depth += tokens[j].nesting
        if depth == 0:
            return j
    return len(tokens) - 1


def parse_markdown(text: str, fallback_title: str) -> LoadedDocument:
    matter = parse_front_matter(text)
    front, offset = matter.values, matter.lines
    lines = text.split("\n")
    body = "\n".join(lines[offset:])
    tokens = _parser().parse(body)
    blocks: list[Block] = []
    stack: list[tuple[int, str]] = []
    first_h1: str | None = None

    def source(a: int, b: int) -> str:
        return strip_template_tags("\n".join(lines[offset + a : offset + b])).strip("\n")

    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.level != 0 or tok.map is None:
            i += 1
            continue
        a, b = tok.map
        if tok.type == "heading_open":
            level = int(tok.tag[1:])
            title = strip_template_tags(tokens[i + 1].content).strip()
            if level == 1 and first_h1 is None:
                first_h1 = title
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            blocks.append(Block("heading", source(a, b), tuple(t for _, t in stack), offset + a + 1, offset + b))
            i = _close_index(tokens, i) + 1
            continue
        headings = tuple(t for _, t in stack)
        if tok.type == "table_open":
            blocks.append(_table_block(tokens, i, lines, offset, headings))
            i = _close_index(tokens, i) + 1
            continue
        if tok.type == "bullet_list_open" or tok.type == "ordered_list_open":
            # One block per top-level item, so long lists can be split between items.
            end = _close_index(tokens, i)
            for j in range(i + 1, end):
                item = tokens[j]
                if item.type == "list_item_open" and item.level == 1 and item.map:
                    item_start, item_end = item.map
                    # An item's map runs over the blank lines after it; a citation must not.
                    while item_end > item_start + 1 and not lines[offset + item_end - 1].strip():
                        item_end -= 1
                    text_ = source(item_start, item_end)
                    if text_.strip():
                        blocks.append(Block("list", text_, headings, offset + item_start + 1, offset + item_end))
            i = end + 1
            continue
        kind = _BLOCK_KINDS.get(tok.type)
        if kind is not None:
            text_ = source(a, b)
            if text_.strip():
                blocks.append(Block(kind, text_, headings, offset + a + 1, offset + b))
        i = _close_index(tokens, i) + 1 if tok.nesting == 1 else i + 1

    title = _title(front, first_h1, fallback_title)
    return LoadedDocument(title=title, format="markdown", blocks=blocks, front_matter=matter)


def _table_block(tokens: list[Token], start: int, lines: list[str], offset: int, headings: tuple[str, ...]) -> Block:
    end = _close_index(tokens, start)
    header: list[str] = []
    rows: list[tuple[str, int | None]] = []
    in_head = False
    for j in range(start + 1, end):
        tok = tokens[j]
        if tok.type == "thead_open":
            in_head = True
        elif tok.type == "thead_close":
            in_head = False
        elif tok.type == "tr_open" and tok.map:
            line_no = offset + tok.map[0]
            row = strip_template_tags(lines[line_no])
            if in_head:
                header.append(row)
            else:
                rows.append((row, line_no + 1))
    a, b = tokens[start].map or (0, 0)
    if header:
        # The delimiter row (|---|) sits right after the header row in the source.
        delimiter_line = offset + a + len(header)
        if delimiter_line < len(lines):
            header.append(lines[delimiter_line])
    text = "\n".join(header + [r for r, _ in rows])
    return Block("table", text, headings, offset + a + 1, offset + b, table_header=header, table_rows=rows)


def _title(front: dict[str, Any], first_h1: str | None, fallback: str) -> str:
    value = front_matter_title(front)
    if value is not None:
        return strip_template_tags(value).strip()
    return first_h1 or fallback
