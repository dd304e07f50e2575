"""A team server over real HTTP for the hardening suite, and the stdio-style servers it is held to.

:func:`team_server` composes what ``governed-evidence serve --transport http --auth tokens``
composes (one :class:`LevelServices` over one index, a service per level made at start with
their vectors copied in the background under one shared budget, bearer tokens from a tokens
file, an audit trail) and serves it with uvicorn on 127.0.0.1. Each caller's
client records the raw body of every HTTP response it receives (:class:`Bodies`), so a test
can scan exactly what went over the wire.

:func:`stdio_app` is what ``serve`` over stdio composes for one ceiling: the reference a
caller's answers are compared with.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastmcp import Client, FastMCP
from fastmcp.client.client import CallToolResult
from fastmcp.client.transports import StreamableHttpTransport

from governed_evidence.access import tokens
from governed_evidence.config import Classification
from governed_evidence.embeddings.base import Embedder
from governed_evidence.mcp import build_app
from governed_evidence.mcp.audit import AuditSink
from governed_evidence.mcp.calls import Calls, stdio_caller
from governed_evidence.receipts.issue import ReceiptIssuer
from governed_evidence.receipts.keys import Signer
from governed_evidence.search.copies import MemoryBudget
from governed_evidence.search.levels import LevelServices
from governed_evidence.search.service import SearchService
from tests.serving.server import Running, serving

__all__ = [
    "LEVELS",
    "RECEIPTS",
    "VECTOR_MEMORY",
    "Bodies",
    "Team",
    "answer",
    "decoded",
    "http_client",
    "stdio_app",
    "steady_receipt",
    "team_server",
]

LEVELS = tuple(Classification)
#: Room for every level's vectors of a small index (the server's default is 4 GiB).
VECTOR_MEMORY = 64 * 2**20
#: Fields that differ between two builds of the same documents (not between callers).
VOLATILE = frozenset({"built_at"})
#: A receipt's fields that differ between any two calls: its random id, its time and the
#: signature over them. Everything else in it is held to the reference like the answer.
RECEIPT_VOLATILE = frozenset({"id", "at", "sig"})
#: The receipt key of every server these tests compose (the team server and its references).
RECEIPTS = Signer(Ed25519PrivateKey.generate())


@dataclass
class Team:
    running: Running
    #: The token of the first caller at each level.
    tokens: dict[Classification, str]
    #: Every caller's token, by caller name.
    named: dict[str, str]
    levels: LevelServices
    audit: Path

    def audit_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.audit.read_text(encoding="utf-8").splitlines() if line.strip()]


def _service(db: Path, level: Classification, embedder: Embedder, gate: bool, budget: MemoryBudget) -> SearchService:
    return SearchService(
        db, ceiling=level, embedder_factory=lambda: embedder, gate_enabled=gate, vector_memory_bytes=budget
    )


@contextmanager
def team_server(
    db: Path,
    embedder: Embedder,
    work: Path,
    *,
    gate: bool,
    ceiling: Classification = Classification.RESTRICTED,
    callers: dict[str, Classification] | None = None,
) -> Iterator[Team]:
    """A server at ``ceiling`` over ``db`` with a token per caller (default: one per level)."""
    path = work / "tokens.json"
    named = callers or {f"caller-{level.label}": level for level in LEVELS}
    issued = {name: tokens.create(path, name, level) for name, level in named.items()}
    by_level: dict[Classification, str] = {}
    for name, level in named.items():
        by_level.setdefault(level, issued[name])
    budget = MemoryBudget(VECTOR_MEMORY)
    levels = LevelServices(lambda level: _service(db, level, embedder, gate, budget), ceiling)
    # As `serve` with credentials: every level made now, vectors copied in the background
    # (the vec0 KNN answers a level until its copy is done).
    levels.warm_all()
    audit_path = work / "audit.jsonl"
    audit = AuditSink.open(str(audit_path))
    calls = Calls(levels, anonymous=None, audit=audit, transport="http", receipts=ReceiptIssuer(RECEIPTS))
    try:
        with serving(build_app(calls, auth=tokens.TokensFileVerifier(path))) as running:
            yield Team(running, by_level, issued, levels, audit_path)
    finally:
        levels.close()
        audit.close()


@contextmanager
def stdio_app(db: Path, level: Classification, embedder: Embedder, *, gate: bool) -> Iterator[FastMCP]:
    """The app `serve` over stdio builds at ceiling ``level``: one service, vectors warmed."""
    service = _service(db, level, embedder, gate, MemoryBudget(VECTOR_MEMORY))
    levels = LevelServices.single(service)
    levels.warm_in_background(service)
    try:
        yield build_app(Calls(levels, anonymous=stdio_caller(level), receipts=ReceiptIssuer(RECEIPTS)))
    finally:
        levels.close()
        service.reader.close()


@dataclass
class Bodies:
    """Every HTTP response body one client received, as text (read in a response hook)."""

    texts: list[str] = field(default_factory=list)

    async def _record(self, response: httpx2.Response) -> None:
        # Reading the body here caches it on the response: the MCP client reads it again.
        await response.aread()
        self.texts.append(response.text)

    def factory(
        self,
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
        **options: Any,
    ) -> httpx2.AsyncClient:
        """The MCP client's HTTP client (``options``: what fastmcp adds, follow_redirects)."""
        return httpx2.AsyncClient(
            headers=headers,
            timeout=timeout or httpx2.Timeout(30.0, read=60.0),
            auth=auth,
            event_hooks={"response": [self._record]},
            **options,
        )

    def messages(self) -> Iterator[tuple[str, Any]]:
        """Each body as sent, and as JSON (a JSON response, or the data lines of an event stream)."""
        for text in self.texts:
            if not text.strip():
                continue  # 202 Accepted for a notification
            if text.lstrip().startswith(("{", "[")):
                yield text, json.loads(text)
                continue
            for line in text.splitlines():
                if line.startswith("data:") and line[5:].strip():
                    yield line, json.loads(line[5:])


def http_client(running: Running, token: str, bodies: Bodies | None = None) -> Client[StreamableHttpTransport]:
    transport = StreamableHttpTransport(
        running.mcp_url,
        headers={"Authorization": f"Bearer {token}"},
        httpx_client_factory=bodies.factory if bodies is not None else None,
    )
    return Client(transport, timeout=60)


def decoded(value: Any) -> Any:
    """``value`` with every string that holds a JSON object or list replaced by what it holds."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return decoded(json.loads(value))
        except ValueError:
            return value
    if isinstance(value, dict):
        return {k: decoded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [decoded(v) for v in value]
    return value


def _without_volatile(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _without_volatile(steady_receipt(v) if k == "receipt" else v)
            for k, v in value.items()
            if k not in VOLATILE
        }
    if isinstance(value, list):
        return [_without_volatile(v) for v in value]
    return value


def steady_receipt(receipt: Any) -> Any:
    """A receipt without the fields that differ between any two calls (None stays None)."""
    if not isinstance(receipt, dict):
        return receipt
    assert receipt["id"] and receipt["at"], receipt
    return {k: v for k, v in receipt.items() if k not in RECEIPT_VOLATILE}


def answer(result: CallToolResult) -> dict[str, Any]:
    """A tool call's whole answer (error flag, every content block, structured content),
    JSON texts decoded and build times removed: equal answers compare equal."""
    whole: dict[str, Any] = _without_volatile(
        {
            "error": bool(result.is_error),
            "content": [decoded(block.model_dump(mode="json")) for block in result.content],
            "structured": decoded(result.structured_content),
        }
    )
    return whole
