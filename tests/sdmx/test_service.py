"""search → describe → get_data against recorded OECD, ECB and Eurostat responses."""

from __future__ import annotations

import pytest

from governed_evidence.errors import (
    InvalidRequestError,
    NotFoundError,
    ProviderUnavailableError,
    UnusableResponseError,
)
from tests.sdmx.conftest import ServiceFactory
from tests.sdmx.helpers import (
    CSV_CT,
    ECB_DATA,
    ECB_STRUCTURE_FULL,
    ESTAT_GOV,
    ESTAT_NAMA,
    GENERIC_CT,
    OECD_HOUSE_DATA,
    OECD_HOUSE_STRUCTURE,
    OECD_JSON,
    SS_CT,
    STRUCTURE_CT,
    FakeProviders,
    catalogue_of,
    fixture,
    shared,
)

HOUSE = "OECD.ECO.MPD,DSD_AN_HOUSE_PRICES@DF_HOUSE_PRICES,1.0"
G20 = "OECD.SDD.TPS,DSD_G20_PRICES@DF_G20_PRICES,1.0"


def _oecd(fake: FakeProviders) -> None:
    house = shared(OECD_HOUSE_STRUCTURE)
    g20 = fixture("oecd_g20_prices_structure.xml")
    fake.add("/dataflow/all/all/latest", catalogue_of(g20, house), STRUCTURE_CT)
    fake.add("/dataflow/OECD.ECO.MPD/DSD_AN_HOUSE_PRICES@DF_HOUSE_PRICES/1.0?references=all", house, STRUCTURE_CT)
    fake.add("/dataflow/OECD.SDD.TPS/DSD_G20_PRICES@DF_G20_PRICES/1.0?references=all", g20, STRUCTURE_CT)
    fake.add("/data/OECD.ECO.MPD,DSD_AN_HOUSE_PRICES@DF_HOUSE_PRICES,1.0/", shared(OECD_HOUSE_DATA), CSV_CT)


def test_oecd_search_describe_get_data(make_service: ServiceFactory, fake: FakeProviders) -> None:
    _oecd(fake)
    service = make_service()

    found = service.search_datasets("house prices to income", limit=5)
    assert found.provider == "OECD" and found.catalogue_size == 2
    assert found.results[0].dataset == HOUSE
    assert found.results[0].name == "Analytical house prices indicators"
    assert found.source_url == "https://sdmx.oecd.org/public/rest/dataflow/all/all/latest"

    described = service.describe_dataset(found.results[0].dataset, max_codes=5)
    assert described.dataset == HOUSE
    assert described.key_template == "REF_AREA.FREQ.MEASURE.UNIT_MEASURE"
    assert [d.position for d in described.dimensions] == [1, 2, 3, 4]
    assert described.codes_source == "actual_constraint"
    area = described.dimensions[0]
    assert (area.total_codes, area.codes_with_data, area.truncated) == (447, 51, True)
    assert [c.id for c in area.codes] == ["AUS", "AUT", "BEL", "BGR", "BRA"]
    assert all(c.has_data for c in area.codes) and area.codes[0].name == "Australia"
    freq = described.dimensions[1]
    assert [(c.id, c.has_data) for c in freq.codes[:3]] == [("A", True), ("Q", True), ("A2", False)]
    assert described.time_dimension == "TIME_PERIOD"
    assert described.time_coverage is not None
    assert (described.time_coverage.start, described.time_coverage.end) == ("1956-01-01", "2025-06-30")
    # The OECD's DEFAULT annotation (MEASURE=RHP, FREQ=Q) seeds the example key.
    assert described.example_key == ".Q.RHP."
    assert [a.id for a in described.attributes][:2] == ["OBS_STATUS", "UNIT_MULT"]
    assert any("raise max_codes" in h for h in described.hints)

    data = service.get_data(described.dataset, ".A.HPI_RPI+HPI_YDH.", start_period="2005", max_rows=20)
    assert data.source_url == (
        "https://sdmx.oecd.org/public/rest/data/OECD.ECO.MPD,DSD_AN_HOUSE_PRICES@DF_HOUSE_PRICES,1.0/"
        ".A.HPI_RPI+HPI_YDH.?format=csvfilewithlabels&startPeriod=2005"
    )
    assert (data.total_rows, data.returned_rows, data.truncated) == (1694, 20, True)
    assert data.columns == ["REF_AREA", "MEASURE", "TIME_PERIOD", "OBS_VALUE"]
    assert data.rows[0] == ["AUS", "HPI_YDH", "2005", pytest.approx(88.1742083868035)]
    assert data.constant_columns["FREQ"] == "A" and data.constant_columns["UNIT_MEASURE"] == "IX"
    # Labels come from the cached structure when the CSV carries none.
    assert data.labels["REF_AREA"] == {"AUS": "Australia"}
    assert data.labels["MEASURE"]["HPI_YDH"] == "Price to income ratio"
    assert data.format == "sdmx-csv"
    assert data.retrieved_at.endswith("Z") and not data.from_cache and not data.stale
    assert any("first 20 of 1694" in h for h in data.hints)
    # Structure calls were served once; the describe used the Actual constraint (no availableconstraint).
    assert not any("availableconstraint" in u for u in fake.urls())


