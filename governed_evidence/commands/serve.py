"""``serve``: the MCP server over stdio, or over streamable HTTP at /mcp."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from governed_evidence import composition
from governed_evidence.commands.common import LEVELS, index_path
from governed_evidence.config import Settings, parse_level
from governed_evidence.errors import ConfigError
from governed_evidence.logging import get_logger

# Imported when the server starts: `serve` must not pay at start-up for what it may never
# use (tests/mcp/test_startup.py).
if TYPE_CHECKING:
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
        help="HTTP: a browser Origin allowed to call the server (none by default), e.g. https://evidence.example.org "
        "(repeatable)",
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
    auth = None
    if not http:
        given = [flag for flag, value in _http_flags(args).items() if value]
        if given:
            raise ConfigError(f"{', '.join(given)}: only with --transport http")
    else:
        from governed_evidence.serving.http import check_binding

        # Before the model loads: a refused binding or credential setting costs nothing.
        options = _http_options(args)
        check_binding(options)
        tokens_file = Path(args.tokens_file) if args.tokens_file else None
        auth = composition.http_auth(settings, options.auth, tokens_file=tokens_file)
    # The model is the longest part of start-up after the MCP imports, and most of it runs
    # in native code without the GIL: start it first, so it loads while fastmcp is imported
    # and the client initialises, and the first search does not wait for it.
    model = BackgroundEmbedder(settings)
    server: composition.McpServer | None = None
    try:
        from governed_evidence._heap import freeze_startup_heap

        db = index_path(args, settings)
        ceiling = parse_level(args.ceiling) if args.ceiling else settings.ceiling_level
        server = composition.mcp_server(
            settings,
            db=db,
            ceiling=ceiling,
            embedder_factory=model.result,
            transport="http" if http else "stdio",
            auth=auth,
        )
        freeze_startup_heap()
        if not http:
            server.app.run(transport="stdio", show_banner=False)
            return 0
        from governed_evidence.serving.http import run_http

        _warn_if_index_writable(db)
        run_http(server.app, options)
    finally:
        # A client that disconnects (or a configuration error) while the model is loading
        # must not tear the runtime down under the loading thread: onnxruntime aborts the
        # process if it does.
        if server is not None:
            server.close()
        model.join()
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
