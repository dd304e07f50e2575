"""Seams of the receipts suite: a receipt key on disk, a served app, a verify run."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastmcp import Client, FastMCP

from governed_evidence.cli import main
from governed_evidence.config import Classification
from governed_evidence.embeddings.base import Embedder
from governed_evidence.mcp import build_app
from governed_evidence.mcp.audit import AuditSink
from governed_evidence.mcp.calls import Calls, stdio_caller
from governed_evidence.receipts.issue import ReceiptIssuer
from governed_evidence.receipts.keys import load_signer
from governed_evidence.search.levels import LevelServices
from governed_evidence.search.service import SearchService


def write_key(path: Path) -> Path:
    """A new Ed25519 private key as unencrypted PKCS#8 PEM (what openssl genpkey writes)."""
    key = Ed25519PrivateKey.generate()
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(0o600)
    return path


def write_public(key: Path, path: Path) -> Path:
    private = serialization.load_pem_private_key(key.read_bytes(), password=None)
    path.write_bytes(
        private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return path


@pytest.fixture
def receipt_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The server's key, configured as an operator does (so `verify` checks with it by default)."""
    key = write_key(tmp_path / "receipt-key.pem")
    monkeypatch.setenv("GOVERNED_EVIDENCE_RECEIPT_KEY", str(key))
    return key


class Served:
    """An app at one ceiling over one index, signing with ``key`` (None: unsigned)."""

    def __init__(
        self, db: Path, embedder: Embedder, ceiling: Classification, key: Path | None, audit: Path | None = None
    ) -> None:
        self.service = SearchService(db, ceiling=ceiling, embedder_factory=lambda: embedder, gate_enabled=False)
        self.audit = AuditSink.open(str(audit)) if audit is not None else None
        issuer = ReceiptIssuer(load_signer(key) if key is not None else None)
        self.calls = Calls(
            LevelServices.single(self.service), anonymous=stdio_caller(ceiling), audit=self.audit, receipts=issuer
        )
        self.app: FastMCP = build_app(self.calls)

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The tool's structured answer, through a real MCP client (in memory)."""

        async def body() -> dict[str, Any]:
            async with Client(self.app) as client:
                result = await client.call_tool(tool, arguments)
                assert result.structured_content is not None
                # The text block carries the same answer, receipt included.
                assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
                return result.structured_content

        return asyncio.run(body())

    def close(self) -> None:
        self.service.reader.close()
        if self.audit is not None:
            self.audit.close()


@pytest.fixture
def served(hash_embedder: Embedder) -> Iterator[Any]:
    made: list[Served] = []

    def make(
        db: Path, ceiling: Classification = Classification.PUBLIC, key: Path | None = None, audit: Path | None = None
    ) -> Served:
        s = Served(db, hash_embedder, ceiling, key, audit)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def verify(
    capsys: pytest.CaptureFixture[str], answer: str, *args: str, stdin: Any = None
) -> tuple[int, dict[str, Any]]:
    """``governed-evidence verify`` on ``answer`` (a file path) with ``--json``: its exit status and verdict."""
    capsys.readouterr()
    code = main(["verify", answer, "--json", *args])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}
