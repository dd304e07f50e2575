"""Shared seams of the hardening suite: counted figures, captured logs, a memoising embedder."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest
import structlog

from governed_evidence.embeddings.base import Embedder, ModelIdentity, Vectors
from tests.hardening import figures


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not figures.FIGURES:
        return
    terminalreporter.write_sep("=", "hardening figures")
    for line in figures.lines():
        terminalreporter.write_line(line)


class LogCapture:
    """Structured log lines (structlog and stdlib) as they would reach stderr."""

    def __init__(self) -> None:
        self.buffer = io.StringIO()

    def lines(self) -> list[str]:
        return [line for line in self.buffer.getvalue().splitlines() if line.strip()]


@pytest.fixture
def captured_logs() -> Iterator[LogCapture]:
    """Route the package's JSON log lines into memory (the renderer stays the real one)."""
    capture = LogCapture()
    saved = structlog.get_config()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=capture.buffer))
    root = logging.getLogger()
    handler = logging.StreamHandler(capture.buffer)
    if root.handlers:
        handler.setFormatter(root.handlers[0].formatter)
    root.addHandler(handler)
    try:
        yield capture
    finally:
        root.removeHandler(handler)
        structlog.configure(**saved)


class MemoEmbedder:
    """Wraps an embedder and remembers each text's vector (the real model, paid once per text)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.memo: dict[str, np.ndarray[Any, Any]] = {}

    @property
    def identity(self) -> ModelIdentity:
        return self.inner.identity

    def embed(self, texts: Sequence[str]) -> Vectors:
        todo = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if todo:
            for text, vector in zip(todo, self.inner.embed(todo), strict=True):
                self.memo[text] = np.asarray(vector, dtype=np.float32)
        return np.stack([self.memo[t] for t in texts]).astype(np.float32)
