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
from governed_evidence.errors import IngestError
from governed_evidence.store.previous import reusable_vectors

__all__ = ["BATCH", "Embedded", "embed_with_reuse", "embedding_key"]

#: Texts per embedder call: large enough to keep the model busy, small enough to report progress.
BATCH = 256

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
    vectors: dict[str, bytes] = dict(reuse)
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
