"""The one way this package talks to an SDMX provider: httpx, bounded in every direction.

- Only the provider's base URL is ever asked: same scheme, host and port, and a path under
  the base path without dot segments. Redirects are followed by hand and only while they
  stay there.
- Without a proxy, a host name is resolved here and every address it resolves to must be
  public unless the provider allows private networks; the connection then goes to an
  address that was checked (a name that resolves to 169.254.169.254 or 10.x is refused,
  and a second lookup cannot swap in another address).
- Each attempt has a read timeout and an overall deadline, enforced on every socket read
  and write (a server dripping bytes, into the headers or the body, cannot hold a worker).
- The body is decoded here, not by httpx: at most one content-coding, and only one this
  client asked for (gzip or deflate), decompressed incrementally with ``max_length`` so
  no step produces more than the room left under the cap. A bomb of any depth or ratio
  therefore costs at most the cap, never its expanded size.
- 429/502/503/504 and transport failures are retried a bounded number of times with
  exponential backoff; ``Retry-After`` is honoured up to a cap, and a longer request is
  reported instead of slept through. An unreadable ``Retry-After`` counts as absent.
- Every attempt first asks ``before_attempt`` (the rate budget) for permission, so retries
  spend budget like any other request.

Response bodies are never logged.
"""

from __future__ import annotations

import contextvars
import email.utils
import hashlib
import io
import re
import socket
import ssl
import time
import urllib.parse
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from governed_evidence import __version__
from governed_evidence.errors import ProviderUnavailableError, ResponseTooLargeError, UnusableResponseError
from governed_evidence.logging import get_logger
from governed_evidence.sdmx.providers import Provider, is_public_address
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
#: What Accept-Encoding offers (x-gzip is gzip's registered alias), and so the only
#: content-codings decoded, with their zlib window bits.
_CODINGS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
#: Delta-seconds of more digits than this (over 300 years) is no plausible delay.
_RETRY_AFTER_DIGITS = 10
_CONTENT_LENGTH_RE = re.compile(r"[0-9]{1,18}")
#: Most bytes one decompression step produces, so decoding never holds a second large copy.
_STEP = 1024 * 1024


#: Monotonic time by which the current attempt must finish (None outside an attempt).
_ATTEMPT_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("sdmx_attempt_deadline", default=None)
#: Whether the current attempt's provider may be reached on non-public addresses.
_PRIVATE_OK: contextvars.ContextVar[bool] = contextvars.ContextVar("sdmx_private_ok", default=False)


class _PrivateAddressError(Exception):
    """A host name resolved to a non-public address; raised inside the transport, reported by ``fetch``."""


