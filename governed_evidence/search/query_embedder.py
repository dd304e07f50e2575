"""The query embedder's lifecycle: loaded once, on first need, and refused when it does not
match the index.

Meaning search is optional at every step: no embedder configured, one that fails to load,
or one whose model differs from the index's each turn a search into a keyword search with
the reason, never into an error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from governed_evidence.embeddings.base import Embedder, embed_queries
from governed_evidence.errors import EmbedderError
from governed_evidence.logging import get_logger
from governed_evidence.search.vectors import VectorMatrix
from governed_evidence.store.meta import IndexMeta

__all__ = ["CALLER_THREAD_ROWS", "Embedded", "QueryEmbedder"]

log = get_logger("search")

#: The query's vector and, when the vectors are in memory, its nearest passages.
Embedded = tuple[np.ndarray, list[tuple[int, float]] | None]

#: Up to this many rows in the keyword impact lists held in memory, a query is embedded on the
#: caller's thread, before its vector is needed, instead of on a worker while the keyword side
#: runs. Ranking from those lists takes 0.05-0.3 ms, less than handing the query to a worker
#: and waking the caller again costs (about 0.16 ms), and the model's own threads then share
#: the cores with nobody. Measured with the real model, 300 SciFact queries x 3, the two ways
#: alternated in one process (p50 / p95 ms, whole search): 6.58 / 9.34 against 6.77 / 9.62 at
#: 8,396 held rows, 7.46 / 10.50 against 7.58 / 10.98 at 25,661 and 8.02-8.32 / 11.09-11.44
#: against 8.09-8.40 / 11.31-11.78 at 83,752 (docs/performance.md). Above it, or while the
#: keyword side is FTS5's (C, milliseconds at scale, the GIL released), the overlap pays.
CALLER_THREAD_ROWS = 100_000


def _embed_and_rank(embedder: Embedder, text: str, matrix: VectorMatrix | None, depth: int) -> Embedded:
    vector = np.asarray(embed_queries(embedder, [text])[0], dtype=np.float32)
    return vector, (matrix.knn(vector, depth) if matrix is not None else None)


class QueryEmbedder:
    def __init__(self, factory: Callable[[], Embedder] | None) -> None:
        self._factory = factory
        self._embedder: Embedder | None = None
        self._error: str | None = None if factory else "no embedder configured"
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def get(self) -> Embedder | None:
        """The embedder, loaded once; None (with a recorded reason) if unavailable."""
        if self._embedder is not None or self._factory is None:
            return self._embedder
        with self._lock:
            if self._embedder is None and self._error is None:
                try:
                    self._embedder = self._factory()
                except EmbedderError as exc:
                    self._error = str(exc)
                    log.warning("embedder_unavailable", reason=str(exc))
        return self._embedder

    def unavailable(self, meta: IndexMeta) -> str | None:
        """Why meaning search cannot serve the index described by ``meta``; None when it can."""
        embedder = self.get()
        if embedder is None:
            return f"meaning search unavailable: {self._error}"
        try:
            identity = embedder.identity
        except EmbedderError as exc:
            return f"meaning search unavailable: {exc}"
        mismatch = identity.describe_mismatch(meta.embedding_model, meta.embedding_dimension)
        return f"meaning search refused: {mismatch}" if mismatch else None

    def embed(self, text: str) -> np.ndarray:
        """Embed ``text`` on the caller's thread (see :data:`CALLER_THREAD_ROWS`)."""
        embedder = self.get()
        if embedder is None:
            raise EmbedderError(f"meaning search unavailable: {self._error}")
        return _embed_and_rank(embedder, text, None, 0)[0]

    def submit(self, text: str, matrix: VectorMatrix | None, depth: int) -> Future[Embedded]:
        """Embed ``text`` (and rank it against ``matrix``) on a worker thread.

        It runs while the full-text query runs on the caller's thread; both release the
        GIL, and the results are the same as running them in turn.
        """
        embedder = self.get()
        if embedder is None:
            raise EmbedderError(f"meaning search unavailable: {self._error}")
        return self._workers().submit(_embed_and_rank, embedder, text, matrix, depth)

    def _workers(self) -> ThreadPoolExecutor:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="query-embed")
        return self._pool
