"""The fusion and the document interleaving as mathematics, without an index or a model.

Expected scores are worked out by hand from the RRF formula in the comments: an item at
rank r of a list contributes ``weight / (k + r)``; a keyword contribution is further
multiplied by ``coverage ** 0.5`` (the coverage exponent).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pytest

from governed_evidence.search.candidates import FUSION_WEIGHT, confident_order
from governed_evidence.search.fusion import COVERAGE_EXPONENT, RRF_K, Fused
from governed_evidence.search.gate import documents_first
from tests.search.reference import fused as fuse
from tests.search.reference import fused_one_passage_at_a_time

SEED = 20240611
CASES = 200


def _ids(items: list[Fused]) -> list[int]:
    return [f.passage_id for f in items]


def test_constants_the_hand_computations_assume() -> None:
    assert RRF_K == 60
    assert COVERAGE_EXPONENT == 0.5


def test_item_in_both_lists_sums_both_contributions() -> None:
    out = {f.passage_id: f for f in fuse([1, 2], [2, 3], {1: 0.25, 2: 1.0})}
    # id 2: keyword rank 2 at full coverage (1**0.5 = 1) -> 1/62; semantic rank 1 -> 1/61.
    assert out[2].score == pytest.approx(1 / 62 + 1 / 61, rel=1e-12)
    assert (out[2].keyword_rank, out[2].semantic_rank) == (2, 1)
    # id 1: keyword rank 1 only, coverage 0.25 -> 0.25**0.5 = 0.5 -> 0.5/61.
    assert out[1].score == pytest.approx(0.5 / 61, rel=1e-12)
    assert (out[1].keyword_rank, out[1].semantic_rank) == (1, None)
    # id 3: semantic rank 2 only -> 1/62; coverage never touches the semantic side.
    assert out[3].score == pytest.approx(1 / 62, rel=1e-12)
    assert (out[3].keyword_rank, out[3].semantic_rank) == (None, 2)
    # 1/61+1/62 > 1/62 > 0.5/61: the half-covered keyword hit falls below a semantic-only one.
    assert _ids(fuse([1, 2], [2, 3], {1: 0.25, 2: 1.0})) == [2, 3, 1]


def test_the_k_argument() -> None:
    [item] = fuse([7], [7], {7: 0.09}, k=10)
    assert item.score == pytest.approx(0.3 / 11 + 1 / 11)


def test_zero_or_missing_coverage_zeroes_the_keyword_contribution() -> None:
    out = {f.passage_id: f for f in fuse([5, 6], [6], {5: 0.0})}
    assert out[5].score == 0.0  # 0.0**0.5 = 0, still listed as a keyword match
    assert out[5].matched_by == "keyword"
    # id 6 has no coverage entry (read as 0): only its semantic rank 1 counts, 1/61.
    assert out[6].score == pytest.approx(1 / 61, rel=1e-12)
    assert out[6].matched_by == "both"


def test_ties_break_on_semantic_rank_before_keyword_rank_and_id() -> None:
    # k=0 makes exact ties: id 9 semantic rank 1 -> 1/1 = 1.0; id 3 semantic rank 2 (1/2)
    # plus keyword rank 1 at coverage 0.25 (0.5/1) -> 1.0. Semantic rank 1 wins although
    # id 3 has the better keyword rank and the smaller id.
    out = fuse([3], [9, 3], {3: 0.25}, k=0)
    assert [(f.passage_id, f.score) for f in out] == [(9, 1.0), (3, 1.0)]
    # id 8 semantic rank 2 only -> 1/2; id 2 keyword rank 1 at coverage 0.25 -> 0.5/1.
    # Tie: a semantic rank beats none, although id 2 has keyword rank 1 and the smaller id.
    out = fuse([2], [1, 8], {2: 0.25}, k=0)
    assert [(f.passage_id, f.score) for f in out] == [(1, 1.0), (8, 0.5), (2, 0.5)]


def test_ties_without_semantic_ranks_break_on_keyword_rank() -> None:
    # Both uncovered keyword hits score 0; keyword rank decides, not the passage id.
    assert _ids(fuse([9, 4], [], {})) == [9, 4]
    assert _ids(fuse([4, 9], [], {})) == [4, 9]


def test_matched_by() -> None:
    out = {f.passage_id: f.matched_by for f in fuse([1, 2], [2, 3], {1: 1.0, 2: 1.0})}
    assert out == {1: "keyword", 2: "both", 3: "semantic"}


def test_empty_inputs() -> None:
    assert fuse([], [], {}) == []
    assert fuse([], [], {1: 1.0}) == []  # coverage alone lists nothing
    assert _ids(fuse([3, 1], [], {3: 1.0, 1: 1.0})) == [3, 1]
    assert _ids(fuse([], [3, 1], {})) == [3, 1]


def _random_case(rng: random.Random) -> tuple[list[int], list[int], dict[int, float]]:
    pool = list(range(40))
    keyword = rng.sample(pool, rng.randint(0, 20))
    semantic = rng.sample(pool, rng.randint(0, 20))
    coverage = {pid: rng.random() for pid in keyword if rng.random() < 0.8}
    return keyword, semantic, coverage


def test_random_lists_fuse_to_a_sorted_permutation_of_the_union() -> None:
    rng = random.Random(SEED)
    for _ in range(CASES):
        keyword, semantic, coverage = _random_case(rng)
        out = fuse(keyword, semantic, coverage)
        ids = _ids(out)
        assert len(ids) == len(set(ids))
        assert set(ids) == set(keyword) | set(semantic)
        scores = [f.score for f in out]
        assert all(a >= b for a, b in pairwise(scores))
        for f in out:
            kr = keyword.index(f.passage_id) + 1 if f.passage_id in keyword else None
            sr = semantic.index(f.passage_id) + 1 if f.passage_id in semantic else None
            assert (f.keyword_rank, f.semantic_rank) == (kr, sr)
            expected = (coverage.get(f.passage_id, 0.0) ** 0.5 / (60 + kr) if kr else 0.0) + (
                1 / (60 + sr) if sr else 0.0
            )
            assert f.score == pytest.approx(expected, rel=1e-12)


def test_first_in_both_lists_at_full_coverage_is_first() -> None:
    rng = random.Random(SEED + 1)
    for _ in range(CASES):
        keyword, semantic, coverage = _random_case(rng)
        top = 99  # outside the pool of the random lists
        coverage[top] = 1.0
        # 2/61 against at most 1/62 + 1/62 for anyone else.
        assert fuse([top, *keyword], [top, *semantic], coverage)[0].passage_id == top


@dataclass(frozen=True)
class _Item:
    id: int
    document: str
    fused: Fused
    confidence: float


def _build(documents: list[str]) -> list[_Item]:
    return [_Item(i, d, Fused(i, 0.0, None, i), 0.0) for i, d in enumerate(documents)]


def _pids(items: list[_Item]) -> list[int]:
    return [c.id for c in items]


def _first(items: list[_Item]) -> list[_Item]:
    return documents_first(items, [c.document for c in items])


def test_documents_first_worked_example() -> None:
    # Rounds: a0 a1 b0 a2 c0 b1 -> round 0 (0, 2, 4), round 1 (1, 5), round 2 (3).
    out = _first(_build(["a", "a", "b", "a", "c", "b"]))
    assert _pids(out) == [0, 2, 4, 1, 5, 3]
    assert [c.document for c in out] == ["a", "b", "c", "a", "b", "a"]


def test_documents_first_edge_cases() -> None:
    assert _first([]) == []
    assert _pids(_first(_build(["a", "a", "a"]))) == [0, 1, 2]
    assert _pids(_first(_build(["a", "b", "c"]))) == [0, 1, 2]


def _first_appearances(documents: list[str]) -> list[str]:
    return list(dict.fromkeys(documents))


def test_documents_first_properties_over_random_lists() -> None:
    rng = random.Random(SEED + 2)
    for _ in range(CASES):
        documents = [rng.choice("abcdef") for _ in range(rng.randint(0, 25))]
        candidates = _build(documents)
        out = _first(candidates)
        # A permutation of the very same objects.
        assert sorted(_pids(out)) == list(range(len(candidates)))
        assert all(any(c is o for c in candidates) for o in out)
        # The round of each output item (its index within its document, counted in the input).
        seen: dict[str, int] = {}
        round_of: dict[int, int] = {}
        for c in candidates:
            round_of[c.id] = seen.get(c.document, 0)
            seen[c.document] = round_of[c.id] + 1
        rounds = [round_of[c.id] for c in out]
        # Every first passage precedes every second one, and so on.
        assert rounds == sorted(rounds)
        # Stable within a round: input order kept.
        for r in set(rounds):
            in_round = [c.id for c in out if round_of[c.id] == r]
            assert in_round == sorted(in_round)
        # Documents first appear in the same order; each document's passages keep their order.
        assert _first_appearances([c.document for c in out]) == _first_appearances(documents)
        for d in set(documents):
            mine = [c.id for c in out if c.document == d]
            assert mine == sorted(mine)
        # Idempotent.
        assert _pids(_first(out)) == _pids(out)


def _scored(pid: int, fused: float, confidence: float) -> _Item:
    return _Item(pid, f"d{pid}", Fused(pid, fused, None, pid), confidence)


def confident_first(items: list[_Item], depth: int, weight: float = 0.0) -> list[_Item]:
    order = confident_order([c.confidence for c in items], [c.fused.score for c in items], depth, weight)
    return [items[i] for i in order]


def test_the_hybrid_order_is_confidence_plus_the_weighted_fused_score_over_the_best() -> None:
    assert FUSION_WEIGHT == 0.625
    # In fused order: best fused score 0.032 (scale 0.625 / 0.032).
    a, b, c, d = _scored(1, 0.032, 0.40), _scored(2, 0.016, 0.55), _scored(3, 0.008, 0.60), _scored(4, 0.004, 0.9)
    # Keys: a 0.40 + 0.625 = 1.025; b 0.55 + 0.3125 = 0.8625; c 0.60 + 0.15625 = 0.75625; d outside the depth.
    assert _pids(confident_first([a, b, c, d], 3, FUSION_WEIGHT)) == [1, 2, 3, 4]
    # By confidence alone (weight 0) the least agreed-on passage comes first.
    assert _pids(confident_first([a, b, c, d], 3)) == [3, 2, 1, 4]
    # A weight that lets confidence decide between b and a: a 0.40 + 0.1 = 0.5 < b 0.55 + 0.05 = 0.6.
    assert _pids(confident_first([a, b, c], 3, 0.1)) == [3, 2, 1]  # c 0.6 + 0.025 = 0.625 first
    # Equal keys keep the fused order (a stable sort).
    e, f = _scored(5, 0.02, 0.5), _scored(6, 0.02, 0.5)
    assert _pids(confident_first([e, f], 2, FUSION_WEIGHT)) == [5, 6]


def test_without_a_fused_score_the_order_is_by_confidence() -> None:
    # Keyword-only or empty fused scores (0) cannot be scaled: confidence alone orders them.
    a, b = _scored(1, 0.0, 0.3), _scored(2, 0.0, 0.7)
    assert _pids(confident_first([a, b], 2, FUSION_WEIGHT)) == [2, 1]
    assert confident_first([], 10, FUSION_WEIGHT) == []


def test_the_array_fusion_equals_fusion_a_passage_at_a_time() -> None:
    """The same passages with the same ranks and scores (to rounding), in the same order but
    among exactly tied scores."""
    rng = random.Random(SEED)
    ties = 0
    for _ in range(CASES * 5):
        pool = rng.sample(range(1, 400), 90)
        keyword = pool[: rng.randint(0, 50)]
        semantic = rng.sample(pool[20:], rng.randint(0, 50))
        # Few distinct coverages, and k = 0 or 1, make exact ties that the tie rule must break.
        coverage = {p: rng.choice([0.0, 0.25, 1.0, rng.random()]) for p in pool}
        k = rng.choice([0, 1, RRF_K])
        expected = fused_one_passage_at_a_time(keyword, semantic, coverage, k)
        got = fuse(keyword, semantic, coverage, k=k)
        by_id = {f.passage_id: f for f in got}
        assert sorted(by_id) == sorted(p for p, *_ in expected)
        for pid, score, keyword_rank, semantic_rank in expected:
            assert (by_id[pid].keyword_rank, by_id[pid].semantic_rank) == (keyword_rank, semantic_rank)
            assert by_id[pid].score == pytest.approx(score, rel=1e-12, abs=1e-15)
        # Ordered by score; where scores are tied to rounding, by the tie rule.
        for a, b in pairwise(got):
            assert a.score >= b.score - 1e-12
        ties += sum(abs(a[1] - b[1]) < 1e-15 for a, b in pairwise(expected))
    assert ties > 100


def test_a_ranking_that_lists_a_passage_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="more than once"):
        fuse([1, 2, 1], [3], {})
    with pytest.raises(ValueError, match="more than once"):
        fuse([1], [3, 3], {})


def _confident_order_by_sorted(confidence: list[float], fused: list[float], depth: int, weight: float) -> list[int]:
    """The hybrid order one key at a time, by Python's stable sort: the oracle of the array one."""
    head = range(min(depth, len(confidence)))
    best = max((fused[i] for i in head), default=0.0) if weight else 0.0
    if best <= 0.0:
        keys = [-confidence[i] for i in head]
    else:
        scale = weight / best
        keys = [-(confidence[i] + scale * fused[i]) for i in head]
    return [*sorted(head, key=keys.__getitem__), *range(len(head), len(confidence))]


def test_the_hybrid_order_equals_a_stable_sort_of_the_same_keys() -> None:
    rng = random.Random(SEED)
    equal_keys = 0
    for _ in range(CASES * 5):
        n = rng.randint(0, 110)
        # Confidences at two places and fused scores from a few values: many equal keys.
        confidence = [round(rng.random(), 2) for _ in range(n)]
        fused = [rng.choice([0.0, 1 / 61, 1 / 62, 2 / 61, rng.random() / 30]) for _ in range(n)]
        depth = rng.choice([0, 5, 100])
        weight = rng.choice([0.0, FUSION_WEIGHT])
        expected = _confident_order_by_sorted(confidence, fused, depth, weight)
        assert confident_order(confidence, fused, depth, weight) == expected
        assert confident_order(np.asarray(confidence), np.asarray(fused), depth, weight) == expected
        equal_keys += n - len(set(zip(confidence[:depth], fused[:depth], strict=True)))
    assert equal_keys > 100
