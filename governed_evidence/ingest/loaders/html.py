"""HTML pages (intranet exports, saved pages) via lxml and readability-lxml: main content only.

A page is mostly not its content: navigation, a site header and footer, scripts, styles,
a cookie banner. Indexed, those would fill passages with "Home | Contact | Accept all" and
match every query about cookies. So the page is parsed with lxml's HTML parser, and then:

* what HTML itself marks as not content (scripts, styles, forms, navigation, the page's
  header and footer, hidden elements, cookie banners, breadcrumbs) is dropped by rule
  (``html_boilerplate``);
* a page that marks its main content (``<main>`` or ``role="main"``) is taken at its word;
* any other page (the ``<div id="main-content">`` of a Confluence export, a SharePoint
  page) goes to readability-lxml, which scores the remaining blocks and keeps the main
  content, dropping what scores as navigation, comments, sidebars or link lists.

The content is then read in document order: ``h1``-``h6`` become sections (so they name the
citation), paragraphs, list items, quotes and preformatted text become blocks, and tables
keep their header words beside each row (``rows``), spanned cells included. A table whose
cells hold headings or other tables is page layout, and is read as ordinary content.

Positions are lines of the source file: every element is stamped with the lines it spans
before anything is dropped or moved, and the stamps travel through readability, so
``page.html#expenses:L40-52`` points at the HTML an editor opens.

The HTML parser never expands entities declared in a document type (they stay text), but
a page that declares any is refused: HTML has no use for them, and the declaration is what
an entity-expansion bomb needs. The parse runs in a child process under the per-file
memory and processor budgets (``bounded``), paced by the page's size.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.document import Block, BlockKind, LoadedDocument
from governed_evidence.ingest.guards import sanitize
from governed_evidence.ingest.loaders.bounded import limit_cpu, run_bounded
from governed_evidence.ingest.loaders.html_boilerplate import drop_boilerplate
from governed_evidence.ingest.loaders.labelled_rows import cell_text, labelled_row
from governed_evidence.ingest.templates import strip_template_tags

__all__ = ["CPU_BASE_SECONDS", "CPU_SECONDS_PER_MIB", "MAX_HTML_BYTES", "load_html"]

#: Intranet pages are tens to hundreds of KB, a long exported page a few MB. The page is
#: held as lxml trees two or three times over (the source, the copy readability scores, its
#: result): 16 MiB of HTML stays well inside the per-file memory budget.
MAX_HTML_BYTES = 16 * 1024 * 1024
#: Processor time paced by size: readability costs about 0.6 s a MB of flat HTML; four
#: times that, plus an allowance for a small page.
CPU_BASE_SECONDS = 10.0
CPU_SECONDS_PER_MIB = 4.0

#: Where each element's first and last source lines are stamped (overwriting any the page set).
_LINE = "data-ge-line"
_END = "data-ge-end"
#: Stands for a <br> in the text until lines are split (a private-use character).
_BREAK = "\ue000"
#: What libxml2 reports when a page goes past one of its limits (nesting deeper than 256
#: elements, a text node over 10 MB): it stops there and returns what it has read so far.
_PARSER_LIMIT = "ERR_RESOURCE_LIMIT"
#: The widest table read (HTML's own limit on colspan) and its longest rowspan.
_MAX_COLUMNS = 1000
_MAX_ROWSPAN = 65534

_HEADING = re.compile(r"^h([1-6])$")
#: Tags whose text runs on inside a block: their text joins the surrounding paragraph.
_INLINE = frozenset(
    "a abbr acronym b bdi bdo big br cite code data del dfn em font i img ins kbd label mark q "
    "ruby rp rt s samp small span strike strong sub sup time tt u var wbr".split()
)
#: Blocks read as one piece of text, and the kind they become (None: the kind around them).
_TEXT_BLOCKS: dict[str, BlockKind | None] = {
    "p": None,
    "dt": None,
    "dd": None,
    "figcaption": "paragraph",
    "caption": "paragraph",
    "address": "paragraph",
    "summary": "paragraph",
    "legend": "paragraph",
    "pre": "code",
}
#: Containers that set the kind of the text inside them.
_KIND_OF_CONTAINER: dict[str, BlockKind] = {"li": "list", "blockquote": "quote"}
#: A table whose cells hold these is page layout, not data.
_LAYOUT_IN_CELLS = " | ".join(f".//td//{tag} | .//th//{tag}" for tag in ("table", "h1", "h2", "h3", "h4", "h5", "h6"))
#: ``<!ENTITY`` in the encodings a page may use (the HTML parser reads UTF-16 by its BOM).
_ENTITY_MARKS = tuple(
    mark.encode(codec) for mark in ("<!ENTITY", "<!entity") for codec in ("utf-8", "utf-16-le", "utf-16-be")
)

# readability logs the traceback of every page it cannot summarise, at ERROR; the loader
# reports that page as rejected with the reason, and one line in the report is enough.
logging.getLogger("readability").setLevel(logging.CRITICAL)


def _stamp_lines(root: Any) -> None:
    """Stamp every element with the source lines it spans, before anything moves.

    The last line is where its content ends: the later of its own text's last line and its
    children's ends (each plus the lines of the text after it).
    """
    from lxml import etree

    ends: list[int] = []
    for event, el in etree.iterwalk(root, events=("start", "end")):
        if not isinstance(el.tag, str):
            continue
        if event == "start":
            line = el.sourceline or (ends[-1] if ends else 1)
            el.set(_LINE, str(line))
            ends.append(line + (el.text or "").count("\n"))
            continue
        end = ends.pop()
        el.set(_END, str(end))
        if ends:
            ends[-1] = max(ends[-1], end + (el.tail or "").count("\n"))


def _main_content(root: Any) -> Any:
    """The page's main content: its ``main`` element, else what readability finds."""
    import lxml.html
    from readability import Document

    for main in root.xpath("//main | //*[@role='main']"):
        if main.text_content().strip():
            return main
    page = lxml.html.tostring(root, encoding="unicode")
    try:
        summary = Document(page).summary(html_partial=True)
    except Exception as exc:  # noqa: BLE001 - readability wraps everything in Unparseable
        raise FileRejectedError(f"HTML main content cannot be found ({type(exc).__name__})") from None
    if not summary.strip():
        raise FileRejectedError("HTML has no text")
    return lxml.html.fragment_fromstring(summary, create_parent="div")


