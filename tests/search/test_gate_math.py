"""The confidence gate as mathematics: hand-computed values, monotonicity, bounds, the gate.

With calibration floor f, ceiling c, distinct_scale s, distinct_base b, coverage_weight w:

    semantic = clip((sim - f) / (c - f)) * (b + (1 - b) * clip((sim - background) / s))
    keyword  = w * coverage**2
    confidence = round(1 - (1 - semantic) * (1 - keyword), 4)     (coverage**1.5 without sim)

The worked examples use CAL (floor 0.2, ceiling 0.6, defaults s=0.25, b=0.5, w=0.8).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pytest

from governed_evidence.embeddings.calibration import CALIBRATIONS, ModelCalibration, calibration_for
from governed_evidence.search.confidence import Signals, background_similarity, confidences
from governed_evidence.search.gate import documents_first, gate
from tests.search.reference import confidence, confidence_one_at_a_time

CAL = ModelCalibration(floor=0.2, ceiling=0.6)
MINILM = "sentence-transformers/all-MiniLM-L6-v2@int8-onnx"


def conf(similarity: float | None, coverage: float, background: float | None = None) -> float:
    return confidence(Signals(similarity, coverage, False, background), CAL)


def test_calibration_defaults_the_worked_examples_assume() -> None:
    assert (CAL.distinct_scale, CAL.distinct_base, CAL.coverage_weight) == (0.25, 0.5, 0.8)


@pytest.mark.parametrize(
    ("coverage", "expected"),
    [(0.64, 0.512), (0.25, 0.125), (1.0, 1.0), (0.0, 0.0), (1.7, 1.0), (-0.2, 0.0)],
)
def test_without_similarity_coverage_to_the_power_1_5(coverage: float, expected: float) -> None:
    # 0.64**1.5 = 0.8**3 = 0.512; 0.25**1.5 = 0.5**3 = 0.125; out-of-range coverage is clipped.
    assert conf(None, coverage) == expected
    assert conf(None, coverage, background=0.9) == expected  # background needs a similarity


@pytest.mark.parametrize("similarity", [0.2, 0.1, -0.3])
def test_at_or_below_floor_without_coverage_is_zero(similarity: float) -> None:
    assert conf(similarity, 0.0) == 0.0
    assert conf(similarity, 0.0, background=0.0) == 0.0


@pytest.mark.parametrize(("similarity", "background"), [(0.6, 0.1), (0.9, 0.0), (1.2, -0.3)])
def test_at_or_above_ceiling_and_far_above_background_is_one(similarity: float, background: float) -> None:
    # semantic clip(>=1) = 1; distinct clip((sim - bg) / 0.25 >= 2) = 1 -> factor 1.
    assert conf(similarity, 0.0, background) == 1.0
    assert conf(similarity, 0.0) == 1.0


def test_noisy_or_of_semantic_and_keyword() -> None:
    # sim 0.4 -> semantic (0.4-0.2)/0.4 = 0.5; coverage 0.5 -> keyword 0.8*0.25 = 0.2.
    # 1 - (1-0.5)*(1-0.2) = 1 - 0.4 = 0.6.
    assert conf(0.4, 0.5) == 0.6
    assert conf(0.4, 0.0) == 0.5  # keyword part 0
    # At the floor only the keyword part counts: full coverage -> 0.8, half -> 0.2.
    assert conf(0.2, 1.0) == 0.8
    assert conf(0.2, 0.5) == 0.2
    # sim 0.3 -> semantic 0.25; coverage 1 -> keyword 0.8: 1 - 0.75*0.2 = 0.85.
    assert conf(0.3, 1.0) == 0.85


@pytest.mark.parametrize(
    ("background", "expected"),
    [
        (0.6, 0.5),  # no higher than the background: distinct 0 -> factor distinct_base 0.5
        (0.8, 0.5),  # below the background: distinct clipped to 0
        (0.5, 0.7),  # distinct 0.1/0.25 = 0.4 -> factor 0.5 + 0.5*0.4 = 0.7
        (0.45, 0.8),  # distinct 0.15/0.25 = 0.6 -> factor 0.8
        (0.35, 1.0),  # distinct 0.25/0.25 = 1 -> factor 1
        (0.0, 1.0),  # distinct 2.4 clipped to 1
    ],
)
def test_distinctness_factor_between_base_and_one(background: float, expected: float) -> None:
    assert conf(0.6, 0.0, background) == expected  # semantic before the factor: 1


def test_distinctness_and_coverage_combined() -> None:
    # sim 0.4: semantic 0.5; background 0.3: distinct 0.4 -> factor 0.7 -> semantic 0.35.
    # coverage 0.5: keyword 0.2. 1 - 0.65*0.8 = 0.48.
    assert conf(0.4, 0.5, 0.3) == 0.48


SIMS = [-0.3 + 0.05 * i for i in range(31)]  # -0.3 .. 1.2
COVS = [-0.2 + 0.1 * i for i in range(20)]  # -0.2 .. 1.7
BACKGROUNDS: list[float | None] = [None, -0.3, 0.0, 0.1, 0.2, 0.3, 0.45, 0.6, 0.9, 1.2]
CALIBRATION_SET = [CAL, calibration_for(MINILM), calibration_for(None), ModelCalibration(0.1, 0.9, 0.1, 0.2, 0.5)]


def test_confidence_is_monotone_and_bounded_over_a_grid() -> None:
    checked = 0
    for cal in CALIBRATION_SET:
        for bg in BACKGROUNDS:
            grid = [[confidence(Signals(s, c, False, bg), cal) for c in COVS] for s in SIMS]
            for row in grid:
                assert all(0.0 <= v <= 1.0 for v in row)
                assert all(a <= b for a, b in pairwise(row))  # in coverage
            for column in zip(*grid, strict=True):
                assert all(a <= b for a, b in pairwise(column))  # in similarity
            checked += len(SIMS) * len(COVS)
        real = [b for b in BACKGROUNDS if b is not None]
        for s in SIMS:
            for c in COVS:
                values = [confidence(Signals(s, c, False, b), cal) for b in real]
                assert all(a >= b for a, b in pairwise(values))  # in background
        keyword_only = [confidence(Signals(None, c, False), cal) for c in COVS]
        assert all(0.0 <= v <= 1.0 for v in keyword_only)
        assert all(a <= b for a, b in pairwise(keyword_only))
    assert checked == 4 * 10 * 31 * 20
    # The grid is not flat: it reaches both ends.
    assert conf(-0.3, -0.2) == 0.0
    assert conf(1.2, 1.7, -0.3) == 1.0


def test_confidences_of_a_query_equal_the_formula_one_candidate_at_a_time() -> None:
    # A batch gives each candidate what the formula gives it alone (the background shared,
    # None per candidate): the grid, its edges (floor, ceiling, clipping) and random values.
    rng = random.Random(7)
    pairs: list[tuple[float | None, float]] = [(s, c) for s in [*SIMS, None] for c in COVS]
    pairs += [(None if rng.random() < 0.1 else rng.uniform(-0.5, 1.2), rng.uniform(-0.2, 1.3)) for _ in range(300)]
    missing = np.asarray([s is None for s, _ in pairs])
    sims = np.asarray([-1.0 if s is None else s for s, _ in pairs])
    covs = np.asarray([c for _, c in pairs])
    compared = 0
    for cal in CALIBRATION_SET:
        for bg in BACKGROUNDS:
            expected = [confidence_one_at_a_time(Signals(s, c, False, bg), cal) for s, c in pairs]
            got = confidences(sims, covs, bg, cal, missing)
            # To the four places served, but where the array arithmetic rounds across a half.
            assert all(abs(a - b) <= 1e-4 + 1e-12 for a, b in zip(got, expected, strict=True))
            assert sum(a != b for a, b in zip(got, expected, strict=True)) <= len(pairs) // 100
            compared += len(expected)
    assert compared == 4 * len(BACKGROUNDS) * (32 * 20 + 300)
    assert confidences(np.zeros(0), np.zeros(0), 0.3, CAL) == []


def test_background_is_the_mean_of_ranks_5_to_15() -> None:
    # Ranks 1-4 and 16-20 at 0.9 are outside the window; ranks 5-15 hold 0.0, 0.1, ..., 1.0
    # (11 values), mean 5.5/11 = 0.5.
    sims = [0.9] * 4 + [i / 10 for i in range(11)] + [0.9] * 5
    assert background_similarity(sims) == pytest.approx(0.5, abs=1e-12)
    # Only ranks 5-7 present: (0.3 + 0.6 + 0.9) / 3 = 0.6.
    assert background_similarity([1.0, 1.0, 1.0, 1.0, 0.3, 0.6, 0.9]) == pytest.approx(0.6, abs=1e-12)


@pytest.mark.parametrize("length", [0, 1, 4, 5, 6])
def test_background_needs_three_in_the_window(length: int) -> None:
    assert background_similarity([0.5] * length) is None


def test_calibration_for_known_and_unknown_models() -> None:
    known = calibration_for(MINILM)
    assert known is CALIBRATIONS[MINILM]
    assert (known.floor, known.ceiling) == (0.15, 0.55)
    for unknown in (None, "", "someone/else-model"):
        default = calibration_for(unknown)
        assert (default.floor, default.ceiling) == (0.30, 0.75)
        assert default.floor > known.floor
    # Same cosine, less trust for an unknown model: (0.35-0.15)/0.4 = 0.5 vs (0.35-0.3)/0.45.
    signals = Signals(0.35, 0.0, False)
    assert confidence(signals, known) == 0.5
    assert confidence(signals, calibration_for("someone/else-model")) == 0.1111


@dataclass(frozen=True)
class Item:
    name: str
    confidence: float
    #: Each item its own document unless a test says otherwise (documents first is then a no-op).
    document_id: str = ""


def items(*confidences: float) -> list[Item]:
    return [Item(f"p{i}", c, f"doc{i}") for i, c in enumerate(confidences)]


def names(kept: list[Item]) -> list[str]:
    return [k.name for k in kept]


def test_threshold_boundary_equal_passes() -> None:
    out = gate(items(0.36, 0.3599, 0.5), threshold=0.36, enabled=True, limit=10)
    assert names(out.kept) == ["p0", "p2"]
    assert (out.withheld, out.best) == (1, 0.5)


def test_gate_disabled_keeps_everything_up_to_limit() -> None:
    out = gate(items(0.1, 0.2, 0.0, 0.95), threshold=0.5, enabled=False, limit=3)
    assert names(out.kept) == ["p0", "p1", "p2"]
    assert out.withheld == 0
    assert out.best == 0.95  # seen beyond the limit too
    assert names(gate(items(0.1, 0.2), threshold=0.5, enabled=False, limit=10).kept) == ["p0", "p1"]


def test_withheld_counts_only_below_threshold_including_beyond_limit() -> None:
    # p3 (0.7) passes but is over the limit: neither kept nor withheld. p2 and p4 are withheld.
    out = gate(items(0.9, 0.8, 0.1, 0.7, 0.2), threshold=0.5, enabled=True, limit=2)
    assert names(out.kept) == ["p0", "p1"]
    assert (out.withheld, out.best) == (2, 0.9)
    out = gate(items(0.9, 0.1, 0.2), threshold=0.5, enabled=True, limit=0)
    assert (out.kept, out.withheld) == ([], 2)


def test_best_is_the_max_confidence_seen() -> None:
    out = gate(items(0.1, 0.3, 0.2), threshold=0.5, enabled=True, limit=5)
    assert (out.kept, out.withheld, out.best) == ([], 3, 0.3)
    none: list[Item] = []
    empty = gate(none, threshold=0.5, enabled=True, limit=5)
    assert (empty.kept, empty.withheld, empty.best) == ([], 0, 0.0)


def test_order_preserved() -> None:
    # Not sorted by confidence: the ranking order of those that pass is kept.
    out = gate(items(0.4, 0.9, 0.2, 0.6, 0.5), threshold=0.4, enabled=True, limit=10)
    assert names(out.kept) == ["p0", "p1", "p3", "p4"]
    assert [k.confidence for k in out.kept] == [0.4, 0.9, 0.6, 0.5]


def test_what_passes_is_served_documents_first_before_the_limit() -> None:
    # a's second passage (0.8) waits for b's first (0.7); the limit then cuts a's third.
    kept = gate(
        [Item("a1", 0.9, "a"), Item("a2", 0.8, "a"), Item("b1", 0.7, "b"), Item("a3", 0.6, "a")],
        threshold=0.5, enabled=True, limit=3,
    ).kept  # fmt: skip
    assert names(kept) == ["a1", "b1", "a2"]


def test_a_withheld_best_passage_does_not_push_its_document_down() -> None:
    # a's best-ranked passage is withheld: its next passage is a's first among those kept,
    # so a still comes before c (documents first is applied after the threshold).
    kept = gate(
        [Item("a1", 0.1, "a"), Item("b1", 0.9, "b"), Item("a2", 0.8, "a"), Item("b2", 0.7, "b"), Item("c1", 0.6, "c")],
        threshold=0.5, enabled=True, limit=10,
    ).kept  # fmt: skip
    assert names(kept) == ["b1", "a2", "c1", "b2"]


@pytest.mark.parametrize("seed", range(20))
def test_documents_first_with_a_limit_is_the_whole_order_cut(seed: int) -> None:
    rng = random.Random(seed)
    positions = list(range(rng.randint(0, 40)))
    documents = [rng.randint(0, rng.randint(1, 12)) for _ in positions]
    whole = documents_first(positions, documents)
    for limit in (0, 1, 3, 10, 50):
        assert documents_first(positions, documents, limit=limit) == whole[:limit]
