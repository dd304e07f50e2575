"""The similarity calibration an ingest measures for the index's own model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from governed_evidence.config import Classification
from governed_evidence.embeddings.calibration import MIN_PASSAGES, SAMPLE, measure_calibration
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.search.confidence import CALIBRATIONS, calibration_for
from governed_evidence.store.meta import IndexMeta
from tests.helpers import HashEmbedder, meta_of, write

MINILM = "sentence-transformers/all-MiniLM-L6-v2@int8-onnx"


def _unit(rows: np.ndarray) -> np.ndarray:
    out: np.ndarray = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    return out


def _clustered(offset: float, count: int = 200, seed: int = 3) -> np.ndarray:
    """Pairs of near-duplicate passages around a shared direction of weight ``offset``."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(count // 2, 64))
    rows = np.vstack([base, base + 0.3 * rng.normal(size=base.shape)])
    rows += offset * np.ones(64)
    return _unit(rows)


def test_a_model_that_puts_everything_closer_gets_a_higher_floor_and_ceiling() -> None:
    spread = measure_calibration(_clustered(0.0))
    crowded = measure_calibration(_clustered(0.6))
    assert spread is not None and crowded is not None
    assert spread[0] < spread[1] and crowded[0] < crowded[1]
    assert crowded[0] > spread[0] + 0.2
    assert crowded[1] > spread[1]
    # Unrelated passages sit near zero for the spread model; near duplicates near 0.9.
    assert abs(spread[0]) < 0.05
    assert 0.85 < spread[1] < 0.98


def test_too_few_or_too_alike_passages_give_no_calibration() -> None:
    assert measure_calibration(_clustered(0.0, count=MIN_PASSAGES - 2)) is None
    same = _unit(np.ones((50, 8)))
    assert measure_calibration(same) is None


def test_a_large_index_is_sampled_evenly_and_the_same_every_time() -> None:
    vectors = _clustered(0.2, count=3 * SAMPLE)
    first = measure_calibration(vectors)
    assert first is not None
    assert measure_calibration(vectors.copy()) == first


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
    topics = [f"topic{i} alpha{i} beta{i} gamma{i}" for i in range(30)]
    for i, words in enumerate(topics):
        write(root, f"public/doc{i}.md", f"# Policy {i}\n\nThe rule on {words} applies to staff and shared words.\n")
    for i in range(30):
        write(root, f"restricted/secret{i}.md", f"# Secret {i}\n\n{restricted_words} {i}\n")
    return root


def test_a_level_is_calibrated_on_its_own_passages_only(tmp_path: Path) -> None:
    """A public caller's scores never depend on what the restricted documents say."""
    levels: list[dict[str, str]] = []
    for n, words in enumerate(("merger plans codename falcon", "board salary bands and layoffs list")):
        corpus = _corpus(tmp_path / f"corpus{n}", words)
        db = tmp_path / f"index{n}.sqlite"
        ingest_corpus(corpus, db, HashEmbedder(), ceiling=Classification.RESTRICTED, progress=None)
        levels.append({k: v for k, v in meta_of(db).items() if k.startswith("similarity_")})
    assert set(levels[0]) == {"similarity_public", "similarity_internal", "similarity_restricted"}
    assert levels[0]["similarity_public"] == levels[1]["similarity_public"]
    assert levels[0]["similarity_internal"] == levels[1]["similarity_internal"]
    assert levels[0]["similarity_restricted"] != levels[1]["similarity_restricted"]


@pytest.mark.parametrize("value", ["0.1", "a,b"])
def test_a_damaged_calibration_is_refused_as_a_damaged_index(value: str) -> None:
    rows = IndexMeta("m", 8).rows() | {"similarity_public": value}
    with pytest.raises(Exception, match="damaged"):
        IndexMeta.from_rows(rows)
