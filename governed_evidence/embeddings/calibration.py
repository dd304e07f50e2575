"""Where unrelated text and a clear match sit for an embedding model, measured over a corpus.

The gate rescales a cosine similarity between a model's ``floor`` (unrelated) and ``ceiling``
(a clear match). Those depend on the model: all-MiniLM-L6-v2 puts unrelated policy passages
near 0.15, multilingual-e5-small near 0.75, so thresholds fixed for one silently let the
other through (with MiniLM's, e5 answered "What is the capital city of Australia?" from a
water company's FAQ at confidence 0.52). An ingest therefore measures the index's own model
over the index's own passages, with no question and no extra model call:

* ``floor``: the median cosine between two passages of the corpus (most pairs of passages of
  one corpus are about different things);
* ``ceiling``: the 10th percentile, over passages, of the cosine to the passage's nearest
  other passage (nearly every passage has a close relative: the next part of its section,
  its sibling policy), i.e. a similarity nine passages in ten reach with some passage.

On the sample corpus MiniLM's vectors give (0.17, 0.56) against the (0.15, 0.55) chosen for
it on the tuning questions; docs/evaluation.md has both models' figures.
"""

from __future__ import annotations

import numpy as np

from governed_evidence.embeddings.base import Vectors

__all__ = ["CEILING_QUANTILE", "FLOOR_QUANTILE", "MIN_PASSAGES", "MIN_SPAN", "SAMPLE", "measure_calibration"]

#: Fewer passages than this say too little about the model: no calibration is recorded.
MIN_PASSAGES = 20
#: At most this many passages, evenly spread over the index, are compared (a SAMPLE x SAMPLE
#: product: 4 MB and a few milliseconds).
SAMPLE = 1024
#: The floor's quantile of all pairwise similarities, and the ceiling's of nearest-neighbour ones.
FLOOR_QUANTILE = 0.5
CEILING_QUANTILE = 0.1
#: A ceiling less than this above the floor would make the rescaling a step: none is recorded.
MIN_SPAN = 0.02


def measure_calibration(vectors: Vectors) -> tuple[float, float] | None:
    """(floor, ceiling) of the model that made ``vectors`` (L2-normalised rows), or None when
    there are too few passages, or their similarities spread too little, to tell."""
    count = int(vectors.shape[0])
    if count < MIN_PASSAGES:
        return None
    rows = vectors
    if count > SAMPLE:
        # Evenly spread, not random: the same index always gives the same calibration.
        rows = vectors[np.linspace(0, count - 1, SAMPLE).astype(np.int64)]
    sims = np.asarray(rows, dtype=np.float64) @ np.asarray(rows, dtype=np.float64).T
    upper = np.triu_indices(sims.shape[0], 1)
    floor = float(np.quantile(sims[upper], FLOOR_QUANTILE))
    np.fill_diagonal(sims, -np.inf)
    ceiling = float(np.quantile(sims.max(axis=1), CEILING_QUANTILE))
    if not np.isfinite(floor) or not np.isfinite(ceiling) or ceiling - floor < MIN_SPAN:
        return None
    return round(floor, 4), round(ceiling, 4)
