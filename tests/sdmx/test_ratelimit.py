"""Separate hourly budgets, persisted before each request: restarts cannot exceed them, damage fails closed."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from governed_evidence.errors import RateLedgerError, RateLimitedError
from tests.sdmx.conftest import ServiceFactory
from tests.sdmx.helpers import CSV_CT, STRUCTURE_CT, FakeClock, FakeProviders, fixture

TIGHT = """
[providers.OECD]
data_per_hour = 2
structure_per_hour = 3
"""
DATASET = "OECD.SDD.TPS,DSD_G20_PRICES@DF_G20_PRICES,1.0"


def _serve(fake: FakeProviders) -> None:
    fake.add("/dataflow/", fixture("oecd_g20_prices_structure.xml"), STRUCTURE_CT)
    fake.add("/data/", fixture("oecd_g20_prices_data.csv"), CSV_CT)


def _data(service, key: str):  # type: ignore[no-untyped-def]
    return service.get_data(DATASET, key, max_rows=5)


def test_data_budget_is_enforced_and_says_when_to_retry(make_service: ServiceFactory, fake: FakeProviders) -> None:
    _serve(fake)
    service = make_service(TIGHT)
    _data(service, "CHN.A.N.CPI.PA._T.N.GY")
    _data(service, "IND.A.N.CPI.PA._T.N.GY")
    with pytest.raises(
        RateLimitedError, match=r"2 data requests per hour to OECD is spent; retry in about 3601 s"
    ) as info:
        _data(service, "BRA.A.N.CPI.PA._T.N.GY")
    assert info.value.retry_after_s == pytest.approx(3600)
    assert len(fake.requests) == 2  # the refused request was never sent
    # Cached answers still flow.
    assert _data(service, "CHN.A.N.CPI.PA._T.N.GY").from_cache is True


def test_budgets_are_separate(make_service: ServiceFactory, fake: FakeProviders) -> None:
    _serve(fake)
    service = make_service(TIGHT)
    _data(service, "CHN.A.N.CPI.PA._T.N.GY")
    _data(service, "IND.A.N.CPI.PA._T.N.GY")
    # The data budget is spent; structure calls have their own.
    described = service.describe_dataset(DATASET)
    assert described.from_cache is False
    status = service.status()
    oecd = next(p for p in status.providers if p.provider == "OECD")
    assert (oecd.data_used_last_hour, oecd.data_per_hour) == (2, 2)
    assert oecd.structure_used_last_hour == 2  # the dataflow structure and its availableconstraint


def test_a_restart_cannot_exceed_the_budget(
    make_service: ServiceFactory, fake: FakeProviders, clock: FakeClock
) -> None:
    _serve(fake)
    first = make_service(TIGHT)
    _data(first, "CHN.A.N.CPI.PA._T.N.GY")
    _data(first, "IND.A.N.CPI.PA._T.N.GY")
    first.close()
    restarted = make_service(TIGHT)
    with pytest.raises(RateLimitedError):
        _data(restarted, "BRA.A.N.CPI.PA._T.N.GY")
    assert len(fake.requests) == 2
    clock.advance(3601)
    assert _data(restarted, "BRA.A.N.CPI.PA._T.N.GY").from_cache is False
    assert len(fake.requests) == 3


def test_two_servers_sharing_a_file_share_the_budget(make_service: ServiceFactory, fake: FakeProviders) -> None:
    _serve(fake)
    a, b = make_service(TIGHT), make_service(TIGHT)
    _data(a, "CHN.A.N.CPI.PA._T.N.GY")
    _data(b, "IND.A.N.CPI.PA._T.N.GY")
    with pytest.raises(RateLimitedError):
        _data(a, "BRA.A.N.CPI.PA._T.N.GY")


def test_retries_spend_budget(make_service: ServiceFactory, fake: FakeProviders) -> None:
    fake.add("/data/", b"", "text/plain", status=503)
    service = make_service(TIGHT, sdmx_max_retries=5)
    with pytest.raises(RateLimitedError):
        _data(service, "CHN.A.N.CPI.PA._T.N.GY")
    assert len(fake.requests) == 2


def test_spent_budget_serves_a_stale_copy(make_service: ServiceFactory, fake: FakeProviders, clock: FakeClock) -> None:
    _serve(fake)
    service = make_service(TIGHT, sdmx_ttl_data_s=60)
    _data(service, "CHN.A.N.CPI.PA._T.N.GY")
    _data(service, "IND.A.N.CPI.PA._T.N.GY")
    clock.advance(120)
    stale = _data(service, "CHN.A.N.CPI.PA._T.N.GY")
    assert (stale.stale, stale.stale_age_seconds) == (True, 120)
    assert "budget of 2 data requests per hour" in stale.hints[0]
    assert stale.total_rows == 41


def _cache_file(tmp_path: Path) -> Path:
    return tmp_path / "sdmx-cache.sqlite"


def test_tampered_ledger_fails_closed(make_service: ServiceFactory, fake: FakeProviders, tmp_path: Path) -> None:
    _serve(fake)
    make_service(TIGHT).close()
    conn = apsw.Connection(str(_cache_file(tmp_path)))
    conn.execute(
        "DROP TABLE sdmx_rate_ledger; CREATE TABLE sdmx_rate_ledger(provider, bucket, at);"
        "INSERT INTO sdmx_rate_ledger VALUES ('OECD', 'data', 'yesterday');"
    )
    conn.close()
    service = make_service(TIGHT)
    with pytest.raises(RateLedgerError, match="no request was sent"):
        _data(service, "CHN.A.N.CPI.PA._T.N.GY")
    assert fake.requests == []
    status = service.status()
    assert status.usable is False and "ledger" in (status.problem or "")


def test_ledger_entries_from_the_future_fail_closed(
    make_service: ServiceFactory, fake: FakeProviders, tmp_path: Path, clock: FakeClock
) -> None:
    _serve(fake)
    make_service(TIGHT).close()
    conn = apsw.Connection(str(_cache_file(tmp_path)))
    conn.execute("INSERT INTO sdmx_rate_ledger VALUES ('OECD', 'data', ?)", (clock.now + 86_400,))
    conn.close()
    with pytest.raises(RateLedgerError):
        _data(make_service(TIGHT), "CHN.A.N.CPI.PA._T.N.GY")
    assert fake.requests == []


def test_a_corrupted_cache_file_fails_closed_instead_of_falling_back(
    make_service: ServiceFactory, fake: FakeProviders, tmp_path: Path
) -> None:
    _serve(fake)
    make_service(TIGHT).close()
    path = _cache_file(tmp_path)
    data = bytearray(path.read_bytes())
    data[:16] = b"garbage-garbage!"
    path.write_bytes(bytes(data))
    service = make_service(TIGHT)
    assert service.status().location == "file"
    assert service.status().usable is False
    with pytest.raises(RateLedgerError, match="unusable"):
        _data(service, "CHN.A.N.CPI.PA._T.N.GY")
    with pytest.raises(RateLedgerError):
        service.search_datasets("prices")
    assert fake.requests == []
