"""A ranking as columns: the candidates built from them, and the gate over them, are the ones the
object-by-object path gives, on a real index at every ceiling, mode and threshold."""

from __future__ import annotations

from pathlib import Path

import pytest

from governed_evidence.config import Classification
from governed_evidence.search.gate import apply_gate, gate_positions
from governed_evidence.search.ranking import FUSION_WEIGHT, RERANK_DEPTH, confident_first, gate_ranking
from governed_evidence.search.service import SearchService
from tests.helpers import SMALL_CORPUS_QUERIES, HashEmbedder

QUERIES = [*SMALL_CORPUS_QUERIES, "who approves a new laptop"]


@pytest.mark.parametrize("ceiling", list(Classification))
def test_gate_over_columns_keeps_what_the_gate_over_candidates_keeps(
    built_index: Path, hash_embedder: HashEmbedder, ceiling: Classification
) -> None:
    service = SearchService(built_index, ceiling=ceiling, embedder_factory=lambda: hash_embedder)
    compared = 0
    for query in QUERIES:
        for mode in ("hybrid", "semantic", "keyword"):
            ranking = service.rank(query, mode)
            candidates = ranking.candidates
            if mode == "hybrid":
                # The columns' order is confident_first over the fused order.
                big = 10**9
                fused_order = sorted(
                    candidates,
                    key=lambda c: (
                        -c.fused.score,
                        c.fused.semantic_rank or big,
                        c.fused.keyword_rank or big,
                        c.fused.passage_id,
                    ),
                )
                assert [c.fused.passage_id for c in confident_first(fused_order, RERANK_DEPTH, FUSION_WEIGHT)] == [
                    c.fused.passage_id for c in candidates
                ]
            for threshold in (0.0, 0.2, 0.4, 0.6, 1.1):
                for enabled in (True, False):
                    for limit in (1, 3, 10):
                        expected = apply_gate(
                            candidates,
                            threshold=threshold,
                            enabled=enabled,
                            limit=limit,
                            document=lambda c: c.head.document_id,
                        )
                        got = gate_ranking(ranking, threshold=threshold, enabled=enabled, limit=limit)
                        assert [c.fused.passage_id for c in got.kept] == [c.fused.passage_id for c in expected.kept]
                        assert [(c.confidence, c.signals, c.document) for c in got.kept] == [
                            (c.confidence, c.signals, c.document) for c in expected.kept
                        ]
                        assert (got.withheld, got.best) == (expected.withheld, expected.best)
                        compared += len(expected.kept)
    assert compared > 0


def test_gate_positions_names_documents_only_of_what_passes() -> None:
    asked: list[int] = []

    def document(i: int) -> str:
        asked.append(i)
        return "ab"[i % 2]

    kept, withheld, best = gate_positions([0.9, 0.1, 0.5, 0.7, 0.2], document, threshold=0.4, enabled=True, limit=2)
    assert sorted(asked) == [0, 2, 3]
    # Passing: 0 (a), 2 (a), 3 (b): documents first gives 0, 3, then 2; the limit keeps two.
    assert (kept, withheld, best) == ([0, 3], 2, 0.9)
