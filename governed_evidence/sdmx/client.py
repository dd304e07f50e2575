"""The one way this package talks to an SDMX provider: httpx, bounded in every direction.

- Only the provider's own origin is ever contacted; redirects are followed by hand and
  only while they stay on that origin.
- Each attempt has a read timeout and an overall deadline, enforced on every socket read
  and write (a server dripping bytes, into the headers or the body, cannot hold a worker),
  and the decoded body is capped while it streams (a gzip bomb is measured after
  decompression, not by its Content-Length).
- 429/502/503/504 and transport failures are retried a bounded number of times with
  exponential backoff; ``Retry-After`` is honoured up to a cap, and a longer request is
  reported instead of slept through.
- Every attempt first asks ``before_attempt`` (the rate budget) for permission, so retries
  spend budget like any other request.

Response bodies are never logged.
"""

from __future__ import annotations

import contextvars
import email.utils
import hashlib
import ssl
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from governed_evidence import __version__
from governed_evidence.errors import ProviderUnavailableError, ResponseTooLargeError, UnusableResponseError
from governed_evidence.logging import get_logger
from governed_evidence.sdmx.providers import Provider
from governed_evidence.sdmx.urls import SdmxRequest

__all__ = ["USER_AGENT", "HttpResponse", "SdmxClient", "parse_retry_after"]

log = get_logger("sdmx.client")

USER_AGENT = (
    f"governed-evidence/{__version__} (SDMX 2.1 client for cited official statistics; "
    "cached, rate-limited; python-httpx)"
)
RETRY_STATUSES = frozenset({429, 502, 503, 504})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 3
#: Error bodies are only read for their status text or SDMX error code.
ERROR_BODY_BYTES = 64 * 1024


#: Monotonic time by which the current attempt must finish (None outside an attempt).
_ATTEMPT_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("sdmx_attempt_deadline", default=None)


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
    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_tcp(
            host, port, _remaining(timeout, httpcore.ConnectTimeout), local_address, socket_options
        )
        return _DeadlineStream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_unix_socket(path, _remaining(timeout, httpcore.ConnectTimeout), socket_options)
        return _DeadlineStream(stream)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _bounded_transport(proxy: str | None) -> httpx.HTTPTransport:
    """httpx's own transport, with the attempt deadline enforced on its sockets."""
    transport = httpx.HTTPTransport(proxy=proxy, trust_env=False)
    # httpx offers no public hook for the network backend; httpcore reads this attribute
    # whenever it opens a connection (tests/hardening checks a header drip is cut off).
    pool = transport._pool
    pool._network_backend = _DeadlineBackend(pool._network_backend)
    return transport


@dataclass(frozen=True)
class HttpResponse:
    """A completed response whose body is within its cap."""

    status: int
    #: The Content-Type header as sent (parameters included); parsing is chosen by it.
    content_type: str
    body: bytes
    #: The URL that answered (the requested one unless a same-origin redirect moved it).
    url: str


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP-date); None if absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(int(text))
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - now)


def _origin(url: str) -> tuple[str, str, int]:
    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, (parts.hostname or "").lower(), port


