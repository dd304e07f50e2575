"""What every embedder offers, and how a model is identified in an index."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["AsymmetricEmbedder", "Embedder", "ModelIdentity", "Vectors", "embed_queries"]

Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True)
class ModelIdentity:
    """Recorded in the index; a query embedder must match it exactly to search by meaning."""

    #: Stable name of the model (and its variant), e.g. ``all-MiniLM-L6-v2/int8-onnx``.
    model_id: str
    #: Vector length.
    dimension: int
    #: sha256 of the weights when they are local, else a description of the endpoint.
    checksum: str

    def describe_mismatch(self, index_model_id: str, index_dimension: int) -> str | None:
        """Why vectors from this model cannot be compared with the index's, or None."""
        if self.model_id != index_model_id:
            # An asymmetric model's id carries its prompts after " [" (embeddings/openai.py):
            # the same model with other prompts makes vectors the index's cannot be compared with.
            if self.model_id.split(" [", 1)[0] == index_model_id.split(" [", 1)[0]:
                return (
                    f"the index was built with {index_model_id}, the query embedder is {self.model_id}"
                    " (the same model with other query/passage prompts)"
                )
            return f"the index was built with {index_model_id}, the query embedder is {self.model_id}"
        if self.dimension != index_dimension:
            return f"the index holds {index_dimension}-d vectors, the query embedder makes {self.dimension}-d"
        return None


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors, one row per text."""

    @property
    def identity(self) -> ModelIdentity: ...

    def embed(self, texts: Sequence[str]) -> Vectors: ...


class AsymmetricEmbedder(Embedder, Protocol):
    """An embedder that embeds a search query otherwise than a passage (a prompt, an
    ``input_type``); :meth:`embed` embeds passages."""

    def embed_queries(self, texts: Sequence[str]) -> Vectors: ...


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """``texts`` embedded as search queries: by the embedder's query side when it has one,
    else as any text (a symmetric model such as MiniLM)."""
    # Looked up on the type, not with isinstance: a runtime protocol check reads every
    # member, and reading an endpoint embedder's identity may call the endpoint.
    method = getattr(type(embedder), "embed_queries", None)
    if method is None:
        return embedder.embed(texts)
    result: Vectors = method(embedder, texts)
    return result
