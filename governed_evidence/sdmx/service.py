"""SdmxService: search a provider's catalogue, describe a dataset, fetch its data, with citations.

A facade: it checks a tool's arguments, resolves the dataset reference and hands over to
the module that holds the logic, all of which answer through the one fetch path
(:mod:`~governed_evidence.sdmx.fetch`: cache, rate budget, provider, parse, store, stale
copy on failure), every request of one tool call within one deadline
(:mod:`~governed_evidence.sdmx.deadline`):

- :mod:`~governed_evidence.sdmx.resolve`: a bare dataset id completed from the catalogue;
- :mod:`~governed_evidence.sdmx.describe`: dimensions in key order, the codes that have
  data, time coverage;
- :mod:`~governed_evidence.sdmx.observations`: the data for a key as a compact table;
- :mod:`~governed_evidence.sdmx.parsed`: parsed forms of cached responses, memoised;
- :mod:`~governed_evidence.sdmx.cache`, :mod:`~governed_evidence.sdmx.ratelimit` and
  :mod:`~governed_evidence.sdmx.store`: the response cache, the rate ledger, and where
  their tables live.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx

from governed_evidence.config import Settings
from governed_evidence.errors import InvalidRequestError
from governed_evidence.sdmx.cache import ResponseCache
from governed_evidence.sdmx.client import SdmxClient
from governed_evidence.sdmx.describe import describe
from governed_evidence.sdmx.fetch import Fetcher, provenance
from governed_evidence.sdmx.models import (
    DataResponse,
    DatasetDescription,
    DatasetHit,
    DatasetSearchResponse,
    ProviderBudget,
    StatisticsCacheStatus,
)
from governed_evidence.sdmx.observations import observations
from governed_evidence.sdmx.parsed import ParsedResponses
from governed_evidence.sdmx.providers import Providers, load_providers
from governed_evidence.sdmx.ratelimit import RateLedger
from governed_evidence.sdmx.resolve import catalogue_for, resolve
from governed_evidence.sdmx.store import CacheStore
from governed_evidence.sdmx.urls import Kind
from governed_evidence.sdmx.validate import (
    MAX_CODES_LIMIT,
    MAX_QUERY_CHARS,
    MAX_ROWS_LIMIT,
    MAX_SEARCH_LIMIT,
    parse_dataset_ref,
    validate_key,
    validate_periods,
)

__all__ = ["SdmxService"]


class SdmxService:
    """Synchronous, thread-safe access to configured SDMX providers."""

    def __init__(
        self,
        *,
        providers: Providers,
        store: CacheStore,
        client: SdmxClient,
        ttls: dict[Kind, float],
        max_bytes: dict[Kind, int],
        max_rows_parsed: int = 200_000,
        cache_max_bytes: int = 256 * 1024 * 1024,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.providers = providers
        self.store = store
        self.client = client
        self.cache = ResponseCache(store, max_bytes=cache_max_bytes, clock=clock)
        self.ledger = RateLedger(store, clock=clock)
        self.fetcher = Fetcher(
            cache=self.cache, ledger=self.ledger, client=client, ttls=ttls, max_bytes=max_bytes, clock=clock
        )
        self.parsed = ParsedResponses(self.cache, max_rows_parsed=max_rows_parsed, max_bytes=max_bytes)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        db: Path | None = None,
        providers: Providers | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> SdmxService:
        """The service as an operator configured it; ``db`` overrides the index path (CLI ``--db``).

        ``providers`` are the already-loaded ``settings.sdmx_providers`` (read again when None).
        """
        client = SdmxClient(
            timeout_s=settings.sdmx_timeout_s,
            max_retries=settings.sdmx_max_retries,
            max_retry_wait_s=settings.sdmx_max_retry_wait_s,
            deadline_s=settings.sdmx_deadline_s,
            proxy=settings.sdmx_proxy.get_secret_value() if settings.sdmx_proxy is not None else None,
            transport=transport,
            sleep=sleep,
            wall_clock=clock,
        )
        return cls(
            providers=providers if providers is not None else load_providers(settings.sdmx_providers),
            store=CacheStore(db if db is not None else settings.db, settings.sdmx_cache_path),
            client=client,
            ttls={
                "catalogue": settings.sdmx_ttl_catalogue_s,
                "structure": settings.sdmx_ttl_structure_s,
                "data": settings.sdmx_ttl_data_s,
            },
            max_bytes={
                "catalogue": settings.sdmx_max_bytes_catalogue,
                "structure": settings.sdmx_max_bytes_structure,
                "data": settings.sdmx_max_bytes_data,
            },
            max_rows_parsed=settings.sdmx_max_rows_parsed,
            cache_max_bytes=settings.sdmx_cache_max_bytes,
            clock=clock,
        )

    def close(self) -> None:
        self.client.close()
        self.store.close()

    # -- tools -----------------------------------------------------------------------------

    def search_datasets(self, query: str, provider: str = "OECD", limit: int = 10) -> DatasetSearchResponse:
        """Dataflows of ``provider`` ranked by how well their names and descriptions match ``query``."""
        p = self.providers.get(provider)
        text = query.strip() if isinstance(query, str) else ""
        if not text or len(text) > MAX_QUERY_CHARS:
            raise InvalidRequestError(f"query must be 1-{MAX_QUERY_CHARS} characters")
        if not 1 <= limit <= MAX_SEARCH_LIMIT:
            raise InvalidRequestError(f"limit must be between 1 and {MAX_SEARCH_LIMIT}")
        with self.client.call():
            index, fetched = catalogue_for(self.fetcher, self.parsed, p)
        hits, total = index.search(text, limit)
        results = [
            DatasetHit(
                rank=i + 1,
                dataset=h.row.dataset,
                id=h.row.dataset_id,
                agency=h.row.agency,
                version=h.row.version,
                name=h.row.name,
                description=h.row.description[:300],
                provider=p.id,
            )
            for i, h in enumerate(hits)
        ]
        hints: list[str] = []
        if results:
            hints.append("Pass a result's `dataset` to describe_dataset to see its dimensions and codes.")
        else:
            others = ", ".join(i for i in self.providers.ids() if i != p.id)
            hints.append(
                f"No {p.id} dataflow matches these words. Search for the statistic (e.g. 'research development "
                "expenditure'), not countries or years: those are chosen later in the key."
                + (f" Other providers: {others}." if others else "")
            )
        return DatasetSearchResponse(
            provider=p.id,
            provider_name=p.name,
            results=results,
            total_matches=total,
            catalogue_size=len(index),
            **provenance(fetched, hints),
        )

    def describe_dataset(self, dataset: str, provider: str = "OECD", max_codes: int = 30) -> DatasetDescription:
        """Dimensions in key order with their codes (codes with data first), time coverage and an example key."""
        p = self.providers.get(provider)
        ref = parse_dataset_ref(dataset)
        if not 1 <= max_codes <= MAX_CODES_LIMIT:
            raise InvalidRequestError(f"max_codes must be between 1 and {MAX_CODES_LIMIT}")
        with self.client.call():
            return describe(self.fetcher, self.parsed, p, resolve(self.fetcher, self.parsed, p, ref), max_codes)

    def get_data(
        self,
        dataset: str,
        key: str,
        provider: str = "OECD",
        start_period: str | None = None,
        end_period: str | None = None,
        max_rows: int = 200,
        labels: bool = False,
    ) -> DataResponse:
        """Observations for ``key`` as a compact table with constant columns lifted out and a citable URL.

        ``labels``: each code's label beside it (``REF_AREA_label``), from the response or the
        dataset's structure (one structure request when neither the response nor the cache has it).
        """
        p = self.providers.get(provider)
        ref = parse_dataset_ref(dataset)
        key = validate_key(key)
        start, end = validate_periods(start_period, end_period)
        if not 1 <= max_rows <= MAX_ROWS_LIMIT:
            raise InvalidRequestError(f"max_rows must be between 1 and {MAX_ROWS_LIMIT}")
        with self.client.call():
            ref = resolve(self.fetcher, self.parsed, p, ref)
            return observations(self.fetcher, self.parsed, p, ref, key, start, end, max_rows, labels=labels)

    def status(self) -> StatisticsCacheStatus:
        """Where the cache lives, whether it persists, its size and each provider's budget use."""
        location = self.store.location
        stats = self.cache.stats()
        budgets = [
            ProviderBudget(
                provider=p.id,
                data_per_hour=p.data_per_hour,
                data_used_last_hour=self.ledger.usage(p.id, "data"),
                structure_per_hour=p.structure_per_hour,
                structure_used_last_hour=self.ledger.usage(p.id, "structure"),
            )
            for p in self.providers
        ]
        ledger_ok = all(b.data_used_last_hour is not None and b.structure_used_last_hour is not None for b in budgets)
        problem = location.failure or (None if ledger_ok else "the rate ledger cannot be read; requests are refused")
        return StatisticsCacheStatus(
            location=location.mode,
            reason=location.reason,
            persistent=location.persistent,
            usable=problem is None,
            problem=problem,
            entries=stats.get("entries", 0),
            expired_entries=stats.get("expired", 0),
            bytes=stats.get("bytes", 0),
            providers=budgets,
        )
