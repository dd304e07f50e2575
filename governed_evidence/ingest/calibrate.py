"""The index's similarity calibration, measured per level over the vectors being built."""

from __future__ import annotations

import apsw
import numpy as np

from governed_evidence.config import Classification
from governed_evidence.embeddings.calibration import SAMPLE, measure_calibration

__all__ = ["level_calibrations"]


def level_calibrations(conn: apsw.Connection, ceiling: Classification) -> dict[str, tuple[float, float]]:
    """(floor, ceiling) by level label, each measured over the searchable passages at or below
    that level only (a caller's scores are never shaped by passages above its level); a level
    with too few passages has none."""
    out: dict[str, tuple[float, float]] = {}
    for level in Classification:
        if level > ceiling:
            break
        (count,) = conn.execute(
            "SELECT count(*) FROM passages WHERE searchable = 1 AND classification <= ?", (int(level),)
        ).fetchone() or (0,)
        # Every step-th passage by id: an even spread without reading every vector of a large index.
        step = max(1, int(count) // SAMPLE)
        blobs = [
            blob
            for (blob,) in conn.execute(
                "SELECT v.embedding FROM passages p JOIN passage_vectors v ON v.passage_id = p.id"
                " WHERE p.searchable = 1 AND p.classification <= ? AND p.id % ? = 0 ORDER BY p.id",
                (int(level), step),
            )
        ]
        if not blobs:
            continue
        measured = measure_calibration(np.vstack([np.frombuffer(b, dtype=np.float32) for b in blobs]))
        if measured is not None:
            out[level.label] = measured
    return out