def _checked_addresses(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to, if all of them are public."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        # What httpcore would have raised had it resolved the name itself.
        raise httpcore.ConnectError(str(exc)) from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    # One private address among public ones is refused too: which one a connection gets
    # is not ours to choose, and a rebinding name answers with both.
    if not addresses or not all(is_public_address(a) for a in addresses):
        raise _PrivateAddressError
    return addresses


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
        for address in _checked_addresses(host, port):
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


def _bounded_transport(proxy: str | None) -> httpx.HTTPTransport:
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


class _Decoder:
    """One content-coding, decompressed a bounded step at a time (identity passes through)."""

    def __init__(self, coding: str | None) -> None:
        self._wbits = _CODINGS[coding] if coding else None
        self._zlib = zlib.decompressobj(self._wbits) if self._wbits is not None else None
        self._started = False

    def decode_into(self, data: bytes, body: io.BytesIO, limit: int) -> None:
        """Append what ``data`` decodes to onto ``body``, stopping once ``body`` is past ``limit``.

        Raises ``zlib.error`` on a corrupt stream or data after its end.
        """
        if self._zlib is None:
            body.write(data[: limit + 1 - body.tell()])
            return
        pending = data
        while pending and body.tell() <= limit:
            try:
                # max_length is what bounds memory: one step yields at most _STEP bytes and
                # never more than one byte past the cap.
                piece = self._zlib.decompress(pending, min(_STEP, limit + 1 - body.tell()))
            except zlib.error:
                if self._started or self._wbits != zlib.MAX_WBITS:
                    raise
                # "deflate" is sometimes sent without the zlib wrapper (as httpx also accepts).
                self._wbits = -zlib.MAX_WBITS
                self._zlib = zlib.decompressobj(self._wbits)
                continue
            self._started = True
            if self._zlib.eof and self._zlib.unused_data:
                raise zlib.error("data after the end of the compressed body")
            body.write(piece)
            if not piece and len(self._zlib.unconsumed_tail) == len(pending):
                break  # no progress (zlib always makes some; this only keeps the loop finite)
            pending = self._zlib.unconsumed_tail

    def finish(self) -> None:
        """Raises ``zlib.error`` when the compressed body ended early (an empty body is empty)."""
        if self._zlib is not None and self._started and not self._zlib.eof:
            raise zlib.error("the compressed body is truncated")


def _coding(response: httpx.Response) -> str | None:
    """The response's one content-coding (None for identity).

    Raises
    ------
    UnusableResponseError
        More than one coding (each layer would multiply what a few bytes expand to), or one
        this client did not offer.
    """
    codings = [
        c.strip().lower()
        for c in response.headers.get_list("content-encoding", split_commas=True)
        if c.strip().lower() not in ("", "identity")
    ]
    if len(codings) > 1:
        raise UnusableResponseError("the provider sent more than one content-coding, which this server does not decode")
    if codings and codings[0] not in _CODINGS:
        raise UnusableResponseError("the provider sent a content-coding this server did not ask for")
    return codings[0] if codings else None


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
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP-date); None if absent or unreadable.

    Total: it returns a number or None for any text and never raises, since an exception
    here would escape the statistics errors and lose the stale copy. Only ASCII digits
    count (``str.isdigit`` also accepts ``²`` and ``٣``, which ``int`` rejects or misreads),
    and more than ten of them is no plausible delay.
    """
    if value is None:
        return None
    text = value.strip()
    if not text or not text.isascii():
        return None
    if text.isdigit():
        return float(text) if len(text) <= _RETRY_AFTER_DIGITS else None
    try:
        when = email.utils.parsedate_to_datetime(text)
        return max(0.0, when.timestamp() - now)
    except (TypeError, ValueError, IndexError, OverflowError, OSError):
        return None


def _origin(url: str) -> tuple[str, str, int]:
    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, (parts.hostname or "").lower(), port


def _same_origin(provider: Provider, url: str) -> bool:
    try:
        parts = urllib.parse.urlsplit(url)
        # Credentials in a redirect would be sent as a login; no provider URL carries any.
        return _origin(url) == provider.origin and parts.username is None and parts.password is None
    except ValueError:  # an unreadable port
        return False


def _under_base_path(provider: Provider, url: str) -> bool:
    """The path is below the base path and moves nowhere once a server decodes it."""
    base = urllib.parse.urlsplit(provider.base_url).path.rstrip("/") + "/"
    path = urllib.parse.urlsplit(url).path
    if not path.startswith(base):
        return False
    rest = urllib.parse.unquote(path[len(base) :])
    return (
        # A second decoding (%252e), a backslash or a control character could still move it.
        rest.isprintable()
        and not any(c in rest for c in "%\\")
        and not any(segment in (".", "..") for segment in rest.split("/"))
    )


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
            except _PrivateAddressError:
                log.warning("sdmx_request", provider=provider.id, kind=request.kind, request=tag,
                            attempt=attempt, error="private_address")  # fmt: skip
                raise ProviderUnavailableError(
                    f"provider {provider.id}'s host name resolves to a loopback, private or link-local address, "
                    "which this server does not connect to"
                ) from None
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
        if not (
            _same_origin(provider, url) and url.startswith(provider.base_url + "/") and _under_base_path(provider, url)
        ):
            # Unreachable through the URL builders; a guard against a future caller.
            raise UnusableResponseError(f"refusing a request outside provider {provider.id}'s configured base")

    def _follow(self, provider: Provider, request: SdmxRequest, max_bytes: int) -> _Raw:
        url = request.url
        for _ in range(MAX_REDIRECTS + 1):
            raw = self._once(provider, url, request.accept, max_bytes)
            if raw.status not in REDIRECT_STATUSES or not raw.location:
                return raw
            target = urllib.parse.urljoin(url, raw.location)
            # A redirect may move within the provider's base, never beside or above it.
            if not _same_origin(provider, target):
                raise UnusableResponseError(
                    f"provider {provider.id} redirected outside its configured base (another host, scheme or port); "
                    "the redirect was not followed"
                )
            if not _under_base_path(provider, target):
                raise UnusableResponseError(
                    f"provider {provider.id} redirected outside its configured base path; the redirect was not followed"
                )
            url = target
        raise UnusableResponseError(f"provider {provider.id} redirected too many times")

    def _once(self, provider: Provider, url: str, accept: str, max_bytes: int) -> _Raw:
        deadline = _ATTEMPT_DEADLINE.set(time.monotonic() + 2 * self.timeout_s)
        private = _PRIVATE_OK.set(provider.private_network_allowed)
        try:
            return self._read(url, accept, max_bytes)
        finally:
            _PRIVATE_OK.reset(private)
            _ATTEMPT_DEADLINE.reset(deadline)

    def _read(self, url: str, accept: str, max_bytes: int) -> _Raw:
        deadline = self._monotonic() + 2 * self.timeout_s
        with self._http.stream("GET", url, headers={"Accept": accept}) as response:
            status = response.status_code
            ok = 200 <= status < 300
            body = self._body(response, ok, max_bytes, deadline)
            return _Raw(
                status=status,
                content_type=response.headers.get("content-type", ""),
                body=body,
                url=url,
                retry_after=response.headers.get("retry-after"),
                location=response.headers.get("location"),
            )

    def _body(self, response: httpx.Response, ok: bool, max_bytes: int, deadline: float) -> bytes:
        """The decoded body of a success, within ``max_bytes``; of anything else, its start.

        An error body is read only for its status text or SDMX error code, so a coding or
        a stream this client cannot decode leaves it short or empty instead of hiding the
        status (a 503 must stay a 503: retried, or answered from a stale copy).
        """
        limit = max_bytes if ok else ERROR_BODY_BYTES
        try:
            coding = _coding(response)
        except UnusableResponseError:
            if ok:
                raise
            return b""
        declared = response.headers.get("content-length", "")
        if ok and coding is None and _CONTENT_LENGTH_RE.fullmatch(declared) and int(declared) > limit:
            raise ResponseTooLargeError(self._too_large(max_bytes))
        stream = response.stream
        if not isinstance(stream, httpx.SyncByteStream):  # pragma: no cover - a sync client's stream
            raise TypeError("expected a synchronous response stream")
        decoder = _Decoder(coding)
        # BytesIO rather than bytearray: getvalue() hands over its buffer without a copy,
        # so a body at the cap is held once, not twice.
        body = io.BytesIO()
        try:
            # The raw (still encoded) bytes as they arrive. Not iter_raw(): a response
            # built with its content already loaded (as transports in tests build them)
            # refuses iter_raw, while its stream still yields the bytes as sent.
            for chunk in stream:
                # Decoded up to one byte past the limit: that byte tells "over" from "exactly at".
                decoder.decode_into(chunk, body, limit)
                if body.tell() > limit:
                    if not ok:
                        # Only the start of an error body is ever looked at.
                        return body.getvalue()[:limit]
                    raise ResponseTooLargeError(self._too_large(max_bytes))
                if self._monotonic() > deadline:
                    raise httpx.ReadTimeout("overall deadline exceeded")
            if ok:
                decoder.finish()
        except zlib.error:
            if ok:
                raise UnusableResponseError("the provider sent a body that could not be decompressed") from None
        return body.getvalue()

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
