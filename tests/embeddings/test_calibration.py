"""The similarity calibration an ingest measures for the index's own model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from governed_evidence.config import Classification
from governed_evidence.embeddings.base import ModelIdentity, Vectors
from governed_evidence.embeddings.calibration import (
    CALIBRATIONS,
    CEILING_SHARE,
    FLOOR_QUANTILE,
    MIN_PASSAGES,
    PSEUDO_QUERIES,
    UNRELATED_QUESTIONS,
    calibration_for,
    measure_calibration,
    pseudo_query_rows,
)
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.search.service import SearchService
from governed_evidence.store.meta import IndexMeta
from tests.helpers import HashEmbedder, meta_of, write

MINILM = "sentence-transformers/all-MiniLM-L6-v2@int8-onnx"
REPO = Path(__file__).resolve().parents[2]


class CrowdedEmbedder(HashEmbedder):
    """Bag-of-words vectors plus one direction every text shares, as multilingual-e5 puts every
    text close to every other (its cosines for unrelated text sit near 0.8): a model whose
    similarities the default model's calibration would misread."""

    def __init__(self, shared: float = 1.0) -> None:
        super().__init__(dimension=256, model_id="test/crowded-bow")
        self.shared = shared
        self.queries: list[str] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        bow = super().embed(texts)
        rows = bow + self.shared * np.ones(bow.shape[1], dtype=np.float32) / np.sqrt(bow.shape[1])
        out: Vectors = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
        return out

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        self.queries.extend(texts)
        return self.embed(texts)


TOPICS = (
    "laptops passwords visitors printers backups vehicles badges parcels keys phones cameras lockers bicycles "
    "uniforms chemicals ladders drones tablets scanners radios generators forklifts kettles heaters projectors "
    "routers cables batteries monitors desks"
).split()


def _template_corpus(root: Path) -> Path:
    """Thirty policies written from one template: every passage resembles every other."""
    for topic in TOPICS:
        write(
            root,
            f"{topic}.md",
            f"# {topic.capitalize()} policy\n\n## Purpose of the rules for {topic}\n\n"
            "This policy sets out the rules that all staff and contractors of the company must follow "
            f"for {topic}. It applies to every team, every office and every site of the company.\n\n"
            f"## Who is responsible for {topic}\n\nManagers make sure that all staff and contractors of "
            f"the company follow the rules for {topic} and report any breach of this policy to the "
            "security team of the company.\n",
        )
    return root


def test_a_crowded_model_on_template_policies_answers_a_paraphrase_and_abstains_off_topic(tmp_path: Path) -> None:
    """The calibration measured from passages alone put this model's floor among the questions'
    own similarities (or measured nothing, leaving MiniLM-like defaults that served anything)."""
    corpus = _template_corpus(tmp_path / "corpus")
    db = tmp_path / "index.sqlite"
    embedder = CrowdedEmbedder()
    ingest_corpus(
        corpus,
        db,
        embedder,
        ceiling=Classification.RESTRICTED,
        default_classification=Classification.PUBLIC,
        progress=None,
    )
    floor, ceiling = (float(v) for v in meta_of(db)["similarity_public"].split(","))
    assert 0.6 < floor < ceiling < 1.0
    # The fixed unrelated questions were asked on the query side, and the sampled headings.
    assert set(UNRELATED_QUESTIONS) <= set(embedder.queries)
    assert any(q.startswith(("Purpose of the rules for", "Who is responsible for")) for q in embedder.queries)

    service = SearchService(db, ceiling=Classification.PUBLIC, embedder_factory=lambda: embedder)
    answer = service.search("Who looks after the drones?", confidence_level="strict")
    assert answer.status == "OK"
    assert [r.document for r in answer.results][:1] == ["drones.md"]
    for question in ("What is the capital city of Australia?", "How long should I boil an egg?"):
        assert service.search(question, confidence_level="strict").status == "NO_RELEVANT_CONTEXT", question


def test_the_floor_and_ceiling_follow_the_unrelated_questions_and_the_headings() -> None:
    unrelated = np.linspace(0.70, 0.80, 24)
    own = np.full(32, 0.90)
    floor, ceiling = measure_calibration(unrelated, own, passages=100) or (0.0, 0.0)
    assert floor == pytest.approx(float(np.quantile(unrelated, FLOOR_QUANTILE)), abs=1e-4)
    assert ceiling == pytest.approx(floor + CEILING_SHARE * (0.90 - floor), abs=1e-4)
    # A model that puts everything lower gets a lower floor and ceiling, by the same rule.
    low = measure_calibration(unrelated - 0.6, own - 0.4, passages=100)
    assert low is not None and low[0] < floor - 0.5 and low[1] < ceiling - 0.3


def test_too_few_passages_or_headings_no_closer_than_unrelated_questions_give_no_calibration() -> None:
    unrelated = np.full(24, 0.5)
    assert measure_calibration(unrelated, np.full(32, 0.9), passages=MIN_PASSAGES - 1) is None
    assert measure_calibration(unrelated, np.full(32, 0.505), passages=100) is None
    assert measure_calibration(unrelated, np.array([]), passages=100) is None


