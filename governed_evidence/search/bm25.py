"""FTS5's bm25(), recomputed for a bounded set of candidate passages.

An OR query over common words makes FTS5 score every row that holds any of them: at a
million passages a ten-word question touches hundreds of thousands of rows. The keyword
side therefore asks FTS5 only for the query's most selective words (a fixed budget of
postings, see :func:`selective_prefix`), takes the best :data:`CANDIDATE_FACTOR` times as
many rows as it needs, and re-scores those with the *whole* query here, with FTS5's own
formula and statistics (``fts5_aux.c``: k1 1.2, b 0.75, per-phrase IDF from the row count
and the number of rows holding the term, column weights summed per instance, the row's
token count against the average). When every word fits the budget (every small corpus)
FTS5 ranks the whole query itself and nothing here runs.

What is approximate is only which rows are re-scored: a row holding none of the selective
words is not a candidate. ``make bench`` measures the overlap with the full query's top 10.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import apsw

from governed_evidence.config import Classification
from governed_evidence.store.schema import fts_table

__all__ = [
    "BUDGET_SHARE",
    "CANDIDATE_FACTOR",
    "FULL_QUERY_POSTINGS",
    "K1",
    "POSTINGS_BUDGET",
    "B",
    "RowTerms",
    "TableTotals",
    "coverage_idf",
    "idf",
    "row_term_set",
    "row_terms",
    "score",
    "selective_prefix",
    "table_totals",
]

K1 = 1.2
B = 0.75
#: Rows (summed document frequencies) the selective query may touch, at least. Chosen on the
#: generated 100k corpus, where the re-scored top 10 matched the full query's top 10 on every
#: query sampled; larger tables get :data:`BUDGET_SHARE` of their rows (the top-10 overlap
#: at 1M is measured by ``make bench``).
POSTINGS_BUDGET = 20_000
BUDGET_SHARE = 0.05
#: Up to this many postings the whole query goes to FTS5 (about as fast as the two steps).
FULL_QUERY_POSTINGS = 40_000
#: Candidates re-scored per result needed.
CANDIDATE_FACTOR = 4
_TOTALS_FUNCTION = "ge_fts_totals"


@dataclass(frozen=True)
class TableTotals:
    """What bm25 needs from the whole table: row count and average row length in tokens."""

    rows: int
    average_length: float


@dataclass(frozen=True, slots=True)
class RowTerms:
    """One row as FTS5 indexed it: term counts per column, its length in tokens, and every
    term it holds (once, as coverage asks for it per query stem)."""

    columns: tuple[Counter[str], ...]
    length: int
    terms: frozenset[str]


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


def selective_prefix(terms: Sequence[str], frequencies: dict[str, int], rows: int) -> list[int]:
    """Indexes of ``terms`` to query: rarest first, while their summed frequency fits the budget.

    The budget is :data:`POSTINGS_BUDGET` or :data:`BUDGET_SHARE` of the table's rows,
    whichever is larger; the rarest term is always kept. Returns every index when the whole
    query touches at most :data:`FULL_QUERY_POSTINGS` rows, where one FTS5 query over
    everything is the cheaper plan.
    """
    if sum(frequencies.get(t, 0) for t in terms) <= FULL_QUERY_POSTINGS:
        return list(range(len(terms)))
    budget = max(POSTINGS_BUDGET, int(rows * BUDGET_SHARE))
    order = sorted(range(len(terms)), key=lambda i: (frequencies.get(terms[i], 0), i))
    kept: list[int] = []
    total = 0
    for i in order:
        hits = frequencies.get(terms[i], 0)
        # A word in no row costs nothing and scores nothing; the rarest word that occurs is always kept.
        if total > 0 and total + hits > budget:
            break
        kept.append(i)
        total += hits
    return sorted(kept)


def row_terms(tokenizer: Any, columns: Sequence[str]) -> RowTerms:
    """Tokenise each column with the index's own tokenizer (``conn.fts5_tokenizer``)."""
    counts: list[Counter[str]] = []
    length = 0
    for text in columns:
        if not text:
            # Most headings and some titles are empty: nothing to tokenise.
            counts.append(Counter())
            continue
        # The index's tokenizer emits no colocated forms, so plain token strings are exact.
        tokens = tokenizer(
            text.encode("utf-8"), apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False, include_colocated=False
        )
        counts.append(Counter(tokens))
        length += len(tokens)
    return RowTerms(tuple(counts), length, frozenset().union(*counts))


def row_term_set(tokenizer: Any, columns: Sequence[str]) -> frozenset[str]:
    """The terms of :func:`row_terms`, without counting them: all that coverage needs, and
    cheaper (tokenising and counting rows took about a third of a search served from the
    index file)."""
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


def score(
    phrases: Sequence[str],
    idfs: Sequence[float],
    row: RowTerms,
    weights: Sequence[float],
    totals: TableTotals,
) -> float:
    """FTS5's bm25 for one row, as a positive number (bm25() returns its negation)."""
    norm = K1 * (1.0 - B + B * row.length / totals.average_length) if totals.average_length > 0 else K1
    total = 0.0
    for phrase, weight_idf in zip(phrases, idfs, strict=True):
        freq = 0.0
        for column, weight in zip(row.columns, weights, strict=True):
            freq += weight * column.get(phrase, 0)
        total += weight_idf * ((freq * (K1 + 1.0)) / (freq + norm))
    return total


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