def _text(raw: str) -> str:
    """Text as it reads: whitespace runs as one space, <br> as a line break."""
    lines = (" ".join(part.split()) for part in raw.split(_BREAK))
    return "\n".join(line for line in lines if line)


def _stamp(el: Any, name: str) -> int | None:
    value = el.get(name)
    if value is None or not value.isdigit():
        return None
    return int(value)


def _span(el: Any) -> tuple[int | None, int | None]:
    """The source lines of ``el``: its own stamps, else its descendants', else its ancestors'."""
    start, end = _stamp(el, _LINE), _stamp(el, _END)
    if start is not None and end is not None:
        return start, end
    inner = [s for d in el.iterdescendants() if isinstance(d.tag, str) for s in (_stamp(d, _LINE), _stamp(d, _END))]
    found = [s for s in inner if s is not None]
    if found:
        return min(found), max(found)
    for ancestor in el.iterancestors():
        start, end = _stamp(ancestor, _LINE), _stamp(ancestor, _END)
        if start is not None:
            return start, end if end is not None else start
    return None, None


@dataclass
class _Reader:
    """Turns the main content into blocks, keeping the heading path as it goes."""

    blocks: list[Block] = field(default_factory=list)
    stack: list[tuple[int, str]] = field(default_factory=list)

    @property
    def headings(self) -> tuple[str, ...]:
        return tuple(text for _, text in self.stack)

    def add(self, kind: BlockKind, text: str, span: tuple[int | None, int | None]) -> None:
        text = sanitize(text).strip()
        if text:
            self.blocks.append(Block(kind, text, self.headings, span[0], span[1]))

    def container(self, el: Any, kind: BlockKind) -> None:
        """Read ``el``'s children in order: runs of inline text are paragraphs of ``kind``."""
        run: list[str] = [el.text or ""]
        members: list[Any] = []

        def flush() -> None:
            text = _text("".join(run))
            if text:
                spans = [_span(m) for m in members] or [_span(el)]
                starts = [s for s, _ in spans if s is not None]
                ends = [e for _, e in spans if e is not None]
                self.add(kind, text, (min(starts, default=None), max(ends, default=None)))
            run.clear()
            members.clear()

        for child in el:
            if isinstance(child.tag, str):
                tag = child.tag.lower()
                if tag in _INLINE:
                    run.append(child.text_content())
                    members.append(child)
                else:
                    flush()
                    self.element(child, tag, kind)
            run.append(child.tail or "")
        flush()

    def element(self, el: Any, tag: str, kind: BlockKind) -> None:
        heading = _HEADING.match(tag)
        if heading:
            text = cell_text(sanitize(_text(el.text_content())))
            if text:
                level = int(heading.group(1))
                while self.stack and self.stack[-1][0] >= level:
                    self.stack.pop()
                self.stack.append((level, text))
                self.add("heading", text, _span(el))
            return
        if tag in _TEXT_BLOCKS:
            own = _TEXT_BLOCKS[tag]
            if own == "code":
                lines = [line.rstrip() for line in el.text_content().replace(_BREAK, "\n").split("\n")]
                self.add("code", "\n".join(lines).strip("\n"), _span(el))
            else:
                self.add(own or kind, _text(el.text_content()), _span(el))
            return
        if tag == "table" and not el.xpath(_LAYOUT_IN_CELLS):
            self.table(el)
            return
        if tag in ("hr", "head", "title", "meta", "link", "base"):
            return
        self.container(el, _KIND_OF_CONTAINER.get(tag, kind))

    def table(self, el: Any) -> None:
        caption = el.find("caption")
        if caption is not None:
            self.add("paragraph", _text(caption.text_content()), _span(caption))
        grid = _grid(el)
        if not grid:
            return
        header_rows = 0
        while header_rows < len(grid) and grid[header_rows][2]:
            header_rows += 1
        if header_rows == 0 and len(grid) > 1:
            # No row is marked as the header: the first one is, as in Word and Markdown tables.
            header_rows = 1
        if header_rows == len(grid):
            header_rows = 0
        header = _header_names([cells for _, cells, _ in grid[:header_rows]])
        rows: list[tuple[str, int | None]] = []
        for line, cells, _ in grid[header_rows:]:
            text = labelled_row(header, cells)
            if text:
                rows.append((text, line))
        if rows:
            start, end = _span(el)
            lines = [n for _, n in rows if n is not None]
            self.blocks.append(
                Block(
                    "table",
                    "\n".join(r for r, _ in rows),
                    self.headings,
                    start if start is not None else min(lines, default=None),
                    end if end is not None else max(lines, default=None),
                    table_rows=rows,
                )
            )