def test_the_headings_asked_are_evenly_spread_and_the_same_every_time() -> None:
    rows = pseudo_query_rows(1000)
    assert len(rows) == PSEUDO_QUERIES and rows[0] == 0 and rows[-1] == 999
    assert pseudo_query_rows(1000) == rows
    assert pseudo_query_rows(5) == [0, 1, 2, 3, 4]


def test_no_unrelated_question_is_an_evaluation_question() -> None:
    """The off-topic questions the evaluation abstains on are never the ones calibrated on."""
    asked = {q.lower() for q in UNRELATED_QUESTIONS}
    assert len(asked) == len(UNRELATED_QUESTIONS)
    for path in [REPO / "evals" / "questions.jsonl", *sorted((REPO / "evals").glob("*/*.jsonl"))]:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                assert json.loads(line)["question"].lower() not in asked, path.name


def test_the_gate_reads_the_measured_calibration_for_a_model_without_a_tuned_one() -> None:
    assert calibration_for(MINILM, (0.6, 0.9)) is CALIBRATIONS[MINILM]
    measured = calibration_for("openai-compatible:e5", (0.72, 0.88))
    assert (measured.floor, measured.ceiling) == (0.72, 0.88)
    default = calibration_for("openai-compatible:e5")
    assert (default.floor, default.ceiling) == (0.30, 0.75)


def test_the_meta_keeps_one_calibration_per_level() -> None:
    meta = IndexMeta("m", 8, similarity={"public": (0.25, 0.5), "internal": (0.2, 0.55)})
    back = IndexMeta.from_rows(meta.rows())
    assert back.similarity_calibration(Classification.PUBLIC) == (0.25, 0.5)
    assert back.similarity_calibration(Classification.INTERNAL) == (0.2, 0.55)
    assert back.similarity_calibration(Classification.RESTRICTED) is None


def _corpus(root: Path, restricted_words: str) -> Path:
    for i, topic in enumerate(TOPICS):
        write(
            root,
            f"public/doc{i}.md",
            f"# Policy {i}\n\n## Rules for {topic}\n\nThe rules for {topic} apply to staff.\n",
        )
    for i in range(30):
        write(
            root, f"restricted/secret{i}.md", f"# Secret {i}\n\n## {restricted_words} {i}\n\n{restricted_words} {i}\n"
        )
    return root


def test_a_level_is_calibrated_on_its_own_passages_only(tmp_path: Path) -> None:
    """A public caller's scores never depend on what the restricted documents say, and their
    headings are never asked when the public level is measured."""
    levels: list[dict[str, str]] = []
    for n, words in enumerate(("merger plans codename falcon", "board salary bands and layoffs list")):
        corpus = _corpus(tmp_path / f"corpus{n}", words)
        db = tmp_path / f"index{n}.sqlite"
        ingest_corpus(corpus, db, CrowdedEmbedder(), ceiling=Classification.RESTRICTED, progress=None)
        levels.append({k: v for k, v in meta_of(db).items() if k.startswith("similarity_")})
    assert set(levels[0]) == {"similarity_public", "similarity_internal", "similarity_restricted"}
    assert levels[0]["similarity_public"] == levels[1]["similarity_public"]
    assert levels[0]["similarity_internal"] == levels[1]["similarity_internal"]
    assert levels[0]["similarity_restricted"] != levels[1]["similarity_restricted"]


def test_a_small_corpus_costs_no_model_call_for_calibration(tmp_path: Path) -> None:
    for i in range(MIN_PASSAGES - 5):
        write(tmp_path / "corpus", f"doc{i}.md", f"# Doc {i}\n\nText {i}.\n")
    embedder = CrowdedEmbedder()
    db = tmp_path / "index.sqlite"
    ingest_corpus(tmp_path / "corpus", db, embedder, ceiling=Classification.RESTRICTED, progress=None)
    assert embedder.queries == []
    assert not [k for k in meta_of(db) if k.startswith("similarity_")]


def test_a_model_with_a_tuned_calibration_is_not_measured(tmp_path: Path) -> None:
    """The default model's gate reads its tuned calibration: its ingest spends no query on one."""

    class TunedModel(CrowdedEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self._identity = ModelIdentity(MINILM, 256, "none")

    embedder = TunedModel()
    db = tmp_path / "index.sqlite"
    ingest_corpus(_template_corpus(tmp_path / "corpus"), db, embedder, ceiling=Classification.RESTRICTED, progress=None)
    assert embedder.queries == []
    assert not [k for k in meta_of(db) if k.startswith("similarity_")]


@pytest.mark.parametrize("value", ["0.1", "a,b"])
def test_a_damaged_calibration_is_refused_as_a_damaged_index(value: str) -> None:
    rows = IndexMeta("m", 8).rows() | {"similarity_public": value}
    with pytest.raises(Exception, match="damaged"):
        IndexMeta.from_rows(rows)
