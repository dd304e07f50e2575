"""The httpx transport the client sends through: sockets bounded by the attempt's deadline.

httpx's timeouts apply to each read, so a server sending one header byte per second would
never time out; here every socket read, write, connect and TLS handshake is cut to what
is left of the current attempt's overall deadline. Without a proxy, connections go only to
addresses :func:`governed_evidence.sdmx.origin.checked_addresses` found public (a second
lookup cannot swap in another address), unless the attempt's provider allows private
networks. The client opens each attempt with :func:`attempt_bounds`.

Proxies come only from ``GOVERNED_EVIDENCE_SDMX_PROXY``: ``HTTPS_PROXY`` and the other
environment variables are never read (``trust_env=False``), so a variable set for other
programs cannot send statistics requests, and the provider allowlist's guarantees, through
a machine the operator did not choose for them. :func:`environment_proxy_variable` lets
an error say that one is set and ignored.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import ssl
import time
from collections.abc import Iterable, Iterator
from typing import Any

import httpcore
import httpx

from governed_evidence.sdmx.origin import checked_addresses

__all__ = ["ENVIRONMENT_PROXY_VARIABLES", "attempt_bounds", "bounded_transport", "environment_proxy_variable"]

#: What httpx (and curl, pip, requests) would read a proxy from; this transport reads none of them.
ENVIRONMENT_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")

#: Monotonic time by which the current attempt must finish (None outside an attempt).
_ATTEMPT_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("sdmx_attempt_deadline", default=None)
#: Whether the current attempt's provider may be reached on non-public addresses.
_PRIVATE_OK: contextvars.ContextVar[bool] = contextvars.ContextVar("sdmx_private_ok", default=False)


@contextlib.contextmanager
def attempt_bounds(deadline: float, *, private_ok: bool) -> Iterator[None]:
    """Within this block, sockets end by monotonic ``deadline`` and reach private addresses only if ``private_ok``."""
    deadline_token = _ATTEMPT_DEADLINE.set(deadline)
    private_token = _PRIVATE_OK.set(private_ok)
    try:
        yield
    finally:
        _PRIVATE_OK.reset(private_token)
        _ATTEMPT_DEADLINE.reset(deadline_token)


def environment_proxy_variable() -> str | None:
    """The name of the first environment proxy variable that is set (never its value, which may hold credentials)."""
    return next((name for name in ENVIRONMENT_PROXY_VARIABLES if os.environ.get(name, "").strip()), None)


def _remaining(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` shortened to what is left of the attempt's deadline; past it, ``error``."""
    deadline = _ATTEMPT_DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("overall deadline exceeded")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A socket stream whose every read and write ends by the attempt's deadline.

    httpx's timeouts apply to each read, so a server sending one header byte per second
    would otherwise never time out (the body loop's own check only runs once headers are in).
    """

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _remaining(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _remaining(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        inner = self._inner.start_tls(ssl_context, server_hostname, _remaining(timeout, httpcore.ConnectTimeout))
        return _DeadlineStream(inner)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """Connections bounded by the attempt's deadline and, when ``check_addresses``, made only to public addresses."""

    def __init__(self, inner: httpcore.NetworkBackend, *, check_addresses: bool) -> None:
        self._inner = inner
        self._check_addresses = check_addresses

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        if not self._check_addresses or _PRIVATE_OK.get():
            stream = self._inner.connect_tcp(
                host, port, _remaining(timeout, httpcore.ConnectTimeout), local_address, socket_options
            )
            return _DeadlineStream(stream)
        # Connect to the checked addresses themselves; TLS still verifies the host name
        # (httpcore passes the URL's host to start_tls, not the address).
        failure: Exception = httpcore.ConnectError("no address to connect to")
        for address in checked_addresses(host, port):
            try:
                stream = self._inner.connect_tcp(
                    address, port, _remaining(timeout, httpcore.ConnectTimeout), local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
                continue
            return _DeadlineStream(stream)
        raise failure

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_unix_socket(path, _remaining(timeout, httpcore.ConnectTimeout), socket_options)
        return _DeadlineStream(stream)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def bounded_transport(proxy: str | None) -> httpx.HTTPTransport:
    """httpx's own transport, with the attempt deadline enforced on its sockets.

    Through a proxy the sockets go to the proxy, which resolves the provider's name, so
    the address check applies only without one (the proxy's own policy applies then).
    """
    transport = httpx.HTTPTransport(proxy=proxy, trust_env=False)
    # httpx offers no public hook for the network backend; httpcore reads this attribute
    # whenever it opens a connection (tests/hardening checks a header drip is cut off).
    pool = transport._pool
    pool._network_backend = _DeadlineBackend(pool._network_backend, check_addresses=proxy is None)
    return transport