def _span_attr(cell: Any, name: str, limit: int) -> int:
    try:
        return max(1, min(int((cell.get(name) or "1").strip()), limit))
    except ValueError:
        return 1


def _carry(out: list[str], pending: dict[int, list[Any]]) -> None:
    """Fill the columns a cell of an earlier row still spans."""
    while len(out) in pending and len(out) < _MAX_COLUMNS:
        column = len(out)
        left = pending[column]
        out.append(left[1])
        left[0] -= 1
        if left[0] == 0:
            del pending[column]


def _grid(table: Any) -> list[tuple[int | None, list[str], bool]]:
    """The table's rows as (source line, text per column, header row?), spans laid out.

    A value spanning rows is repeated in each (each row then still says which group it is
    in); one spanning columns is written once, in its first column. Header cells repeat
    across their columns, since a group name applies to each.
    """
    pending: dict[int, list[Any]] = {}  # column -> [rows it still covers, its text]
    grid: list[tuple[int | None, list[str], bool]] = []
    leading = True
    for tr in table.xpath("./tr | ./thead/tr | ./tbody/tr | ./tfoot/tr"):
        cells = tr.xpath("./td | ./th")
        is_header = tr.getparent().tag == "thead" or (leading and bool(cells) and all(c.tag == "th" for c in cells))
        leading = leading and is_header
        out: list[str] = []
        started: dict[int, list[Any]] = {}
        for cell in cells:
            _carry(out, pending)
            if len(out) >= _MAX_COLUMNS:
                break
            text = cell_text(sanitize(_text(cell.text_content())))
            width = min(_span_attr(cell, "colspan", _MAX_COLUMNS), _MAX_COLUMNS - len(out))
            height = _span_attr(cell, "rowspan", _MAX_ROWSPAN)
            for k in range(width):
                value = text if k == 0 or is_header else ""
                if height > 1:
                    started[len(out)] = [height - 1, value]
                out.append(value)
        _carry(out, pending)
        # Spans that start in this row cover the rows after it.
        pending.update(started)
        if any(out):
            grid.append((_stamp(tr, _LINE), out, is_header))
    return grid


