"""The pure parts of benchmarks/token_match.py: the token score, the piece weights, the AUC and the
reordering it measures. The measurement itself (real model, real corpora) is run by hand."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from benchmarks.sentence_similarity import Scored
from benchmarks.token_match import TokenVectors, auc, piece_weights, reorder, token_score


def _unit(*rows: list[float]) -> np.ndarray:
    m = np.asarray(rows, dtype=np.float64)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_each_question_piece_takes_its_best_passage_piece_weighted_by_idf() -> None:
    question = TokenVectors((1, 2), _unit([1, 0], [0, 1]))
    passage = TokenVectors((7, 8, 9), _unit([1, 0], [1, 1], [-1, 0]))
    # Piece 1 finds an exact match (1.0); piece 2 at best the diagonal (cos 45 degrees).
    assert token_score(question, np.array([1.0, 1.0]), passage) == pytest.approx((1 + 2**-0.5) / 2)
    assert token_score(question, np.array([3.0, 1.0]), passage) == pytest.approx((3 + 2**-0.5) / 4)
    assert token_score(question, np.array([0.0, 1.0]), passage) == pytest.approx(2**-0.5)


def test_an_empty_side_or_weightless_question_scores_zero() -> None:
    q = TokenVectors((1,), _unit([1, 0]))
    assert token_score(q, np.array([0.0]), TokenVectors((2,), _unit([1, 0]))) == 0.0
    assert token_score(q, np.array([1.0]), TokenVectors((), np.zeros((0, 2)))) == 0.0


def test_stopwords_and_punctuation_weigh_nothing_and_rare_pieces_weigh_more() -> None:
    df = Counter({1: 99, 2: 1, 3: 50, 4: 1})
    w = piece_weights([1, 2, 3, 4], ["badge", "lanyard", "the", "?"], df, 100, frozenset({"the"}))
    assert w[2] == 0.0 and w[3] == 0.0
    assert w[1] > w[0] > 0.0


def test_auc_counts_ties_half_and_is_nan_without_a_side() -> None:
    assert auc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert auc([0.1], [0.9]) == 0.0
    assert auc([0.5], [0.5]) == 0.5
    assert np.isnan(auc([], [0.5]))


def test_reorder_moves_only_the_scored_head_and_keeps_the_tail() -> None:
    cands = tuple(Scored(d, c) for d, c in [("a", 0.9), ("b", 0.5), ("c", 0.4), ("d", 0.3)])
    assert reorder(cands, [0.1, 0.9, 0.5], "as shipped") == cands
    assert [c.document for c in reorder(cands, [0.1, 0.9, 0.5], "token")] == ["b", "c", "a", "d"]
    # mix: token/0.9 + confidence/0.9 -> a 1.11, b 1.56, c 1.0
    assert [c.document for c in reorder(cands, [0.1, 0.9, 0.5], "mix")] == ["b", "a", "c", "d"]
    with pytest.raises(ValueError, match="unknown variant"):
        reorder(cands, [0.1], "other")
