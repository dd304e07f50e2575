"""The searchable vectors at one ceiling, held in memory for exact nearest-neighbour search.

sqlite-vec's float KNN is an exact scan, but it walks its chunks one vector at a time; a
matrix product over the same vectors gives the same ranking several times faster (see
docs/performance.md). The index file stays the single source of truth: this is a read-only
copy taken from it, keyed by the file's identity and dropped when a rebuild replaces it.

From :data:`PROJECTED_ROWS` rows a product over the vectors projected onto their
:data:`PROJECTED_DIMENSION` principal directions (taken from the held vectors at load) picks
:func:`projected_count` candidates, ranked by their exact cosine: a quarter of the bytes
streamed per query, the cost of a full product at these sizes being memory, not arithmetic.

Above :data:`EXACT_ROWS` rows a one-bit-per-dimension sign code of every vector is kept
beside the matrix: a Hamming scan over the codes (48 bytes a row instead of 1,536) picks
:func:`rescore_count` candidates, and those are ranked by their exact cosine. The distances
returned are always exact; only which passages reach the exact step is approximate, and
``make bench`` measures that as recall@10 against a full matrix product (>= 0.99 at 10k,
100k and 1M passages).

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
from governed_evidence.search.sql import count_searchable

__all__ = [
    "EXACT_ROWS",
    "HAMMING_BLOCK",
    "PROJECTED_DIMENSION",
    "PROJECTED_RESCORE_FRACTION",
    "PROJECTED_RESCORE_MIN",
    "PROJECTED_RESCORE_PER_K",
    "PROJECTED_ROWS",
    "RESCORE_BLOCK",
    "RESCORE_FRACTION",
    "RESCORE_MIN",
    "WHOLE_SCAN_ROWS",
    "HeldVectors",
    "MemoryBudget",
    "Projection",
    "VectorCopier",
    "VectorMatrix",
    "load_matrix",
    "matrix_bytes",
    "principal_basis",
    "projected_count",
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
#: Above WHOLE_SCAN_ROWS, rows of sign codes scanned at a time: a block's temporaries (256 KB
#: for one word's XOR) stay in a core's cache. The scan with its selection, alternated with the
#: whole-array scan over the generated corpora's vectors (the same rows picked for every query):
#: 838,040 rows 8.3-8.9 to 7.0 ms p50, 250,000 rows 2.2 to 1.7, 200,000 1.7 to 1.4. Blocks of 8,192 or
#: 131,072 rows cost more (the distances alone at 838,040 rows: 6.7 and 6.5 against 5.8 ms).
HAMMING_BLOCK = 32_768
#: Up to this many rows the codes are scanned whole, as before blocks: at 83,752 rows blocks
#: cost 0.04 ms of a search's 1.3 ms vector stage (in one process, alternated).
WHOLE_SCAN_ROWS = 131_072
#: Rows the sign-code path gathers and rescores at a time (:func:`_rescored`): at 83,752 rows
#: (2,000 rescored) 0.50 to 0.36 ms p50, at 838,040 (8,380) 3.28 to 1.86, the same scores to
#: the bit for every query; blocks of 256 or 768 rows were no faster.
RESCORE_BLOCK = 512


#: From this many rows (up to EXACT_ROWS) candidates are picked by a product over the
#: projected vectors. Below it the full product costs 0.1 ms or less: nothing to save.
PROJECTED_ROWS = 8_192
#: Principal directions kept (of 384 for MiniLM), with the rescored count below: chosen by
#: ``python -m benchmarks.projection`` on SciFact train queries (the fastest setting keeping
#: recall@50 >= 0.995 against the full product on the generated 10k and 50k passages and the
#: real abstracts). At 10k, k=50, 500 rescored: 64 directions keep 0.991 in 0.28 ms p50, 96
#: keep 0.998 in 0.33 ms, 128 keep 0.9999 in 0.38 ms; the full product takes 0.63 ms.
PROJECTED_DIMENSION = 96
#: Candidates rescored exactly after the projected product: ten times k, at least 500 and 5%
#: of the rows.
PROJECTED_RESCORE_PER_K = 10
PROJECTED_RESCORE_MIN = 500
PROJECTED_RESCORE_FRACTION = 20
#: Rows the principal directions are computed from, at most (evenly spaced): the directions of
#: a sample are as good, and the load stays short at 50k rows.
_BASIS_SAMPLE = 16_384


def rescore_count(rows: int, k: int) -> int:
    return min(rows, max(k, RESCORE_MIN, rows // RESCORE_FRACTION))


def projected_count(rows: int, k: int) -> int:
    """Candidates the projected product passes to exact rescoring."""
    return min(rows, max(PROJECTED_RESCORE_PER_K * k, PROJECTED_RESCORE_MIN, rows // PROJECTED_RESCORE_FRACTION))


def _projects(rows: int, dimension: int) -> bool:
    """Whether a matrix of this shape is searched through the projection."""
    return PROJECTED_ROWS <= rows <= EXACT_ROWS and dimension >= 2 * PROJECTED_DIMENSION


def principal_basis(matrix: np.ndarray, dimension: int | None = None) -> np.ndarray:
    """The ``dimension`` leading eigenvectors of the rows' second-moment matrix, as columns
    (float32, C order): the projection that keeps the most of every inner product in the
    least-squares sense. Uncentred, because the products it approximates are uncentred.
    ``dimension`` defaults to :data:`PROJECTED_DIMENSION`."""
    kept = PROJECTED_DIMENSION if dimension is None else dimension
    step = max(1, -(-matrix.shape[0] // _BASIS_SAMPLE))
    sample = np.asarray(matrix[::step], dtype=np.float64)
    _, vectors = np.linalg.eigh(sample.T @ sample)
    # eigh returns ascending eigenvalues: the last columns are the leading directions.
    return np.ascontiguousarray(vectors[:, ::-1][:, :kept], dtype=np.float32)


@dataclass(frozen=True)
class Projection:
    """Held rows projected onto their leading principal directions (:func:`principal_basis`)."""

    #: The directions as columns (dimension x PROJECTED_DIMENSION).
    basis: np.ndarray
    #: Every row projected onto them, column-major: scanned whole by each query.
    rows: np.ndarray

    @classmethod
    def of(cls, matrix: np.ndarray) -> Projection:
        basis = principal_basis(matrix)
        return cls(basis, np.asfortranarray(matrix @ basis))

    @property
    def nbytes(self) -> int:
        return int(self.basis.nbytes + self.rows.nbytes)

    def nearest(self, unit: np.ndarray, wanted: int) -> np.ndarray:
        """Row positions of the ``wanted`` highest projected similarities to ``unit``."""
        count = self.rows.shape[0]
        if wanted >= count:
            return np.arange(count)
        approximate = self.rows @ (unit @ self.basis)
        # The largest without negating a copy of every score first.
        return np.argpartition(approximate, count - wanted)[count - wanted :]


@dataclass(frozen=True)
class VectorMatrix:
    """Unit-normalised rows in passage-id order; ``ids`` is sorted ascending."""

    level: Classification
    ids: np.ndarray
    matrix: np.ndarray
    #: Sign bits of every row, word-major (see :func:`sign_codes`); None: every query is a full
    #: matrix product (or a projected one).
    codes: np.ndarray | None = None
    #: The rows projected onto their principal directions; None: no projected product.
    projection: Projection | None = None

    @property
    def rows(self) -> int:
        return int(self.ids.shape[0])

    @property
    def nbytes(self) -> int:
        extra = sum(a.nbytes for a in (self.codes, self.projection) if a is not None)
        return int(self.matrix.nbytes + self.ids.nbytes + extra)

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
        if self.projection is not None:
            rows = self.projection.nearest(unit, projected_count(self.rows, k))
            scores = _gathered(self.matrix, rows) @ unit
        elif self.codes is not None:
            rows = self._nearest_codes(_signs(unit), rescore_count(self.rows, k))
            scores = _rescored(self.matrix, rows, unit)
        else:
            rows = np.arange(self.rows)
            scores = every = self.matrix @ unit
        top = np.argpartition(-scores, k - 1)[:k] if k < len(rows) else np.arange(len(rows))
        # lexsort: last key is primary; the id breaks ties, so the order is deterministic.
        order = top[np.lexsort((self.ids[rows[top]], -scores[top]))]
        # Converted column by column (tolist), not element by element: the same Python ints and
        # floats (1 - similarity in float32), in a third of the time.
        ranked = zip(self.ids[rows[order]].tolist(), (1.0 - scores[order]).tolist(), strict=True)
        return list(ranked), every

    def _nearest_codes(self, query_code: np.ndarray, wanted: int) -> np.ndarray:
        """Row positions of the ``wanted`` smallest Hamming distances to ``query_code``."""
        assert self.codes is not None
        # Codes are stored word-major (one contiguous array per 64-bit word): XOR and popcount
        # then stream through memory, several times faster than row-major on the same data.
        block = self.rows if self.rows <= WHOLE_SCAN_ROWS else HAMMING_BLOCK
        distance, counts = _blocked_distances(self.codes, query_code, block)
        if wanted >= self.rows:
            return np.arange(self.rows)
        # Distances are small integers: their histogram finds the cut-off without sorting.
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
        scores = every[pos[found]] if every is not None else _gathered(self.matrix, pos[found]) @ _unit(query)
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


def _rescored(matrix: np.ndarray, rows: np.ndarray, unit: np.ndarray) -> np.ndarray:
    """The exact similarity of ``rows`` (positions) to ``unit``, gathered and multiplied
    :data:`RESCORE_BLOCK` rows at a time: each block's copy stays in the core's cache instead of
    the whole gather going out to memory and back. Each row's product is the same dot product
    whatever the block (a test compares every block size against the whole gather)."""
    count = rows.shape[0]
    scores = np.empty(count, dtype=np.float32)
    # Blocks start at multiples of RESCORE_BLOCK, so each row sits where it sat in the whole
    # product's row groups; a last block of one row joins the block before it (a product over a
    # single row takes another path, whose last bit can differ).
    starts = list(range(0, count, RESCORE_BLOCK))
    if len(starts) > 1 and count - starts[-1] == 1:
        starts.pop()
    for start, stop in zip(starts, [*starts[1:], count], strict=True):
        scores[start:stop] = _gathered(matrix, rows[start:stop]) @ unit
    return scores


def _gathered(matrix: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``matrix[rows]``, the same rows in the same order, copied by ``np.take``: a row copy each
    instead of fancy indexing's element-wise iterator, half the time for 500 rows of 384 floats
    (0.06 against 0.12 ms in a core's cache)."""
    return np.take(matrix, rows, axis=0)


