"""The pure parts of benchmarks/rerank_depth.py: the reordering it applies is the product's, the
fused order it starts from is the product's with the reordering switched off (and only while it
ranks), and the rule that chooses the depth. The measurement itself (real model, real corpora) is
run by hand; nothing here is timed."""

from __future__ import annotations

import pytest

from benchmarks.rerank_depth import (
    BEFORE,
    DEPTHS,
    choose_depth,
    fused_order,
    reordered,
    scifact_ndcg,
    score,
)
from benchmarks.sentence_similarity import Scored
from governed_evidence.search import candidates as ranking

A, B, C, D = (Scored("a", 0.2), Scored("b", 0.9), Scored("c", 0.5), Scored("d", 0.9))


def test_reordering_sorts_only_the_first_depth_candidates_by_confidence_keeping_ties_in_order() -> None:
    fused = (A, B, C, D)
    assert reordered(fused, 0) == fused
    assert reordered(fused, 1) == fused
    assert reordered(fused, 3) == (B, C, A, D)
    # b and d tie at 0.9: the fused order between them is kept, as the product's stable sort keeps it.
    assert reordered(fused, 4) == (B, D, C, A)
    assert reordered(fused, 100) == (B, D, C, A)


def test_the_shipped_depth_and_the_one_before_are_among_those_tried() -> None:
    assert ranking.RERANK_DEPTH in DEPTHS
    assert BEFORE in DEPTHS and 0 in DEPTHS


def test_the_fused_order_switches_the_products_reordering_off_only_while_it_ranks() -> None:
    shipped = ranking.RERANK_DEPTH
    with fused_order():
        assert ranking.RERANK_DEPTH == 0
    assert shipped == ranking.RERANK_DEPTH
    with pytest.raises(RuntimeError), fused_order():
        raise RuntimeError("a ranking failed")
    assert shipped == ranking.RERANK_DEPTH


def test_scifact_ndcg_reads_the_documents_in_their_reordered_order() -> None:
    # One query whose only relevant document is "a", last by confidence.
    queries = [((A, B), {"a": 1})]
    assert scifact_ndcg(queries, 0) == pytest.approx(1.0)
    assert scifact_ndcg(queries, 2) == pytest.approx(1 / 1.5849625, rel=1e-6)  # 1 / log2(3)


def _policy(**by_depth: float) -> dict[int, dict[str, float]]:
    """One corpus whose four rule metrics are all ``by_depth[depth]``."""
    keys = ("answerable_hit@1", "paraphrase_hit@3", "paraphrase_normal_hit@3", "page@10")
    return {int(d[1:]): dict.fromkeys(keys, v) for d, v in by_depth.items()}


def test_the_rule_sums_the_policy_means_and_scifact() -> None:
    policy = {"x": _policy(d0=0.5, d20=1.0), "y": _policy(d0=0.5, d20=0.0)}
    # x and y average to 0.5 on each metric at both depths: 2.0, plus SciFact's figure.
    assert score(policy, {0: 0.7, 20: 0.6}, 0) == pytest.approx(2.7)
    assert score(policy, {0: 0.7, 20: 0.6}, 20) == pytest.approx(2.6)
    assert score(policy, None, 20) == pytest.approx(2.0)


def test_the_best_sum_wins_and_a_tie_goes_to_the_depth_nearest_the_shipped_one() -> None:
    policy = {"x": _policy(d0=0.5, d10=0.75, d20=0.75, d30=0.75)}
    assert choose_depth(policy, None, depths=(0, 10, 20, 30)) == 20
    # 10 and 30 tie and are as near the depth shipped before (20): the shallower.
    assert choose_depth(policy, None, depths=(0, 10, 30)) == 10
    assert choose_depth(policy, None, depths=(0, 30, 10)) == 10
    # The sum decides before nearness.
    assert choose_depth(policy, {0: 0.0, 10: 0.0, 20: 0.0, 30: 0.1}, depths=(0, 10, 20, 30)) == 30


def _sample(paraphrase_hit3: float, page10: float) -> dict[str, float]:
    """The sample corpus's figures with the release gate's bounds otherwise met."""
    return {
        "answerable_hit@1": 1.0,
        "answerable_hit@3": 1.0,
        "answerable_false_abstention": 0.0,
        "paraphrase_hit@3": paraphrase_hit3,
        "paraphrase_normal_hit@3": paraphrase_hit3,
        "paraphrase_false_abstention": 0.0,
        "page@10": page10,
        "abstention": 0.6,
    }


def test_a_depth_that_breaks_the_release_gate_on_the_sample_corpus_is_never_chosen() -> None:
    # Depth 0 scores best but the sample corpus's paraphrase hit@3 (0.70) is under evals/gate.toml's 0.80;
    # depth 10 meets it but its page@10 is under the suites' 0.90.
    sample = {0: _sample(0.70, 1.0), 10: _sample(0.99, 0.85), 20: _sample(0.85, 0.95)}
    assert choose_depth({"sample": sample}, {0: 1.0, 10: 1.0, 20: 0.0}, depths=(0, 10, 20)) == 20
    with pytest.raises(ValueError, match="no depth keeps"):
        choose_depth({"sample": sample}, None, depths=(0, 10))
