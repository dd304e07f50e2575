"""The one way this package talks to an SDMX provider: GETs with bounded retries.

The request and retry logic lives here; what bounds it lives in modules named for it:

- :mod:`~governed_evidence.sdmx.origin`: only the provider's base URL is ever asked (same
  scheme, host and port, a path under the base path without dot segments), redirects are
  followed by hand and only while they stay there, and a host name must resolve to public
  addresses unless the provider allows private networks.
- :mod:`~governed_evidence.sdmx.transport`: each attempt has a read timeout and an overall
  deadline, enforced on every socket read and write (a server dripping bytes, into the
  headers or the body, cannot hold a worker), and connects only to checked addresses.
- :mod:`~governed_evidence.sdmx.decoding`: the body is decoded here, not by httpx, at most
  one content-coding and incrementally against the byte cap, so a bomb costs at most the cap.

Retries: 429/502/503/504 and transport failures are retried a bounded number of times
with exponential backoff; ``Retry-After`` is honoured up to a cap, and a longer request is
reported instead of slept through. An unreadable ``Retry-After`` counts as absent. Every
attempt first asks ``before_attempt`` (the rate budget) for permission, so retries spend
budget like any other request.

Response bodies are never logged.
"""

from __future__ import annotations

import email.utils
import hashlib
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from governed_evidence import __version__
from governed_evidence.errors import ProviderUnavailableError, UnusableResponseError
from governed_evidence.logging import get_logger
from governed_evidence.sdmx.decoding import ACCEPT_ENCODING, read_body
from governed_evidence.sdmx.origin import PrivateAddressError, check_redirect, check_request_url
from governed_evidence.sdmx.providers import Provider
from governed_evidence.sdmx.transport import attempt_bounds, bounded_transport
from governed_evidence.sdmx.urls import SdmxRequest

__all__ = [
    "MAX_REDIRECTS",
    "REDIRECT_STATUSES",
    "RETRY_STATUSES",
    "USER_AGENT",
    "HttpResponse",
    "SdmxClient",
    "parse_retry_after",
]

log = get_logger("sdmx.client")

USER_AGENT = (
    f"governed-evidence/{__version__} (SDMX 2.1 client for cited official statistics; "
    "cached, rate-limited; python-httpx)"
)
RETRY_STATUSES = frozenset({429, 502, 503, 504})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 3
#: Delta-seconds of more digits than this (over 300 years) is no plausible delay.
_RETRY_AFTER_DIGITS = 10


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
            transport=transport if transport is not None else bounded_transport(proxy),
            timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s)),
            follow_redirects=False,
            # Environment proxies and .netrc credentials must not silently apply.
            trust_env=False,
            headers={"User-Agent": USER_AGENT, "Accept-Encoding": ACCEPT_ENCODING},
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
        check_request_url(provider, request.url)
        tag = hashlib.sha256(request.cache_key.encode()).hexdigest()[:12]
        attempt = 0
        while True:
            before_attempt()
            started = self._monotonic()
            try:
                response = self._follow(provider, request, max_bytes)
            except PrivateAddressError:
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

    def _follow(self, provider: Provider, request: SdmxRequest, max_bytes: int) -> _Raw:
        url = request.url
        for _ in range(MAX_REDIRECTS + 1):
            raw = self._once(provider, url, request.accept, max_bytes)
            if raw.status not in REDIRECT_STATUSES or not raw.location:
                return raw
            target = urllib.parse.urljoin(url, raw.location)
            check_redirect(provider, target)
            url = target
        raise UnusableResponseError(f"provider {provider.id} redirected too many times")

    def _once(self, provider: Provider, url: str, accept: str, max_bytes: int) -> _Raw:
        with attempt_bounds(time.monotonic() + 2 * self.timeout_s, private_ok=provider.private_network_allowed):
            return self._read(url, accept, max_bytes)

    def _read(self, url: str, accept: str, max_bytes: int) -> _Raw:
        deadline = self._monotonic() + 2 * self.timeout_s
        with self._http.stream("GET", url, headers={"Accept": accept}) as response:
            status = response.status_code
            ok = 200 <= status < 300
            body = read_body(response, ok=ok, max_bytes=max_bytes, deadline=deadline, monotonic=self._monotonic)
            return _Raw(
                status=status,
                content_type=response.headers.get("content-type", ""),
                body=body,
                url=url,
                retry_after=response.headers.get("retry-after"),
                location=response.headers.get("location"),
            )


@dataclass(frozen=True)
class _Raw(HttpResponse):
    retry_after: str | None = None
    location: str | None = None
