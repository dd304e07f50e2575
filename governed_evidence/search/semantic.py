"""The semantic stage: the passages nearest the query's vector at the caller's level, and the
distance of any other candidate.

From the level's vectors in memory (:mod:`vectors`) when they are held, else from the index
file: sqlite-vec's KNN with the ceiling inside it, and point lookups for single distances.
Both are exact cosine distances; the in-memory ranking equals the KNN's but for the sign-code
prefilter's checked recall on large indexes.
"""

from __future__ import annotations

import apsw
import numpy as np

from governed_evidence.config import Classification
from governed_evidence.search import sql
from governed_evidence.search.vectors import VectorMatrix

__all__ = ["distances", "nearest"]


def nearest(
    conn: apsw.Connection, level: Classification, vector: np.ndarray, depth: int, matrix: VectorMatrix | None
) -> list[tuple[int, float]]:
    """The ``depth`` passages nearest ``vector`` at or below ``level``, nearest first, with their distances."""
    if matrix is not None:
        return matrix.knn(vector, depth)
    return sql.vector_ranking(conn, level, vector.tobytes(), depth)


def distances(
    conn: apsw.Connection, vector: np.ndarray, ids: list[int], matrix: VectorMatrix | None
) -> dict[int, float]:
    """The cosine distance of each passage of ``ids`` (already checked visible) to ``vector``."""
    if matrix is not None:
        return matrix.distances(vector, ids)
    return sql.cosine_distances(conn, vector.tobytes(), ids)
