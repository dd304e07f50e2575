"""FTS5's bm25 pieces the search side needs outside FTS5 itself.

FTS5's formula (``fts5_aux.c``: k1 1.2, b 0.75, per-phrase IDF from the row count and the
number of rows holding the term, column weights summed per instance, the row's token count
against the average) is what the impact lists (:mod:`impacts`) precompute per posting; the
table's own row count and average length come from FTS5 (:func:`table_totals`). The coverage
signal weighs query words by :func:`coverage_idf`, and reads which terms a row holds with the
index's own tokenizer (:func:`row_term_set`) when the impact lists are not in memory.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import apsw

from governed_evidence.config import Classification
from governed_evidence.store.schema import fts_table

__all__ = ["K1", "B", "TableTotals", "coverage_idf", "idf", "row_term_set", "table_totals"]

K1 = 1.2
B = 0.75
_TOTALS_FUNCTION = "ge_fts_totals"


@dataclass(frozen=True)
class TableTotals:
    """What bm25 needs from the whole table: row count and average row length in tokens."""

    rows: int
    average_length: float


def idf(rows: int, hits: int) -> float:
    """FTS5's IDF: log((N - n + 0.5) / (n + 0.5)), floored at 1e-6 for very common terms."""
    value = math.log((rows - hits + 0.5) / (hits + 0.5))
    return value if value > 0.0 else 1e-6


def coverage_idf(rows: int, hits: int) -> float:
    """The IDF that weighs words in the coverage signal: log(1 + (N - n + 0.5) / (n + 0.5)).

    Unlike :func:`idf` it never reaches zero, so a word in most passages still counts a
    little towards "the passage holds every word of the question".
    """
    return math.log(1.0 + (rows - hits + 0.5) / (hits + 0.5))


def row_term_set(tokenizer: Any, columns: Sequence[str]) -> frozenset[str]:
    """Every term a row holds in ``columns`` (title, heading, indexed body), as FTS5 indexed it."""
    held: set[str] = set()
    for text in columns:
        if text:
            held.update(
                tokenizer(
                    text.encode("utf-8"),
                    apsw.FTS5_TOKENIZE_DOCUMENT,
                    None,
                    include_offsets=False,
                    include_colocated=False,
                )
            )
    return frozenset(held)


def _totals(api: apsw.FTS5ExtensionApi, *args: Any) -> str:
    return f"{api.row_count} {api.column_total_size(-1)}"


def table_totals(conn: apsw.Connection, level: Classification, probe: str) -> TableTotals | None:
    """Row count and average length of one level's full-text table, read through FTS5 itself.

    ``probe`` is a MATCH expression that holds at least one row (an auxiliary function runs
    only on a matching row); None when nothing matches.
    """
    conn.register_fts5_function(_TOTALS_FUNCTION, _totals)
    table = fts_table(level)
    row = conn.execute(
        f"SELECT {_TOTALS_FUNCTION}({table}) FROM {table} WHERE {table} MATCH ? LIMIT 1", (probe,)
    ).fetchone()
    if row is None:
        return None
    rows, tokens = (int(x) for x in str(row[0]).split())
    return TableTotals(rows, tokens / rows if rows else 0.0)
