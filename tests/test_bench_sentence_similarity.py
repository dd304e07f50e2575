"""The pure parts of benchmarks/sentence_similarity.py: how a passage is cut into sentences, the
mixed similarity, the rule that chooses alpha, and that the vector copy is swapped only while the
measurement runs. The measurement itself (real model, real corpora) is run by hand; nothing here
is timed."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.sentence_similarity import SentenceVectors, mixed_similarity, rule, sentence_similarity, sentences
from governed_evidence.config import Classification
from governed_evidence.search.vectors import VectorMatrix


def test_sentences_split_at_ends_clauses_and_lines_and_drop_short_pieces() -> None:
    text = "Staff must lock screens. Visitors sign in: badges are returned daily\n- Yes\nNo exceptions apply here!"
    assert sentences(text) == [
        "Staff must lock screens.",
        "badges are returned daily",  # "Visitors sign in:" is a clause of three words: dropped
        "No exceptions apply here!",
    ]


def test_sentences_keep_a_decimal_and_an_abbreviation_without_a_space() -> None:
    assert sentences("The rate is 3.5 percent of the base.") == ["The rate is 3.5 percent of the base."]


def test_mixed_similarity_blends_each_passage_with_its_best_sentence() -> None:
    passage = np.array([0.4, 0.6, 0.5], dtype=np.float32)
    sentence = np.array([0.9, 0.2, 0.3, 0.1], dtype=np.float32)
    owner = np.array([0, 0, 1, 1])
    mixed = mixed_similarity(passage, sentence, owner, alpha=0.25)
    # Passage 0: best sentence 0.9; passage 1: no sentence beats the passage (0.6); passage 2:
    # no sentence at all, so it keeps its own similarity.
    np.testing.assert_allclose(mixed, [0.25 * 0.4 + 0.75 * 0.9, 0.6, 0.5], rtol=1e-6)


def test_mixed_similarity_with_alpha_one_is_the_passage_similarity() -> None:
    passage = np.array([0.1, 0.7], dtype=np.float32)
    mixed = mixed_similarity(passage, np.array([0.95], dtype=np.float32), np.array([0]), alpha=1.0)
    np.testing.assert_allclose(mixed, passage)


def test_the_rule_rewards_hits_and_abstention_and_charges_false_abstention() -> None:
    base = {"paraphrase_hit@3": 0.5, "page@10": 0.7, "abstention": 0.3, "false_abstention": 0.1}
    assert rule(base) == pytest.approx(1.4)
    assert rule({**base, "false_abstention": 0.2}) < rule(base) < rule({**base, "abstention": 0.4})


def _matrix() -> VectorMatrix:
    rows = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=np.float32)
    return VectorMatrix(Classification.PUBLIC, np.array([10, 20, 30]), rows)


def test_the_vector_copy_ranks_by_the_mixed_similarity_only_inside_the_block() -> None:
    matrix = _matrix()
    query = np.array([1.0, 0.0], dtype=np.float32)
    assert [pid for pid, _ in matrix.knn(query, 3)] == [10, 30, 20]
    # Passage 20 has a sentence that matches the query exactly; passage 99 is not held here.
    found = SentenceVectors(np.array([20, 99]), np.array([[1.0, 0.0], [1.0, 0.0]], dtype=np.float32))
    with sentence_similarity(found, alpha=0.0):
        ranked = matrix.knn(query, 3)
        assert [pid for pid, _ in ranked[:2]] == [10, 20]  # ties at 1.0 break on the passage id
        assert matrix.distances(query, [20, 30, 99]) == pytest.approx({20: 0.0, 30: 0.4})
    assert [pid for pid, _ in matrix.knn(query, 3)] == [10, 30, 20]
    assert matrix.distances(query, [20]) == pytest.approx({20: 1.0})
