"""The searchable vectors at one ceiling, held in memory for nearest-neighbour search.

sqlite-vec's float KNN is an exact scan, but it walks its chunks one vector at a time; a matrix
product over the same vectors gives the same ranking many times faster (docs/performance.md).
The index file stays the single source of truth: this is a read-only copy taken from it, keyed
by the file's identity and dropped when a rebuild replaces it.

Up to :attr:`SearchTuning.exact_rows` rows every query is one exact product. Above it a
one-bit-per-dimension sign code of every row is kept beside the matrix: a Hamming scan over
the codes (48 bytes a row instead of 1,536 for MiniLM) picks
:meth:`SearchTuning.rescore_count` rows, and those are ranked by their exact cosine. Only which
rows reach the exact step is approximate, so the prefilter is used only where it keeps the
exact neighbours on *this* index: when the copy loads, a sample of the index's own rows is
searched both ways (:func:`prefilter_recall`), and below
:attr:`SearchTuning.prefilter_min_recall` the exact product serves instead. The distances
returned are always exact.

The ceiling is applied while loading: only vectors whose passage is at or below the caller's
level and searchable (not superseded) are copied, so a passage above the ceiling is not in
memory at all and cannot take a rank, move a score or be counted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import apsw
import numpy as np

from governed_evidence.config import Classification
from governed_evidence.search.sql import count_searchable
from governed_evidence.search.tuning import DEFAULT_TUNING, SearchTuning

__all__ = ["VectorCopier", "VectorMatrix", "load_matrix", "matrix_bytes", "prefilter_recall", "sign_codes"]

#: Float32 bytes per dimension.
_FLOAT_BYTES = 4
#: Rows copied, normalised and coded at a time, so the load's peak stays near the matrix itself.
_BLOCK_ROWS = 4096
#: The depth the prefilter check compares (recall@10).
_CHECK_DEPTH = 10


@dataclass(frozen=True)
class VectorMatrix:
    """Unit-normalised rows in passage-id order; ``ids`` is sorted ascending."""

    level: Classification
    ids: np.ndarray
    matrix: np.ndarray
    tuning: SearchTuning = DEFAULT_TUNING
    #: Sign bits of every row, word-major (:func:`sign_codes`); None: every query is an exact product.
    codes: np.ndarray | None = None
    #: The prefilter's recall@10 measured on this index when it loaded (None: not measured).
    checked_recall: float | None = None

    @property
    def rows(self) -> int:
        return int(self.ids.shape[0])

    @property
    def nbytes(self) -> int:
        codes = self.codes.nbytes if self.codes is not None else 0
        return int(self.matrix.nbytes + self.ids.nbytes + codes)

    @property
    def strategy(self) -> Literal["exact product", "sign-code prefilter"]:
        return "exact product" if self.codes is None else "sign-code prefilter"

    def knn(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` nearest passages by cosine distance, nearest first (ties by passage id)."""
        if self.rows == 0 or k <= 0:
            return []
        unit = _unit(query)
        if self.codes is None:
            rows = np.arange(self.rows)
            scores = self.matrix @ unit
        else:
            rows = _nearest_codes(self.codes, sign_codes(unit.reshape(1, -1)), self.tuning.rescore_count(self.rows, k))
            scores = self.matrix[rows] @ unit
        top = np.argpartition(-scores, k - 1)[:k] if k < len(rows) else np.arange(len(rows))
        # lexsort: the last key is primary; the id breaks ties, so the order is deterministic.
        order = top[np.lexsort((self.ids[rows[top]], -scores[top]))]
        return list(zip(self.ids[rows[order]].tolist(), (1.0 - scores[order]).tolist(), strict=True))

    def distances(self, query: np.ndarray, passage_ids: list[int]) -> dict[int, float]:
        """Cosine distance for specific passages; ids not held (above the ceiling, absent) are skipped."""
        if not passage_ids or self.rows == 0:
            return {}
        wanted = np.asarray(passage_ids, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.ids, wanted), self.rows - 1)
        found = self.ids[pos] == wanted
        scores = self.matrix[pos[found]] @ _unit(query)
        # 1 - similarity in float32, as knn() computes it, so both give a passage the same distance.
        return dict(zip(wanted[found].tolist(), (1.0 - scores).tolist(), strict=True))


def _unit(vector: np.ndarray) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def sign_codes(matrix: np.ndarray) -> np.ndarray:
    """Sign bits (1 where a component is positive) of a (rows, dimension) matrix, packed into
    64-bit words, word-major: shape (words, rows). One contiguous array per word makes the
    XOR and popcount of a scan stream through memory."""
    bits = np.packbits(matrix > 0, axis=-1)
    pad = (-bits.shape[-1]) % 8
    if pad:
        bits = np.concatenate((bits, np.zeros((*bits.shape[:-1], pad), dtype=np.uint8)), axis=-1)
    return np.ascontiguousarray(np.ascontiguousarray(bits).view(np.uint64).T)


def _nearest_codes(codes: np.ndarray, query_code: np.ndarray, wanted: int) -> np.ndarray:
    """Row positions of the ``wanted`` smallest Hamming distances to ``query_code`` (words, 1)."""
    words, rows = codes.shape
    if wanted >= rows:
        return np.arange(rows)
    distance = np.bitwise_count(codes[0] ^ query_code[0]).astype(np.uint16)
    for word in range(1, words):
        distance += np.bitwise_count(codes[word] ^ query_code[word])
    # Distances are small integers: their histogram finds the cut-off without sorting.
    cutoff = int(np.searchsorted(np.cumsum(np.bincount(distance)), wanted))
    below = np.flatnonzero(distance < cutoff)
    at = np.flatnonzero(distance == cutoff)[: wanted - below.shape[0]]
    return np.concatenate((below, at))


