"""Choose the embedder an operator configured."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence

import numpy as np

from governed_evidence.config import Settings
from governed_evidence.embeddings.base import Embedder, ModelIdentity, Vectors
from governed_evidence.errors import EmbedderError

__all__ = ["BackgroundEmbedder", "LazyEmbedder", "make_embedder", "make_ingest_embedder"]


def make_embedder(settings: Settings, name: str | None = None) -> Embedder:
    choice = name or settings.embedder
    if choice == "openai":
        from governed_evidence.embeddings.openai import OpenAIEmbedder
        from governed_evidence.embeddings.prompts import resolve_prompting

        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        prompting = resolve_prompting(
            settings.openai_preset,
            settings.openai_query_prefix,
            settings.openai_passage_prefix,
            settings.openai_input_type,
        )
        return OpenAIEmbedder(
            settings.openai_base_url,
            settings.openai_model,
            api_key=key,
            timeout_s=settings.openai_timeout_s,
            prompting=prompting,
        )
    from governed_evidence.embeddings.minilm import MiniLMEmbedder

    return MiniLMEmbedder()


class LazyEmbedder:
    """An embedder made when the first texts are to be embedded, not before.

    An ingest that embeds nothing (an unchanged corpus, or an incremental build whose
    changed passages all have stored vectors) then never loads the model. ``identity`` is
    the identity the made embedder must have, when it is known without making it (the
    default model's is fixed by its pinned weights); otherwise asking for it makes the embedder.
    """

    def __init__(self, make: Callable[[], Embedder], identity: ModelIdentity | None = None) -> None:
        self._make = make
        self._identity = identity
        self._embedder: Embedder | None = None

    @property
    def loaded(self) -> bool:
        return self._embedder is not None

    def load(self) -> None:
        """Make the embedder now (an ingest says so in its progress)."""
        self._get()

    def _get(self) -> Embedder:
        if self._embedder is None:
            embedder = self._make()
            if self._identity is not None and embedder.identity != self._identity:
                raise EmbedderError("the embedding model loaded is not the one the index records")
            self._embedder = embedder
        return self._embedder

    @property
    def identity(self) -> ModelIdentity:
        return self._identity if self._identity is not None else self._get().identity

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts and self._identity is not None:
            return np.zeros((0, self._identity.dimension), dtype=np.float32)
        return self._get().embed(texts)


def make_ingest_embedder(settings: Settings, name: str | None = None) -> LazyEmbedder:
    """The embedder an ingest uses: the configured one, made only when something is embedded."""
    if (name or settings.embedder) == "openai":
        # The endpoint's dimension is learnt from its first answer: asking for the identity makes it.
        return LazyEmbedder(lambda: make_embedder(settings, name))
    from governed_evidence.embeddings.minilm import DIMENSION, MODEL_ID, MODEL_SHA256

    return LazyEmbedder(lambda: make_embedder(settings, name), ModelIdentity(MODEL_ID, DIMENSION, MODEL_SHA256))


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
