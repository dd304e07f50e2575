"""An empty get_data answer says why and which nearby keys have data, from real constraints."""

from __future__ import annotations

from governed_evidence.sdmx.emptiness import MAX_SUGGESTIONS
from tests.sdmx.conftest import ServiceFactory
from tests.sdmx.helpers import STRUCTURE_CT, FakeProviders, fixture
from tests.sdmx.test_service import G20, HOUSE, _oecd


def _empty(fake: FakeProviders) -> None:
    _oecd(fake)
    # The OECD's plain-text 404 for an empty selection.
    fake.add("/data/", b"NoResultsFound", "text/plain; charset=utf-8", status=404)


def test_a_code_without_data_is_named_with_codes_that_have_data(
    make_service: ServiceFactory, fake: FakeProviders
) -> None:
    _empty(fake)
    service = make_service()
    service.describe_dataset(HOUSE)  # caches the structure and its Actual constraint (CR_A_...)
    before = len(fake.requests)
    got = service.get_data(HOUSE, "ZZZ.A.HPI_RPI.IX")
    assert got.rows == [] and got.total_rows == 0
    text = " ".join(got.hints)
    assert "REF_AREA ZZZ" in text and "no data in this dataset at all" in text
    assert "REF_AREA codes that have data include AUS+AUT+BEL+BGR+BRA" in text
    # Up to three keys one position away, from the constraint.
    assert "AUS.A.HPI_RPI.IX, AUT.A.HPI_RPI.IX, BEL.A.HPI_RPI.IX" in text
    # The structure's own constraint was enough: only the data request was sent.
    assert len(fake.requests) == before + 1


def test_a_period_without_data_gives_the_period_that_has_data(
    make_service: ServiceFactory, fake: FakeProviders
) -> None:
    _empty(fake)
    service = make_service()
    service.describe_dataset(HOUSE)
    got = service.get_data(HOUSE, "AUS.A.HPI_RPI.IX", start_period="2030")
    assert any("this dataset has data from 1956-01-01 to 2025-06-30" in h for h in got.hints)


def test_a_combination_without_data_suggests_keys_one_position_wider(
    make_service: ServiceFactory, fake: FakeProviders
) -> None:
    _empty(fake)
    service = make_service()
    service.describe_dataset(HOUSE)
    got = service.get_data(HOUSE, "AUS.A.HPI_RPI.IX")
    text = " ".join(got.hints)
    assert "each code of this key has data, but not in this combination" in text
    suggested = text.split("Keys one position away to try: ", 1)[1].split(" (", 1)[0].split(", ")
    assert suggested == [".A.HPI_RPI.IX", "AUS..HPI_RPI.IX", "AUS.A..IX"]
    assert len(suggested) <= MAX_SUGGESTIONS
    assert "a combination may still be empty" in text


def test_availability_is_asked_once_and_counted_when_the_structure_has_none(
    make_service: ServiceFactory, fake: FakeProviders
) -> None:
    _empty(fake)
    fake.add("/availableconstraint/OECD.SDD.TPS,DSD_G20_PRICES@DF_G20_PRICES,1.0/all/all/all?mode=exact",
             fixture("spc_availableconstraint.xml"), STRUCTURE_CT)  # fmt: skip
    fake.add("/data/OECD.SDD.TPS,DSD_G20_PRICES@DF_G20_PRICES,1.0/", b"NoResultsFound", "text/plain", status=404)
    service = make_service()
    # The g20 structure has no constraint; describe asks availableconstraint (cached after).
    service.describe_dataset(G20)
    got = service.get_data(G20, "CHN.A.N.CPI.PA._T.N.GY")
    assert any("FREQ A" in h for h in got.hints)
    assert any("FREQ codes that have data include M" in h for h in got.hints)
    asked = [u for u in fake.urls() if "availableconstraint" in u]
    assert len(asked) == 1  # the cached answer served the diagnosis
    assert (service.ledger.usage("OECD", "structure") or 0) >= 2


def test_without_a_cached_structure_the_hint_stays_general(make_service: ServiceFactory, fake: FakeProviders) -> None:
    _empty(fake)
    got = make_service().get_data(HOUSE, "ZZZ.A..")
    assert got.hints[0].startswith("No observations match this key and period")
