"""The index's similarity calibration, measured per level over the vectors being built.

Each level is measured over the searchable passages at or below it only, so a caller's scores
are never shaped by passages above its level: the unrelated questions are compared with those
passages alone, and only their headings are asked. The model is called for the fixed unrelated
questions once and for each distinct heading once (a few dozen short queries per build); a
model whose calibration was tuned on the questions (MiniLM) is not measured at all.
"""

from __future__ import annotations

import apsw
import numpy as np

from governed_evidence.config import Classification
from governed_evidence.embeddings.base import Embedder, Vectors, embed_queries
from governed_evidence.embeddings.calibration import (
    CALIBRATIONS,
    MIN_PASSAGES,
    UNRELATED_QUESTIONS,
    measure_calibration,
    pseudo_query_rows,
)

__all__ = ["level_calibrations"]

#: Vectors read at a time while looking for each unrelated question's nearest passage.
_CHUNK = 4096

_VISIBLE = "FROM passages p WHERE p.searchable = 1 AND p.classification <= ?"


class _Queries:
    """Query-side vectors by text, each text embedded once per build."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._known: dict[str, np.ndarray] = {}

    def of(self, texts: list[str]) -> Vectors:
        todo = [t for t in dict.fromkeys(texts) if t not in self._known]
        if todo:
            for text, vector in zip(todo, embed_queries(self._embedder, todo), strict=True):
                self._known[text] = np.asarray(vector, dtype=np.float64)
        out: Vectors = np.vstack([self._known[t] for t in texts])
        return out


def level_calibrations(
    conn: apsw.Connection, ceiling: Classification, embedder: Embedder
) -> dict[str, tuple[float, float]]:
    """(floor, ceiling) by level label (embeddings/calibration.py); a level with too few
    passages, or whose measurement cannot tell the two apart, has none, and so does every level
    for a model whose calibration was tuned on the questions (the gate reads that one)."""
    if embedder.identity.model_id in CALIBRATIONS:
        return {}
    queries = _Queries(embedder)
    levels = [level for level in Classification if level <= ceiling]
    # Asked only when some level is measured: a small index makes no model call at all.
    nearest: dict[Classification, np.ndarray] | None = None
    out: dict[str, tuple[float, float]] = {}
    for level in levels:
        rows = conn.execute(f"SELECT p.id, p.heading, p.title {_VISIBLE} ORDER BY p.id", (int(level),)).fetchall()
        if len(rows) < MIN_PASSAGES:
            # Too few to say anything about the model: no calibration, and no model call.
            continue
        chosen = [rows[i] for i in pseudo_query_rows(len(rows))]
        headings = [(int(str(pid)), str(heading or title)) for pid, heading, title in chosen]
        headings = [(pid, text) for pid, text in headings if text.strip()]
        if not headings:
            continue
        own = _vectors(conn, [pid for pid, _ in headings])
        asked = queries.of([text for _, text in headings])
        heading_own = np.einsum("ij,ij->i", asked, own)
        if nearest is None:
            nearest = _nearest(conn, levels, queries.of(list(UNRELATED_QUESTIONS)))
        measured = measure_calibration(nearest[level], heading_own, len(rows))
        if measured is not None:
            out[level.label] = measured
    return out


def _vectors(conn: apsw.Connection, ids: list[int]) -> np.ndarray:
    marks = ",".join("?" * len(ids))
    found = {
        int(str(pid)): np.frombuffer(blob, dtype=np.float32)
        for pid, blob in conn.execute(
            f"SELECT passage_id, embedding FROM passage_vectors WHERE passage_id IN ({marks})", ids
        )
    }
    return np.vstack([found[pid] for pid in ids]).astype(np.float64)


def _nearest(conn: apsw.Connection, levels: list[Classification], asked: Vectors) -> dict[Classification, np.ndarray]:
    """Each asked vector's cosine to its nearest searchable passage at or below each of
    ``levels``, from one scan of the vectors (a chunk at a time): every level's passages are
    among the highest level's, so the vectors are read once, not once a level."""
    asked = np.asarray(asked, dtype=np.float64)
    best = {level: np.full(asked.shape[0], -np.inf) for level in levels}
    cursor = conn.execute(
        "SELECT classification, embedding FROM passage_vectors WHERE searchable = 1 AND classification <= ?",
        (int(max(levels)),),
    )
    chunk: list[tuple[int, bytes]] = []
    for row in cursor:
        chunk.append(row)
        if len(chunk) == _CHUNK:
            _best_of(asked, chunk, best)
            chunk = []
    if chunk:
        _best_of(asked, chunk, best)
    return best


def _best_of(asked: np.ndarray, chunk: list[tuple[int, bytes]], best: dict[Classification, np.ndarray]) -> None:
    """Raise each level's best cosines with a chunk of (classification, vector) rows."""
    classification = np.fromiter((c for c, _ in chunk), dtype=np.int64, count=len(chunk))
    matrix = np.frombuffer(b"".join(blob for _, blob in chunk), dtype=np.float32).reshape(len(chunk), -1)
    cosine = asked @ matrix.astype(np.float64).T
    for level, so_far in best.items():
        at_or_below = classification <= int(level)
        if at_or_below.any():
            np.maximum(so_far, cosine[:, at_or_below].max(axis=1), out=so_far)
