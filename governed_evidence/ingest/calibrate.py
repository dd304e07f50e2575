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
    out: dict[str, tuple[float, float]] = {}
    for level in Classification:
        if level > ceiling:
            break
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
        nearest = _nearest(conn, level, queries.of(list(UNRELATED_QUESTIONS)))
        measured = measure_calibration(nearest, heading_own, len(rows))
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


def _nearest(conn: apsw.Connection, level: Classification, asked: Vectors) -> np.ndarray:
    """Each asked vector's cosine to its nearest passage at or below ``level`` (all of them,
    read a chunk at a time)."""
    best = np.full(asked.shape[0], -np.inf)
    chunk: list[bytes] = []
    cursor = conn.execute(
        "SELECT v.embedding FROM passages p JOIN passage_vectors v ON v.passage_id = p.id"
        " WHERE p.searchable = 1 AND p.classification <= ?",
        (int(level),),
    )
    for (blob,) in cursor:
        chunk.append(blob)
        if len(chunk) == _CHUNK:
            best = np.maximum(best, _best_of(asked, chunk))
            chunk = []
    if chunk:
        best = np.maximum(best, _best_of(asked, chunk))
    return best


def _best_of(asked: Vectors, blobs: list[bytes]) -> np.ndarray:
    matrix = np.vstack([np.frombuffer(b, dtype=np.float32) for b in blobs]).astype(np.float64)
    result: np.ndarray = (np.asarray(asked, dtype=np.float64) @ matrix.T).max(axis=1)
    return result
