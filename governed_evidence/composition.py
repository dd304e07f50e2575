"""The composition root: services and the server built from the operator's settings, for the CLI.

Every part of the package takes what it needs as arguments; this is the one place that
reads the settings and wires the parts together (the search services and their memory
budget, the query embedder, the audit trail, the statistics service, the MCP server and its
callers, the statistics carry-over of an index build, the status both services report). The
commands (``commands/``) turn flags into these calls and run what they return. Imports stay
inside the functions: ``serve`` must not pay at start-up for the ingest parsers or the
statistics HTTP stack (tests/mcp/test_startup.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from governed_evidence.config import Classification, Settings

if TYPE_CHECKING:
    from collections.abc import Callable

    from fastmcp import FastMCP
    from fastmcp.server.auth import AuthProvider

    from governed_evidence.embeddings.base import Embedder
    from governed_evidence.ingest.pipeline import IngestReport
    from governed_evidence.ingest.report import ProgressFn
    from governed_evidence.mcp.audit import AuditSink
    from governed_evidence.mcp.status import ServerStatus
    from governed_evidence.receipts.issue import ReceiptIssuer
    from governed_evidence.sdmx.deferred import DeferredSdmxService
    from governed_evidence.sdmx.service import SdmxService
    from governed_evidence.search.copies import MemoryBudget
    from governed_evidence.search.levels import LevelServices
    from governed_evidence.search.service import SearchService
    from governed_evidence.serving.http import AuthMode

__all__ = [
    "McpServer",
    "audit_sink",
    "deferred_statistics",
    "dry_run",
    "http_auth",
    "ingest",
    "level_services",
    "mcp_server",
    "receipt_issuer",
    "search_service",
    "server_status",
    "statistics_service",
]


def search_service(
    settings: Settings,
    *,
    db: Path,
    ceiling: Classification,
    embedder_factory: Callable[[], Embedder] | None = None,
    serving: bool = False,
    budget: MemoryBudget | None = None,
) -> SearchService:
    from governed_evidence.embeddings.factory import make_embedder
    from governed_evidence.search.rerank import make_reranker
    from governed_evidence.search.service import SearchService

    return SearchService(
        db,
        ceiling=ceiling,
        embedder_factory=embedder_factory or (lambda: make_embedder(settings)),
        gate_enabled=settings.gate == "on",
        # A one-shot command answers one query: copying every vector first would cost more.
        # A server of several ceilings shares one budget between their copies.
        vector_memory_bytes=(budget or settings.vector_memory_mb * 2**20) if serving else 0,
        # None unless the operator turned it on (ADR 0008); its HTTP client is made on first use.
        reranker=make_reranker(settings),
    )


def level_services(
    settings: Settings, *, db: Path, ceiling: Classification, embedder_factory: Callable[[], Embedder]
) -> LevelServices:
    """The services of a team server: one per level served, made on first use, one vector budget."""
    from governed_evidence.search.copies import MemoryBudget
    from governed_evidence.search.levels import LevelServices

    budget = MemoryBudget(settings.vector_memory_mb * 2**20)
    return LevelServices(
        lambda level: search_service(
            settings, db=db, ceiling=level, embedder_factory=embedder_factory, serving=True, budget=budget
        ),
        ceiling,
    )


@dataclass
class McpServer:
    """The MCP app with what it serves from: closed when the server stops."""

    app: FastMCP[Any]
    levels: LevelServices
    audit: AuditSink | None

    def close(self) -> None:
        # A copy of the vectors in progress stops at its next block.
        self.levels.close()
        if self.audit is not None:
            self.audit.close()


def http_auth(settings: Settings, mode: AuthMode, *, tokens_file: Path | None) -> AuthProvider | None:
    """The credential a team server accepts (None: none), from the settings and the flags."""
    from governed_evidence.serving.auth import make_auth

    return make_auth(mode, settings, tokens_file=tokens_file)


def mcp_server(
    settings: Settings,
    *,
    db: Path,
    ceiling: Classification,
    embedder_factory: Callable[[], Embedder],
    transport: Literal["stdio", "http"],
    auth: AuthProvider | None = None,
) -> McpServer:
    """The MCP server wired from the settings: the audit trail, statistics made on first use,
    and the search services. Over stdio one service at the operator's ceiling; over HTTP one
    per level up to it, every caller served at their own (without credentials every caller is
    at the ceiling, and only that level is made); their vectors copied in the background."""
    from governed_evidence.logging import route_library_loggers
    from governed_evidence.mcp import build_app
    from governed_evidence.mcp.calls import Calls, stdio_caller
    from governed_evidence.search.levels import LevelServices
    from governed_evidence.telemetry import configure_tracing

    configure_tracing()
    audit = audit_sink(settings)
    receipts = receipt_issuer(settings)
    # The statistics service (httpx, parsers, the cache connection) is made on the first
    # statistics call; only the providers file is read now.
    statistics = deferred_statistics(settings, db=db)
    route_library_loggers("fastmcp", "mcp", "httpx", "uvicorn", "uvicorn.error")
    if transport == "stdio":
        service = search_service(settings, db=db, ceiling=ceiling, embedder_factory=embedder_factory, serving=True)
        levels = LevelServices.single(service)
        # Until the copies are held (after the model is ready) the index file answers: the same, slower.
        levels.warm_in_background(service)
        calls = Calls(levels, anonymous=stdio_caller(ceiling), audit=audit, receipts=receipts)
        return McpServer(build_app(calls, statistics), levels, audit)
    from governed_evidence.access.caller import Caller

    levels = level_services(settings, db=db, ceiling=ceiling, embedder_factory=embedder_factory)
    anonymous = Caller(name="anonymous", clearance=ceiling, via="network") if auth is None else None
    if anonymous is not None:
        levels.warm_in_background(levels.top)
    else:
        # Every level made now, its copies taken in a fixed order (search/levels.py).
        levels.warm_all()
    calls = Calls(levels, anonymous=anonymous, audit=audit, transport="http", receipts=receipts)
    return McpServer(build_app(calls, statistics, auth=auth), levels, audit)


def audit_sink(settings: Settings) -> AuditSink | None:
    """The audit trail the operator asked for (None: none)."""
    if not settings.audit_log:
        return None
    from governed_evidence.mcp.audit import AuditSink

    return AuditSink.open(settings.audit_log, record_queries=settings.audit_queries == "on")


def receipt_issuer(settings: Settings) -> ReceiptIssuer:
    """Receipts signed with the operator's key, or unsigned when none is configured."""
    from governed_evidence.receipts.issue import ReceiptIssuer
    from governed_evidence.receipts.keys import load_signer

    return ReceiptIssuer(load_signer(settings.receipt_key) if settings.receipt_key is not None else None)


