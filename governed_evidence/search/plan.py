"""A query's plan: everything about the query text the rankings need, worked out once.

The keyword ranking and the coverage signal read the same tokens, stems and document
frequencies; computing them here, from one connection and one level,
keeps the parts that use them free of any state of their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import apsw

from governed_evidence.config import Classification
from governed_evidence.errors import InvalidRequestError
from governed_evidence.search import sql
from governed_evidence.search.impacts import ImpactIndex
from governed_evidence.search.limits import MAX_QUERY_CHARS
from governed_evidence.search.query import query_tokens, token_stems
from governed_evidence.store.meta import IndexMeta

__all__ = ["QueryPlan", "Snapshot", "plan_query", "searched_level", "validate_query"]


@dataclass(frozen=True)
class Snapshot:
    """One query's view of the index: the file generation it reads, on this thread's connection,
    and the level it searches."""

    generation: tuple[int, int]
    conn: apsw.Connection
    meta: IndexMeta
    #: The caller's ceiling, capped by the build ceiling (:func:`searched_level`).
    level: Classification


@dataclass(frozen=True)
class QueryPlan:
    text: str
    #: The full-text index searched: the caller's ceiling, capped by what was built.
    level: Classification
    #: Words of the query as the index tokenizer splits them (each quoted in MATCH).
    tokens: tuple[str, ...]
    #: The stem FTS5 matches for each token ("" when a token is not exactly one stem).
    phrases: tuple[str, ...]
    #: Distinct stems, in query order.
    stems: tuple[str, ...]
    #: Passages at ``level`` holding each stem.
    frequencies: Mapping[str, int]
    #: Rows of the full-text index at ``level``.
    table_rows: int


def validate_query(query: str) -> str:
    text = query.strip()
    if not text:
        raise InvalidRequestError("query is empty; give the words or question to search for")
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidRequestError(f"query is {len(text)} characters; the limit is {MAX_QUERY_CHARS}")
    return text


def searched_level(ceiling: Classification, meta: IndexMeta) -> Classification:
    """The caller's ceiling, capped by the build ceiling (no index exists above it)."""
    return min(ceiling, meta.ceiling)


def plan_query(
    conn: apsw.Connection, meta: IndexMeta, level: Classification, text: str, impacts: ImpactIndex | None = None
) -> QueryPlan:
    """The query's words, stems and their frequencies at ``level`` (from the level's impact lists
    when they are held: the same counts, without a query)."""
    tokens = query_tokens(conn, text)
    phrases = token_stems(conn, tokens)
    stems = list(dict.fromkeys(p for p in phrases if p))
    if impacts is not None:
        frequencies = {s: n for s in stems if (n := impacts.frequency(s)) > 0}
    else:
        frequencies = sql.document_frequencies(conn, level, stems)
    return QueryPlan(
        text=text,
        level=level,
        tokens=tuple(tokens),
        phrases=tuple(phrases),
        stems=tuple(stems),
        frequencies=frequencies,
        table_rows=meta.fts_row_count(level),
    )
