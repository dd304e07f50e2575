"""The one fetch path every answer takes: cache, rate budget, provider, parse, store.

A fresh cache entry is used as is. Otherwise the provider is asked (each attempt spending
rate budget, :mod:`~governed_evidence.sdmx.ratelimit`), its HTTP status is judged
(:func:`check_status`: an empty selection is an answer, a 404 or a rejected key an
error), and the answer is parsed *before* it is cached, so an unusable answer never
replaces a good one. When the provider cannot be used, an expired entry is served
flagged ``stale`` with its age and why. :func:`provenance` turns what came back into the
citation fields every tool response carries.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict, TypeVar

from governed_evidence.errors import (
    InvalidRequestError,
    NotFoundError,
    ProviderUnavailableError,
    RateLimitedError,
    ResponseTooLargeError,
    StatisticsError,
    WarningCode,
)
from governed_evidence.logging import get_logger
from governed_evidence.sdmx.cache import CacheEntry, ResponseCache
from governed_evidence.sdmx.client import HttpResponse, SdmxClient
from governed_evidence.sdmx.formats import media_type
from governed_evidence.sdmx.providers import Provider
from governed_evidence.sdmx.ratelimit import RateLedger, hourly_limit
from governed_evidence.sdmx.structure import error_codes
from governed_evidence.sdmx.urls import Kind, SdmxRequest

__all__ = [
    "FIND_DATASET_HINT",
    "KEY_HINT",
    "Fetched",
    "Fetcher",
    "Provenance",
    "check_status",
    "is_no_results",
    "provenance",
]

log = get_logger("sdmx")
_T = TypeVar("_T")

#: What an SDMX error code may look like when repeated to a caller.
_ERROR_CODE_RE = re.compile(r"[0-9]{1,4}")

#: Recovery hints of the statistics errors that need a different next call than their code's default.
FIND_DATASET_HINT = "Call search_datasets to find the dataset's current reference, then pass its `dataset` value."
KEY_HINT = (
    "Call describe_dataset for the dimensions in key order and the codes that have data, then build the key "
    "from those codes."
)
_TOO_LARGE_HINT: dict[Kind, str] = {
    "catalogue": (
        "The provider's catalogue is larger than this server reads: try another provider, or tell the user the "
        "operator can raise GOVERNED_EVIDENCE_SDMX_MAX_BYTES_CATALOGUE."
    ),
    "structure": (
        "This dataset's structure is larger than this server reads: choose another dataset (search_datasets), or "
        "tell the user the operator can raise GOVERNED_EVIDENCE_SDMX_MAX_BYTES_STRUCTURE."
    ),
}


class Provenance(TypedDict):
    """The citation fields of a tool response: where the answer came from and how fresh it is."""

    source_url: str
    retrieved_at: str
    from_cache: bool
    stale: bool
    stale_age_seconds: int | None
    warnings: list[WarningCode]
    hints: list[str]


@dataclass(frozen=True)
class Fetched:
    """The cache entry an answer was parsed from, and whether it came from the cache or is stale."""

    entry: CacheEntry
    from_cache: bool
    stale: bool
    stale_hint: str | None
    age_s: float


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, tz=dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172800:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} days"


def provenance(fetched: Fetched, hints: list[str]) -> Provenance:
    """The citation fields for an answer parsed from ``fetched``; a stale copy's hint comes first."""
    return Provenance(
        source_url=fetched.entry.source_url,
        retrieved_at=_iso(fetched.entry.fetched_at),
        from_cache=fetched.from_cache,
        stale=fetched.stale,
        stale_age_seconds=int(fetched.age_s) if fetched.stale else None,
        warnings=[WarningCode.STALE_SERVED] if fetched.stale else [],
        hints=([fetched.stale_hint] if fetched.stale_hint else []) + hints,
    )


def is_no_results(provider: Provider, response: HttpResponse) -> bool:
    """A 404 that means an empty selection: SDMX error 100, or one of the provider's no-results markers."""
    if response.status != 404:
        return False
    if media_type(response.content_type).endswith("xml"):
        try:
            return "100" in error_codes(response.body)
        except StatisticsError:
            return False
    return provider.says_no_results(response.body)


