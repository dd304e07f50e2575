"""The passages a query has touched so far: first what ranking needs, then the rows served.

Both rankings and the re-scoring ask for passages by id. Each id is checked once per query
against the caller's ceiling (a second check beside the one inside the rankings) and read as
a :class:`PassageHead`, its id and document: all that fusion, the gate and documents-first
need. Whole rows, with their text, are read only for what is served (:meth:`RowCache.prefetch`
after the gate), or when the FTS5 re-scoring or the reranker asks. A row is tokenised with the
index's own tokenizer, so keyword scores and coverage agree with FTS5, only when asked: with
the keyword impact lists in memory (:mod:`impacts`) nothing is tokenised per query.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import apsw

from governed_evidence.config import Classification
from governed_evidence.errors import IndexUnavailableError
from governed_evidence.search import bm25, sql
from governed_evidence.search.bm25 import RowTerms
from governed_evidence.search.query import index_tokenizer
from governed_evidence.search.rows import Passage

__all__ = ["PassageHead", "RowCache"]


@dataclass(frozen=True, slots=True)
class PassageHead:
    """A passage as ranking sees it: visible at the ceiling, with its document; the row on demand."""

    id: int
    document: str
    cache: RowCache = field(compare=False, repr=False)

    def resolve(self) -> Passage:
        return self.cache.row(self.id)


class RowCache:
    def __init__(self, conn: apsw.Connection, level: Classification, *, covering: bool = False) -> None:
        self._conn = conn
        self._level = level
        #: Whether the ceiling check may read the covering index (:func:`sql.has_visibility_index`).
        self._covering = covering
        #: Every id found visible so far (at or below the level, searchable).
        self.heads: dict[int, PassageHead] = {}
        self._rows: dict[int, Passage] = {}
        self._terms: dict[int, RowTerms] = {}

    def fetch(self, ids: Iterable[int]) -> None:
        """Check the ids not checked yet; ids above the ceiling are simply not found."""
        missing = {p for p in ids if p not in self.heads}
        for pid, document in sql.passage_documents(self._conn, self._level, missing, covering=self._covering).items():
            self.heads[pid] = PassageHead(pid, document, self)

    def prefetch(self, ids: Iterable[int]) -> None:
        """Read the whole rows of visible ``ids`` not read yet, in one query."""
        missing = {p for p in ids if p in self.heads and p not in self._rows}
        self._rows.update(sql.passages_by_id(self._conn, self._level, missing))

    def row(self, pid: int) -> Passage:
        """The whole row of a visible passage (read now if it was not prefetched)."""
        self.prefetch((pid,))
        try:
            return self._rows[pid]
        except KeyError:
            # Checked visible on this connection a moment ago: only a damaged file gets here.
            raise IndexUnavailableError("the index changed while the search read it") from None

    def terms(self) -> Mapping[int, RowTerms]:
        """Every visible passage so far as FTS5 indexed it (read and tokenised once, on first need)."""
        pending = [pid for pid in self.heads if pid not in self._terms]
        if pending:
            self.prefetch(pending)
            tokenizer = index_tokenizer(self._conn)
            for pid in pending:
                row = self._rows[pid]
                self._terms[pid] = bm25.row_terms(tokenizer, (row.title, row.heading, row.search_text))
        return self._terms

    def keep_only(self, ids: set[int]) -> None:
        """Forget the passages outside ``ids`` (candidates re-scored but not ranked)."""
        self.heads = {p: h for p, h in self.heads.items() if p in ids}
        self._rows = {p: r for p, r in self._rows.items() if p in ids}
        self._terms = {p: t for p, t in self._terms.items() if p in ids}
