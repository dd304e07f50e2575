"""SdmxService: search a provider's catalogue, describe a dataset, fetch its data, with citations.

Every answer goes through one path: a fresh cache entry is used as is; otherwise the
provider is asked (spending rate budget), the answer is parsed *before* it is cached (an
unusable answer never replaces a good one), and when the provider cannot be used an
expired entry is served flagged ``stale`` with its age. Parsed catalogues and structures
are kept per response body, so a catalogue is parsed once, not once per search.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, TypeVar

import httpx

from governed_evidence.config import Settings
from governed_evidence.errors import (
    InvalidRequestError,
    NotFoundError,
    ProviderUnavailableError,
    RateLimitedError,
    ResponseTooLargeError,
    StatisticsError,
    UnusableResponseError,
)
from governed_evidence.logging import get_logger
from governed_evidence.sdmx.cache import CacheEntry, CacheStore, RateLedger, ResponseCache
from governed_evidence.sdmx.catalogue import CatalogueIndex, parse_catalogue
from governed_evidence.sdmx.client import HttpResponse, SdmxClient
from governed_evidence.sdmx.data import DataTable, ordered_columns, parse_data
from governed_evidence.sdmx.formats import Format, detect, media_type
from governed_evidence.sdmx.models import (
    AttributeInfo,
    CodeInfo,
    CodesSource,
    DataResponse,
    DatasetDescription,
    DatasetHit,
    DatasetSearchResponse,
    DimensionInfo,
    ProviderBudget,
    StatisticsCacheStatus,
    TimeCoverage,
)
from governed_evidence.sdmx.providers import Provider, Providers, load_providers
from governed_evidence.sdmx.structure import (
    MAX_CODES,
    Constraint,
    Dataflow,
    DataStructure,
    StructureMessage,
    error_codes,
    parse_structure,
)
from governed_evidence.sdmx.urls import (
    Kind,
    SdmxRequest,
    availability_request,
    catalogue_request,
    data_request,
    structure_request,
)
from governed_evidence.sdmx.validate import (
    MAX_CODES_LIMIT,
    MAX_QUERY_CHARS,
    MAX_ROWS_LIMIT,
    MAX_SEARCH_LIMIT,
    DatasetRef,
    parse_dataset_ref,
    provider_dataset_ref,
    validate_key,
    validate_periods,
)

__all__ = ["MAX_CODES_LIMIT", "MAX_ROWS_LIMIT", "MAX_SEARCH_LIMIT", "SdmxService"]

log = get_logger("sdmx")
T = TypeVar("T")

#: Parsed structures kept in memory (keyed by body hash), by count and by the items they
#: hold together: one message may hold up to MAX_CODES, sixteen such must not pile up.
_STRUCTURE_MEMO = 16
_STRUCTURE_MEMO_ITEMS = MAX_CODES
#: What an SDMX error code or a unit multiplier may look like when repeated to a caller.
_ERROR_CODE_RE = re.compile(r"[0-9]{1,4}")
_UNIT_MULT_RE = re.compile(r"[0-9]{1,2}")
_NO_RESULTS_MARKERS = (b"noresultsfound", b"no results found", b"norecordsfound", b"no records found")
_FORMAT_NAMES: dict[Format, str] = {
    "csv": "sdmx-csv",
    "generic": "sdmx-ml-generic",
    "structurespecific": "sdmx-ml-structure-specific",
}


class _Provenance(TypedDict):
    source_url: str
    retrieved_at: str
    from_cache: bool
    stale: bool
    stale_age_seconds: int | None
    hints: list[str]


@dataclass(frozen=True)
class _Fetched:
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


def _period(value: str | None) -> str | None:
    """``2025-06-30T00:00:00`` → ``2025-06-30`` (constraints carry timestamps for periods)."""
    if not value:
        return None
    return value.split("T", 1)[0]


def is_no_results(response: HttpResponse) -> bool:
    """The OECD's plain-text 404 "NoResultsFound", and SDMX error 100, mean an empty selection."""
    if response.status != 404:
        return False
    mt = media_type(response.content_type)
    head = response.body[:4096].lower()
    if mt.endswith("xml"):
        try:
            return "100" in error_codes(response.body)
        except StatisticsError:
            return False
    return any(marker in head for marker in _NO_RESULTS_MARKERS)


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
        self.ttls = ttls
        self.max_bytes = max_bytes
        self.max_rows_parsed = max_rows_parsed
        self.clock = clock
        self.cache = ResponseCache(store, max_bytes=cache_max_bytes, clock=clock)
        self.ledger = RateLedger(store, clock=clock)
        self._lock = threading.Lock()
        self._catalogues: dict[str, tuple[str, CatalogueIndex]] = {}
        self._structures: OrderedDict[str, StructureMessage] = OrderedDict()

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
            proxy=settings.sdmx_proxy,
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

    # -- the one fetch path --------------------------------------------------------------

    def _limit(self, provider: Provider, request: SdmxRequest) -> int:
        return provider.data_per_hour if request.bucket == "data" else provider.structure_per_hour

    def _check_status(self, provider: Provider, request: SdmxRequest, response: HttpResponse) -> None:
        status = response.status
        if 200 <= status < 300:
            return
        if status == 404:
            if request.kind == "data" and is_no_results(response):
                return
            raise NotFoundError(
                f"provider {provider.id} has no such dataset or structure (HTTP 404); "
                "use search_datasets to find a dataset reference"
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
                "and that the key has one position per dimension in the order describe_dataset gives"
            )
        if status == 413:
            raise ResponseTooLargeError(
                f"provider {provider.id} refuses a selection this large; narrow the key or the period"
            )
        raise ProviderUnavailableError(f"provider {provider.id} answered HTTP {status}; try again later")

    def _stale_hint(self, exc: StatisticsError, cached: CacheEntry, now: float) -> str:
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

    def _fetch(self, provider: Provider, request: SdmxRequest, parse: Callable[[CacheEntry], T]) -> tuple[T, _Fetched]:
        now = self.clock()
        cached = self.cache.get(request)
        if cached is not None and cached.fresh(now):
            return parse(cached), _Fetched(cached, True, False, None, cached.age(now))
        try:
            response = self.client.fetch(
                provider,
                request,
                max_bytes=self.max_bytes[request.kind],
                before_attempt=lambda: self.ledger.acquire(provider.id, request.bucket, self._limit(provider, request)),
            )
            self._check_status(provider, request, response)
            fresh = CacheEntry(
                provider.id, request.cache_key, request.kind, response.status, response.content_type,
                response.body, hashlib.sha256(response.body).hexdigest(), len(response.body), now,
                now + self.ttls[request.kind], request.url,
            )  # fmt: skip
            value = parse(fresh)
        except StatisticsError as exc:
            if cached is None:
                raise
            log.warning("sdmx_serving_stale", provider=provider.id, kind=request.kind, error=type(exc).__name__)
            return parse(cached), _Fetched(cached, True, True, self._stale_hint(exc, cached, now), cached.age(now))
        # Cached only once it parsed: an unusable answer never replaces a good copy.
        entry = self.cache.put(
            request,
            status=response.status,
            content_type=response.content_type,
            body=response.body,
            source_url=request.url,
            ttl_s=self.ttls[request.kind],
        )
        return value, _Fetched(entry, False, False, None, 0.0)

    # -- parsed forms, memoised per body ---------------------------------------------------

    def _structure(self, entry: CacheEntry) -> StructureMessage:
        if not 200 <= entry.status < 300:
            raise UnusableResponseError("the provider sent no structure")
        key = entry.body_sha256
        with self._lock:
            memo = self._structures.get(key)
            if memo is not None:
                self._structures.move_to_end(key)
                return memo
        fmt = detect(entry.content_type, entry.body)
        if fmt != "structure":
            raise UnusableResponseError(f"expected a structure message from the provider, got {fmt}")
        message = parse_structure(entry.body)
        with self._lock:
            self._structures[key] = message
            while len(self._structures) > 1 and (
                len(self._structures) > _STRUCTURE_MEMO
                or sum(m.size for m in self._structures.values()) > _STRUCTURE_MEMO_ITEMS
            ):
                self._structures.popitem(last=False)
        return message

    def _catalogue(self, entry: CacheEntry) -> CatalogueIndex:
        key = entry.body_sha256
        with self._lock:
            memo = self._catalogues.get(entry.provider)
            if memo is not None and memo[0] == key:
                return memo[1]
        rows = self.cache.load_catalogue(entry.provider, key)
        if rows is None:
            fmt = detect(entry.content_type, entry.body)
            if fmt != "structure":
                raise UnusableResponseError(f"expected the provider's dataflow catalogue, got {fmt}")
            rows = parse_catalogue(entry.body)
            self.cache.save_catalogue(entry.provider, key, rows)
        index = CatalogueIndex(rows)
        with self._lock:
            self._catalogues[entry.provider] = (key, index)
        return index

    def _table(self, entry: CacheEntry, keep: int) -> tuple[DataTable, Format | None]:
        if entry.status == 404:
            return DataTable([], [], 0, {}, set()), None
        fmt = detect(entry.content_type, entry.body)
        if fmt == "text" and any(m in entry.body[:4096].lower() for m in _NO_RESULTS_MARKERS):
            return DataTable([], [], 0, {}, set()), None
        if fmt == "error":
            if "100" in error_codes(entry.body):
                return DataTable([], [], 0, {}, set()), None
            raise UnusableResponseError("the provider answered with an SDMX error message")
        return parse_data(fmt, entry.body, keep=keep, max_rows=self.max_rows_parsed), fmt

    # -- dataset resolution ----------------------------------------------------------------

    def _catalogue_for(self, provider: Provider) -> tuple[CatalogueIndex, _Fetched]:
        return self._fetch(provider, catalogue_request(provider), self._catalogue)

    def _resolve(self, provider: Provider, ref: DatasetRef) -> DatasetRef:
        """Fill in a missing agency (and version) from the provider's default or its catalogue."""
        if ref.agency is not None:
            return ref
        if provider.default_agency is not None:
            return DatasetRef(provider.default_agency, ref.id, ref.version)
        index, _ = self._catalogue_for(provider)
        for row in index.rows:
            if row.dataset_id.upper() == ref.id.upper():
                version = row.version if ref.version == "latest" else ref.version
                # The catalogue is provider text: its parts go into URLs only if a caller
                # could have sent them (no "..", no slash), whatever the cache holds.
                resolved = provider_dataset_ref(row.agency, row.dataset_id, version)
                if resolved is None:
                    raise UnusableResponseError(
                        f"the {provider.id} catalogue names this dataset with identifiers this server does not accept"
                    )
                return resolved
        raise NotFoundError(
            f"no dataset {ref.id!r} in the {provider.id} catalogue; use search_datasets to find a dataset reference"
        )

    def _peek_structure(self, provider: Provider, ref: DatasetRef) -> tuple[StructureMessage, Dataflow | None] | None:
        """A cached structure for ``ref`` (even expired), without touching the network."""
        entry = self.cache.get(structure_request(provider, ref))
        if entry is None and ref.version != "latest":
            # describe_dataset may have been asked for the latest version of the same flow.
            entry = self.cache.get(structure_request(provider, DatasetRef(ref.agency, ref.id)))
        if entry is None:
            return None
        try:
            message = self._structure(entry)
        except StatisticsError:
            return None
        return message, message.dataflow(ref.id, ref.agency)

    # -- tools -----------------------------------------------------------------------------

    def search_datasets(self, query: str, provider: str = "OECD", limit: int = 10) -> DatasetSearchResponse:
        """Dataflows of ``provider`` ranked by how well their names and descriptions match ``query``."""
        p = self.providers.get(provider)
        text = query.strip() if isinstance(query, str) else ""
        if not text or len(text) > MAX_QUERY_CHARS:
            raise InvalidRequestError(f"query must be 1-{MAX_QUERY_CHARS} characters")
        if not 1 <= limit <= MAX_SEARCH_LIMIT:
            raise InvalidRequestError(f"limit must be between 1 and {MAX_SEARCH_LIMIT}")
        index, fetched = self._catalogue_for(p)
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
            **self._provenance(fetched, hints),
        )

    def describe_dataset(self, dataset: str, provider: str = "OECD", max_codes: int = 30) -> DatasetDescription:
        """Dimensions in key order with their codes (codes with data first), time coverage and an example key."""
        p = self.providers.get(provider)
        ref = parse_dataset_ref(dataset)
        if not 1 <= max_codes <= MAX_CODES_LIMIT:
            raise InvalidRequestError(f"max_codes must be between 1 and {MAX_CODES_LIMIT}")
        ref = self._resolve(p, ref)
        message, fetched = self._fetch(p, structure_request(p, ref), self._structure)
        flow = message.dataflow(ref.id, ref.agency)
        dsd = message.structure_for(flow)
        if dsd is None:
            raise NotFoundError(
                f"provider {p.id} returned no data structure for {ref.text}; use search_datasets to find a dataset"
            )
        hints: list[str] = []
        actual, source = self._codes_with_data(p, ref, message, flow, dsd, hints)
        dimensions = [
            self._dimension(i + 1, dim.id, message, dsd, actual, source, max_codes)
            for i, dim in enumerate(dsd.dimensions)
        ]
        coverage = self._coverage(flow, actual)
        key_template = ".".join(d.id for d in dsd.dimensions)
        example = self._example_key(flow, dimensions)
        hints.append(
            f"A key has {len(dimensions)} positions in the order {key_template}; leave a position empty for all "
            "codes and join several codes with '+'."
        )
        if any(d.truncated for d in dimensions):
            hints.append(
                f"Some dimensions list only {max_codes} codes (codes with data first); raise max_codes "
                f"(up to {MAX_CODES_LIMIT}) to see more."
            )
        if source == "allowed_constraint":
            hints.append(
                f"{p.id} reports which codes are allowed, not which have data; an allowed combination may be empty."
            )
        resolved_version = flow.version if flow is not None and flow.version else ref.version
        resolved_agency = flow.agency if flow is not None and flow.agency else (ref.agency or "")
        return DatasetDescription(
            provider=p.id,
            dataset=f"{resolved_agency},{ref.id if flow is None else flow.id},{resolved_version}",
            id=ref.id if flow is None else flow.id,
            agency=resolved_agency,
            version=resolved_version,
            name=(flow.name if flow is not None else "") or dsd.name,
            description=flow.description if flow is not None else "",
            dimensions=dimensions,
            time_dimension=dsd.time_dimension.id if dsd.time_dimension is not None else None,
            time_coverage=coverage,
            attributes=[AttributeInfo(id=a.id, name=message.concept_name(a) or None) for a in dsd.attributes],
            codes_source=source,
            key_template=key_template,
            example_key=example,
            **self._provenance(fetched, hints),
        )

    def get_data(
        self,
        dataset: str,
        key: str,
        provider: str = "OECD",
        start_period: str | None = None,
        end_period: str | None = None,
        max_rows: int = 200,
    ) -> DataResponse:
        """Observations for ``key`` as a compact table with constant columns lifted out and a citable URL."""
        p = self.providers.get(provider)
        ref = parse_dataset_ref(dataset)
        key = validate_key(key)
        start, end = validate_periods(start_period, end_period)
        if not 1 <= max_rows <= MAX_ROWS_LIMIT:
            raise InvalidRequestError(f"max_rows must be between 1 and {MAX_ROWS_LIMIT}")
        ref = self._resolve(p, ref)
        peeked = self._peek_structure(p, ref)
        dsd = peeked[0].structure_for(peeked[1]) if peeked is not None else None
        if dsd is not None and key != "all" and len(key.split(".")) != len(dsd.dimensions):
            # Caught here rather than by the provider, so a mistake costs no download budget.
            raise InvalidRequestError(
                f"the key has {len(key.split('.'))} positions but {ref.id} has {len(dsd.dimensions)} dimensions "
                f"({'.'.join(d.id for d in dsd.dimensions)}); leave a position empty for all codes"
            )
        request = data_request(p, ref, key, start, end)
        (table, fmt), fetched = self._fetch(p, request, lambda e: self._table(e, max_rows))
        dims = [d.id for d in dsd.dimensions] if dsd is not None else None
        columns = [c for c in ordered_columns(table.columns, dims) if c not in table.constant and c not in table.empty]
        rows = [[table.value(c, row.get(c, "")) for c in columns] for row in table.rows]
        labels = self._labels(table, columns, peeked[0] if peeked is not None else None, dsd)
        hints: list[str] = []
        if table.total_rows == 0:
            hints.append(
                "No observations match this key and period. describe_dataset lists the codes that have data and "
                "the time coverage; widen the period or use fewer fixed positions."
            )
        elif len(rows) < table.total_rows:
            hints.append(
                f"Showing the first {len(rows)} of {table.total_rows} rows; narrow the key or the period, or raise "
                f"max_rows (up to {MAX_ROWS_LIMIT})."
            )
        unit_mult = table.constant.get("UNIT_MULT")
        if unit_mult and _UNIT_MULT_RE.fullmatch(unit_mult) and unit_mult != "0":
            hints.append(f"UNIT_MULT={unit_mult}: values are in units of 10^{unit_mult}.")
        return DataResponse(
            provider=p.id,
            dataset=ref.text,
            key=key,
            start_period=start,
            end_period=end,
            columns=columns,
            rows=rows,
            constant_columns=dict(table.constant),
            labels=labels,
            total_rows=table.total_rows,
            returned_rows=len(rows),
            truncated=len(rows) < table.total_rows,
            format=_FORMAT_NAMES.get(fmt, "none") if fmt is not None else "none",  # type: ignore[arg-type]
            **self._provenance(fetched, hints),
        )

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

    # -- helpers ---------------------------------------------------------------------------

    def _provenance(self, fetched: _Fetched, hints: list[str]) -> _Provenance:
        return _Provenance(
            source_url=fetched.entry.source_url,
            retrieved_at=_iso(fetched.entry.fetched_at),
            from_cache=fetched.from_cache,
            stale=fetched.stale,
            stale_age_seconds=int(fetched.age_s) if fetched.stale else None,
            hints=([fetched.stale_hint] if fetched.stale_hint else []) + hints,
        )

    def _codes_with_data(
        self,
        provider: Provider,
        ref: DatasetRef,
        message: StructureMessage,
        flow: Dataflow | None,
        dsd: DataStructure,
        hints: list[str],
    ) -> tuple[Constraint | None, CodesSource]:
        actual = message.constraints_for(flow, "Actual")
        if actual:
            return actual[0], "actual_constraint"
        if provider.availableconstraint:
            try:
                available, _ = self._fetch(provider, availability_request(provider, ref), self._structure)
                found = available.constraints_for(None, "Actual")
                if found:
                    return found[0], "available_constraint"
            except (StatisticsError, NotFoundError, InvalidRequestError) as exc:
                log.info("sdmx_availability_skipped", provider=provider.id, error=type(exc).__name__)
                hints.append("The provider's availability of codes could not be read; codes are not marked.")
        codelists = [message.codelist(d.codelist) for d in dsd.dimensions]
        if any(cl is not None and cl.partial for cl in codelists):
            return None, "partial_codelist"
        allowed = message.constraints_for(flow, "Allowed")
        if allowed and any(c.key_values for c in allowed):
            return allowed[0], "allowed_constraint"
        return None, "codelist_only"

    def _dimension(
        self,
        position: int,
        dim_id: str,
        message: StructureMessage,
        dsd: DataStructure,
        constraint: Constraint | None,
        source: CodesSource,
        max_codes: int,
    ) -> DimensionInfo:
        component = next(d for d in dsd.dimensions if d.id == dim_id)
        codelist = message.codelist(component.codelist)
        names = dict(codelist.codes) if codelist is not None else {}
        constrained = constraint.key_values.get(dim_id) if constraint is not None else None
        if source in ("actual_constraint", "available_constraint") and constrained is not None:
            with_data = list(dict.fromkeys(constrained))
            ordered = with_data + [c for c in names if c not in set(with_data)]
            flags: dict[str, bool | None] = {c: c in set(with_data) for c in ordered}
            count: int | None = len(with_data)
        elif source == "partial_codelist" and codelist is not None and codelist.partial:
            ordered = list(names)
            flags = dict.fromkeys(ordered, True)
            count = len(ordered)
        elif source == "allowed_constraint" and constrained is not None:
            # Codes outside an Allowed constraint cannot be asked for: leave them out.
            ordered = list(dict.fromkeys(constrained))
            flags = dict.fromkeys(ordered, None)
            count = None
        else:
            ordered = list(names)
            flags = dict.fromkeys(ordered, None)
            count = None
        codes = [CodeInfo(id=c, name=names.get(c) or None, has_data=flags[c]) for c in ordered[:max_codes]]
        return DimensionInfo(
            position=position,
            id=dim_id,
            name=message.concept_name(component) or (codelist.name if codelist is not None else None) or None,
            codes=codes,
            total_codes=len(ordered),
            codes_with_data=count,
            truncated=len(ordered) > max_codes,
        )

    @staticmethod
    def _coverage(flow: Dataflow | None, constraint: Constraint | None) -> TimeCoverage | None:
        if constraint is not None and (constraint.time_start or constraint.time_end):
            return TimeCoverage(
                start=_period(constraint.time_start), end=_period(constraint.time_end), source="constraint"
            )
        if flow is not None:
            # Eurostat states coverage as dataflow annotations.
            start = flow.annotations.get("OBS_PERIOD_OVERALL_OLDEST")
            end = flow.annotations.get("OBS_PERIOD_OVERALL_LATEST")
            if start or end:
                return TimeCoverage(start=start or None, end=end or None, source="annotation")
        return None

    @staticmethod
    def _example_key(flow: Dataflow | None, dimensions: list[DimensionInfo]) -> str:
        """The provider's default selection where it publishes one; else fix only single-code dimensions."""
        defaults: dict[str, str] = {}
        if flow is not None:
            for part in flow.annotations.get("DEFAULT", "").split(","):
                dim, _, code = part.partition("=")
                if dim and code:
                    defaults[dim.strip()] = code.strip()
        positions: list[str] = []
        for d in dimensions:
            usable = [c.id for c in d.codes if c.has_data is not False]
            default = defaults.get(d.id)
            if default and (default in usable or d.truncated):
                positions.append(default)
            elif len(usable) == 1 and not d.truncated:
                positions.append(usable[0])
            else:
                positions.append("")
        if positions and all(p == "" for p in positions):
            # An all-wildcard key can be huge; fix the first dimension that has a code.
            for i, d in enumerate(dimensions):
                usable = [c.id for c in d.codes if c.has_data is not False]
                if usable:
                    positions[i] = usable[0]
                    break
        return ".".join(positions)

    @staticmethod
    def _labels(
        table: DataTable, columns: list[str], message: StructureMessage | None, dsd: DataStructure | None
    ) -> dict[str, dict[str, str]]:
        used: dict[str, set[str]] = {c: {v} for c, v in table.constant.items()}
        for row in table.rows:
            for c in columns:
                value = row.get(c, "")
                if value:
                    used.setdefault(c, set()).add(value)
        components = {c.id: c for c in ([*dsd.dimensions, *dsd.attributes] if dsd is not None else [])}
        labels: dict[str, dict[str, str]] = {}
        for column, codes in used.items():
            sent = table.labels.get(column, {})
            codelist = message.codelist(components[column].codelist) if message and column in components else None
            known = codelist.codes if codelist is not None else {}
            found = {code: sent.get(code) or known.get(code, "") for code in sorted(codes)}
            found = {k: v for k, v in found.items() if v}
            if found:
                labels[column] = found
        return labels
