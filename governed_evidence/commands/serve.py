"""``serve``: the MCP server over stdio, or over streamable HTTP at /mcp."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from governed_evidence import composition
from governed_evidence.commands.common import LEVELS, index_path, search_service
from governed_evidence.config import Settings, parse_level
from governed_evidence.errors import ConfigError
from governed_evidence.logging import get_logger

# Imported when the server starts: `serve` must not pay at start-up for what it may never
# use (tests/mcp/test_startup.py).
if TYPE_CHECKING:
    from governed_evidence.embeddings.factory import BackgroundEmbedder
    from governed_evidence.search.levels import LevelServices
    from governed_evidence.serving.http import HttpOptions

__all__ = ["register", "run_serve"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "serve", help="run the MCP server: over stdio (stdout carries only JSON-RPC) or streamable HTTP at /mcp"
    )
    p.add_argument("--db")
    p.add_argument(
        "--ceiling",
        choices=LEVELS,
        help="server ceiling (default: $GOVERNED_EVIDENCE_CEILING or public); over HTTP each caller sees up to "
        "the lower of it and their own clearance",
    )
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="default: stdio")
    p.add_argument("--host", help="HTTP: address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="HTTP: port (default 8000)")
    p.add_argument(
        "--auth",
        choices=["none", "tokens", "jwt"],
        help="HTTP: callers' credentials: tokens from 'token create', or JWTs from the identity provider "
        "(GOVERNED_EVIDENCE_JWT_*); default none, loopback only",
    )
    p.add_argument("--tokens-file", help="HTTP with --auth tokens (default: $GOVERNED_EVIDENCE_TOKENS_FILE)")
    p.add_argument(
        "--allowed-host",
        action="append",
        metavar="NAME",
        help="HTTP: a Host name requests may use besides loopback and the bound address (repeatable)",
    )
    p.add_argument(
        "--allowed-origin",
        action="append",
        metavar="ORIGIN",
        help="HTTP: a browser Origin allowed besides the server's own, e.g. https://evidence.example.org (repeatable)",
    )
    p.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        help="HTTP: serve a non-loopback address without credentials (a private network is the boundary; "
        "every caller gets the server ceiling)",
    )
    p.set_defaults(func=run_serve)


def run_serve(args: argparse.Namespace, settings: Settings) -> int:
    from governed_evidence._heap import pause_collection, resume_collection

    # Until the heap is frozen, once the app is built: the imports below allocate a few hundred
    # thousand objects that live as long as the process, and collecting among them while they
    # are made cost start-up about 0.1 s (governed_evidence/_heap.py).
    pause_collection()
    try:
        return _serve(args, settings)
    finally:
        resume_collection()


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    from governed_evidence.embeddings.factory import BackgroundEmbedder

    http = args.transport == "http"
    if not http:
        given = [flag for flag, value in _http_flags(args).items() if value]
        if given:
            raise ConfigError(f"{', '.join(given)}: only with --transport http")
    else:
        from governed_evidence.serving.auth import make_auth
        from governed_evidence.serving.http import check_binding

        # Before the model loads: a refused binding or credential setting costs nothing.
        options = _http_options(args)
        check_binding(options)
        auth = make_auth(options.auth, settings, tokens_file=Path(args.tokens_file) if args.tokens_file else None)
    # The model is the longest part of start-up after the MCP imports, and most of it runs
    # in native code without the GIL: start it first, so it loads while fastmcp is imported
    # and the client initialises, and the first search does not wait for it.
    model = BackgroundEmbedder(settings)
    levels: LevelServices | None = None
    audit = None
    try:
        from governed_evidence._heap import freeze_startup_heap
        from governed_evidence.logging import route_library_loggers
        from governed_evidence.mcp import build_app
        from governed_evidence.mcp.calls import Calls, stdio_caller
        from governed_evidence.telemetry import configure_tracing

        configure_tracing()
        audit = composition.audit_sink(settings)
        db = index_path(args, settings)
        ceiling = parse_level(args.ceiling) if args.ceiling else settings.ceiling_level
        # The statistics service (httpx, parsers, the cache connection) is made on the first
        # statistics call; only the providers file is read now.
        statistics = composition.deferred_statistics(settings, db=db)
        route_library_loggers("fastmcp", "mcp", "httpx", "uvicorn", "uvicorn.error")
        if not http:
            levels = _stdio_levels(args, settings, model)
            calls = Calls(levels, anonymous=stdio_caller(ceiling), audit=audit)
            app = build_app(calls, statistics)
            freeze_startup_heap()
            app.run(transport="stdio", show_banner=False)
            return 0
        from governed_evidence.access.caller import Caller
        from governed_evidence.serving.http import run_http

        levels = composition.level_services(settings, db=db, ceiling=ceiling, embedder_factory=model.result)
        # Without credentials every caller is at the server's ceiling: only that level is
        # served. With credentials every level up to the ceiling is made now, its vectors
        # copied in a fixed order (search/levels.py).
        anonymous = Caller(name="anonymous", clearance=ceiling, via="network") if auth is None else None
        if anonymous is not None:
            levels.warm_in_background(levels.top)
        else:
            levels.warm_all()
        _warn_if_index_writable(db)
        calls = Calls(levels, anonymous=anonymous, audit=audit, transport="http")
        app = build_app(calls, statistics, auth=auth)
        freeze_startup_heap()
        run_http(app, options)
    finally:
        # A client that disconnects (or a configuration error) while the model is loading
        # must not tear the runtime down under the loading thread: onnxruntime aborts the
        # process if it does. A copy of the vectors in progress stops at its next block.
        if levels is not None:
            levels.close()
        model.join()
        if audit is not None:
            audit.close()
        from governed_evidence.telemetry import shutdown_tracing

        # Spans still queued are sent now (bounded by the exporter's timeout).
        shutdown_tracing()
    return 0


def _warn_if_index_writable(db: Path) -> None:
    """Replicas serve one immutable file: one the server may write takes the statistics cache
    into it (ADR 0006), and the file then changes under every replica reading it."""
    if db.exists() and os.access(db, os.W_OK) and os.access(db.parent, os.W_OK):
        get_logger("serving").warning(
            "index_writable",
            advice="serve the index read-only (a read-only mount, or a file the server's user cannot write) "
            "and set GOVERNED_EVIDENCE_SDMX_CACHE_PATH for the statistics cache",
        )


def _stdio_levels(args: argparse.Namespace, settings: Settings, model: BackgroundEmbedder) -> LevelServices:
    """The one service of a stdio server, its vectors copied in the background at start."""
    from governed_evidence.search.levels import LevelServices

    service = search_service(args, settings, embedder_factory=model.result, serving=True)
    levels = LevelServices.single(service)
    # The searchable vectors are copied into memory in the background (after the model is
    # ready); until then the vec0 KNN answers (exact, slower).
    levels.warm_in_background(service)
    return levels


def _http_flags(args: argparse.Namespace) -> dict[str, object]:
    return {
        "--host": args.host,
        "--port": args.port,
        "--auth": args.auth,
        "--tokens-file": args.tokens_file,
        "--allowed-host": args.allowed_host,
        "--allowed-origin": args.allowed_origin,
        "--allow-unauthenticated": args.allow_unauthenticated,
    }


def _http_options(args: argparse.Namespace) -> HttpOptions:
    from governed_evidence.serving.http import HttpOptions

    return HttpOptions(
        host=args.host or "127.0.0.1",
        port=args.port if args.port is not None else 8000,
        auth=args.auth or "none",
        allowed_hosts=tuple(args.allowed_host or ()),
        allowed_origins=tuple(args.allowed_origin or ()),
        allow_unauthenticated=args.allow_unauthenticated,
    )