def prefilter_recall(matrix: VectorMatrix, probes: int) -> float:
    """recall@10 of the sign-code prefilter against the exact product on ``matrix``'s own rows:
    ``probes`` rows spread evenly over the index, each searched as a query both ways."""
    if matrix.codes is None or matrix.rows == 0:
        return 1.0
    exact = VectorMatrix(matrix.level, matrix.ids, matrix.matrix, matrix.tuning)
    kept = total = 0
    for position in np.linspace(0, matrix.rows - 1, num=min(probes, matrix.rows), dtype=np.int64).tolist():
        query = matrix.matrix[position]
        truth = {pid for pid, _ in exact.knn(query, _CHECK_DEPTH)}
        kept += len(truth & {pid for pid, _ in matrix.knn(query, _CHECK_DEPTH)})
        total += len(truth)
    return kept / total if total else 1.0


def _code_words(dimension: int) -> int:
    """64-bit words in one vector's sign code."""
    return (dimension + 63) // 64


def matrix_bytes(rows: int, dimension: int, tuning: SearchTuning = DEFAULT_TUNING) -> int:
    """Memory for ``rows`` vectors: the float matrix, the ids and (above the exact size) the sign codes."""
    codes = 8 * _code_words(dimension) if rows > tuning.exact_rows else 0
    return rows * (dimension * _FLOAT_BYTES + 8 + codes)


def load_matrix(
    conn: apsw.Connection,
    level: Classification,
    dimension: int,
    tuning: SearchTuning = DEFAULT_TUNING,
    cancelled: Callable[[], bool] = lambda: False,
) -> VectorMatrix | None:
    """Copy the searchable vectors at or below ``level`` out of the index into one matrix.

    ``cancelled`` is polled between blocks, so a shutdown never waits for a large copy; a
    cancelled copy returns None.
    """
    expected = count_searchable(conn, level)
    coded = expected > tuning.exact_rows
    # An exact product over the whole matrix streams each dimension's column into the scores
    # when the matrix is column-major (docs/performance.md); the prefilter's rescoring gathers
    # rows, which wants them contiguous.
    order: Literal["C", "F"] = "C" if coded else "F"
    matrix = np.empty((expected, dimension), dtype=np.float32, order=order)
    ids = np.empty(expected, dtype=np.int64)
    rows = 0
    pending_ids: list[int] = []
    pending: list[bytes] = []

    def flush() -> None:
        nonlocal rows
        if not pending:
            return
        block = np.frombuffer(b"".join(pending), dtype=np.float32).reshape(len(pending), dimension)
        end = rows + len(pending)
        if end > matrix.shape[0]:
            raise ValueError("more vectors than searchable passages")
        norms = np.linalg.norm(block, axis=1, keepdims=True)
        # A zero vector has no direction; left at zero it has similarity 0 to every query.
        np.divide(block, norms, out=matrix[rows:end], where=norms > 0)
        matrix[rows:end][(norms <= 0).reshape(-1)] = 0.0
        ids[rows:end] = pending_ids
        rows = end
        pending.clear()
        pending_ids.clear()

    cursor = conn.execute(
        "SELECT passage_id, embedding FROM passage_vectors WHERE classification <= ? AND searchable = 1",
        (int(level),),
    )
    for pid, blob in cursor:
        pending_ids.append(int(pid))
        pending.append(bytes(blob))
        if len(pending) >= _BLOCK_ROWS:
            flush()
            if cancelled():
                return None
    flush()
    matrix, ids = np.require(matrix[:rows], requirements=order), ids[:rows]
    if rows > 1 and not bool(np.all(ids[1:] > ids[:-1])):
        # Sorted in numpy, not with ORDER BY, which would spill every vector into a temporary b-tree.
        by_id = np.argsort(ids, kind="stable")
        ids, matrix = ids[by_id], np.require(matrix[by_id], requirements=order)
    held = VectorMatrix(level, ids, matrix, tuning)
    if not coded:
        return held
    held = VectorMatrix(level, ids, matrix, tuning, codes=sign_codes(matrix))
    recall = prefilter_recall(held, tuning.prefilter_probes)
    if recall < tuning.prefilter_min_recall:
        # The prefilter would lose neighbours on this index: the exact product serves it.
        return VectorMatrix(level, ids, matrix, tuning, checked_recall=recall)
    return VectorMatrix(level, ids, matrix, tuning, codes=held.codes, checked_recall=recall)


class VectorCopier:
    """Sizes and takes the vector matrix for :class:`~governed_evidence.search.copies.MemoryCopy`."""

    kind = "vectors"

    def __init__(self, dimension: int, tuning: SearchTuning = DEFAULT_TUNING) -> None:
        self.dimension = dimension
        self.tuning = tuning

    def needed_bytes(self, conn: apsw.Connection, level: Classification) -> int:
        # No dimension, no vectors to copy (-1: cannot be held); an empty level needs nothing.
        if self.dimension <= 0:
            return -1
        return matrix_bytes(count_searchable(conn, level), self.dimension, self.tuning)

    def copy(self, conn: apsw.Connection, level: Classification, cancelled: Callable[[], bool]) -> VectorMatrix | None:
        return load_matrix(conn, level, self.dimension, self.tuning, cancelled)
