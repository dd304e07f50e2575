"""The passages a query has touched so far, with their indexed terms.

Both rankings and the re-scoring ask for rows by id; each is read once per query (under the
caller's ceiling, a second check beside the one inside the rankings). A row is tokenised with
the index's own tokenizer, so keyword scores and coverage agree with FTS5, only when asked:
with the keyword impact lists in memory (:mod:`impacts`) nothing is tokenised per query.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import apsw

from governed_evidence.config import Classification
from governed_evidence.search import bm25, sql
from governed_evidence.search.bm25 import RowTerms
from governed_evidence.search.query import index_tokenizer
from governed_evidence.search.rows import Passage

__all__ = ["RowCache"]


class RowCache:
    def __init__(self, conn: apsw.Connection, level: Classification) -> None:
        self._conn = conn
        self._level = level
        self.rows: dict[int, Passage] = {}
        self._terms: dict[int, RowTerms] = {}

    def fetch(self, ids: Iterable[int]) -> None:
        """Read the rows of ``ids`` not read yet; ids above the ceiling are simply not found."""
        missing = {p for p in ids if p not in self.rows}
        self.rows.update(sql.passages_by_id(self._conn, self._level, missing))

    def terms(self) -> Mapping[int, RowTerms]:
        """Every row read so far as FTS5 indexed it (tokenised once, on first need)."""
        pending = [pid for pid in self.rows if pid not in self._terms]
        if pending:
            tokenizer = index_tokenizer(self._conn)
            for pid in pending:
                row = self.rows[pid]
                self._terms[pid] = bm25.row_terms(tokenizer, (row.title, row.heading, row.search_text))
        return self._terms

    def keep_only(self, ids: set[int]) -> None:
        """Forget the rows outside ``ids`` (candidates re-scored but not ranked)."""
        self.rows = {p: r for p, r in self.rows.items() if p in ids}
        self._terms = {p: t for p, t in self._terms.items() if p in ids}
