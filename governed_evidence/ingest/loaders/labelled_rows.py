"""Table rows that carry their column names: "Nightly limit (EUR): 210".

A spreadsheet row, an HTML table row or a slide's table row is found by the words of its
header as much as by its own ("the nightly limit in Paris"), and a passage that holds
only rows 40-48 of a rate table must still say what each number is. So every row is
written with its header names beside its values, and needs no header line above it.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["cell_text", "labelled_row"]

#: Between the cells of a row: the separator Markdown and DOCX tables already use.
_SEPARATOR = " | "


def cell_text(text: str) -> str:
    """One cell as one line: runs of whitespace (line breaks inside a cell too) as one space."""
    return " ".join(text.split())


def labelled_row(header: Sequence[str], cells: Sequence[str]) -> str:
    """``cells`` with each non-empty value named by the header cell of its column.

    An empty value is left out (the row does not say "Notes: " for nothing); a value whose
    column has no header name, or lies past the header, stands alone.
    """
    parts: list[str] = []
    for column, value in enumerate(cells):
        if not value:
            continue
        name = header[column] if column < len(header) else ""
        parts.append(f"{name}: {value}" if name and name != value else value)
    return _SEPARATOR.join(parts)
