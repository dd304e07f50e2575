"""Choose the embedder an operator configured."""

from __future__ import annotations

from governed_evidence.config import Settings
from governed_evidence.embeddings.base import Embedder

__all__ = ["make_embedder"]


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