def statistics_service(settings: Settings, *, db: Path) -> SdmxService:
    from governed_evidence.sdmx.service import SdmxService

    return SdmxService.from_settings(settings, db=db)


def deferred_statistics(settings: Settings, *, db: Path) -> DeferredSdmxService:
    """Statistics made on the first statistics call (only the providers file is read now)."""
    from governed_evidence.sdmx.deferred import DeferredSdmxService

    return DeferredSdmxService(settings, db=db)


def server_status(documents: SearchService, statistics: SdmxService | DeferredSdmxService | None) -> ServerStatus:
    from governed_evidence.mcp.status import combined_status

    return combined_status(documents, statistics)


def ingest(
    settings: Settings,
    corpus: Path,
    db: Path,
    *,
    embedder_name: str | None,
    ceiling: Classification,
    default_classification: Classification,
    force: bool,
    progress: ProgressFn | None = None,
) -> IngestReport:
    from governed_evidence.embeddings.factory import make_ingest_embedder
    from governed_evidence.ingest.pipeline import ingest_corpus
    from governed_evidence.sdmx.schema import carry_over

    return ingest_corpus(
        corpus,
        db,
        # Made on the first passage to embed: an ingest that embeds nothing loads no model.
        make_ingest_embedder(settings, embedder_name),
        ceiling=ceiling,
        default_classification=default_classification,
        max_file_bytes=settings.max_file_bytes,
        force=force,
        progress=progress,
        # The default index file is shared by whatever an operator ingests without --db:
        # replacing another corpus's index takes --force (which also rebuilds an unchanged one).
        refuse_other_corpus=not force,
        # The statistics cache and rate ledger live in the same file: a rebuild keeps them.
        carry_over=carry_over,
    )


def dry_run(
    settings: Settings,
    corpus: Path,
    *,
    ceiling: Classification,
    default_classification: Classification,
    progress: ProgressFn | None = None,
) -> IngestReport:
    """What ``ingest`` would index, refuse and skip; no embedder is made, so no model loads."""
    from governed_evidence.ingest.pipeline import dry_run_corpus

    return dry_run_corpus(
        corpus,
        ceiling=ceiling,
        default_classification=default_classification,
        max_file_bytes=settings.max_file_bytes,
        progress=progress,
    )
