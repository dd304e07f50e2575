"""Where the cache lives, cache hits and expiry, stale service, eviction and carry-over."""

from __future__ import annotations

import os
from pathlib import Path

import apsw
import pytest

from governed_evidence.errors import ProviderUnavailableError
from governed_evidence.sdmx import store as store_module
from governed_evidence.sdmx.cache import ResponseCache
from governed_evidence.sdmx.providers import load_providers
from governed_evidence.sdmx.ratelimit import RateLedger
from governed_evidence.sdmx.schema import carry_over_sql, schema_sql
from governed_evidence.sdmx.service import SdmxService
from governed_evidence.sdmx.store import CacheStore
from governed_evidence.sdmx.urls import catalogue_request
from tests.sdmx.conftest import ServiceFactory
from tests.sdmx.helpers import STRUCTURE_CT, FakeClock, FakeProviders, fixture

OECD = load_providers().get("OECD")
G20 = fixture("oecd_g20_prices_structure.xml")


def _index_file(path: Path) -> Path:
    """A stand-in evidence index: the store only needs the `meta` table to recognise one."""
    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL); INSERT INTO meta VALUES ('k','v');")
    conn.close()
    return path


def _tables(path: Path) -> set[str]:
    conn = apsw.Connection(str(path))
    try:
        return {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


def test_tables_go_into_a_writable_index(tmp_path: Path) -> None:
    index = _index_file(tmp_path / "evidence.sqlite")
    store = CacheStore(index, tmp_path / "fallback.sqlite")
    assert (store.location.mode, store.location.persistent, store.location.reason) == ("index", True, None)
    store.close()
    assert {"meta", "sdmx_cache", "sdmx_rate_ledger", "sdmx_catalogue"} <= _tables(index)
    assert not (tmp_path / "fallback.sqlite").exists()


def test_read_only_index_falls_back_to_the_configured_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = _index_file(tmp_path / "evidence.sqlite")
    before = index.read_bytes()
    real_access = os.access
    # Tests run as root, which ignores permission bits; report the file as not writable.
    monkeypatch.setattr(store_module.os, "access", lambda p, mode: False if Path(p) == index else real_access(p, mode))
    store = CacheStore(index, tmp_path / "volume" / "cache.sqlite")
    assert store.location.mode == "file"
    assert store.location.reason == "the index file is read-only"
    store.close()
    assert index.read_bytes() == before
    assert "sdmx_rate_ledger" in _tables(tmp_path / "volume" / "cache.sqlite")


def test_read_only_filesystem_is_detected_by_sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = _index_file(tmp_path / "evidence.sqlite")
    real = store_module._open_writable

    def read_only(path: Path) -> apsw.Connection:
        if path == index:
            raise apsw.ReadOnlyError("attempt to write a readonly database")
        return real(path)

    monkeypatch.setattr(store_module, "_open_writable", read_only)
    store = CacheStore(index, None)
    assert (store.location.mode, store.location.persistent) == ("memory", False)
    assert store.location.reason == "the index file is read-only"
    store.close()


def test_no_index_and_no_fallback_means_memory(tmp_path: Path) -> None:
    store = CacheStore(tmp_path / "missing.sqlite", None)
    assert store.location.mode == "memory"
    assert store.location.reason == "there is no index file"
    assert not (tmp_path / "missing.sqlite").exists()
    store.close()


def test_a_file_that_is_not_an_index_is_left_alone(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    conn = apsw.Connection(str(other))
    conn.execute("CREATE TABLE unrelated(x)")
    conn.close()
    before = other.read_bytes()
    store = CacheStore(other, None)
    assert store.location.mode == "memory"
    assert store.location.reason == "the index file is not an evidence index"
    store.close()
    assert other.read_bytes() == before


def test_an_index_rebuild_is_followed(tmp_path: Path, clock: FakeClock) -> None:
    index = _index_file(tmp_path / "evidence.sqlite")
    store = CacheStore(index, None)
    cache = ResponseCache(store, max_bytes=10**9, clock=clock)
    request = catalogue_request(OECD)
    cache.put(request, status=200, content_type=STRUCTURE_CT, body=G20, source_url=request.url, ttl_s=60)
    # An atomic rebuild renames a brand-new file over the old one.
    new = _index_file(tmp_path / "new.sqlite")
    os.replace(new, index)
    assert cache.get(request) is None
    cache.put(request, status=200, content_type=STRUCTURE_CT, body=G20, source_url=request.url, ttl_s=60)
    assert cache.get(request) is not None
    store.close()
    assert "sdmx_cache" in _tables(index)


def test_carry_over_copies_ledger_and_cache_into_a_rebuilt_file(tmp_path: Path, clock: FakeClock) -> None:
    old = _index_file(tmp_path / "old.sqlite")
    store = CacheStore(old, None)
    cache = ResponseCache(store, max_bytes=10**9, clock=clock)
    request = catalogue_request(OECD)
    cache.put(request, status=200, content_type=STRUCTURE_CT, body=G20, source_url=request.url, ttl_s=60)
    RateLedger(store, clock=clock).acquire("OECD", "data", 60)
    store.close()
    new = apsw.Connection(str(tmp_path / "new.sqlite"))
    new.execute(schema_sql())
    new.execute("ATTACH DATABASE ? AS previous", (str(old),))
    new.execute(carry_over_sql())
    assert new.execute("SELECT count(*) FROM sdmx_rate_ledger").fetchone() == (1,)
    assert new.execute("SELECT count(*) FROM sdmx_cache").fetchone() == (1,)
    with pytest.raises(ValueError):
        carry_over_sql("x; DROP TABLE meta")


def test_cache_round_trip_records_metadata(tmp_path: Path, clock: FakeClock) -> None:
    store = CacheStore(None, tmp_path / "cache.sqlite")
    cache = ResponseCache(store, max_bytes=10**9, clock=clock)
    request = catalogue_request(OECD)
    stored = cache.put(request, status=200, content_type=STRUCTURE_CT, body=G20, source_url=request.url, ttl_s=100)
    got = cache.get(request)
    assert got is not None and got.body == G20
    assert (got.size, got.content_type, got.fetched_at, got.expires_at) == (
        len(G20),
        STRUCTURE_CT,
        clock.now,
        clock.now + 100,
    )
    assert got.body_sha256 == stored.body_sha256 and len(got.body_sha256) == 64
    assert got.fresh(clock.now + 99) and not got.fresh(clock.now + 100)
    # Bodies are stored compressed.
    conn = apsw.Connection(str(tmp_path / "cache.sqlite"))
    (stored_size,) = conn.execute("SELECT stored_size FROM sdmx_cache").fetchone()  # type: ignore[misc]
    conn.close()
    assert stored_size < len(G20) / 3
    store.close()


def test_a_damaged_cache_entry_is_a_miss(tmp_path: Path, clock: FakeClock) -> None:
    store = CacheStore(None, tmp_path / "cache.sqlite")
    cache = ResponseCache(store, max_bytes=10**9, clock=clock)
    request = catalogue_request(OECD)
    cache.put(request, status=200, content_type=STRUCTURE_CT, body=G20, source_url=request.url, ttl_s=100)
    with store.connection() as conn:
        conn.execute("UPDATE sdmx_cache SET body = zeroblob(10)")
    assert cache.get(request) is None
    assert cache.stats()["entries"] == 0
    store.close()


def test_eviction_keeps_the_cache_under_its_size(tmp_path: Path, clock: FakeClock) -> None:
    store = CacheStore(None, tmp_path / "cache.sqlite")
    cache = ResponseCache(store, max_bytes=12_000, clock=clock)
    providers = load_providers()
    requests = [catalogue_request(providers.get(p)) for p in ("OECD", "ECB", "ESTAT")]
    bodies = [os.urandom(5_000) for _ in requests]  # incompressible
    for request, body in zip(requests, bodies, strict=True):
        cache.put(request, status=200, content_type="x", body=body, source_url=request.url, ttl_s=100)
        clock.advance(1)
    assert cache.get(requests[0]) is None  # the oldest went
    assert cache.get(requests[2]) is not None
    assert cache.stats()["stored_bytes"] <= 12_000
    store.close()


def _oecd_catalogue(fake: FakeProviders) -> None:
    fake.add("/dataflow/all/all/latest", G20, STRUCTURE_CT)


def test_second_search_is_a_cache_hit(make_service: ServiceFactory, fake: FakeProviders) -> None:
    _oecd_catalogue(fake)
    service = make_service()
    first = service.search_datasets("consumer prices")
    second = service.search_datasets("G20 prices")
    assert (first.from_cache, second.from_cache) == (False, True)
    assert len(fake.requests) == 1
    assert second.retrieved_at == first.retrieved_at
    # A restarted server searches the persisted catalogue without fetching or re-parsing it.
    restarted = make_service()
    assert restarted.search_datasets("consumer prices").from_cache is True
    assert len(fake.requests) == 1


def test_expired_entries_are_refetched(make_service: ServiceFactory, fake: FakeProviders, clock: FakeClock) -> None:
    _oecd_catalogue(fake)
    service = make_service(sdmx_ttl_catalogue_s=3600)
    service.search_datasets("prices")
    clock.advance(3599)
    assert service.search_datasets("prices").from_cache is True
    clock.advance(2)
    refreshed = service.search_datasets("prices")
    assert (refreshed.from_cache, refreshed.stale) == (False, False)
    assert len(fake.requests) == 2


def test_stale_copy_is_served_when_the_provider_fails(
    make_service: ServiceFactory, fake: FakeProviders, clock: FakeClock
) -> None:
    _oecd_catalogue(fake)
    service = make_service(sdmx_ttl_catalogue_s=3600)
    original = service.search_datasets("prices")
    clock.advance(2 * 86400)
    fake.add("/dataflow/all/all/latest", b"", "text/html", status=503)
    stale = service.search_datasets("prices")
    assert (stale.from_cache, stale.stale) == (True, True)
    assert stale.stale_age_seconds == 2 * 86400
    assert stale.retrieved_at == original.retrieved_at
    assert stale.results == original.results
    assert "cached copy retrieved 2 days ago" in stale.hints[0]
    # Three attempts (two retries) before giving up on the provider.
    assert len(fake.requests) == 4


def test_without_a_cached_copy_the_failure_is_an_error(make_service: ServiceFactory, fake: FakeProviders) -> None:
    fake.add("/dataflow/all/all/latest", b"", "text/html", status=503)
    with pytest.raises(ProviderUnavailableError, match="HTTP 503"):
        make_service().search_datasets("prices")


def test_an_unusable_answer_never_replaces_a_good_copy(
    make_service: ServiceFactory, fake: FakeProviders, clock: FakeClock
) -> None:
    _oecd_catalogue(fake)
    service: SdmxService = make_service(sdmx_ttl_catalogue_s=60)
    service.search_datasets("prices")
    clock.advance(120)
    fake.add("/dataflow/all/all/latest", b"<html>maintenance</html>", "text/html")
    stale = service.search_datasets("prices")
    assert stale.stale and "could not be used" in stale.hints[0]
    entry = service.cache.get(catalogue_request(OECD))
    assert entry is not None and entry.body == G20


@pytest.mark.parametrize("retry_after", ["9" * 400, "1" * 5000, "²", "٣", "１２"])
def test_an_unreadable_retry_after_still_serves_the_stale_copy(
    make_service: ServiceFactory, fake: FakeProviders, clock: FakeClock, retry_after: str
) -> None:
    _oecd_catalogue(fake)
    service = make_service(sdmx_ttl_catalogue_s=3600)
    original = service.search_datasets("prices")
    clock.advance(7200)
    fake.add("/dataflow/all/all/latest", b"busy", "text/plain", status=503, **{"retry-after": retry_after.encode()})
    stale = service.search_datasets("prices")
    assert (stale.from_cache, stale.stale, stale.stale_age_seconds) == (True, True, 7200)
    assert stale.results == original.results
    with pytest.raises(ProviderUnavailableError, match="HTTP 503"):
        make_service(sdmx_cache_path=None).search_datasets("prices")


def _sdmx_tables(path: Path) -> dict[str, list[tuple[object, ...]]]:
    conn = apsw.Connection(str(path))
    try:
        names = [str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: list(conn.execute(f"SELECT * FROM {n}")) for n in names if n.startswith("sdmx_")}
    finally:
        conn.close()


def test_the_shared_cache_and_budget_hold_nothing_of_a_query(
    tmp_path: Path, make_service: ServiceFactory, fake: FakeProviders
) -> None:
    """Servers of every ceiling on one index file share the statistics tables (public data and
    request counts). A document search never touches them, and a statistics search stores
    the provider's catalogue, never the words searched for."""
    from governed_evidence.config import Classification
    from governed_evidence.ingest.pipeline import ingest_corpus
    from governed_evidence.search.service import SearchService
    from tests.helpers import HashEmbedder, small_corpus

    db = tmp_path / "index.sqlite"
    embedder = HashEmbedder()
    ingest_corpus(small_corpus(tmp_path / "corpus"), db, embedder, ceiling=Classification.RESTRICTED, progress=None)
    _oecd_catalogue(fake)
    statistics = make_service(db=db, sdmx_cache_path=None)
    assert statistics.status().location == "index"
    statistics.search_datasets("prices zanzibar-quokka")
    before = _sdmx_tables(db)
    status_before = statistics.status()
    documents = SearchService(db, ceiling=Classification.RESTRICTED, embedder_factory=lambda: embedder)
    try:
        for query in ("restricted project quokka budget", "train fares", "zanzibar-quokka"):
            documents.search(query, confidence_level="normal")
    finally:
        documents.reader.close()
    assert _sdmx_tables(db) == before
    assert statistics.status() == status_before
    text = repr(before)
    assert "quokka" not in text and "zanzibar" not in text
    assert all("quokka" not in url for url in fake.urls())
