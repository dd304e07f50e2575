"""The pure parts of benchmarks/fusion_weight.py: the order it measures is the product's at each
weight, SciFact is read in that order, and the rule that chooses the weight. The measurement
itself (real model, real corpora) is run by hand; nothing here is timed."""

from __future__ import annotations

import pytest

from benchmarks.fusion_weight import WEIGHTS, Item, _Score, choose, ordered, rule, scifact_ndcg
from governed_evidence.search import candidates as ranking

# In fused order: a is ranked best by both sides but least confident.
A, B, C = Item("a", 0.40, _Score(0.032)), Item("b", 0.55, _Score(0.016)), Item("c", 0.60, _Score(0.008))


def test_the_order_at_each_weight_is_the_products() -> None:
    assert [i.document for i in ordered([A, B, C], 0.0)] == ["c", "b", "a"]
    assert [i.document for i in ordered([A, B, C], ranking.FUSION_WEIGHT)] == ["a", "b", "c"]
    order = ranking.confident_order([0.40, 0.55, 0.60], [0.032, 0.016, 0.008], ranking.RERANK_DEPTH, 0.625)
    assert ordered([A, B, C], 0.625) == [[A, B, C][i] for i in order]


def test_the_shipped_weight_and_confidence_alone_are_among_those_tried() -> None:
    assert ranking.FUSION_WEIGHT in WEIGHTS and 0.0 in WEIGHTS


def test_scifact_is_scored_in_the_order_at_the_weight() -> None:
    queries = [([A, B, C], {"a": 1})]
    assert scifact_ndcg(queries, ranking.FUSION_WEIGHT) == pytest.approx(1.0)
    assert scifact_ndcg(queries, 0.0) == pytest.approx(0.5)  # third: 1 / log2(4)


def _corpus(**by_weight: float) -> dict[float, dict[str, float]]:
    keys = ("answerable_hit@1", "paraphrase_hit@3", "paraphrase_normal_hit@3", "page@10")
    return {float(w[1:].replace("_", ".")): dict.fromkeys(keys, v) for w, v in by_weight.items()}


def test_the_rule_sums_the_policy_mean_and_scifact() -> None:
    policy = {"x": {"answerable_hit@1": 1.0, "paraphrase_hit@3": 0.5, "paraphrase_normal_hit@3": 0.5, "page@10": 1.0}}
    assert rule(policy, 0.7) == pytest.approx(3.7)
    assert rule({**policy, "y": dict.fromkeys(policy["x"], 0.0)}, None) == pytest.approx(1.5)


def test_choose_takes_the_best_rule_sum_and_the_smaller_weight_on_a_tie() -> None:
    policy = {"x": _corpus(w0=0.5, w0_5=0.6, w1=0.6)}
    assert choose(policy, None, (0.0, 0.5, 1.0)) == 0.5
    # SciFact breaks the tie the other way.
    assert choose(policy, {0.0: 0.70, 0.5: 0.71, 1.0: 0.72}, (0.0, 0.5, 1.0)) == 1.0
