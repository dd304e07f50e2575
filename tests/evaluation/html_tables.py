"""Read a report page back: its tables by class, each row's cells as text (for the comparison tests)."""

from __future__ import annotations

from html.parser import HTMLParser


class _Tables(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._table: list[list[str]] | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            cls = dict(attrs).get("class") or ""
            self._table = self.tables.setdefault(cls, [])
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag == "td" and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._table is not None and self._row:
            self._table.append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def tables(html: str) -> dict[str, list[list[str]]]:
    """Class of each table -> its body rows (header rows have no <td>, so are left out)."""
    parser = _Tables()
    parser.feed(html)
    return parser.tables


def number(cell: str) -> float | None:
    """A figure as the page prints it, read back."""
    return None if cell == "missing" else float(cell)


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._skip += tag == "style"
        # Attribute values are text a reader could be shown too (a title, an id).
        self.parts.extend(v for _, v in attrs if v)

    def handle_endtag(self, tag: str) -> None:
        self._skip -= tag == "style"

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def text(html: str) -> str:
    """Everything a page says: its text and attribute values, without its style sheets."""
    parser = _Text()
    parser.feed(html)
    return " ".join(parser.parts)