def test_bare_oecd_id_is_resolved_through_the_catalogue(make_service: ServiceFactory, fake: FakeProviders) -> None:
    _oecd(fake)
    described = make_service().describe_dataset("DSD_AN_HOUSE_PRICES@DF_HOUSE_PRICES")
    assert described.dataset == HOUSE
    with pytest.raises(NotFoundError, match="search_datasets"):
        make_service().describe_dataset("DF_DOES_NOT_EXIST")


def test_oecd_no_results_is_an_empty_result_with_a_hint(make_service: ServiceFactory, fake: FakeProviders) -> None:
    _oecd(fake)
    fake.add("/data/", b"NoResultsFound", "text/plain; charset=utf-8", status=404)
    data = make_service().get_data(HOUSE, "ZZZ.A..", start_period="2020")
    assert (data.total_rows, data.returned_rows, data.rows, data.format) == (0, 0, [], "none")
    assert "No observations match" in data.hints[0]


def test_the_oecd_no_results_marker_is_read_from_the_providers_data(
    make_service: ServiceFactory, fake: FakeProviders
) -> None:
    _oecd(fake)
    fake.add("/data/", b"NoResultsFound", "text/plain; charset=utf-8", status=404)
    # Without the OECD's markers its plain-text 404 is an ordinary "not found".
    with pytest.raises(NotFoundError, match="HTTP 404"):
        make_service("[providers.OECD]\nno_results_markers = []\n").get_data(HOUSE, "ZZZ.A..", start_period="2020")
    # An operator's own words for it are read the same way.
    fake.add("/data/", b"Aucun resultat", "text/plain", status=404)
    data = make_service('[providers.OECD]\nno_results_markers = ["AUCUN RESULTAT"]\n').get_data(HOUSE, "ZZZ.A..")
    assert (data.total_rows, data.format) == (0, "none")
    assert "No observations match" in data.hints[0]


def test_a_provider_without_no_results_markers_answers_ordinary_errors_as_before(
    make_service: ServiceFactory, fake: FakeProviders
) -> None:
    toml = (
        '[providers.PLAIN]\nbase_url = "https://stats.example.org/rest"\ndefault_agency = "ECB"\n'
        "no_results_markers = []\n"
    )
    service = make_service(toml)
    assert service.providers.get("PLAIN").no_results_markers == ()
    fake.add("/data/", b"Resource not found", "text/plain", status=404)
    with pytest.raises(NotFoundError, match="HTTP 404"):
        service.get_data("EXR", "M.USD", provider="PLAIN")
    fake.add("/data/", fixture("fmr_error_150.xml"), "application/xml", status=400)
    with pytest.raises(InvalidRequestError, match=r"HTTP 400, SDMX error 150\); check"):
        service.get_data("EXR", "M.USD", provider="PLAIN")
    fake.add("/data/", b"busy", "text/plain", status=500)
    with pytest.raises(ProviderUnavailableError, match="HTTP 500"):
        service.get_data("EXR", "M.USD", provider="PLAIN")
    # SDMX error 100 means an empty selection from any provider; another provider's words do not.
    no_results = fixture("fmr_error_150.xml").replace(b'code="150"', b'code="100"')
    fake.add("/data/", no_results, "application/xml", status=404)
    assert service.get_data("EXR", "M.USD", provider="PLAIN").total_rows == 0
    fake.add("/data/", b"NoResultsFound", "text/plain", status=404)
    with pytest.raises(NotFoundError, match="HTTP 404"):
        service.get_data("EXR", "M.D", provider="PLAIN")


def test_key_is_checked_against_a_cached_structure_before_spending_budget(
    make_service: ServiceFactory, fake: FakeProviders
) -> None:
    _oecd(fake)
    service = make_service()
    service.describe_dataset(HOUSE)
    before = len(fake.requests)
    with pytest.raises(InvalidRequestError, match=r"3 positions but .* has 4 dimensions"):
        service.get_data(HOUSE, "A.HPI.IX")
    assert len(fake.requests) == before


