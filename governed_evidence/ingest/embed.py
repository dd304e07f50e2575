"""Vectors for a build: reused from the index being replaced where the embedder input is
unchanged, computed for the rest. Every index build (ingest, the BEIR runner) uses this.

A passage's key is a hash of the model id and the exact embedder input
(:func:`embedding_key`), so a vector is reused only for the same text under the same model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from governed_evidence.embeddings.base import Embedder
from governed_evidence.embeddings.factory import LazyEmbedder
from governed_evidence.errors import IngestError
from governed_evidence.store.previous import reusable_vectors

__all__ = ["BATCH", "Embedded", "embed_with_reuse", "embedding_key"]

#: Texts per embedder call (the default model's own batch), so progress moves every second
#: or so: 4 texts of 256 tokens take about 0.5 s of the model on 2 cores, under load a few
#: times that; 256 took 10 to 60 s. Calls are in length order (below), so a small call pads
#: no more than a large one would.
BATCH = 4

ProgressFn = Callable[[str, int, int], None]


def embedding_key(model_id: str, text: str) -> str:
    """Identity of one embedder input under one model (stored as ``passages.text_hash``)."""
    return hashlib.sha256(f"{model_id}\n{text}".encode()).hexdigest()


@dataclass(frozen=True)
class Embedded:
    #: Float32 bytes by embedding key.
    vectors: dict[str, bytes]
    reused: int
    computed: int


def embed_with_reuse(
    previous: Path,
    embedder: Embedder,
    inputs: Sequence[tuple[str, str]],
    *,
    progress: ProgressFn | None = None,
) -> Embedded:
    """Vectors for every ``(key, text)`` in ``inputs``; ``previous`` is the index being replaced."""
    identity = embedder.identity
    reuse = reusable_vectors(previous, identity.model_id, identity.dimension, {key for key, _ in inputs})
    todo = [i for i, (key, _) in enumerate(inputs) if key not in reuse]
    # Texts of similar length in one call, so padding costs little model time.
    todo.sort(key=lambda i: len(inputs[i][1]))
    vectors: dict[str, bytes] = dict(reuse)
    if todo and isinstance(embedder, LazyEmbedder) and not embedder.loaded:
        # Its own stage: loading the model takes seconds, and the first batch's time left
        # must not count it.
        if progress:
            progress("model", 0, 1)
        embedder.load()
        if progress:
            progress("model", 1, 1)
    if progress and todo:
        progress("embedding", 0, len(todo))
    for start in range(0, len(todo), BATCH):
        idx = todo[start : start + BATCH]
        matrix = embedder.embed([inputs[i][1] for i in idx])
        if matrix.shape != (len(idx), identity.dimension):
            raise IngestError("the embedder returned vectors of the wrong shape")
        for i, vec in zip(idx, matrix, strict=True):
            vectors[inputs[i][0]] = np.asarray(vec, dtype=np.float32).tobytes()
        if progress:
            progress("embedding", min(start + BATCH, len(todo)), len(todo))
    return Embedded(vectors, len(inputs) - len(todo), len(todo))
