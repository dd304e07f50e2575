"""Embedders: the offline default model and the OpenAI-compatible client."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import pytest

from governed_evidence.embeddings.minilm import DIMENSION, MODEL_ID, MiniLMEmbedder
from governed_evidence.embeddings.openai import OpenAIEmbedder
from governed_evidence.errors import EmbedderError


def test_minilm_vectors_are_normalised_and_meaningful(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.embed(
        [
            "time off when a relative dies",
            "bereavement leave after a death in the family",
            "expense claims for train tickets",
        ]
    )
    assert vectors.shape == (3, DIMENSION) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    sims = vectors @ vectors.T
    assert sims[0, 1] > 0.45 > sims[0, 2]
    assert minilm.identity.model_id == MODEL_ID


def test_minilm_batches_by_length_without_changing_results(minilm: MiniLMEmbedder) -> None:
    texts = [
        "short",
        "a much longer sentence about annual leave entitlement and carry over rules " * 3,
        "mid length text",
    ]
    together = minilm.embed(texts)
    alone = np.vstack([minilm.embed([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-4)


def test_minilm_refuses_a_tampered_model_file(tmp_path: Path) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not the model")
    with pytest.raises(EmbedderError, match="checksum"):
        MiniLMEmbedder(fake)
    with pytest.raises(EmbedderError, match="missing"):
        MiniLMEmbedder(tmp_path / "absent.onnx")


def _endpoint(handler: object) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        "http://127.0.0.1:9",
        "test-model",
        api_key="k",
        retries=2,
        transport=httpx.MockTransport(handler),  # type: ignore[arg-type]
    )


def test_openai_embedder_reads_vectors_in_index_order() -> None:
    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        assert request.headers["Authorization"] == "Bearer k"
        assert request.url.path == "/v1/embeddings"
        data = [{"index": i, "embedding": [float(i + 1), 0.0, 1.0]} for i in range(len(body["input"]))]
        return httpx.Response(200, json={"data": list(reversed(data))})

    embedder = _endpoint(handler)
    vectors = embedder.embed(["a", "b"])
    assert vectors.shape == (2, 3)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert vectors[0, 0] < vectors[1, 0]  # index 0 -> [1,0,1], index 1 -> [2,0,1]
    assert embedder.identity.model_id == "openai-compatible:test-model"
    assert embedder.identity.dimension == 3
    assert seen[0]["model"] == "test-model"


def test_openai_embedder_retries_then_succeeds() -> None:
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] < 3:
            return httpx.Response(503)
        return httpx.Response(200, json={"data": [{"index": 0, "embedding": [1.0, 0.0]}]})

    assert _endpoint(handler).embed(["x"]).shape == (1, 2)
    assert calls["n"] == 3


def test_openai_embedder_gives_up_with_a_clear_error() -> None:
    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(EmbedderError, match="unreachable"):
        _endpoint(refused).embed(["x"])

    def wrong_shape(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"data": [{"index": 0, "embedding": []}]})

    with pytest.raises(EmbedderError, match="wrong shape"):
        _endpoint(wrong_shape).embed(["x"])

    def not_found(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, text="no such model")

    with pytest.raises(EmbedderError, match="HTTP 404"):
        _endpoint(not_found).embed(["x"])