def _header_names(rows: list[list[str]]) -> list[str]:
    """One name per column from the header rows: "Rates Hotel" under a "Rates" group."""
    width = max((len(r) for r in rows), default=0)
    names: list[str] = []
    for column in range(width):
        parts: list[str] = []
        for row in rows:
            value = row[column] if column < len(row) else ""
            if value and (not parts or parts[-1] != value):
                parts.append(value)
        names.append(" ".join(parts))
    return names


@dataclass
class _Page:
    """What the parser process returns."""

    title: str
    blocks: list[Block]


def _extract(path: Path) -> _Page:
    """Run in the bounded child: parse, stamp, drop the boilerplate, find and read the content."""
    import lxml.html
    from lxml import etree

    data = path.read_bytes()
    if len(data) > MAX_HTML_BYTES:
        raise FileRejectedError(f"HTML page is {len(data)} bytes, over the {MAX_HTML_BYTES}-byte limit for HTML")
    limit_cpu(
        CPU_BASE_SECONDS + CPU_SECONDS_PER_MIB * len(data) / (1024 * 1024),
        f"for a {len(data) / (1024 * 1024):.1f} MiB page, with {CPU_BASE_SECONDS:g} s plus "
        f"{CPU_SECONDS_PER_MIB:g} s a MiB allowed",
    )
    if any(mark in data for mark in _ENTITY_MARKS):
        raise FileRejectedError(
            "HTML declares XML entities (<!ENTITY), which HTML has no use for; "
            "refused as a possible entity-expansion bomb"
        )
    try:
        data.decode("utf-8")
        encoding: str | None = "utf-8"
    except UnicodeDecodeError:
        # Not UTF-8: the page's own declaration (<meta charset>) decides, else Latin-1.
        encoding = None
    parser = lxml.html.HTMLParser(encoding=encoding, remove_comments=True, remove_pis=True, no_network=True)
    try:
        root = lxml.html.document_fromstring(data, parser=parser)
    except (etree.ParserError, ValueError) as exc:
        raise FileRejectedError(f"HTML cannot be parsed ({type(exc).__name__})") from None
    if any(error.type_name == _PARSER_LIMIT for error in parser.error_log):
        raise FileRejectedError(
            "HTML goes past the parser's limits (elements nested over 256 deep, or a text run over 10 MB); "
            "the rest of the page would be lost"
        )
    titles = root.xpath("//head/title") or root.xpath("//title")
    # A page saved from a template may title itself "{{ site.title }}": its first heading then.
    title = strip_template_tags(cell_text(sanitize(titles[0].text_content()))).strip() if titles else ""
    _stamp_lines(root)
    for br in root.iter("br"):
        br.tail = _BREAK + (br.tail or "")
    drop_boilerplate(root)
    content = _main_content(root)
    reader = _Reader()
    # The parser refused anything deeper than 256 elements, so this recursion stays shallow.
    reader.element(content, str(content.tag).lower(), "paragraph")
    if not title:
        title = next(
            (t for b in reader.blocks if b.kind == "heading" and (t := strip_template_tags(b.text).strip())), ""
        )
    return _Page(title, reader.blocks)


def load_html(path: Path, fallback_title: str) -> LoadedDocument:
    # Imported here so the parser process starts with them loaded rather than importing them.
    import lxml.html  # noqa: F401
    import readability  # noqa: F401

    page = run_bounded("HTML", _extract, path)
    if not any(b.kind != "heading" for b in page.blocks):
        raise FileRejectedError("HTML has no text in its main content")
    return LoadedDocument(title=page.title or fallback_title, format="html", blocks=page.blocks)
