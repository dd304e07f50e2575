"""The keyword side: FTS5's bm25 ranking, and the coverage signal the gate reads.

With the level's impact lists in memory (:mod:`impacts`, copied from the full-text index in
the background) the whole query is ranked there and nothing below runs. Until then, or
without the memory for them, FTS5 ranks. Over a small table one FTS5 query over every word
of the query is the cheapest plan. When the whole OR query would touch too many rows, FTS5
gets only the rarest words
(:func:`bm25.selective_prefix`), returns a few times more candidates than needed, and those
are re-scored with the whole query by the Python copy of FTS5's bm25 (:mod:`bm25`), using
the table's own row count and average length.
"""

from __future__ import annotations

import apsw
import numpy as np

from governed_evidence.search import bm25, sql
from governed_evidence.search.candidates import RowCache
from governed_evidence.search.impacts import ImpactIndex
from governed_evidence.search.plan import QueryPlan
from governed_evidence.search.query import match_expression

__all__ = ["KeywordRanker", "coverage"]


class KeywordRanker:
    """Ranks by bm25; remembers one table's totals per index file generation."""

    def __init__(self) -> None:
        self._totals: dict[tuple[tuple[int, int], int], bm25.TableTotals] = {}

    def rank(
        self,
        conn: apsw.Connection,
        generation: tuple[int, int],
        plan: QueryPlan,
        depth: int,
        cache: RowCache,
        impacts: ImpactIndex | None = None,
    ) -> list[int]:
        """Passage ids, best first: the impact lists or FTS5 over the whole query, or FTS5 over
        its selective words re-scored."""
        tokens, phrases = list(plan.tokens), list(plan.phrases)
        if not tokens:
            return []
        # A token without exactly one stem is a multi-token phrase to FTS5; only FTS5 scores it.
        if impacts is not None and impacts.level == plan.level and "" not in phrases:
            return impacts.rank(phrases, depth)
        keep = bm25.selective_prefix(phrases, dict(plan.frequencies), plan.table_rows)
        present = [i for i in keep if plan.frequencies.get(phrases[i], 0) > 0]
        totals = None
        if len(keep) < len(tokens) and present and "" not in phrases:
            # Table statistics come from FTS5 itself, through any row the probe word matches.
            totals = self._table_totals(conn, generation, plan, match_expression([tokens[present[0]]]))
        if totals is None:
            return sql.keyword_ranking(conn, plan.level, match_expression(tokens), depth)
        candidates = sql.keyword_ranking(
            conn, plan.level, match_expression([tokens[i] for i in keep]), depth * bm25.CANDIDATE_FACTOR
        )
        cache.fetch(candidates)
        idfs = [bm25.idf(totals.rows, plan.frequencies.get(p, 0)) for p in phrases]
        terms = cache.terms()
        scores = {
            pid: bm25.score(phrases, idfs, terms[pid], sql.BM25_WEIGHTS, totals) for pid in candidates if pid in terms
        }
        return sorted(scores, key=lambda pid: (-scores[pid], pid))[:depth]

    def _table_totals(
        self, conn: apsw.Connection, generation: tuple[int, int], plan: QueryPlan, probe: str
    ) -> bm25.TableTotals | None:
        key = (generation, int(plan.level))
        if key not in self._totals:
            totals = bm25.table_totals(conn, plan.level, probe)
            if totals is None:
                return None
            self._totals = {key: totals}
        return self._totals[key]


def coverage(plan: QueryPlan, cache: RowCache, impacts: ImpactIndex | None, ids: np.ndarray) -> np.ndarray:
    """IDF-weighted share of the query's stems present in each passage of ``ids`` (0-1; the
    passages were read into ``cache`` as visible): which stems a passage holds comes from the
    impact lists when they are of this level, else from tokenising the rows."""
    if not plan.stems:
        return np.zeros(ids.shape[0], dtype=np.float64)
    weights = {s: bm25.coverage_idf(plan.table_rows, plan.frequencies.get(s, 0)) for s in plan.stems}
    denominator = sum(weights.values()) or 1.0
    if impacts is not None and impacts.level == plan.level:
        held = impacts.held_weights(weights, ids)
    else:
        sets = cache.term_sets()
        held = np.asarray(
            [sum(w for s, w in weights.items() if s in sets[pid]) for pid in ids.tolist()], dtype=np.float64
        )
    shares: np.ndarray = held / denominator
    return shares
