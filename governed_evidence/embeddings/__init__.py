"""Embedders: the offline default model and an OpenAI-compatible endpoint."""

from governed_evidence.embeddings.base import Embedder, ModelIdentity
from governed_evidence.embeddings.factory import make_embedder

__all__ = ["Embedder", "ModelIdentity", "make_embedder"]
