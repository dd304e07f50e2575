"""The keyword side in memory: FTS5's bm25 as impact lists, copied from the full-text index itself.

FTS5 answers an OR query by scoring every row that holds any of its words, in C but one row
at a time; at 100k passages that is most of a search. This is a derived copy of the same
index, as the vector matrix is of the stored vectors: for every term, the rows holding it
(in passage-id order) and each row's share of the bm25 score, ``tf·(k1+1) / (tf + k1·(1-b+b·len/avg))``
with the column weights folded into ``tf``. A query adds ``idf × impact`` over the postings of
its terms into one score per row and takes the top k of the whole query; from
``SearchTuning.pruned_rows`` rows MaxScore (:mod:`maxscore`) finds the same top k without
scoring every row.

Nothing is tokenised here. The postings are read from an ``fts5vocab`` *instance* table over
the level's own FTS5 table, so terms, stems and counts are the index's by construction, and
the row count and average length that bm25 needs come from FTS5 itself
(:func:`bm25.table_totals`). Scores agree with FTS5's bm25() to float32 precision;
``tests/search/test_impacts.py`` checks the rankings against FTS5 on real corpora.

The ceiling is applied by what is copied: the level's FTS5 table holds only searchable
passages at or below the level, so nothing above it is in memory to rank or to count.
The same postings answer which of the query's stems each candidate holds (the coverage
signal), instead of re-tokenising every candidate's text per query.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import apsw
import numpy as np

from governed_evidence.config import Classification
from governed_evidence.search import bm25, sql
from governed_evidence.search.maxscore import Phrase, best_positions, pruned_top
from governed_evidence.search.query import quote_token
from governed_evidence.store.schema import fts_table, terms_table, vocab_table

__all__ = ["POSTING_BYTES", "ImpactCopier", "ImpactIndex", "load_impacts"]

#: Bytes a posting costs: its row position (int32) and its impact (float32).
POSTING_BYTES = 8
#: Bytes a distinct term costs, about: its str key and int in the term dictionary, and its bound.
_TERM_BYTES = 104
#: Instance rows read between checks for a shutdown.
_POLL_ROWS = 1 << 16


@dataclass(frozen=True)
class ImpactIndex:
    """Impact lists of one level's full-text index (see the module docstring)."""

    level: Classification
    #: Passage id of each row position, ascending (rows holding at least one token).
    ids: np.ndarray
    #: Term -> its index into ``starts``.
    terms: dict[str, int]
    #: Postings of term t are ``positions[starts[t]:starts[t + 1]]``, ascending.
    starts: np.ndarray
    positions: np.ndarray
    impacts: np.ndarray
    #: FTS5's own statistics: rows of the table (empty ones included) and mean length in tokens.
    totals: bm25.TableTotals
    #: The largest impact of each term (float32): what bounds its contribution to any row.
    bounds: np.ndarray

    @property
    def rows(self) -> int:
        return int(self.ids.shape[0])

    @property
    def nbytes(self) -> int:
        arrays = self.ids.nbytes + self.starts.nbytes + self.positions.nbytes + self.impacts.nbytes
        # The bounds are counted in _TERM_BYTES.
        return int(arrays + _TERM_BYTES * len(self.terms))

    def frequency(self, term: str) -> int:
        """Rows holding ``term`` (FTS5's document frequency)."""
        t = self.terms.get(term)
        return 0 if t is None else int(self.starts[t + 1] - self.starts[t])

    def _postings(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        t = self.terms.get(term)
        if t is None:
            return None
        lo, hi = int(self.starts[t]), int(self.starts[t + 1])
        return self.positions[lo:hi], self.impacts[lo:hi]

    def phrases(self, phrases: Sequence[str]) -> list[Phrase]:
        """The postings, impacts, idf and bound of each phrase held here, in query order (a
        repeated stem once per time it is given)."""
        out: list[Phrase] = []
        for phrase in phrases:
            t = self.terms.get(phrase)
            if t is None:
                continue
            lo, hi = int(self.starts[t]), int(self.starts[t + 1])
            idf = bm25.idf(self.totals.rows, hi - lo)
            # idf x the largest impact, by the float32 product each contribution is computed with.
            out.append(Phrase(self.positions[lo:hi], self.impacts[lo:hi], idf, float(idf * self.bounds[t])))
        return out

    def _every_row_top(self, held: Sequence[Phrase], depth: int) -> np.ndarray:
        """Row positions of the ``depth`` best rows, best first (ties by position), every row
        scored: every phrase's ``idf × impact`` summed per row by one ``bincount`` over the
        postings of all of them (a repeated stem counts each time, as in FTS5)."""
        if not held:
            return np.zeros(0, dtype=np.int64)
        scores = np.bincount(
            np.concatenate([p.positions for p in held]),
            weights=np.concatenate([p.weights() for p in held]),
            minlength=self.rows,
        )
        matched = np.flatnonzero(scores > 0.0)
        return best_positions(matched, scores[matched], depth)

    def rank(self, phrases: Sequence[str], depth: int, *, essential_share: float | None = None) -> list[int]:
        """The ``depth`` best passage ids by bm25, best first (ties by passage id).

        With ``essential_share`` MaxScore (:mod:`maxscore`) skips the rows that cannot reach the
        top ``depth`` (the same answer, without scoring every row), unless the postings it cannot
        skip exceed that share of the query's; None: every row is scored."""
        if depth <= 0 or self.rows == 0:
            return []
        held = self.phrases(phrases)
        top = pruned_top(held, depth, essential_share) if essential_share is not None else None
        if top is None:
            top = self._every_row_top(held, depth)
        ranked: list[int] = self.ids[top].tolist()
        return ranked

    def held_weights(self, weights: Mapping[str, float], wanted: np.ndarray) -> np.ndarray:
        """For each passage id of ``wanted`` (int64), the sum of ``weights`` over the stems it
        holds (the coverage signal's numerator); a passage not in this index holds none. Each
        stem's postings are searched for every wanted passage at once."""
        total = np.zeros(wanted.shape[0], dtype=np.float64)
        if not wanted.shape[0] or not self.rows:
            return total
        where = np.minimum(np.searchsorted(self.ids, wanted), self.rows - 1)
        present = self.ids[where] == wanted
        for stem, weight in weights.items():
            postings = self._postings(stem)
            if postings is None:
                continue
            positions = postings[0]
            at = np.minimum(positions.searchsorted(where), positions.shape[0] - 1)
            total += np.where(present & (positions[at] == where), weight, 0.0)
        return total


def _instance_table(level: Classification) -> str:
    return f"ge_instances_{level.label}"


def _probe_totals(conn: apsw.Connection, level: Classification) -> tuple[bm25.TableTotals | None, int]:
    """FTS5's row count and mean length, and the number of distinct terms, of one level."""
    first = conn.execute(f"SELECT term FROM {vocab_table(level)} LIMIT 1").fetchone()
    if first is None:
        return None, 0
    totals = bm25.table_totals(conn, level, quote_token(str(first[0])))
    (terms,) = conn.execute(f"SELECT count(*) FROM {terms_table(level)}").fetchone() or (0,)
    return totals, int(terms)


def load_impacts(
    conn: apsw.Connection, level: Classification, cancelled: Callable[[], bool] = lambda: False
) -> ImpactIndex | None:
    """Copy one level's full-text index into impact lists; None when empty or cancelled."""
    totals, _ = _probe_totals(conn, level)
    if totals is None or totals.rows == 0:
        return None
    table = _instance_table(level)
    weight = " ".join(
        f"WHEN '{column}' THEN {w}" for column, w in zip(("title", "heading", "body"), sql.BM25_WEIGHTS, strict=True)
    )
    # A temporary vocabulary table: it exists on this connection only and writes nothing to the file.
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table} USING fts5vocab(main, {fts_table(level)}, instance)")
    try:
        terms: dict[str, int] = {}
        starts = array("q", [0])
        doc_ids = array("q")
        weighted = array("d")
        counts = array("q")
        last_term: str | None = None
        last_doc = -1
        # Rows come in index order: by term, then row id, then position, so one pass groups them.
        for seen, (term, doc, w) in enumerate(
            conn.execute(f"SELECT term, doc, CASE col {weight} ELSE 1.0 END FROM temp.{table}"), start=1
        ):
            if term != last_term:
                if last_term is not None:
                    starts.append(len(doc_ids))
                terms[term] = len(terms)
                last_term, last_doc = term, -1
            if doc != last_doc:
                doc_ids.append(doc)
                weighted.append(w)
                counts.append(1)
                last_doc = doc
            else:
                weighted[-1] += w
                counts[-1] += 1
            if seen % _POLL_ROWS == 0 and cancelled():
                return None
    finally:
        conn.execute(f"DROP TABLE IF EXISTS temp.{table}")
    starts.append(len(doc_ids))
    docs = np.frombuffer(doc_ids, dtype=np.int64)
    ids = np.unique(docs)
    positions = np.searchsorted(ids, docs).astype(np.int32)
    # A row's length is every token it holds, in every column (FTS5's xColumnSize summed).
    lengths = np.bincount(positions, weights=np.frombuffer(counts, dtype=np.int64), minlength=ids.shape[0])
    tf = np.frombuffer(weighted, dtype=np.float64)
    k1, b = bm25.K1, bm25.B
    norm = (
        k1 * (1.0 - b + b * lengths / totals.average_length) if totals.average_length > 0 else np.full_like(lengths, k1)
    )
    impacts = (tf * (k1 + 1.0) / (tf + norm[positions])).astype(np.float32)
    term_starts = np.frombuffer(starts, dtype=np.int64).copy()
    return ImpactIndex(
        level=level,
        ids=ids,
        terms=terms,
        starts=term_starts,
        positions=positions,
        impacts=impacts,
        totals=totals,
        # Every term holds at least one posting, so each slice of reduceat is its own.
        bounds=np.maximum.reduceat(impacts, term_starts[:-1]) if impacts.shape[0] else np.zeros(0, np.float32),
    )


class ImpactCopier:
    """Sizes and takes the impact lists for :class:`~governed_evidence.search.copies.MemoryCopy`."""

    kind = "keyword_impacts"

    def needed_bytes(self, conn: apsw.Connection, level: Classification) -> int:
        # Tokens bound postings from above (a row's repeated term is one posting).
        totals, terms = _probe_totals(conn, level)
        if totals is None:
            return 0
        tokens = int(totals.rows * totals.average_length)
        return POSTING_BYTES * tokens + 8 * totals.rows + _TERM_BYTES * terms

    def copy(self, conn: apsw.Connection, level: Classification, cancelled: Callable[[], bool]) -> ImpactIndex | None:
        return load_impacts(conn, level, cancelled)
