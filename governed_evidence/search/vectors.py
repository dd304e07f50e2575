"""The searchable vectors at one ceiling, held in memory for exact nearest-neighbour search.

sqlite-vec's float KNN is an exact scan, but it walks its chunks one vector at a time; a
matrix product over the same vectors gives the same ranking several times faster (see
docs/performance.md). The index file stays the single source of truth: this is a read-only
copy taken from it, keyed by the file's identity and dropped when a rebuild replaces it.

Above :data:`EXACT_ROWS` rows a one-bit-per-dimension sign code of every vector is kept
beside the matrix: a Hamming scan over the codes (48 bytes a row instead of 1,536) picks
:func:`rescore_count` candidates, and those are ranked by their exact cosine. The distances
returned are always exact; only which passages reach the exact step is approximate, and
``make bench`` measures that as recall@10 against a full matrix product (>= 0.99 at 100k
and 1M passages).

The ceiling is applied while loading: only vectors whose passage is at or below the
caller's level and searchable (not superseded) are copied, so a passage above the ceiling
is not in memory at all and cannot take a rank, move a score or be counted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import apsw
import numpy as np

from governed_evidence.config import Classification
from governed_evidence.search.held import HeldCopy, MemoryBudget

__all__ = [
    "EXACT_ROWS",
    "RESCORE_FRACTION",
    "RESCORE_MIN",
    "HeldVectors",
    "MemoryBudget",
    "VectorCopier",
    "VectorMatrix",
    "count_searchable",
    "load_matrix",
    "matrix_bytes",
    "rescore_count",
    "sign_codes",
]

#: Float32 bytes per dimension; the budget check multiplies it by rows and dimension.
_FLOAT_BYTES = 4
_BLOCK_ROWS = 4096
#: Up to this many rows the full matrix product is cheap enough (about 1 ms per 10k rows).
EXACT_ROWS = 50_000
#: Candidates rescored exactly after the Hamming scan: 1% of the rows, at least 2,000.
#: Measured on the generated SciFact corpora: recall@10 0.995 at 100k, 0.994 at 1M.
RESCORE_MIN = 2_000
RESCORE_FRACTION = 100


def rescore_count(rows: int, k: int) -> int:
    return min(rows, max(k, RESCORE_MIN, rows // RESCORE_FRACTION))


@dataclass(frozen=True)
class VectorMatrix:
    """Unit-normalised rows in passage-id order; ``ids`` is sorted ascending."""

    level: Classification
    ids: np.ndarray
    matrix: np.ndarray
    #: Sign bits of every row, word-major (see :func:`sign_codes`); None: every query is a full
    #: matrix product.
    codes: np.ndarray | None = None

    @property
    def rows(self) -> int:
        return int(self.ids.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes + self.ids.nbytes + (self.codes.nbytes if self.codes is not None else 0))

    def knn(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` nearest passages by cosine distance, nearest first (ties by passage id)."""
        return self.knn_scored(query, k)[0]

    def knn_scored(self, query: np.ndarray, k: int) -> tuple[list[tuple[int, float]], np.ndarray | None]:
        """:meth:`knn`, and the similarity of every row when the full product computed them
        (up to :data:`EXACT_ROWS`; else None), for :meth:`distances` to read instead of
        computing the other candidates' again."""
        if self.rows == 0 or k <= 0:
            return [], None
        unit = _unit(query)
        every: np.ndarray | None = None
        if self.codes is None:
            rows = np.arange(self.rows)
            scores = every = self.matrix @ unit
        else:
            rows = self._nearest_codes(_signs(unit), rescore_count(self.rows, k))
            scores = self.matrix[rows] @ unit
        top = np.argpartition(-scores, k - 1)[:k] if k < len(rows) else np.arange(len(rows))
        # lexsort: last key is primary; the id breaks ties, so the order is deterministic.
        order = top[np.lexsort((self.ids[rows[top]], -scores[top]))]
        return [(int(self.ids[rows[i]]), float(1.0 - scores[i])) for i in order], every

    def _nearest_codes(self, query_code: np.ndarray, wanted: int) -> np.ndarray:
        """Row positions of the ``wanted`` smallest Hamming distances to ``query_code``."""
        assert self.codes is not None
        # Codes are stored word-major (one contiguous array per 64-bit word): XOR and popcount
        # then stream through memory, several times faster than row-major on the same data.
        distance = np.bitwise_count(self.codes[0] ^ query_code[0]).astype(np.uint16)
        for word in range(1, self.codes.shape[0]):
            distance += np.bitwise_count(self.codes[word] ^ query_code[word])
        if wanted >= self.rows:
            return np.arange(self.rows)
        # Distances are small integers: a histogram finds the cut-off without sorting.
        counts = np.bincount(distance)
        cutoff = int(np.searchsorted(np.cumsum(counts), wanted))
        below = np.flatnonzero(distance < cutoff)
        at = np.flatnonzero(distance == cutoff)[: wanted - below.shape[0]]
        return np.concatenate((below, at))

    def distances(self, query: np.ndarray, passage_ids: list[int], every: np.ndarray | None = None) -> dict[int, float]:
        """Cosine distance for specific passages; ids not held (above the ceiling, absent) are
        skipped. ``every``: this query's similarity of every row, from :meth:`knn_scored`."""
        if not passage_ids or self.rows == 0:
            return {}
        wanted = np.asarray(passage_ids, dtype=np.int64)
        pos = np.searchsorted(self.ids, wanted)
        pos = np.minimum(pos, self.rows - 1)
        found = self.ids[pos] == wanted
        scores = every[pos[found]] if every is not None else self.matrix[pos[found]] @ _unit(query)
        # 1 - similarity in float32, as knn() computes it, so both give a passage the same distance.
        return dict(zip(wanted[found].tolist(), (1.0 - scores).tolist(), strict=True))