def _blocked_distances(codes: np.ndarray, query_code: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """Every row's Hamming distance to ``query_code`` and their histogram, ``block`` rows at a
    time (every row at once up to :data:`WHOLE_SCAN_ROWS`, else :data:`HAMMING_BLOCK`): each
    word's temporaries stay in the core's cache while the block's distances and histogram are
    summed."""
    words, rows = codes.shape
    distance = np.empty(rows, dtype=np.uint16)
    counts = np.zeros(words * 64 + 1, dtype=np.int64)
    for start in range(0, rows, block):
        stop = min(start + block, rows)
        part = distance[start:stop]
        part[:] = np.bitwise_count(codes[0, start:stop] ^ query_code[0])
        for word in range(1, words):
            part += np.bitwise_count(codes[word, start:stop] ^ query_code[word])
        counts += np.bincount(part, minlength=counts.shape[0])
    return distance, counts


def sign_codes(matrix: np.ndarray) -> np.ndarray:
    """Word-major sign codes of a (rows, dimension) matrix: shape (words, rows)."""
    return np.ascontiguousarray(_signs(matrix).T)


def _code_words(dimension: int) -> int:
    """64-bit words in one vector's sign code."""
    return (dimension + 63) // 64


def matrix_bytes(rows: int, dimension: int) -> int:
    """Memory for ``rows`` vectors: the float matrix, the ids and (when used) the sign codes or
    the projected rows and their basis."""
    codes = 8 * _code_words(dimension) if rows > EXACT_ROWS else 0
    if _projects(rows, dimension):
        projected = PROJECTED_DIMENSION * _FLOAT_BYTES
        return rows * (dimension * _FLOAT_BYTES + 8 + projected) + dimension * projected
    return rows * (dimension * _FLOAT_BYTES + 8 + codes)


def load_matrix(
    conn: apsw.Connection, level: Classification, dimension: int, cancelled: Callable[[], bool] = lambda: False
) -> VectorMatrix | None:
    """Copy the searchable vectors at or below ``level`` out of the index into one matrix.

    ``cancelled`` is polled between blocks, so a shutdown never waits for a large copy;
    a cancelled copy returns None.
    """
    expected = count_searchable(conn, level)
    # Below PROJECTED_ROWS every query is one matrix-vector product over the whole matrix: held
    # column-major, OpenBLAS streams each dimension's column into the scores (sgemv "N"):
    # 1.66 to 1.05 ms p50 at 10k rows against a dot product per row, the same top 50
    # (`python -m benchmarks.matrix_layout`, docs/performance.md). From it the rescored rows
    # are gathered by position, which wants rows contiguous (the projected rows, scanned whole,
    # are column-major).
    projects = _projects(expected, dimension)
    order: Literal["C", "F"] = "F" if expected <= EXACT_ROWS and not projects else "C"
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
    projection = Projection.of(matrix) if projects and _projects(rows, dimension) else None
    return VectorMatrix(level=level, ids=ids, matrix=matrix, codes=codes, projection=projection)


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
