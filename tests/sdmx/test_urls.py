"""URLs are built as strings from the provider's base and validated parts, and tested as strings."""

from __future__ import annotations

from governed_evidence.sdmx.providers import load_providers
from governed_evidence.sdmx.urls import (
    STRUCTURE_ACCEPT,
    availability_request,
    catalogue_request,
    data_request,
    flow_ref,
    structure_request,
)
from governed_evidence.sdmx.validate import DatasetRef, parse_dataset_ref

PROVIDERS = load_providers()
OECD = PROVIDERS.get("OECD")
ECB = PROVIDERS.get("ECB")
ESTAT = PROVIDERS.get("ESTAT")
QNA = parse_dataset_ref("OECD.SDD.NAD,DSD_NAMAIN1@DF_QNA,1.0")


def test_catalogue_urls() -> None:
    assert catalogue_request(OECD).url == "https://sdmx.oecd.org/public/rest/dataflow/all/all/latest"
    assert catalogue_request(ECB).url == "https://data-api.ecb.europa.eu/service/dataflow/ECB/all/latest"
    assert (
        catalogue_request(ESTAT).url
        == "https://ec.europa.eu/eurostat/api/dissemination/sdmx/2.1/dataflow/ESTAT/all/latest"
    )
    assert catalogue_request(OECD).accept == STRUCTURE_ACCEPT
    assert catalogue_request(OECD).kind == "catalogue"


def test_structure_urls_follow_each_providers_quirks() -> None:
    assert (
        structure_request(OECD, QNA).url
        == "https://sdmx.oecd.org/public/rest/dataflow/OECD.SDD.NAD/DSD_NAMAIN1@DF_QNA/1.0?references=all"
    )
    assert (
        structure_request(ECB, DatasetRef("ECB", "EXR")).url
        == "https://data-api.ecb.europa.eu/service/dataflow/ECB/EXR/latest?references=all"
    )
    # Eurostat rejects references=all; partial codelists carry the codes in use.
    assert (
        structure_request(ESTAT, DatasetRef("ESTAT", "GOV_10Q_GGNFA")).url
        == "https://ec.europa.eu/eurostat/api/dissemination/sdmx/2.1/dataflow/ESTAT/GOV_10Q_GGNFA/latest"
        "?detail=referencepartial&references=descendants"
    )


def test_unknown_agency_asks_all_for_structures() -> None:
    assert structure_request(OECD, DatasetRef(None, "DF_X")).url.startswith(
        "https://sdmx.oecd.org/public/rest/dataflow/all/DF_X/latest"
    )


def test_availability_url() -> None:
    assert (
        availability_request(OECD, QNA).url
        == "https://sdmx.oecd.org/public/rest/availableconstraint/OECD.SDD.NAD,DSD_NAMAIN1@DF_QNA,1.0/all/all/all"
        "?mode=exact"
    )


def test_data_urls() -> None:
    request = data_request(OECD, QNA, "Q.FRA+DEU..B1GQ", "2015", "2020-Q4")
    assert request.url == (
        "https://sdmx.oecd.org/public/rest/data/OECD.SDD.NAD,DSD_NAMAIN1@DF_QNA,1.0/Q.FRA+DEU..B1GQ"
        "?endPeriod=2020-Q4&format=csvfilewithlabels&startPeriod=2015"
    )
    assert request.kind == "data" and request.bucket == "data"
    assert (
        data_request(ECB, DatasetRef("ECB", "EXR", "1.0"), "M.USD.EUR.SP00.A", None, None).url
        == "https://data-api.ecb.europa.eu/service/data/ECB,EXR,1.0/M.USD.EUR.SP00.A"
    )
    # Eurostat's data path takes the bare dataflow id.
    assert (
        data_request(ESTAT, DatasetRef("ESTAT", "nama_10_gdp"), "A.CP_MEUR.B1GQ.LU", "2012", None).url
        == "https://ec.europa.eu/eurostat/api/dissemination/sdmx/2.1/data/nama_10_gdp/A.CP_MEUR.B1GQ.LU?startPeriod=2012"
    )


def test_flow_ref_forms() -> None:
    assert flow_ref(OECD, QNA) == "OECD.SDD.NAD,DSD_NAMAIN1@DF_QNA,1.0"
    assert flow_ref(ESTAT, DatasetRef("ESTAT", "GOV_10Q_GGNFA", "1.0")) == "GOV_10Q_GGNFA"


def test_cache_key_is_stable_and_distinguishes_requests() -> None:
    a = data_request(OECD, QNA, "Q.FRA..B1GQ", "2015", None)
    b = data_request(OECD, QNA, "Q.FRA..B1GQ", "2015", None)
    c = data_request(OECD, QNA, "Q.DEU..B1GQ", "2015", None)
    assert a.cache_key == b.cache_key
    assert a.cache_key != c.cache_key
    assert a.cache_key.startswith("data https://sdmx.oecd.org/")


def test_structure_requests_spend_the_structure_budget() -> None:
    assert catalogue_request(OECD).bucket == "structure"
    assert structure_request(OECD, QNA).bucket == "structure"
    assert availability_request(OECD, QNA).bucket == "structure"


def test_dot_segments_never_reach_a_url() -> None:
    import pytest

    from governed_evidence.errors import UnusableResponseError

    for ref in [DatasetRef("..", "X", "1.0"), DatasetRef("A", "..", "1.0"), DatasetRef("A", "X", ".."),
                DatasetRef("A", "X", "."), DatasetRef("A", "", "1.0")]:  # fmt: skip
        with pytest.raises(UnusableResponseError, match="not a valid SDMX identifier"):
            structure_request(OECD, ref)
        with pytest.raises(UnusableResponseError, match="not a valid SDMX identifier"):
            data_request(ESTAT if ref.id == ".." else OECD, ref, "all", None, None)


def test_a_key_of_empty_positions_is_never_a_dot_segment() -> None:
    assert data_request(OECD, QNA, "..", None, None).url.endswith(
        "/data/OECD.SDD.NAD,DSD_NAMAIN1@DF_QNA,1.0/all?format=csvfilewithlabels"
    )
    assert data_request(ESTAT, DatasetRef("ESTAT", "nama_10_gdp"), ".", None, None).url.endswith(
        "/data/nama_10_gdp/all"
    )
    assert data_request(ESTAT, DatasetRef("ESTAT", "nama_10_gdp"), "...", None, None).url.endswith(
        "/data/nama_10_gdp/..."
    )