def test_without_an_actual_constraint_availableconstraint_is_asked(
    make_service: ServiceFactory, fake: FakeProviders
) -> None:
    _oecd(fake)
    fake.add("/availableconstraint/OECD.SDD.TPS,DSD_G20_PRICES@DF_G20_PRICES,1.0/all/all/all?mode=exact",
             fixture("spc_availableconstraint.xml"), STRUCTURE_CT)  # fmt: skip
    described = make_service().describe_dataset(G20)
    assert described.codes_source == "available_constraint"
    freq = next(d for d in described.dimensions if d.id == "FREQ")
    assert [(c.id, c.has_data) for c in freq.codes] == [("M", True)]
    assert described.time_coverage is not None and described.time_coverage.end == "2025-07-31"
    # No codelists in this response: codes are known only from the constraint.
    assert next(d for d in described.dimensions if d.id == "REF_AREA").codes == []


def test_ecb_describe_uses_allowed_codes_and_never_asks_availableconstraint(
    make_service: ServiceFactory, fake: FakeProviders
) -> None:
    fake.add("/service/dataflow/ECB/EXR/latest?references=all", shared(ECB_STRUCTURE_FULL), STRUCTURE_CT)
    fake.add("/service/data/ECB,EXR,1.0/M.USD.EUR.SP00.A", shared(ECB_DATA), GENERIC_CT)
    service = make_service()
    described = service.describe_dataset("EXR", provider="ECB", max_codes=500)
    assert described.dataset == "ECB,EXR,1.0"
    assert described.codes_source == "allowed_constraint"
    assert described.key_template == "FREQ.CURRENCY.CURRENCY_DENOM.EXR_TYPE.EXR_SUFFIX"
    exr_type = next(d for d in described.dimensions if d.id == "EXR_TYPE")
    assert "SP00" in {c.id for c in exr_type.codes}
    assert exr_type.codes_with_data is None and all(c.has_data is None for c in exr_type.codes)
    assert exr_type.total_codes == 12  # the allowed ones, not the 36 of the codelist
    assert any("allowed, not which have data" in h for h in described.hints)
    assert not any("availableconstraint" in u for u in fake.urls())

    data = service.get_data(described.dataset, "M.USD.EUR.SP00.A", provider="ECB", max_rows=3)
    assert data.format == "sdmx-ml-generic"
    assert (data.total_rows, data.returned_rows) == (252, 3)
    assert data.columns == ["TIME_PERIOD", "OBS_VALUE"]
    assert data.rows[0] == ["1999-01", pytest.approx(1.16078)]
    assert data.constant_columns["CURRENCY"] == "USD"
    assert data.labels["CURRENCY"]["USD"] == "US dollar"
    assert data.source_url == "https://data-api.ecb.europa.eu/service/data/ECB,EXR,1.0/M.USD.EUR.SP00.A"


def test_eurostat_partial_codelists_and_structure_specific_data(
    make_service: ServiceFactory, fake: FakeProviders
) -> None:
    fake.add(
        "/sdmx/2.1/dataflow/ESTAT/GOV_10Q_GGNFA/latest?detail=referencepartial&references=descendants",
        shared(ESTAT_GOV),
        STRUCTURE_CT,
    )
    fake.add("/sdmx/2.1/data/nama_10_gdp/A.CP_MEUR.B1GQ.LU", shared(ESTAT_NAMA), SS_CT)
    service = make_service()
    described = service.describe_dataset("GOV_10Q_GGNFA", provider="ESTAT")
    assert described.dataset == "ESTAT,GOV_10Q_GGNFA,1.0"
    assert described.codes_source == "partial_codelist"
    assert described.key_template == "freq.unit.s_adj.sector.na_item.geo"
    geo = described.dimensions[-1]
    assert geo.codes_with_data == geo.total_codes and geo.codes[0].has_data is True
    assert described.time_coverage is not None and described.time_coverage.source == "annotation"
    assert described.time_coverage.end == "2022-Q3"

    data = service.get_data("nama_10_gdp", "A.CP_MEUR.B1GQ.LU", provider="ESTAT", start_period="2012")
    assert data.format == "sdmx-ml-structure-specific"
    assert [row for row in data.rows] == [
        ["2012", 46526.2], ["2013", 49094.5], ["2014", 51791.3], ["2015", 54142.3],
    ]  # fmt: skip
    assert data.constant_columns == {"geo": "LU", "na_item": "B1GQ", "unit": "CP_MEUR", "freq": "A"}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.get_data("EXR/../x", "A"), "not a dataset reference"),
        (lambda s: s.get_data("ECB,EXR,1.0", "A/B", provider="ECB"), "not a series key"),
        (lambda s: s.get_data("ECB,EXR,1.0", "A", provider="ECB", start_period="yesterday"), "not a period"),
        (lambda s: s.get_data("ECB,EXR,1.0", "A", provider="ECB", max_rows=5000), "max_rows"),
        (lambda s: s.get_data("ECB,EXR,1.0", "A", provider="https://evil.example"), "not a provider id"),
        (lambda s: s.describe_dataset("EXR", provider="ECB", max_codes=0), "max_codes"),
        (lambda s: s.describe_dataset("EXR?x", provider="ECB"), "not a dataset reference"),
        (lambda s: s.search_datasets("", provider="ECB"), "query"),
        (lambda s: s.search_datasets("x" * 501), "query"),
        (lambda s: s.search_datasets("gdp", limit=0), "limit"),
        (lambda s: s.search_datasets("gdp", provider="NOPE"), "unknown provider"),
    ],
)
def test_invalid_input_is_rejected_before_any_request(  # type: ignore[no-untyped-def]
    make_service: ServiceFactory, fake: FakeProviders, call, message: str
) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        call(make_service())
    assert fake.requests == []


