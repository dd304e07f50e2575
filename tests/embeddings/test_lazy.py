"""The ingest's embedder is made on the first text to embed, and must be the model it declared."""

from __future__ import annotations

import pytest

from governed_evidence.config import Settings
from governed_evidence.embeddings.base import ModelIdentity
from governed_evidence.embeddings.factory import LazyEmbedder, make_ingest_embedder
from governed_evidence.embeddings.minilm import DIMENSION, MODEL_ID, MODEL_SHA256
from governed_evidence.errors import EmbedderError
from tests.helpers import HashEmbedder


def test_nothing_is_made_until_a_text_is_embedded() -> None:
    made: list[HashEmbedder] = []

    def make() -> HashEmbedder:
        made.append(HashEmbedder())
        return made[-1]

    lazy = LazyEmbedder(make, HashEmbedder().identity)
    assert lazy.identity == HashEmbedder().identity
    assert lazy.embed([]).shape == (0, 64)
    assert not made and not lazy.loaded
    assert lazy.embed(["leave policy"]).shape == (1, 64)
    assert len(made) == 1 and lazy.loaded
    lazy.embed(["travel"])
    assert len(made) == 1


def test_an_embedder_that_is_not_the_declared_model_is_refused() -> None:
    lazy = LazyEmbedder(HashEmbedder, ModelIdentity("another/model", 64, "none"))
    with pytest.raises(EmbedderError, match="not the one"):
        lazy.embed(["text"])


def test_without_a_declared_identity_asking_for_it_makes_the_embedder() -> None:
    lazy = LazyEmbedder(HashEmbedder)
    assert lazy.identity == HashEmbedder().identity and lazy.loaded


def test_the_default_model_is_declared_without_loading_it() -> None:
    lazy = make_ingest_embedder(Settings())
    assert lazy.identity == ModelIdentity(MODEL_ID, DIMENSION, MODEL_SHA256)
    assert not lazy.loaded
