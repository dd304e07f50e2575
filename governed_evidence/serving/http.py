"""Serving the MCP app over streamable HTTP at ``/mcp``: binding rules, Host checks, health.

fastmcp's own transport in stateless mode: every request stands alone (no session state in
the process), so any replica behind a load balancer can answer any request.

* **Binding.** Loopback by default. A non-loopback address without authentication is
  refused unless the operator says a private network is the boundary
  (``--allow-unauthenticated``): an unauthenticated server on a shared network would give
  everyone who can reach it the server's ceiling.
* **DNS rebinding and browsers.** The Host is checked strictly (fastmcp's guard): a request
  whose Host is not a loopback name, the bound address or an ``--allowed-host`` gets 421.
  A request carrying an ``Origin`` (only browsers send one; MCP clients do not) gets 403
  unless that origin is listed with ``--allowed-origin`` (none by default). fastmcp's own
  rule would also let in every loopback origin (``http://127.0.0.1:<any port>``,
  ``http://localhost``) when the Host is loopback, i.e. any web app running on the
  caller's machine; :class:`ListedOrigins` does not.
* **Credentials.** A request without a usable bearer token gets 401 with its challenge and
  a JSON body saying how to get one for the configured mode (``unauthorized``).
* **Health.** ``GET /health`` answers ``{"status": "ok"}`` without a credential and says
  nothing about the corpus (no counts, no model, no ceiling).
"""

from __future__ import annotations

import ipaddress
import signal
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from governed_evidence.errors import ConfigError
from governed_evidence.logging import get_logger

if TYPE_CHECKING:
    from fastmcp import FastMCP
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "MCP_PATH",
    "AuthMode",
    "HttpOptions",
    "ListedOrigins",
    "check_binding",
    "http_app",
    "is_loopback",
    "normal_origin",
    "run_http",
]

log = get_logger("serving")

MCP_PATH = "/mcp"
AuthMode = Literal["none", "tokens", "jwt"]


@dataclass(frozen=True)
class HttpOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    auth: AuthMode = "none"
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    allow_unauthenticated: bool = False


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_binding(options: HttpOptions) -> None:
    """Refuse a binding that would expose the documents without authentication."""
    if not 0 < options.port < 65536:
        raise ConfigError(f"--port must be between 1 and 65535, not {options.port}")
    if options.auth == "none" and not is_loopback(options.host) and not options.allow_unauthenticated:
        raise ConfigError(
            f"refusing to serve on {options.host} without authentication: use --auth tokens or --auth jwt, "
            "or --allow-unauthenticated if a private network is the boundary (every caller then gets the "
            "server's ceiling)"
        )


_DEFAULT_PORTS = {"http": 80, "https": 443}


def normal_origin(origin: str) -> str:
    """``HTTPS://Example.org:443/`` → ``https://example.org``: an origin as browsers compare them.

    Anything that is not ``scheme://host[:port]`` comes back lower-cased as it is, so it
    matches only the same text (``null`` included, which no listed origin should be).
    """
    text = origin.strip().rstrip("/").lower()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return text
    if not parts.scheme or not parts.hostname or parts.path or parts.query or parts.fragment or parts.username:
        return text
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if port is None or port == _DEFAULT_PORTS.get(parts.scheme):
        return f"{parts.scheme}://{host}"
    return f"{parts.scheme}://{host}:{port}"


class ListedOrigins:
    """403 for an HTTP request whose ``Origin`` is not one the operator listed (none by default).

    Runs beside fastmcp's Host/Origin guard, which in its strict mode still accepts any
    loopback origin when the Host is loopback and any same-origin request: a web page served
    from another port of the caller's machine is a different origin, and nothing this server
    serves is a page that would call it. A request without an ``Origin`` (every MCP client
    that is not a browser) passes.
    """

    def __init__(self, app: ASGIApp, allowed: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed = frozenset(normal_origin(o) for o in allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            from starlette.datastructures import Headers
            from starlette.responses import PlainTextResponse

            origins = Headers(scope=scope).getlist("origin")
            if any(normal_origin(o) not in self.allowed for o in origins):
                await PlainTextResponse("Forbidden Origin", status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def http_app(app: FastMCP, options: HttpOptions) -> Starlette:
    """The ASGI app: the MCP endpoint, ``/health`` and (with JWT) the resource metadata."""
    from starlette.responses import JSONResponse

    @app.custom_route("/health", methods=["GET"], include_in_schema=False)
    async def health(_request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    from starlette.middleware import Middleware

    served = app.http_app(
        path=MCP_PATH,
        middleware=[Middleware(ListedOrigins, allowed=options.allowed_origins)],
        transport="http",
        stateless_http=True,
        json_response=True,
        host_origin_protection=True,  # strict: every request, whatever address is bound
        allowed_hosts=list(options.allowed_hosts),
        # The explicit list (empty by default); ListedOrigins refuses what fastmcp would let in besides it.
        allowed_origins=list(options.allowed_origins),
    )
    if options.auth != "none" or app.auth is not None:
        from governed_evidence.serving.unauthorized import UnauthorizedBody

        served.add_middleware(UnauthorizedBody, mode=options.auth)
    return served


def _exit_normally(_signum: int, _frame: object) -> None:
    raise SystemExit(0)


def run_http(app: FastMCP, options: HttpOptions, *, sockets: list[socket.socket] | None = None) -> None:
    """Serve until interrupted (uvicorn; its access log is off: the audit trail records calls).

    ``sockets``: listen on these instead of binding ``options.host``/``port`` (tests bind
    127.0.0.1 port 0 themselves).
    """
    import uvicorn

    check_binding(options)
    config = uvicorn.Config(
        http_app(app, options),
        host=options.host,
        port=options.port,
        log_config=None,
        access_log=False,
        server_header=False,
        lifespan="on",
    )
    # uvicorn shuts down gracefully on SIGTERM, then raises the signal again with the handler
    # it found: with the default one the process dies there, before the caller's clean-up
    # (vector copies stopped, audit trail closed). Exiting normally runs it.
    signal.signal(signal.SIGTERM, _exit_normally)
    host = f"[{options.host}]" if ":" in options.host else options.host
    log.info("serving", transport="http", url=f"http://{host}:{options.port}{MCP_PATH}", auth=options.auth)
    uvicorn.Server(config).run(sockets=sockets)
