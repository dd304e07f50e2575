"""Choose the embedder an operator configured."""

from __future__ import annotations

import contextlib
import threading

from governed_evidence.config import Settings
from governed_evidence.embeddings.base import Embedder

__all__ = ["BackgroundEmbedder", "make_embedder"]


def make_embedder(settings: Settings, name: str | None = None) -> Embedder:
    choice = name or settings.embedder
    if choice == "openai":
        from governed_evidence.embeddings.openai import OpenAIEmbedder

        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        return OpenAIEmbedder(
            settings.openai_base_url,
            settings.openai_model,
            api_key=key,
            timeout_s=settings.openai_timeout_s,
        )
    from governed_evidence.embeddings.minilm import MiniLMEmbedder

    return MiniLMEmbedder()


class BackgroundEmbedder:
    """The configured embedder, made on a thread that starts at construction.

    The server starts this before importing the MCP stack: most of loading the default
    model (hashing the weights, building the ONNX session) is native code that runs without
    the GIL, so it overlaps the imports instead of delaying the first search after them.
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._embedder: Embedder | None = None
        self._thread = threading.Thread(target=self._load, name="embedder-load", daemon=True)
        self._thread.start()

    def _load(self) -> None:
        # A failure is left for result() to reproduce on the caller's thread.
        with contextlib.suppress(Exception):
            self._embedder = make_embedder(self._settings)

    def result(self) -> Embedder:
        """The embedder, waiting for the load to finish; usable as an embedder factory."""
        self._thread.join()
        if self._embedder is not None:
            return self._embedder
        # The load failed: make it again on the caller's thread, so the failure is raised
        # (and handled, e.g. recorded as "meaning search unavailable") there, as it would be
        # with no background load.
        return make_embedder(self._settings)

    def join(self) -> None:
        """Wait for the load (onnxruntime aborts the process if it is torn down mid-load)."""
        self._thread.join()