def test_nonstandard_json_is_refused_as_not_sdmx_json(make_service: ServiceFactory, fake: FakeProviders) -> None:
    # The OECD answers a plain application/json request with its own shape, not SDMX-JSON.
    fake.add("/dataflow/OECD.CFE.EDS/DSD_FUA_CLIM@DF_LAND_TEMP/", shared(OECD_JSON), "application/json")
    with pytest.raises(UnusableResponseError, match="not an SDMX-JSON structure message"):
        make_service().describe_dataset("OECD.CFE.EDS,DSD_FUA_CLIM@DF_LAND_TEMP,1.2")


def test_provider_400_becomes_an_actionable_error(make_service: ServiceFactory, fake: FakeProviders) -> None:
    fake.add("/data/", fixture("fmr_error_150.xml"), "application/xml", status=400)
    with pytest.raises(InvalidRequestError, match=r"HTTP 400, SDMX error 150\); check") as info:
        make_service().get_data("ECB,EXR,1.0", "M.USD", provider="ECB")
    assert "Unable to parse" not in str(info.value)  # provider text is never echoed


def test_unknown_dataset_is_not_found(make_service: ServiceFactory, fake: FakeProviders) -> None:
    fake.add("/dataflow/ECB/NOPE/", b"Not found", "text/plain", status=404)
    with pytest.raises(NotFoundError, match="HTTP 404"):
        make_service().describe_dataset("NOPE", provider="ECB")


def test_eurostat_too_large_status(make_service: ServiceFactory, fake: FakeProviders) -> None:
    fake.add("/data/", b"EXTRACTION_TOO_BIG", "text/plain", status=413)
    from governed_evidence.errors import ResponseTooLargeError

    with pytest.raises(ResponseTooLargeError, match="narrow"):
        make_service().get_data("nama_10_gdp", "all", provider="ESTAT")


def test_status_reports_location_and_counts(make_service: ServiceFactory, fake: FakeProviders) -> None:
    _oecd(fake)
    service = make_service()
    service.search_datasets("house")
    status = service.status()
    assert (status.location, status.persistent, status.usable) == ("file", True, True)
    assert status.reason == "there is no index file"
    assert status.entries == 1 and status.bytes > 0
    assert [p.provider for p in status.providers] == [
        "BIS", "ECB", "ESTAT", "ILO", "IMF", "INSEE", "ISTAT", "OECD", "UNICEF",
    ]  # fmt: skip


def test_parsed_structures_kept_in_memory_are_bounded_by_what_they_hold(
    make_service: ServiceFactory, fake: FakeProviders, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sixteen structures of the largest size each must not stay in memory at once."""
    from governed_evidence.sdmx import parsed as parsed_module

    g20 = fixture("oecd_g20_prices_structure.xml")
    fake.add("/dataflow/OECD.SDD.TPS/DSD_G20_PRICES@DF_G20_PRICES/1.0", g20, STRUCTURE_CT)
    # Another body (so another memo entry) describing the same flow.
    fake.add("/dataflow/OECD.SDD.TPS/DSD_G20_PRICES@DF_G20_PRICES/2.0", g20 + b"\n<!-- copy -->\n", STRUCTURE_CT)
    service = make_service()
    service.describe_dataset(G20)
    weight = next(iter(service.parsed._structures.values())).size
    assert weight > 0
    monkeypatch.setattr(parsed_module, "_STRUCTURE_MEMO_ITEMS", weight + 1)
    service.describe_dataset(G20.replace(",1.0", ",2.0"))
    assert len(service.parsed._structures) == 1
