"""The pure parts of benchmarks/sentence_similarity.py: how a passage is cut into sentences, the
mixed similarity, that the vector copy is swapped only while the measurement runs, the figures it
reads off ranked questions through the product's gate, the rules that choose the thresholds and
the variant, and the release gate's bounds. The measurement itself (real model, real corpora) is
run by hand; nothing here is timed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.sentence_similarity import (
    GRID,
    Ranked,
    Scored,
    SentenceVectors,
    choose,
    choose_thresholds,
    figures,
    keeps_release_gate,
    kept,
    mixed_similarity,
    rule,
    sentence_similarity,
    sentences,
)
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


def test_rescoring_keeps_the_passages_nearest_by_their_own_similarity_and_reorders_them() -> None:
    matrix = _matrix()
    query = np.array([1.0, 0.0], dtype=np.float32)
    # Passage 20 is the farthest by its own vector; a sentence of it matches the query exactly.
    found = SentenceVectors(np.array([20]), np.array([[1.0, 0.0]], dtype=np.float32))
    with sentence_similarity(found, alpha=0.0, rescore=True):
        # Two candidates: 10 and 30 by passage similarity; 20 is not among them, whatever its sentence.
        assert [pid for pid, _ in matrix.knn(query, 2)] == [10, 30]
        # All three: 20 is scored by its sentence and moves up to tie with 10 (ids break ties).
        ranked = matrix.knn(query, 3)
        assert [pid for pid, _ in ranked] == [10, 20, 30]
        assert dict(ranked) == pytest.approx({10: 0.0, 20: 0.0, 30: 0.4})
    with sentence_similarity(found, alpha=0.0):
        # Ranked by the mixed similarity throughout, 20 is among the first two.
        assert [pid for pid, _ in matrix.knn(query, 2)] == [10, 20]


def _q(slice_name: str, expected: str, *candidates: tuple[str, float]) -> Ranked:
    return Ranked(slice_name, frozenset({expected}), tuple(Scored(d, c) for d, c in candidates))


def test_what_is_kept_is_the_gate_s_documents_first_above_the_threshold() -> None:
    q = _q("paraphrase", "b", ("a", 0.9), ("a", 0.8), ("b", 0.5), ("c", 0.2))
    assert [c.document for c in kept(q, 0.3, 8)] == ["a", "b", "a"]  # documents first, c withheld
    assert [c.document for c in kept(q, 0.3, 2)] == ["a", "b"]
    assert kept(q, 0.95, 8) == []


def test_figures_read_strict_and_normal_answers_and_abstention() -> None:
    questions = [
        _q("answerable", "a", ("a", 0.9), ("b", 0.5)),
        _q("paraphrase", "b", ("a", 0.6), ("c", 0.5), ("d", 0.45), ("b", 0.3)),  # b only at normal
        _q("paraphrase", "x", ("a", 0.2)),  # abstained on at strict
        _q("unanswerable", "", ("a", 0.35)),  # abstained on at strict, answered at normal
        _q("unanswerable", "", ("a", 0.7)),
    ]
    f = figures(questions, strict=0.4, normal=0.25)
    assert f["answerable_hit@1"] == f["answerable_hit@3"] == 1.0
    assert f["paraphrase_hit@3"] == 0.0 and f["paraphrase_false_abstention"] == 0.5
    assert f["page@10"] == 0.5 and f["paraphrase_normal_hit@3"] == 0.0  # b is fourth among documents
    assert f["recall@10"] == 0.5
    assert f["abstention"] == 0.5 and f["normal_abstention"] == 0.0
    assert f["false_abstention"] == pytest.approx(1 / 3)


def test_thresholds_follow_the_shipped_rules() -> None:
    # 20 answerable questions with best confidence 0.30 .. 0.68, and 10 unanswerable ones.
    answered = [_q("answerable", "a", ("a", 0.30 + 0.02 * i)) for i in range(20)]
    refused = [_q("unanswerable", "", ("a", 0.20 + 0.02 * i)) for i in range(10)]
    strict, normal = choose_thresholds(answered + refused)
    # normal: the highest threshold leaving at most 5% (1 of 20) without an answer.
    assert normal == pytest.approx(0.32)
    # strict: at most 12% (2 of 20) unanswered; 0.325 to 0.34 all leave 2 unanswered and abstain
    # on 7 of 10: the lowest of equals is taken.
    assert strict == pytest.approx(0.325)
    assert strict in GRID and normal in GRID


def test_the_rule_rewards_hits_and_abstention_and_charges_false_abstention() -> None:
    base = {"paraphrase_hit@3": 0.5, "page@10": 0.7, "abstention": 0.3, "false_abstention": 0.1}
    assert rule(base) == pytest.approx(1.4)
    assert rule({**base, "false_abstention": 0.2}) < rule(base) < rule({**base, "abstention": 0.4})


def test_the_release_gate_bounds_the_sample_corpus() -> None:
    good = {
        "answerable_hit@3": 1.0,
        "paraphrase_hit@3": 0.81,
        "abstention": 0.53,
        "answerable_false_abstention": 0.0,
        "paraphrase_false_abstention": 0.14,
    }
    assert keeps_release_gate(good)
    assert not keeps_release_gate({**good, "paraphrase_hit@3": 0.76})
    assert not keeps_release_gate({**good, "answerable_false_abstention": 0.04})


def test_a_variant_that_breaks_the_release_gate_is_never_chosen() -> None:
    # "better" ranks the sample corpus's paraphrase lower (breaking its bound) and another corpus higher.
    refused = _q("unanswerable", "", ("x", 0.1))
    sample_good = [_q("answerable", "a", ("a", 0.9)), _q("paraphrase", "p", ("p", 0.8)), refused]
    sample_bad = [_q("answerable", "a", ("a", 0.9)), _q("paraphrase", "p", ("x", 0.8)), refused]
    other_low = [_q("paraphrase", "p", ("x", 0.8), ("y", 0.8), ("z", 0.8), ("p", 0.7)), refused]  # p fourth
    other_high = [_q("paraphrase", "p", ("p", 0.8)), refused]
    ranked = {
        "safe": {"sample": sample_good, "other": other_low},
        "better": {"sample": sample_bad, "other": other_high},
    }
    assert choose(ranked, ["sample", "other"], ["safe", "better"]).variant == "safe"
    # Without the sample corpus the bound does not apply, and the rule picks the better ranking.
    assert choose(ranked, ["other"], ["safe", "better"]).variant == "better"


def test_a_rule_s_bound_gives_way_only_as_far_as_the_release_gate_needs() -> None:
    # The sample corpus abstains on half its unanswerable questions only above 0.35, where 10
    # answerable questions of another corpus (best confidence 0.30) already go unanswered.
    sample = [
        _q("answerable", "a", ("a", 0.9)),
        *[_q("paraphrase", "p", ("p", 0.9)) for _ in range(5)],
        _q("unanswerable", "", ("x", 0.45)),
        _q("unanswerable", "", ("x", 0.35)),
    ]
    other = [_q("answerable", "a", ("a", 0.3)) for _ in range(10)] + [_q("answerable", "a", ("a", 0.9))] * 10
    pooled = sample + other
    # Within the gate: the least unanswered share the gate allows (10 of 26), and there the most
    # abstention: just above 0.45, where both unanswerable questions abstain.
    assert choose_thresholds(pooled, sample) == (pytest.approx(0.455), pytest.approx(0.3))
    # Without it, nothing may go unanswered past 12%: no threshold abstains, the lowest is taken.
    assert choose_thresholds(pooled) == (pytest.approx(0.1), pytest.approx(0.3))
    ranked = {"only": {"sample": sample, "other": other}}
    assert choose(ranked, ["sample", "other"], ["only"]).strict == pytest.approx(0.455)
    assert choose(ranked, ["sample", "other"], ["only"], bounded=False).strict == pytest.approx(0.1)


def test_page_level_sets_are_left_to_eval_and_document_level_ones_read(tmp_path: Path) -> None:
    from benchmarks.sentence_similarity import document_level_questions

    record = {"id": "x", "slice": "answerable", "question": "?", "expected": ["a.pdf"]}
    documents = tmp_path / "documents.jsonl"
    documents.write_text(json.dumps(record) + "\n")
    pages = tmp_path / "pages.jsonl"
    pages.write_text(json.dumps(record) + "\n" + json.dumps({**record, "id": "y", "pages": [3]}) + "\n")
    found = document_level_questions(documents)
    assert found is not None and [q.id for q in found] == ["x"]
    assert document_level_questions(pages) is None, "one page-level question makes the set page-level"
