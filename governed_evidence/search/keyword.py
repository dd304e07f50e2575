"""The keyword stage: FTS5's bm25 ranking at the caller's level, and the coverage signal.

With the level's impact lists in memory (:mod:`impacts`, copied from the full-text index in
the background) the whole query is ranked there; until then, or without the memory for them,
FTS5 ranks the same OR query itself. Both give FTS5's bm25 order (the impact lists to float32
precision, checked against FTS5 in tests/search/test_impacts.py).
"""

from __future__ import annotations

import apsw
import numpy as np

from governed_evidence.search import bm25, sql
from governed_evidence.search.impacts import ImpactIndex
from governed_evidence.search.plan import QueryPlan
from governed_evidence.search.query import index_tokenizer, match_expression
from governed_evidence.search.strategy import Strategy
from governed_evidence.search.tuning import SearchTuning

__all__ = ["coverage", "rank_keywords"]


def rank_keywords(
    conn: apsw.Connection,
    plan: QueryPlan,
    depth: int,
    impacts: ImpactIndex | None,
    strategy: Strategy,
    tuning: SearchTuning,
) -> list[int]:
    """Passage ids, best first, at most ``depth``: from the impact lists the strategy names, else FTS5."""
    if not plan.tokens:
        return []
    # A token without exactly one stem is a multi-token phrase to FTS5; only FTS5 scores it.
    if impacts is not None and strategy.keyword != "FTS5" and "" not in plan.phrases:
        pruned = tuning.essential_share if strategy.keyword == "impact lists, MaxScore" else None
        return impacts.rank(plan.phrases, depth, essential_share=pruned)
    return sql.keyword_ranking(conn, plan.level, match_expression(list(plan.tokens)), depth)


def coverage(conn: apsw.Connection, plan: QueryPlan, impacts: ImpactIndex | None, ids: np.ndarray) -> np.ndarray:
    """IDF-weighted share of the query's stems present in each passage of ``ids`` (0-1; ids
    already checked visible at the plan's level): which stems a passage holds comes from the
    impact lists when they are held, else from tokenising its row as the index did."""
    if not plan.stems or not ids.shape[0]:
        return np.zeros(ids.shape[0], dtype=np.float64)
    weights = {s: bm25.coverage_idf(plan.table_rows, plan.frequencies.get(s, 0)) for s in plan.stems}
    denominator = sum(weights.values()) or 1.0
    if impacts is not None:
        held = impacts.held_weights(weights, ids)
    else:
        tokenizer = index_tokenizer(conn)
        rows = sql.passages_by_id(conn, plan.level, set(ids.tolist()))
        sets = {
            pid: bm25.row_term_set(tokenizer, (row.title, row.heading, row.search_text)) for pid, row in rows.items()
        }
        held = np.asarray(
            [sum(w for s, w in weights.items() if s in sets.get(pid, ())) for pid in ids.tolist()], dtype=np.float64
        )
    shares: np.ndarray = held / denominator
    return shares
