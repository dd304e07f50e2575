"""A real HTTP server on 127.0.0.1 (uvicorn in a thread) over the project's ASGI app."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn
from fastmcp import Client, FastMCP
from fastmcp.client.transports import StreamableHttpTransport

from governed_evidence.serving.http import HttpOptions, http_app


@dataclass(frozen=True)
class Running:
    base: str

    @property
    def mcp_url(self) -> str:
        return f"{self.base}/mcp"

    def client(self, token: str | None = None, **kwargs: Any) -> Client[StreamableHttpTransport]:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        return Client(StreamableHttpTransport(self.mcp_url, headers=headers), **kwargs)


@contextmanager
def serving(app: FastMCP, options: HttpOptions | None = None) -> Iterator[Running]:
    """Serve ``app`` over streamable HTTP on a free 127.0.0.1 port until the block ends."""
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
    # without it each response waits ~40 ms for a delayed ACK (Nagle).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        http_app(app, options or HttpOptions(port=port)),
        log_config=None,
        access_log=False,
        lifespan="on",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield Running(base)
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


def get(url: str, **headers: str) -> httpx.Response:
    return httpx.get(url, headers=headers, timeout=10)
