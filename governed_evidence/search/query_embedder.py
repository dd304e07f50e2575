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
from governed_evidence.store.meta import IndexMeta

__all__ = ["QueryEmbedder"]

log = get_logger("search")


def _embed(embedder: Embedder, text: str) -> np.ndarray:
    return np.asarray(embed_queries(embedder, [text])[0], dtype=np.float32)


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

    def start(self, text: str, *, on_worker: bool) -> Future[np.ndarray]:
        """Embed ``text``: on a worker thread while the caller ranks by keywords (both release the
        GIL for most of their time), or here and now; either way the result is read from the
        future. Raises :class:`EmbedderError` when there is no embedder."""
        embedder = self.get()
        if embedder is None:
            raise EmbedderError(f"meaning search unavailable: {self._error}")
        if on_worker:
            return self._workers().submit(_embed, embedder, text)
        done: Future[np.ndarray] = Future()
        try:
            done.set_result(_embed(embedder, text))
        except EmbedderError as exc:
            done.set_exception(exc)
        return done

    def _workers(self) -> ThreadPoolExecutor:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="query-embed")
        return self._pool
