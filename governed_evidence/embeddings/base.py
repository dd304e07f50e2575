"""What every embedder offers, and how a model is identified in an index."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["Embedder", "ModelIdentity", "Vectors"]

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
