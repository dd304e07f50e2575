"""Test seams shared by the suites: a fast deterministic embedder and corpus builders."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import apsw
import numpy as np
import pytest
import structlog

from governed_evidence.config import Classification
from governed_evidence.embeddings.base import Embedder, ModelIdentity, Vectors
from governed_evidence.search.service import SearchService
from governed_evidence.store.connection import connect, meta_rows, read_meta

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
SHARED_DATA = SHARED / "data"


class HashEmbedder:
    """Bag-of-words vectors from hashed lowercase words: same text, same vector, no model.

    Texts sharing words are close, so ranking tests are meaningful; it is not a model of
    meaning (paraphrase tests use the real default model).
    """

    def __init__(self, dimension: int = 64, model_id: str = "test/hash-bow") -> None:
        self._identity = ModelIdentity(model_id, dimension, "none")
        self.calls = 0
        self.texts_embedded = 0

    @property
    def identity(self) -> ModelIdentity:
        return self._identity

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        self.texts_embedded += len(texts)
        dim = self._identity.dimension
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little")
                out[i, h % dim] += 1.0
            norm = float(np.linalg.norm(out[i]))
            if norm == 0.0:
                out[i, 0] = 1.0
            else:
                out[i] /= norm
        return out


class Clock:
    """A clock a test moves by hand (``clock.now += 60``)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@contextmanager
def statements_run(conn: apsw.Connection) -> Iterator[list[str]]:
    """Every SQL statement ``conn`` runs inside the block, in order."""
    statements: list[str] = []

    def trace(_cursor: object, statement: str, _bindings: object) -> bool:
        statements.append(statement)
        return True

    conn.exec_trace = trace
    try:
        yield statements
    finally:
        conn.exec_trace = None


def write(root: Path, rel: str, content: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(content).lstrip("\n"), encoding="utf-8")
    return path


#: Queries over :func:`small_corpus` that reach passages at every level, in every mode.
SMALL_CORPUS_QUERIES = (
    "travel expenses",
    "password rotation policy",
    "Quillmoor acquisition",
    "confidential dispute invoices",
    "remote work equipment",
    "Brackenfield vendor",
)


def small_corpus(root: Path) -> Path:
    """A tiny three-level corpus with known facts, a superseded pair and a seeded secret."""
    write(
        root,
        "public/expenses.md",
        """
        ---
        title: Travel expenses policy
        ---
        # Travel expenses policy

        ## Claiming train fares

        Staff claim standard-class train fares through the expenses portal within thirty days
        of travel. Receipts must be attached to every claim for rail travel.

        ## Hotels

        Hotel stays are reimbursed up to the nightly cap published by finance each April.
        """,
    )
    write(
        root,
        "public/leave.md",
        """
        # Leave policy

        ## Bereavement leave

        After a death in the family an employee may take up to five days of paid bereavement
        leave, agreed with their line manager.

        ## Annual leave

        Full-time staff receive twenty-five days of annual leave each year plus public holidays.
        """,
    )
    write(
        root,
        "internal/remote-2022.md",
        """
        ---
        title: Remote work policy 2022
        superseded_by: internal/remote-2024.md
        ---
        # Remote work policy 2022

        Employees may work from home two days per week with approval from their director.
        """,
    )
    write(
        root,
        "internal/remote-2024.md",
        """
        ---
        title: Remote work policy 2024
        ---
        # Remote work policy 2024

        Employees may work from home three days per week with approval from their line manager.
        """,
    )
    write(
        root,
        "internal/runbook.md",
        """
        # Deployment runbook

        ## Steps

        Deploy with the release pipeline after the change board approves the ticket.

        ## Credentials

        The service account is configured as password = "hunter2-EXAMPLE-not-real" in the vault.
        """,
    )
    write(
        root,
        "restricted/zephyr.md",
        """
        # Project Zephyr acquisition

        The board approved the acquisition of Quillmoor Analytics for 41.7 million under the
        codename Zephyr. Travel expenses for the due diligence team are charged to cost centre 9931.
        """,
    )
    write(
        root,
        "public/labelled-secret.md",
        """
        ---
        classification: confidential
        ---
        # Vendor dispute

        The confidential dispute with Brackenfield Ltd concerns unpaid invoices worth 88,000.
        """,
    )
    return root


def meta_of(db: Path) -> dict[str, str]:
    """The raw ``meta`` rows of ``db`` (of the current schema), through a connection closed afterwards."""
    conn = connect(db, readonly=True)
    try:
        read_meta(conn)  # refuses another schema version
        return meta_rows(conn)
    finally:
        conn.close()


def run_cli(
    *args: str, env: dict[str, str] | None = None, log_level: str = "INFO", drop: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """``python -m governed_evidence ARGS`` from the repository root, as an operator runs it.

    ``drop``: variables of this environment not to pass on (a CI job's ceiling, say).
    """
    full_env = {**os.environ, "GOVERNED_EVIDENCE_LOG_LEVEL": log_level, **(env or {})}
    for name in drop:
        full_env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "governed_evidence", *args],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
        check=False,
    )


def load_script(name: str) -> ModuleType:
    """``scripts/NAME.py`` imported as a module (the scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def counting_maxscore(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Record, for each keyword ranking from the impact lists, whether MaxScore answered it
    (else every row was scored)."""
    from governed_evidence.search import impacts, maxscore

    answered: list[bool] = []

    def counted(phrases: Sequence[maxscore.Phrase], depth: int, essential_share: float) -> np.ndarray | None:
        top = maxscore.pruned_top(phrases, depth, essential_share)
        answered.append(top is not None)
        return top

    monkeypatch.setattr(impacts, "pruned_top", counted)
    return answered


def ungated_service(db: Path, embedder: Embedder, ceiling: Classification, memory: int = 64 * 2**20) -> SearchService:
    """A service over ``db`` at ``ceiling`` with ``embedder``, the gate off, and ``memory`` bytes
    for its in-memory copies (0: every search answered from the file)."""
    return SearchService(
        db, ceiling=ceiling, embedder_factory=lambda: embedder, gate_enabled=False, vector_memory_bytes=memory
    )


@contextlib.contextmanager
def logging_restored() -> Iterator[None]:
    """structlog's configuration and the root logger's handlers and level as they were before."""
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        structlog.configure(**saved)
        root.handlers[:] = handlers
        root.setLevel(level)
