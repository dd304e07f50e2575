"""The confidence of each candidate: one calibrated number from several measured signals.

No single raw score separates answers from confident misses: BM25 rewards a common word in
a title, and cosine similarity overlaps between paraphrases and near-miss questions. The
confidence combines

* ``similarity``: cosine between query and passage, rescaled by the model's calibration
  (where unrelated text and clear matches sit for this model);
* ``distinctness``: how far the passage stands above the query's background similarity
  (the mean of the semantic ranks 5-15). An answer stands out from the rest of the corpus;
  a near miss ("the policy on pets") is about as close to the best passage as to many others;
* ``coverage``: the IDF-weighted share of the query's content words found in the passage,
  length-normalised by construction (raw BM25 grows with query length).

The two kinds of evidence are combined as a noisy-OR: either a distinct semantic match or
a full keyword match is enough. Agreement of the two rankings was measured as a bonus term
and did not separate the slices on the tuning set, so it only shows in ``matched_by``.

Parameters were tuned on the sample corpus's eval slices (answerable, paraphrase,
superseded, unanswerable; see tests/search/test_gate_calibration.py for the figures) and
validated on a held-out question set that was never used for tuning (docs/evaluation.md).
The gate (:mod:`gate`) thresholds this number.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

# A model's calibration lives with the embeddings (an ingest measures it there).
from governed_evidence.embeddings.calibration import ModelCalibration

__all__ = [
    "BACKGROUND_RANKS",
    "Signals",
    "background_similarity",
    "confidences",
]

#: Semantic ranks (1-based, inclusive) whose mean similarity is the query's background.
BACKGROUND_RANKS = (5, 15)


class Signals(NamedTuple):
    """What the gate read for one candidate (a tuple: a search makes one per fused candidate)."""

    similarity: float | None
    coverage: float
    agreement: bool
    #: The query's background similarity (None without meaning search).
    background: float | None = None


def background_similarity(similarities: list[float]) -> float | None:
    """Mean similarity of the semantic ranks in :data:`BACKGROUND_RANKS` (best first)."""
    first, last = BACKGROUND_RANKS
    window = similarities[first - 1 : last]
    if len(window) < 3:
        return None
    return sum(window) / len(window)


def confidences(
    similarity: np.ndarray,
    coverage: np.ndarray,
    background: float | None,
    calibration: ModelCalibration,
    missing: np.ndarray | None = None,
) -> list[float]:
    """The confidence of every candidate of one query (they share ``background``), 0-1 to four
    places: ``missing`` marks the candidates without a similarity (their ``similarity`` is not
    read; coverage alone must carry them); None, every candidate has one."""
    if not coverage.shape[0]:
        return []
    cov = _clip01(coverage)
    sim = similarity if missing is None or not missing.any() else np.where(missing, -1.0, similarity)
    semantic = _clip01((sim - calibration.floor) / (calibration.ceiling - calibration.floor))
    if background is not None:
        distinct = _clip01((sim - background) / calibration.distinct_scale)
        semantic *= calibration.distinct_base + (1.0 - calibration.distinct_base) * distinct
    combined = _clip01(1.0 - (1.0 - semantic) * (1.0 - calibration.coverage_weight * cov**2))
    if missing is None or not missing.any():
        return _rounded(combined)
    # Keyword-only (no similarity): full coverage of the content words is strong evidence,
    # partial weak.
    keyword_only = _clip01(cov**1.5)
    return _rounded(np.where(missing, keyword_only, combined))


def _rounded(values: np.ndarray) -> list[float]:
    return [round(value, 4) for value in values.tolist()]


def _clip01(values: np.ndarray) -> np.ndarray:
    clipped: np.ndarray = np.clip(values, 0.0, 1.0)
    return clipped