class SdmxClient:
    """Synchronous GETs to configured providers only."""

    def __init__(
        self,
        *,
        timeout_s: float = 30.0,
        max_retries: int = 2,
        max_retry_wait_s: float = 20.0,
        proxy: str | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.max_retry_wait_s = max_retry_wait_s
        self._sleep = sleep
        self._monotonic = monotonic
        self._wall_clock = wall_clock
        self._http = httpx.Client(
            transport=transport if transport is not None else _bounded_transport(proxy),
            timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s)),
            follow_redirects=False,
            # Environment proxies and .netrc credentials must not silently apply.
            trust_env=False,
            headers={"User-Agent": USER_AGENT, "Accept-Encoding": "gzip, deflate"},
        )

    def close(self) -> None:
        self._http.close()

    def backoff(self, attempt: int) -> float:
        return float(min(self.max_retry_wait_s, 1.0 * 2**attempt))

    def fetch(
        self,
        provider: Provider,
        request: SdmxRequest,
        *,
        max_bytes: int,
        before_attempt: Callable[[], None],
    ) -> HttpResponse:
        """GET ``request`` with retries; non-retryable statuses are returned for the caller to judge.

        Raises
        ------
        ProviderUnavailableError
            Transport failures or retryable statuses that outlast the retries (or ask to wait too long).
        ResponseTooLargeError
            The decoded body exceeded ``max_bytes``.
        UnusableResponseError
            A redirect off the provider's origin, or a body that fails to decode.
        RateLimitedError
            From ``before_attempt`` when the budget is spent.
        """
        self._check_origin(provider, request.url)
        tag = hashlib.sha256(request.cache_key.encode()).hexdigest()[:12]
        attempt = 0
        while True:
            before_attempt()
            started = self._monotonic()
            try:
                response = self._follow(provider, request, max_bytes)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                log.warning(
                    "sdmx_request", provider=provider.id, kind=request.kind, request=tag,
                    attempt=attempt, error=type(exc).__name__,
                )  # fmt: skip
                if attempt < self.max_retries:
                    self._sleep(self.backoff(attempt))
                    attempt += 1
                    continue
                raise ProviderUnavailableError(
                    f"provider {provider.id} could not be reached ({type(exc).__name__}); try again later"
                ) from None
            log.info(
                "sdmx_request", provider=provider.id, kind=request.kind, request=tag, attempt=attempt,
                status=response.status, bytes=len(response.body),
                ms=round((self._monotonic() - started) * 1000, 1),
            )  # fmt: skip
            if response.status not in RETRY_STATUSES:
                return response
            wait = parse_retry_after(response.retry_after, self._wall_clock())
            if wait is not None and wait > self.max_retry_wait_s:
                raise ProviderUnavailableError(
                    f"provider {provider.id} is busy (HTTP {response.status}) and asks to retry in {int(wait)} s",
                    retry_after_s=wait,
                )
            if attempt >= self.max_retries:
                raise ProviderUnavailableError(
                    f"provider {provider.id} is busy or unavailable (HTTP {response.status}); try again later",
                    retry_after_s=wait,
                )
            self._sleep(wait if wait is not None else self.backoff(attempt))
            attempt += 1

    def _check_origin(self, provider: Provider, url: str) -> None:
        if _origin(url) != provider.origin or not url.startswith(provider.base_url + "/"):
            # Unreachable through the URL builders; a guard against a future caller.
            raise UnusableResponseError(f"refusing a request outside provider {provider.id}'s configured base")

    def _follow(self, provider: Provider, request: SdmxRequest, max_bytes: int) -> _Raw:
        url = request.url
        for _ in range(MAX_REDIRECTS + 1):
            raw = self._once(url, request.accept, max_bytes)
            if raw.status not in REDIRECT_STATUSES or not raw.location:
                return raw
            target = urllib.parse.urljoin(url, raw.location)
            if _origin(target) != provider.origin:
                raise UnusableResponseError(
                    f"provider {provider.id} redirected to another host; the request was not followed"
                )
            url = target
        raise UnusableResponseError(f"provider {provider.id} redirected too many times")

    def _once(self, url: str, accept: str, max_bytes: int) -> _Raw:
        token = _ATTEMPT_DEADLINE.set(time.monotonic() + 2 * self.timeout_s)
        try:
            return self._read(url, accept, max_bytes)
        finally:
            _ATTEMPT_DEADLINE.reset(token)

    def _read(self, url: str, accept: str, max_bytes: int) -> _Raw:
        deadline = self._monotonic() + 2 * self.timeout_s
        with self._http.stream("GET", url, headers={"Accept": accept}) as response:
            status = response.status_code
            ok = 200 <= status < 300
            limit = max_bytes if ok else ERROR_BODY_BYTES
            declared = response.headers.get("content-length", "")
            encoded = response.headers.get("content-encoding", "identity").lower() not in ("", "identity")
            if ok and declared.isdigit() and not encoded and int(declared) > limit:
                raise ResponseTooLargeError(self._too_large(max_bytes))
            body = bytearray()
            try:
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > limit:
                        if not ok:
                            # Only the start of an error body is ever looked at.
                            del body[limit:]
                            break
                        raise ResponseTooLargeError(self._too_large(max_bytes))
                    if self._monotonic() > deadline:
                        raise httpx.ReadTimeout("overall deadline exceeded")
            except httpx.DecodingError:
                raise UnusableResponseError("the provider sent a body that could not be decompressed") from None
            return _Raw(
                status=status,
                content_type=response.headers.get("content-type", ""),
                body=bytes(body),
                url=url,
                retry_after=response.headers.get("retry-after"),
                location=response.headers.get("location"),
            )

    @staticmethod
    def _too_large(max_bytes: int) -> str:
        return (
            f"the provider's response exceeds this server's limit of {max_bytes // (1024 * 1024)} MiB; "
            "narrow the key or the period"
        )


@dataclass(frozen=True)
class _Raw(HttpResponse):
    retry_after: str | None = None
    location: str | None = None
