"""An OpenAI-compatible ``/v1/embeddings`` endpoint (Ollama, vLLM, a gateway) over httpx."""

from __future__ import annotations

import time
from collections.abc import Sequence

import httpx
import numpy as np

from governed_evidence.embeddings.base import ModelIdentity, Vectors
from governed_evidence.embeddings.prompts import Prompting
from governed_evidence.errors import EmbedderError

__all__ = ["OpenAIEmbedder"]

_RETRY_STATUS = {408, 429, 500, 502, 503, 504}


class OpenAIEmbedder:
    """Vectors from a remote endpoint; the dimension is learnt from the first answer.

    ``prompting`` says how a query is told from a passage (embeddings/prompts.py): :meth:`embed`
    embeds passages, :meth:`embed_queries` queries. The prompts are part of the model id the
    index records, so vectors made with other prompts are never compared with the index's.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        retries: int = 2,
        batch_size: int = 64,
        transport: httpx.BaseTransport | None = None,
        prompting: Prompting | None = None,
    ) -> None:
        headers = {"User-Agent": "governed-evidence"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(5.0, timeout_s)),
            transport=transport,
        )
        self._model = model
        self._retries = retries
        self._batch_size = batch_size
        self._dimension: int | None = None
        self._endpoint = f"{httpx.URL(base_url).host}"
        self._prompting = prompting or Prompting()

    @property
    def prompting(self) -> Prompting:
        return self._prompting

    @property
    def identity(self) -> ModelIdentity:
        if self._dimension is None:
            self.embed(["dimension probe"])
        assert self._dimension is not None
        described = self._prompting.describe()
        model_id = f"openai-compatible:{self._model}" + (f" [{described}]" if described else "")
        return ModelIdentity(model_id, self._dimension, f"endpoint:{self._endpoint}")

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Passages, each with the passage prefix (and the passage ``input_type``)."""
        return self._embed(texts, self._prompting.passage_prefix, 1)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Search queries, each with the query prefix (and the query ``input_type``)."""
        return self._embed(texts, self._prompting.query_prefix, 0)

    def _embed(self, texts: Sequence[str], prefix: str, side: int) -> Vectors:
        input_type = self._prompting.input_type[side] if self._prompting.input_type else None
        rows: list[Vectors] = []
        for start in range(0, len(texts), self._batch_size):
            batch = [prefix + t for t in texts[start : start + self._batch_size]]
            rows.append(self._embed_batch(batch, input_type))
        if not rows:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        return np.vstack(rows)

    def _post(self, batch: list[str], input_type: str | None) -> httpx.Response:
        body: dict[str, object] = {"model": self._model, "input": batch}
        if input_type is not None:
            body["input_type"] = input_type
        delay = 0.5
        for attempt in range(self._retries + 1):
            try:
                response = self._client.post("/v1/embeddings", json=body)
            except httpx.TransportError as exc:
                if attempt == self._retries:
                    raise EmbedderError(f"embedding endpoint unreachable ({type(exc).__name__})") from exc
            else:
                if response.status_code not in _RETRY_STATUS or attempt == self._retries:
                    return response
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    def _embed_batch(self, batch: list[str], input_type: str | None) -> Vectors:
        response = self._post(batch, input_type)
        if response.status_code != 200:
            raise EmbedderError(f"embedding endpoint answered HTTP {response.status_code}")
        try:
            data = sorted(response.json()["data"], key=lambda d: d["index"])
            matrix = np.array([d["embedding"] for d in data], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbedderError("embedding endpoint returned an unexpected body") from exc
        if matrix.ndim != 2 or matrix.shape[0] != len(batch) or matrix.shape[1] == 0:
            raise EmbedderError("embedding endpoint returned vectors of the wrong shape")
        if self._dimension is None:
            self._dimension = int(matrix.shape[1])
        elif matrix.shape[1] != self._dimension:
            raise EmbedderError("embedding endpoint changed its vector dimension")
        norms = np.clip(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12, None)
        result: Vectors = (matrix / norms).astype(np.float32)
        return result