def _unit(vector: np.ndarray) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def _signs(matrix: np.ndarray) -> np.ndarray:
    """Sign bits (1 where a component is positive) packed into 64-bit words, one row per vector."""
    bits = np.packbits(matrix > 0, axis=-1)
    pad = (-bits.shape[-1]) % 8
    if pad:
        bits = np.concatenate((bits, np.zeros((*bits.shape[:-1], pad), dtype=np.uint8)), axis=-1)
    return np.ascontiguousarray(bits).view(np.uint64)


def sign_codes(matrix: np.ndarray) -> np.ndarray:
    """Word-major sign codes of a (rows, dimension) matrix: shape (words, rows)."""
    return np.ascontiguousarray(_signs(matrix).T)


def count_searchable(conn: apsw.Connection, level: Classification) -> int:
    row = conn.execute(
        "SELECT count(*) FROM passages WHERE classification <= ? AND searchable = 1", (int(level),)
    ).fetchone()
    return int(row[0]) if row else 0


def _code_words(dimension: int) -> int:
    """64-bit words in one vector's sign code."""
    return (dimension + 63) // 64


def matrix_bytes(rows: int, dimension: int) -> int:
    """Memory for ``rows`` vectors: the float matrix, the ids and (when used) the sign codes."""
    codes = 8 * _code_words(dimension) if rows > EXACT_ROWS else 0
    return rows * (dimension * _FLOAT_BYTES + 8 + codes)


def load_matrix(
    conn: apsw.Connection, level: Classification, dimension: int, cancelled: Callable[[], bool] = lambda: False
) -> VectorMatrix | None:
    """Copy the searchable vectors at or below ``level`` out of the index into one matrix.

    ``cancelled`` is polled between blocks, so a shutdown never waits for a large copy;
    a cancelled copy returns None.
    """
    expected = count_searchable(conn, level)
    # Up to EXACT_ROWS every query is one matrix-vector product over the whole matrix: held
    # column-major, OpenBLAS streams each dimension's column into the scores (sgemv "N"):
    # 1.66 to 1.05 ms p50 at 10k rows against a dot product per row, the same top 50
    # (`python -m benchmarks.matrix_layout`, docs/performance.md). Above it
    # the rescored rows are gathered by position, which wants rows contiguous.
    order: Literal["C", "F"] = "F" if expected <= EXACT_ROWS else "C"
    matrix = np.empty((expected, dimension), dtype=np.float32, order=order)
    ids = np.empty(expected, dtype=np.int64)
    codes: np.ndarray | None = None
    if expected > EXACT_ROWS:
        codes = np.empty((_code_words(dimension), expected), dtype=np.uint64)
    rows = 0
    pending_ids: list[int] = []
    pending: list[bytes] = []

    def flush() -> None:
        # Rows are copied, normalised and coded in blocks, so the peak stays near the matrix
        # itself instead of a multiple of it.
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
        if codes is not None:
            codes[:, rows:end] = _signs(matrix[rows:end]).T
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
    if rows < expected:
        # A column-major matrix cut short is strided; copied, so the product stays one stream.
        matrix, ids = np.require(matrix[:rows], requirements=order), ids[:rows]
        codes = np.ascontiguousarray(codes[:, :rows]) if codes is not None else None
    if rows > 1 and not bool(np.all(ids[1:] > ids[:-1])):
        # Sorted in numpy, not with ORDER BY, which would spill every vector into a temporary b-tree.
        by_id = np.argsort(ids, kind="stable")
        # Into a matrix of the same layout: one copy at the peak, as before.
        sorted_matrix = np.empty_like(matrix, order=order)
        np.take(matrix, by_id, axis=0, out=sorted_matrix, mode="clip")  # "raise" buffers a copy
        ids, matrix = ids[by_id], sorted_matrix
        codes = np.ascontiguousarray(codes[:, by_id]) if codes is not None else None
    return VectorMatrix(level=level, ids=ids, matrix=matrix, codes=codes)


class VectorCopier:
    """Sizes and takes the vector matrix for :class:`~governed_evidence.search.held.HeldCopy`."""

    kind = "vectors"

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension

    def needed_bytes(self, conn: apsw.Connection, level: Classification) -> int:
        # No dimension, no vectors to copy (-1: cannot be held); an empty level needs nothing.
        return matrix_bytes(count_searchable(conn, level), self.dimension) if self.dimension > 0 else -1

    def copy(self, conn: apsw.Connection, level: Classification, cancelled: Callable[[], bool]) -> VectorMatrix | None:
        return load_matrix(conn, level, self.dimension, cancelled=cancelled)


class HeldVectors(HeldCopy[VectorMatrix]):
    """The in-memory copy of one index file's searchable vectors, for one ceiling.

    Copied in the background on first need (or at start, by :meth:`load`), reloaded when a
    rebuild replaces the file, never larger than the memory budget, and stopped at
    shutdown. While there is no copy, callers use the vec0 KNN: exact, only slower.
    """

    @property
    def matrix(self) -> VectorMatrix | None:
        """The copy held now, whichever file generation it belongs to."""
        return self.copy
