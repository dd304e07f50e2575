"""Serving the MCP app over streamable HTTP at ``/mcp``: binding rules, Host checks, health.

fastmcp's own transport in stateless mode: every request stands alone (no session state in
the process), so any replica behind a load balancer can answer any request.

* **Binding.** Loopback by default. A non-loopback address without authentication is
  refused unless the operator says a private network is the boundary
  (``--allow-unauthenticated``): an unauthenticated server on a shared network would give
  everyone who can reach it the server's ceiling.
* **DNS rebinding.** Host and Origin are checked strictly (fastmcp's guard): a request whose
  Host is not a loopback name, the bound address or an ``--allowed-host`` gets 421; a
  browser Origin that is not allowed gets 403. A web page cannot reach a loopback server
  through a name it controls.
* **Credentials.** A request without a usable bearer token gets 401 with its challenge and
  a JSON body saying how to get one for the configured mode (``unauthorized``).
* **Health.** ``GET /health`` answers ``{"status": "ok"}`` without a credential and says
  nothing about the corpus (no counts, no model, no ceiling).
"""

from __future__ import annotations

import ipaddress
import signal
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from governed_evidence.errors import ConfigError
from governed_evidence.logging import get_logger

if TYPE_CHECKING:
    from fastmcp import FastMCP
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["MCP_PATH", "AuthMode", "HttpOptions", "check_binding", "http_app", "is_loopback", "run_http"]

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


def http_app(app: FastMCP, options: HttpOptions) -> Starlette:
    """The ASGI app: the MCP endpoint, ``/health`` and (with JWT) the resource metadata."""
    from starlette.responses import JSONResponse

    @app.custom_route("/health", methods=["GET"], include_in_schema=False)
    async def health(_request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    served = app.http_app(
        path=MCP_PATH,
        transport="http",
        stateless_http=True,
        json_response=True,
        host_origin_protection=True,  # strict: every request, whatever address is bound
        allowed_hosts=list(options.allowed_hosts),
        # None keeps fastmcp's same-origin rule; a list adds origins behind TLS termination.
        allowed_origins=list(options.allowed_origins) or None,
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