def check_status(provider: Provider, request: SdmxRequest, response: HttpResponse) -> None:
    """Accept a success (or an empty data selection); raise the error a caller can act on otherwise.

    Raises
    ------
    NotFoundError
        HTTP 404 that is not an empty data selection.
    InvalidRequestError
        HTTP 400, 414 or 422 (the SDMX error code is repeated when it is a short number).
    ResponseTooLargeError
        HTTP 413.
    ProviderUnavailableError
        Any other status.
    """
    status = response.status
    if 200 <= status < 300:
        return
    if status == 404:
        if request.kind == "data" and is_no_results(provider, response):
            return
        raise NotFoundError(
            f"provider {provider.id} has no such dataset or structure (HTTP 404); "
            "use search_datasets to find a dataset reference",
            hint=FIND_DATASET_HINT,
        )
    if status in (400, 414, 422):
        codes = ""
        if media_type(response.content_type).endswith("xml"):
            try:
                # Provider text: repeated only when it is a short code in ASCII digits.
                found = [c for c in error_codes(response.body) if _ERROR_CODE_RE.fullmatch(c)]
                codes = f", SDMX error {found[0]}" if found else ""
            except StatisticsError:
                codes = ""
        raise InvalidRequestError(
            f"provider {provider.id} rejected the request (HTTP {status}{codes}); check the dataset reference "
            "and that the key has one position per dimension in the order describe_dataset gives",
            hint=KEY_HINT,
        )
    if status == 413:
        raise ResponseTooLargeError(
            f"provider {provider.id} refuses a selection this large; narrow the key or the period"
        )
    raise ProviderUnavailableError(f"provider {provider.id} answered HTTP {status}; try again later")


def _stale_hint(exc: StatisticsError, cached: CacheEntry, now: float) -> str:
    if isinstance(exc, RateLimitedError):
        why = str(exc)
    elif isinstance(exc, ProviderUnavailableError):
        why = "the provider could not be used just now"
    else:
        why = "the provider's latest answer could not be used"
    return (
        f"Served from a cached copy retrieved {_duration(cached.age(now))} ago because {why}; "
        "figures may have been revised since."
    )


class Fetcher:
    """Answers from the cache or the provider, parsed, with stale copies served on failure."""

    def __init__(
        self,
        *,
        cache: ResponseCache,
        ledger: RateLedger,
        client: SdmxClient,
        ttls: dict[Kind, float],
        max_bytes: dict[Kind, int],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cache = cache
        self.ledger = ledger
        self.client = client
        self.ttls = ttls
        self.max_bytes = max_bytes
        self.clock = clock

    def fetch(self, provider: Provider, request: SdmxRequest, parse: Callable[[CacheEntry], _T]) -> tuple[_T, Fetched]:
        """``parse`` of the answer to ``request``, and where it came from.

        Raises
        ------
        StatisticsError
            When the provider cannot be used (or its answer parsed) and nothing is cached.
        """
        now = self.clock()
        cached = self.cache.get(request)
        if cached is not None and cached.fresh(now):
            return parse(cached), Fetched(cached, True, False, None, cached.age(now))
        limit = hourly_limit(provider, request.bucket)
        try:
            response = self.client.fetch(
                provider,
                request,
                max_bytes=self.max_bytes[request.kind],
                before_attempt=lambda: self.ledger.acquire(provider.id, request.bucket, limit),
            )
            check_status(provider, request, response)
            fresh = CacheEntry(
                provider.id, request.cache_key, request.kind, response.status, response.content_type,
                response.body, hashlib.sha256(response.body).hexdigest(), len(response.body), now,
                now + self.ttls[request.kind], request.url,
            )  # fmt: skip
            value = parse(fresh)
        except StatisticsError as exc:
            if cached is None:
                if isinstance(exc, ResponseTooLargeError) and exc.given_hint is None:
                    # Narrowing a key cannot shrink a catalogue or a structure.
                    exc.given_hint = _TOO_LARGE_HINT.get(request.kind)
                raise
            log.warning("sdmx_serving_stale", provider=provider.id, kind=request.kind, error=type(exc).__name__)
            return parse(cached), Fetched(cached, True, True, _stale_hint(exc, cached, now), cached.age(now))
        # Cached only once it parsed: an unusable answer never replaces a good copy.
        entry = self.cache.put(
            request,
            status=response.status,
            content_type=response.content_type,
            body=response.body,
            source_url=request.url,
            ttl_s=self.ttls[request.kind],
        )
        return value, Fetched(entry, False, False, None, 0.0)
