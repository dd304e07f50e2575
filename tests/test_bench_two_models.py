"""The pure parts of benchmarks/two_models.py, over two tiny indexes of one corpus built by two
hash "models": each index is read at the ceiling with its own calibration, refused when its model
is not its embedder's, and the four rankings and their distinct-document scoring behave as the
method says. The measurement itself (two real models, real corpora) is run by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks.two_models import (
    Corpus,
    Found,
    ModelMismatchError,
    Side,
    aligned,
    calibrated_sum,
    distinct_documents,
    load_side,
    orders,
    per_corpus,
    rrf,
    score,
    short_name,
    table,
)
from governed_evidence.config import Classification
from governed_evidence.embeddings.base import embed_queries
from governed_evidence.embeddings.calibration import calibration_for
from governed_evidence.evaluation.questions import Question
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.store.connection import connect
from tests.helpers import HashEmbedder

FIRST = HashEmbedder(model_id="test/hash-first")
SECOND = HashEmbedder(dimension=48, model_id="test/hash-second")


@pytest.fixture
def indexes(tmp_path: Path, corpus: Path) -> tuple[Path, Path]:
    """The small corpus built once by each model, as `eval --suite` builds it (ceiling restricted)."""
    dbs = (tmp_path / "first" / "small.sqlite", tmp_path / "second" / "small.sqlite")
    for db, embedder in zip(dbs, (FIRST, SECOND), strict=True):
        db.parent.mkdir()
        ingest_corpus(corpus, db, embedder, ceiling=Classification.RESTRICTED, progress=None)
    return dbs


def _corpus(indexes: tuple[Path, Path], level: Classification = Classification.PUBLIC) -> Corpus:
    (first, keys), (second, other) = (
        load_side(db, level, e.identity) for db, e in zip(indexes, (FIRST, SECOND), strict=True)
    )
    rows = aligned(keys, other)
    second = Side(second.model_id, second.matrix[rows], second.floor, second.ceiling)
    return Corpus("small", tuple(path for path, _ in keys), first, second)


def test_each_side_holds_the_searchable_passages_at_the_ceiling_with_its_measured_calibration(
    indexes: tuple[Path, Path],
) -> None:
    side, keys = load_side(indexes[1], Classification.PUBLIC, SECOND.identity)
    assert keys and all(path.startswith("public/") for path, _ in keys)
    assert side.matrix.shape == (len(keys), 48)
    assert np.allclose(np.linalg.norm(side.matrix, axis=1), 1.0)
    # Too few passages for an ingest to measure a span: the model's default calibration.
    assert (side.floor, side.ceiling) == (calibration_for(None).floor, calibration_for(None).ceiling)
    # A span the index records at the level is the one read, as the server reads it.
    conn = connect(indexes[1], readonly=False)
    try:
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('similarity_public', '0.8,0.87')")
    finally:
        conn.close()
    side, _ = load_side(indexes[1], Classification.PUBLIC, SECOND.identity)
    assert (side.floor, side.ceiling) == (0.8, 0.87)
    _, internal = load_side(indexes[1], Classification.INTERNAL, SECOND.identity)
    assert len(internal) > len(keys)


def test_an_index_is_refused_when_its_model_is_not_the_embedders(indexes: tuple[Path, Path]) -> None:
    with pytest.raises(ModelMismatchError, match=r"built with test/hash-first, the query embedder is test/hash-second"):
        load_side(indexes[0], Classification.PUBLIC, SECOND.identity)
    same_name = HashEmbedder(dimension=32, model_id="test/hash-first")
    with pytest.raises(ModelMismatchError, match="64-d vectors, the query embedder makes 32-d"):
        load_side(indexes[0], Classification.PUBLIC, same_name.identity)


def test_passages_are_matched_by_document_and_text_whatever_their_ids() -> None:
    first = [("a.md", "one"), ("a.md", "two"), ("b.md", "three")]
    assert aligned(first, first) == [0, 1, 2]
    assert aligned(first, [("b.md", "three"), ("a.md", "one"), ("a.md", "two")]) == [1, 2, 0]
    with pytest.raises(ValueError, match="same passages"):
        aligned(first, [("a.md", "one"), ("a.md", "two"), ("c.md", "three")])


def test_a_passage_both_models_put_first_leads_rrf_and_the_sum() -> None:
    # Row 2 is first for both; row 0 is second for the first model and last for the other.
    s1, s2 = np.array([0.5, 0.2, 0.6, 0.1]), np.array([0.80, 0.82, 0.86, 0.84])
    first = Side("a", np.eye(4), 0.15, 0.55)
    second = Side("b", np.eye(4), 0.80, 0.87)
    ranked = orders(first, second, s1, s2)
    assert [int(ranked[m][0]) for m in ("first", "second", "rrf", "sum")] == [2, 2, 2, 2]
    fused = rrf([np.argsort(-s1, kind="stable"), np.argsort(-s2, kind="stable")], k=60)
    assert fused[2] == pytest.approx(2 / 61)
    # Each cosine rescaled by its own span: the second model's narrow span weighs as much as the first's.
    assert calibrated_sum([(s1, 0.15, 0.55), (s2, 0.80, 0.87)])[2] == pytest.approx(1.125 + 0.06 / 0.07)


def test_rrf_rewards_agreement_in_rank_and_the_sum_how_sure_each_model_is() -> None:
    # Row 1 is second for both; row 0 is far ahead for the first model and last, by a little, for the other.
    s1, s2 = np.array([0.90, 0.40, 0.30, 0.20]), np.array([0.80, 0.83, 0.82, 0.84])
    ranked = orders(Side("a", np.eye(4), 0.15, 0.55), Side("b", np.eye(4), 0.80, 0.87), s1, s2)
    assert int(ranked["rrf"][0]) == 1  # 2/62 against 1/61 + 1/64
    assert int(ranked["sum"][0]) == 0  # 1.875 + 0 against 0.625 + 0.43


def test_the_distinct_document_top_k_collapses_a_documents_passages() -> None:
    documents = ("a.md", "a.md", "b.md", "a.md", "c.md")
    assert distinct_documents(np.arange(5), documents, 2) == ["a.md", "b.md"]
    assert distinct_documents(np.arange(5), documents, 10) == ["a.md", "b.md", "c.md"]
    assert distinct_documents(np.array([3, 4, 0, 2]), documents, 3) == ["a.md", "c.md", "b.md"]


def test_a_question_is_found_by_every_ranking_when_both_models_find_its_document(
    indexes: tuple[Path, Path],
) -> None:
    corpus = _corpus(indexes)
    text = "claiming train fares receipts for rail travel"
    vectors = {text: (embed_queries(FIRST, [text])[0], embed_queries(SECOND, [text])[0])}
    questions = [
        Question("q1", "answerable", text, ("public/expenses.md",)),
        Question("q2", "paraphrase", text, ("public/leave.md",)),
    ]
    found = score(corpus, questions, vectors)
    assert [(f.id, f.method, f.top3) for f in found if f.id == "q1"] == [
        ("q1", m, True) for m in ("first", "second", "rrf", "sum")
    ]
    # The tiny corpus has fewer than 10 public documents: top 10 holds every one.
    assert all(f.top10 for f in found)
    lines = table(found, ("first", "second"))
    assert lines[2] == "| answerable (1) | 1 / 1 | 1 / 1 | 1 / 1 | 1 / 1 |"
    assert lines[3].startswith("| English paraphrases (1) |")
    assert not any("French and German" in line for line in lines)  # no question of that slice


def test_the_per_corpus_lines_count_top_3_in_the_tables_order() -> None:
    found = [
        Found("x", "1", "crosslingual", m, top3, True)
        for m, top3 in (("first", False), ("second", True), ("rrf", True), ("sum", True))
    ]
    assert per_corpus(found, ["x"]) == ["  crosslingual: x (1) 0 / 1 / 1 / 1"]


def test_model_names_are_shortened_for_the_table() -> None:
    assert short_name("sentence-transformers/all-MiniLM-L6-v2@int8-onnx") == "all-MiniLM-L6-v2"
    described = "openai-compatible:multilingual-e5-small [query_prefix=''; input_type=query/passage]"
    assert short_name(described) == "multilingual-e5-small"
