"""The passages a query has touched so far: first what ranking needs, then the rows served.

Both rankings and the re-scoring ask for passages by id. Each id is checked once per query
against the caller's ceiling (a second check beside the one inside the rankings: from the
level's visible set held in memory, :mod:`visible_rows`, else in SQL) and read as
a :class:`PassageHead`, its id and document id: all that fusion, the gate and documents-first
need (a document's path is read when first asked for, every head's at once). Whole rows, with
their text, are read only for what is served (:meth:`RowCache.prefetch` after the gate), or
when the FTS5 re-scoring or the reranker asks. A row is tokenised with the
index's own tokenizer, so keyword scores and coverage agree with FTS5, only when asked: with
the keyword impact lists in memory (:mod:`impacts`) nothing is tokenised per query.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import apsw
import numpy as np

from governed_evidence.config import Classification
from governed_evidence.errors import IndexUnavailableError
from governed_evidence.search import bm25, sql
from governed_evidence.search.bm25 import RowTerms
from governed_evidence.search.query import index_tokenizer
from governed_evidence.search.rows import Passage
from governed_evidence.search.visible_rows import VisibleRows

__all__ = ["PassageHead", "Pool", "RowCache"]


# Not frozen: a search makes one a candidate (about 90), and a frozen dataclass's __init__
# costs three times as much (1.1 against 0.4 µs a head here); nothing assigns to one.
@dataclass(slots=True, eq=False)
class PassageHead:
    """A passage as ranking sees it: visible at the ceiling, with its document; the row on demand."""

    id: int
    document_id: int
    cache: RowCache = field(repr=False)

    @property
    def document(self) -> str:
        """The document's path (read with every other head's on first need)."""
        return self.cache.document_path(self.document_id)

    def resolve(self) -> Passage:
        return self.cache.row(self.id)


class RowCache:
    def __init__(
        self,
        conn: apsw.Connection,
        level: Classification,
        *,
        covering: bool = False,
        held: VisibleRows | None = None,
    ) -> None:
        self._conn = conn
        self._level = level
        #: Whether the ceiling check may read the covering index (:func:`sql.has_visibility_index`).
        self._covering = covering
        #: The level's visible passages read once for this file (:mod:`visible_rows`); None: ask SQL.
        self._held = held if held is not None and held.level == level else None
        #: Every id found visible so far (at or below the level, searchable), with its document id.
        #: Plain numbers, not heads: a head points at its cache, and a cache holding its heads
        #: made every search's cache, heads and rows a reference cycle, about 100 objects left
        #: to the cyclic collector per search instead of freed when the search returns.
        self.visible: dict[int, int] = {}
        self._rows: dict[int, Passage] = {}
        self._terms: dict[int, RowTerms] = {}
        #: Which terms each passage holds, for coverage (no counts: nothing re-scores with them).
        self._term_sets: dict[int, frozenset[str]] = {}
        #: Paths of the visible passages' documents, read on first need.
        self._paths: dict[int, str] = {}

    def fetch(self, ids: Iterable[int]) -> None:
        """Check the ids not checked yet; ids above the ceiling are simply not found."""
        missing = {p for p in ids if p not in self.visible}
        if self._held is not None:
            self.visible.update(self._held.documents(missing))
        else:
            self.visible.update(sql.passage_documents(self._conn, self._level, missing, covering=self._covering))

    def documents_of(self, ids: np.ndarray) -> np.ndarray:
        """The document id of each of ``ids`` (int64) found visible, -1 for the rest, checked as
        :meth:`fetch` checks them (and remembered as visible)."""
        if self._held is None:
            self.fetch(ids.tolist())
            return np.asarray([self.visible.get(pid, -1) for pid in ids.tolist()], dtype=np.int64)
        documents = self._held.documents_at(ids)
        found = np.flatnonzero(documents >= 0)
        # Remembered in ascending id order, as the SQL check returns them (a pool asks in that order).
        found = found[np.argsort(ids[found], kind="stable")]
        self.visible.update(zip(ids[found].tolist(), documents[found].tolist(), strict=True))
        return documents

    def document_path(self, document_id: int) -> str:
        """The path of a head's document; the first call reads the path of every visible passage's
        document at once."""
        if document_id not in self._paths:
            # Only documents of passages found visible: any other id is not found.
            self._paths.update(sql.document_paths(self._conn, set(self.visible.values()) - self._paths.keys()))
        try:
            return self._paths[document_id]
        except KeyError:
            # The id came from a passage row on this connection: only a damaged file gets here.
            raise IndexUnavailableError("the index changed while the search read it") from None

    def prefetch(self, ids: Iterable[int]) -> None:
        """Read the whole rows of visible ``ids`` not read yet, in one query."""
        missing = {p for p in ids if p in self.visible and p not in self._rows}
        self._rows.update(sql.passages_by_id(self._conn, self._level, missing))

    def row(self, pid: int) -> Passage:
        """The whole row of a visible passage (read now if it was not prefetched)."""
        row = self._rows.get(pid)
        if row is not None:
            return row
        self.prefetch((pid,))
        try:
            return self._rows[pid]
        except KeyError:
            # Checked visible on this connection a moment ago: only a damaged file gets here.
            raise IndexUnavailableError("the index changed while the search read it") from None

    def terms(self) -> Mapping[int, RowTerms]:
        """Every visible passage so far as FTS5 indexed it (read and tokenised once, on first need)."""
        pending = [pid for pid in self.visible if pid not in self._terms]
        if pending:
            self.prefetch(pending)
            tokenizer = index_tokenizer(self._conn)
            for pid in pending:
                row = self._rows[pid]
                self._terms[pid] = bm25.row_terms(tokenizer, (row.title, row.heading, row.search_text))
        return self._terms

    def term_sets(self) -> Mapping[int, frozenset[str]]:
        """Which terms every visible passage so far holds, as FTS5 indexed it: taken from
        :meth:`terms` where a row was already counted, else tokenised without counting."""
        pending = [pid for pid in self.visible if pid not in self._term_sets]
        if pending:
            self.prefetch(pid for pid in pending if pid not in self._terms)
            tokenizer = index_tokenizer(self._conn)
            for pid in pending:
                counted = self._terms.get(pid)
                if counted is not None:
                    self._term_sets[pid] = counted.terms
                else:
                    row = self._rows[pid]
                    self._term_sets[pid] = bm25.row_term_set(tokenizer, (row.title, row.heading, row.search_text))
        return self._term_sets

    def keep_only(self, ids: set[int]) -> None:
        """Forget the passages outside ``ids`` (candidates re-scored but not ranked)."""
        self.visible = {p: d for p, d in self.visible.items() if p in ids}
        self._rows = {p: r for p, r in self._rows.items() if p in ids}
        self._terms = {p: t for p, t in self._terms.items() if p in ids}
        self._term_sets = {p: t for p, t in self._term_sets.items() if p in ids}


@dataclass(slots=True)
class Pool:
    """The visible passages of a query's two rankings, each once, in ascending id order: what
    fusion and the signals read, as arrays (a search pools about 90)."""

    ids: np.ndarray
    #: Each passage's document id.
    documents: np.ndarray
    #: Positions of the keyword ranking's visible passages, best first.
    keyword: np.ndarray
    #: Positions of the semantic ranking's visible passages, best first.
    semantic: np.ndarray
    #: Each passage's cosine distance to the query; NaN until measured (:meth:`measured`).
    distance: np.ndarray

    @classmethod
    def of(cls, keyword_ids: Sequence[int], nearest: Sequence[tuple[int, float]], cache: RowCache) -> Pool:
        """Both rankings' passages checked against the ceiling a second time (``cache``);
        ``nearest`` gives the semantic ranking with each passage's distance."""
        keyword = np.asarray(keyword_ids, dtype=np.int64)
        semantic = np.fromiter((pid for pid, _ in nearest), dtype=np.int64, count=len(nearest))
        listed, where = np.unique(np.concatenate((keyword, semantic)), return_inverse=True)
        # Checked in ascending order, the order the cache remembers them in.
        documents = cache.documents_of(listed)
        visible = documents >= 0
        # Each listed position's place among the visible ones.
        place = np.cumsum(visible) - 1
        on_keyword = where[: keyword.shape[0]]
        on_semantic = where[keyword.shape[0] :]
        semantic_visible = visible[on_semantic]
        distance = np.full(int(np.count_nonzero(visible)), np.nan)
        at_semantic = place[on_semantic[semantic_visible]]
        if at_semantic.shape[0]:
            measured = np.fromiter((d for _, d in nearest), dtype=np.float64, count=len(nearest))
            distance[at_semantic] = measured[semantic_visible]
        return cls(listed[visible], documents[visible], place[on_keyword[visible[on_keyword]]], at_semantic, distance)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def unmeasured(self) -> list[int]:
        """The passages without a distance yet, ascending."""
        ids: list[int] = self.ids[np.isnan(self.distance)].tolist()
        return ids

    def measured(self, distances: Mapping[int, float]) -> None:
        """Record ``distances`` of pooled passages."""
        if distances:
            at = np.searchsorted(self.ids, np.fromiter(distances, dtype=np.int64, count=len(distances)))
            self.distance[at] = np.fromiter(distances.values(), dtype=np.float64, count=len(distances))
