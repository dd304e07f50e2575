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

Deadline: attempts, waits and retries all fit in one deadline per tool call
(:mod:`~governed_evidence.sdmx.deadline`, ``GOVERNED_EVIDENCE_SDMX_DEADLINE_S``), because
MCP clients stop waiting long before three attempts of a silent provider end. A retry whose
wait would leave no time for it to be answered is not started, and the error says the
deadline was reached and how long it was.

Proxies: only the one configured (``GOVERNED_EVIDENCE_SDMX_PROXY``); environment proxy
variables are ignored by design (:mod:`~governed_evidence.sdmx.transport`), and when a
provider cannot be reached while one is set, the error says so. The proxy URL may hold
credentials: it appears in no log line and no message.

Response bodies are never logged.
"""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import math
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from governed_evidence import __version__
from governed_evidence.errors import ProviderUnavailableError, UnusableResponseError
from governed_evidence.logging import get_logger
from governed_evidence.sdmx.deadline import Deadline, call_deadline
from governed_evidence.sdmx.decoding import ACCEPT_ENCODING, read_body
from governed_evidence.sdmx.origin import PrivateAddressError, check_redirect, check_request_url
from governed_evidence.sdmx.providers import Provider
from governed_evidence.sdmx.transport import attempt_bounds, bounded_transport, environment_proxy_variable
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
#: A retry is started only if this long is left once its wait is over: less is no time for
#: a provider to answer, and starting anyway would only spend rate budget.
_MIN_ATTEMPT_S = 1.0


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
        deadline_s: float = 20.0,
        proxy: str | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.max_retry_wait_s = max_retry_wait_s
        self.deadline_s = deadline_s
        self._proxied = proxy is not None
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

    def call(self) -> contextlib.AbstractContextManager[Deadline]:
        """The deadline of one tool call: every request made inside it shares it (the service opens it)."""
        return call_deadline(self.deadline_s)

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
            Transport failures or retryable statuses that outlast the retries or the call's deadline (or
            ask to wait too long).
        ResponseTooLargeError
            The decoded body exceeded ``max_bytes``.
        UnusableResponseError
            A redirect off the provider's origin, or a body that fails to decode.
        RateLimitedError
            From ``before_attempt`` when the budget is spent.
        """
        check_request_url(provider, request.url)
        with self.call() as deadline:
            return self._fetch(provider, request, max_bytes, before_attempt, deadline)

    def _fetch(
        self,
        provider: Provider,
        request: SdmxRequest,
        max_bytes: int,
        before_attempt: Callable[[], None],
        deadline: Deadline,
    ) -> HttpResponse:
        tag = hashlib.sha256(request.cache_key.encode()).hexdigest()[:12]
        attempt = 0
        while True:
            if deadline.left() <= 0:
                # An earlier request of this call used the time up: ask nothing, spend no budget.
                raise self._deadline_reached(provider, deadline, "")
            before_attempt()
            started = self._monotonic()
            try:
                response = self._follow(provider, request, max_bytes, deadline)
            except PrivateAddressError:
                log.warning("sdmx_request", provider=provider.id, kind=request.kind, request=tag,
                            attempt=attempt, error="private_address")  # fmt: skip
                raise ProviderUnavailableError(
                    f"provider {provider.id}'s host name resolves to a loopback, private or link-local address, "
                    "which this server does not connect to"
                ) from None
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                # Info: the error the call ends with says it once, in words; a person at a
                # terminal (where only warnings show) does not read one JSON line per attempt first.
                log.info(
                    "sdmx_request", provider=provider.id, kind=request.kind, request=tag,
                    attempt=attempt, error=type(exc).__name__,
                )  # fmt: skip
                if attempt < self.max_retries and self._fits(self.backoff(attempt), deadline):
                    self._sleep(self.backoff(attempt))
                    attempt += 1
                    continue
                note = self._environment_proxy_note()
                if deadline.left() <= 0:
                    raise self._deadline_reached(provider, deadline, note) from None
                note = note or self._proxy_advice()
                cut = (
                    f", and a retry would not finish within this call's deadline of {deadline.seconds:g} s "
                    "(GOVERNED_EVIDENCE_SDMX_DEADLINE_S)"
                    if attempt < self.max_retries
                    else ""
                )
                raise ProviderUnavailableError(
                    f"provider {provider.id} could not be reached at {_host(provider)} ({type(exc).__name__}){cut}; "
                    f"try again later{note}"
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
            delay = wait if wait is not None else self.backoff(attempt)
            if not self._fits(delay, deadline):
                # Sleeping would only end in the deadline; the caller can wait the seconds itself.
                why = (
                    f"is busy (HTTP {response.status}) and asks to retry in {math.ceil(wait)} s, past"
                    if wait is not None
                    else f"is busy or unavailable (HTTP {response.status}) and a retry would not finish within"
                )
                raise ProviderUnavailableError(
                    f"provider {provider.id} {why} this call's deadline of {deadline.seconds:g} s "
                    "(GOVERNED_EVIDENCE_SDMX_DEADLINE_S); try again later",
                    retry_after_s=wait,
                )
            self._sleep(delay)
            attempt += 1

    @staticmethod
    def _fits(wait: float, deadline: Deadline) -> bool:
        """Whether a retry after ``wait`` seconds still has time to be answered before the deadline."""
        return wait + _MIN_ATTEMPT_S <= deadline.left()

    @staticmethod
    def _deadline_reached(provider: Provider, deadline: Deadline, note: str) -> ProviderUnavailableError:
        return ProviderUnavailableError(
            f"provider {provider.id} did not answer in time: this call's deadline of {deadline.seconds:g} s "
            f"(GOVERNED_EVIDENCE_SDMX_DEADLINE_S) was reached; try again later{note}"
        )

    def _proxy_advice(self) -> str:
        """What to check when the host could not be reached: the proxy setting, either way."""
        if self._proxied:
            return (
                ". The request went through the proxy set by GOVERNED_EVIDENCE_SDMX_PROXY: check that it is reachable"
            )
        return ". If this network reaches the internet only through a proxy, set GOVERNED_EVIDENCE_SDMX_PROXY"

    def _environment_proxy_note(self) -> str:
        """Why a proxy set in the environment did not help; its name only, since its value may hold credentials."""
        variable = None if self._proxied else environment_proxy_variable()
        if variable is None:
            return ""
        return (
            f". {variable} is set, but this server ignores proxies from the environment by design; "
            "to send statistics requests through a proxy, set GOVERNED_EVIDENCE_SDMX_PROXY"
        )

    def _follow(self, provider: Provider, request: SdmxRequest, max_bytes: int, deadline: Deadline) -> _Raw:
        url = request.url
        for _ in range(MAX_REDIRECTS + 1):
            raw = self._once(provider, url, request.accept, max_bytes, deadline)
            if raw.status not in REDIRECT_STATUSES or not raw.location:
                return raw
            target = urllib.parse.urljoin(url, raw.location)
            check_redirect(provider, target)
            url = target
        raise UnusableResponseError(f"provider {provider.id} redirected too many times")

    def _once(self, provider: Provider, url: str, accept: str, max_bytes: int, deadline: Deadline) -> _Raw:
        # An attempt ends by twice the read timeout or by the call's deadline, whichever is first.
        budget = min(2 * self.timeout_s, deadline.left())
        with attempt_bounds(time.monotonic() + budget, private_ok=provider.private_network_allowed):
            return self._read(url, accept, max_bytes, budget)

    def _read(self, url: str, accept: str, max_bytes: int, budget: float) -> _Raw:
        deadline = self._monotonic() + budget
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


def _host(provider: Provider) -> str:
    """The host (and a port other than the scheme's) a provider's requests go to: configuration,
    never a secret (base URLs hold no credentials)."""
    parts = urllib.parse.urlsplit(provider.base_url)
    return parts.netloc.rpartition("@")[2] or provider.base_url
