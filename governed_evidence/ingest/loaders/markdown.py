"""Markdown: block structure from markdown-it-py, text and line spans from the source.

Blocks keep the source's own lines (so a citation's line span shows exactly what was
cited); template tags (ERB, Handlebars/Go, Liquid/Jinja) are removed because they are site
plumbing, not text (``ingest/templates.py``). A heading that is only a template (``# <%=
current_page.data.title %>``, filled in from front matter when the site is built) takes the
document's title from front matter, else the file name.
"""

from __future__ import annotations

from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from governed_evidence.ingest.document import Block, BlockKind, LoadedDocument
from governed_evidence.ingest.frontmatter import front_matter_title, parse_front_matter
from governed_evidence.ingest.templates import strip_template_tags

__all__ = ["parse_markdown"]

_BLOCK_KINDS: dict[str, BlockKind] = {
    "paragraph_open": "paragraph",
    "bullet_list_open": "list",
    "ordered_list_open": "list",
    "blockquote_open": "quote",
    "fence": "code",
    "code_block": "code",
    "html_block": "paragraph",
}


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
            text_ = source(a, b)
            if not title:
                # The site fills it in from the front matter when the page is built.
                title = _title(front, None, fallback_title)
                text_ = f"{'#' * level} {title}"
            if level == 1 and first_h1 is None:
                first_h1 = title
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            blocks.append(Block("heading", text_, tuple(t for _, t in stack), offset + a + 1, offset + b))
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
    if value is not None and strip_template_tags(value).strip():
        return strip_template_tags(value).strip()
    return first_h1 or fallback
