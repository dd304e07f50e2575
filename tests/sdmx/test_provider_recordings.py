"""UNICEF and BIS recorded responses, served on 127.0.0.1 and read through the MCP tools.

The bodies are real provider answers copied byte for byte from licensed repositories into
tests/fixtures/sdmx/<PROVIDER>/ (see PROVENANCE.md there: repository, path, commit, licence
and the request each answers). A real HTTP server on 127.0.0.1
(:class:`~tests.sdmx.helpers.LocalProvider`) serves them, and each provider keeps its bundled
providers.toml table; only ``base_url`` is pointed at the local server. The expected values
were read from the files by hand.

Legs not covered here (no licensed recording found): a UNICEF structure under 200 KB (the CME
one served here is 987 KB), a BIS catalogue and a BIS constraint, and anything of ILO. tests/sdmx/test_more_providers.py
covers other legs on unlicensed recordings read from ../shared.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from governed_evidence.sdmx.models import DataResponse, DatasetDescription, DatasetSearchResponse
from governed_evidence.sdmx.providers import load_providers
from governed_evidence.sdmx.service import SdmxService
from tests.sdmx.helpers import (
    CSV_CT,
    GENERIC_CT,
    STRUCTURE_CT,
    FakeProviders,
    LocalProvider,
    call_statistics_tools,
    catalogue_of,
    fixture,
    local_services,
)

#: Every file this module serves, with its sha256 as copied (PROVENANCE.md): a changed byte
#: means the file is no longer the recorded response.
RECORDINGS = {
    "UNICEF/dataflows.xml": "7c5a6664d99710abab97a0e98564f705604252ab1ffcab10612ec2e1a1f2fe31",
    "UNICEF/CME_MRY0T4_USA_BRA_2020.csv": "54fe261169532f6fdceb4a09c510304c8cb14cd5baac73b6b0ee18dcaa823e83",
    "UNICEF/dataflow_CME_dsd.xml": "db79259488228c59a6e24cfda1ff8c89f03b8651987dd9783e121d06a32a3776",
    "BIS/read_datastructure_group.xml": "e82ddee899b8c3fc0eca737bfca7c0a4bbc936b026512611a95580286639f4f2",
    "BIS/generic_dataser_groups.xml": "aef51d9615ccec650011d97f353311e5f3a209a0066bfa6481ce81b4946e045c",
}

#: The path part of each bundled base (the local server answers under the same paths).
UNICEF_PATH = "/ws/public/sdmxapi/rest"
BIS_PATH = "/api/v1"
CME = "UNICEF,CME,1.0"
CME_KEY = "USA+BRA.CME_MRY0T4.._T._T._T"
CBS = "BIS,WS_CBS_PUB,1.0"
#: All 176 series of the recorded answer: the five dimensions it varies are left empty.
CBS_KEY = "Q.S....C.A.A.TO1.A."

Make = Callable[[], SdmxService]


@pytest.fixture
def local(fake: FakeProviders) -> Iterator[LocalProvider]:
    with LocalProvider(fake) as server:
        yield server


@pytest.fixture
def make(tmp_path: Path, local: LocalProvider) -> Iterator[Make]:
    """Services whose UNICEF and BIS tables are the bundled ones with the local server as base."""

    def providers(origin: str) -> str:
        unicef = f'[providers.UNICEF]\nbase_url = "{origin}{UNICEF_PATH}"\n'
        return unicef + f'[providers.BIS]\nbase_url = "{origin}{BIS_PATH}"\n'

    with local_services(tmp_path, local, providers) as build:
        yield build


_call = call_statistics_tools


def _paths(fake: FakeProviders) -> list[str]:
    return [r.url.raw_path.decode() for r in fake.requests]


@pytest.mark.parametrize("name", sorted(RECORDINGS))
def test_the_recordings_are_unchanged(name: str) -> None:
    assert hashlib.sha256(fixture(name)).hexdigest() == RECORDINGS[name]


def test_unicef_catalogue_and_csv_data_through_the_tools(make: Make, fake: FakeProviders) -> None:
    # Recorded: dataflow/UNICEF?references=none&detail=full (70 dataflows); this server asks
    # dataflow/UNICEF/all/latest, the same catalogue.
    fake.add(f"{UNICEF_PATH}/dataflow/UNICEF/all/latest", fixture("UNICEF/dataflows.xml"), STRUCTURE_CT)
    # Recorded: data/UNICEF,CME,1.0/USA+BRA.CME_MRY0T4.._T._T._T?format=csv&startPeriod=2020&endPeriod=2020
    # (its Content-Type was not kept; SDMX-CSV is what the body is).
    fake.add(f"{UNICEF_PATH}/data/{CME}/{CME_KEY}", fixture("UNICEF/CME_MRY0T4_USA_BRA_2020.csv"), CSV_CT)
    found, data = _call(
        make(),
        ("search_datasets", {"query": "child mortality", "provider": "UNICEF"}),
        ("get_data", {"dataset": CME, "key": CME_KEY, "provider": "UNICEF", "start_period": "2020",
                      "end_period": "2020"}),
    )  # fmt: skip

    search = DatasetSearchResponse.model_validate(found.structured_content)
    assert search.catalogue_size == 70
    assert (search.results[0].dataset, search.results[0].name) == (CME, "Child Mortality")
    names = {r.dataset: r.name for r in search.results}
    assert names["UNICEF,CME_DF_2021_WQ,1.0"] == "IGME Child Mortality Estimates wq"

    table = DataResponse.model_validate(data.structured_content)
    assert table.format == "sdmx-csv" and table.total_rows == 6 and table.returned_rows == 6
    # UNICEF's CSV puts a label column after each coded one, named by the concept ("Sex").
    assert table.columns[:2] == ["TIME_PERIOD", "OBS_VALUE"]
    rows = [dict(zip(table.columns, row, strict=True)) for row in table.rows]
    first = rows[0]
    assert (first["REF_AREA"], first["Geographic area"], first["SEX"], first["Sex"]) == ("BRA", "Brazil", "F", "Female")
    assert (first["TIME_PERIOD"], first["OBS_VALUE"]) == ("2020", 13.1817699535802)
    usa_total = next(r for r in rows if r["REF_AREA"] == "USA" and r["SEX"] == "_T")
    assert usa_total["OBS_VALUE"] == 6.46878461763762
    assert usa_total["LOWER_BOUND"] == "6.35545280092989" and usa_total["UPPER_BOUND"] == "6.5800896772505"
    assert table.constant_columns["INDICATOR"] == "CME_MRY0T4"
    assert table.constant_columns["Indicator"] == "Under-five mortality rate"
    assert table.constant_columns["UNIT_MEASURE"] == "D_PER_1000_B"
    assert table.constant_columns["DATA_SOURCE"] == "UN_IGME"
    assert table.source_url.endswith(f"{UNICEF_PATH}/data/{CME}/{CME_KEY}?endPeriod=2020&startPeriod=2020")

    assert _paths(fake) == [
        f"{UNICEF_PATH}/dataflow/UNICEF/all/latest",
        f"{UNICEF_PATH}/data/{CME}/{CME_KEY}?endPeriod=2020&startPeriod=2020",
    ]


def test_unicef_cme_structure_and_its_allowed_constraint_through_the_tools(make: Make, fake: FakeProviders) -> None:
    # Recorded: dataflow/UNICEF/CME/1.0?references=all (dataflow CME, DSD_CME, 23 codelists,
    # the Allowed constraint CME_WEATLH_QUINTILE), the request this server makes for a full reference.
    fake.add(f"{UNICEF_PATH}/dataflow/UNICEF/CME/1.0?references=all", fixture("UNICEF/dataflow_CME_dsd.xml"))
    (described,) = _call(make(), ("describe_dataset", {"dataset": CME, "provider": "UNICEF", "max_codes": 10}))

    description = DatasetDescription.model_validate(described.structured_content)
    assert (description.dataset, description.name) == (CME, "Child Mortality")
    # DSD_CME has four dimensions and TIME_PERIOD.
    assert description.key_template == "REF_AREA.INDICATOR.SEX.WEALTH_QUINTILE"
    assert description.time_dimension == "TIME_PERIOD"
    assert description.codes_source == "allowed_constraint"
    dims = {d.id: d for d in description.dimensions}
    assert [(d.position, d.id) for d in description.dimensions] == [
        (1, "REF_AREA"),
        (2, "INDICATOR"),
        (3, "SEX"),
        (4, "WEALTH_QUINTILE"),
    ]
    # Unconstrained dimensions list their whole codelist: CL_COUNTRY 454, CL_UNICEF_INDICATOR 738.
    assert dims["REF_AREA"].name == "Geographic area"
    assert dims["REF_AREA"].total_codes == 454 and len(dims["REF_AREA"].codes) == 10
    assert (dims["REF_AREA"].codes[0].id, dims["REF_AREA"].codes[0].name) == ("ABW", "Aruba")
    assert dims["INDICATOR"].total_codes == 738
    assert (dims["INDICATOR"].codes[0].id, dims["INDICATOR"].codes[0].name) == ("CME", "Child mortality")
    # SDMX:CL_SEX(2.1), 7 codes, none constrained; the file lists some names in French first
    # (M: "Homme" before "Male"), the English one is taken.
    sex = [(c.id, c.name) for c in dims["SEX"].codes]
    assert dims["SEX"].total_codes == 7 and not dims["SEX"].truncated
    assert sex[:3] == [("F", "Female"), ("M", "Male"), ("_N", "Non response")]
    assert ("_T", "Total") in sex
    # The constraint is a DataKeySet on WEALTH_QUINTILE alone: 6 of CL_WEALTH_QUINTILE's 16 codes
    # (not B20, M40, R80, ...), in the constraint's order; an allowed constraint says nothing of data.
    quintile = dims["WEALTH_QUINTILE"]
    assert quintile.name == "Wealth Quintile" and quintile.total_codes == 6
    assert [(c.id, c.name) for c in quintile.codes] == [
        ("_T", "Total"),
        ("Q1", "Lowest"),
        ("Q2", "Second"),
        ("Q3", "Middle"),
        ("Q4", "Fourth"),
        ("Q5", "Highest"),
    ]
    assert all(c.has_data is None for d in description.dimensions for c in d.codes)
    assert any("allowed, not which have data" in hint for hint in description.hints)
    assert description.source_url.endswith(f"{UNICEF_PATH}/dataflow/UNICEF/CME/1.0?references=all")

    # A full reference needs no catalogue; the bundled table has no availableconstraint.
    assert _paths(fake) == [f"{UNICEF_PATH}/dataflow/UNICEF/CME/1.0?references=all"]


def _serve_bis(fake: FakeProviders) -> None:
    structure = fixture("BIS/read_datastructure_group.xml")
    # No BIS catalogue was found recorded: the catalogue is the real Dataflow of the
    # structure message, as for the first three providers (helpers.catalogue_of).
    fake.add(f"{BIS_PATH}/dataflow/BIS/all/latest", catalogue_of(structure), STRUCTURE_CT)
    # Recorded: a structure answer for WS_CBS_PUB (dataflow, DSD BIS_CBS, 18 codelists);
    # the request is not known, served here at the URL this server builds (references=all).
    fake.add(f"{BIS_PATH}/dataflow/BIS/WS_CBS_PUB/latest?references=all", structure, STRUCTURE_CT)
    # Recorded: generic data of WS_CBS_PUB for 2024-Q4 (176 series, one observation each);
    # the request is not known beyond what the header says (one flow, one quarter).
    fake.add(f"{BIS_PATH}/data/{CBS}/{CBS_KEY}", fixture("BIS/generic_dataser_groups.xml"), GENERIC_CT)


def test_bis_structure_and_generic_data_through_the_tools(make: Make, fake: FakeProviders) -> None:
    _serve_bis(fake)
    found, described, data = _call(
        make(),
        ("search_datasets", {"query": "consolidated banking", "provider": "BIS"}),
        ("describe_dataset", {"dataset": "WS_CBS_PUB", "provider": "BIS", "max_codes": 10}),
        ("get_data", {"dataset": CBS, "key": CBS_KEY, "provider": "BIS", "start_period": "2024-Q4",
                      "end_period": "2024-Q4"}),
    )  # fmt: skip

    search = DatasetSearchResponse.model_validate(found.structured_content)
    assert (search.results[0].dataset, search.results[0].name) == (CBS, "BIS consolidated banking")

    description = DatasetDescription.model_validate(described.structured_content)
    assert description.dataset == CBS and description.name == "BIS consolidated banking"
    assert description.key_template == (
        "FREQ.L_MEASURE.L_REP_CTY.CBS_BANK_TYPE.CBS_BASIS.L_POSITION.L_INSTR.REM_MATURITY.CURR_TYPE_BOOK."
        "L_CP_SECTOR.L_CP_COUNTRY"
    )
    # The recorded structure carries no constraint: codes come from the codelists, unmarked.
    assert description.codes_source == "codelist_only"
    dims = {d.id: d for d in description.dimensions}
    assert dims["FREQ"].total_codes == 8 and ("A", "Annual") in [(c.id, c.name) for c in dims["FREQ"].codes]
    assert [(c.id, c.name) for c in dims["L_MEASURE"].codes][:2] == [
        ("F", "FX and break adjusted change (BIS calculated)"),
        ("S", "Amounts outstanding / Stocks"),
    ]
    assert dims["L_MEASURE"].total_codes == 5
    # CL_BIS_IF_REF_AREA: 432 codes, listed up to max_codes.
    assert dims["L_REP_CTY"].total_codes == 432 and len(dims["L_REP_CTY"].codes) == 10
    assert (dims["L_REP_CTY"].codes[0].id, dims["L_REP_CTY"].codes[0].name) == ("00", "Others")

    table = DataResponse.model_validate(data.structured_content)
    assert table.format == "sdmx-ml-generic" and table.total_rows == 176 and table.returned_rows == 176
    for dim, code in [("FREQ", "Q"), ("L_MEASURE", "S"), ("L_POSITION", "C"), ("CURR_TYPE_BOOK", "TO1")]:
        assert table.constant_columns[dim] == code
    # Series attributes the same on every row are lifted too (COLLECTION, OBS_CONF).
    assert table.constant_columns["COLLECTION"] == "E" and table.constant_columns["OBS_CONF"] == "F"
    rows = [dict(zip(table.columns, row, strict=True)) for row in table.rows]
    assert {r["TIME_PERIOD"] for r in rows} == {"2024-Q4"}
    # The first series of the file: Japan, bank type 4R, basis U, on all countries (5J).
    first = rows[0]
    assert (first["L_REP_CTY"], first["CBS_BANK_TYPE"], first["CBS_BASIS"], first["L_CP_COUNTRY"]) == (
        "JP",
        "4R",
        "U",
        "5J",
    )
    assert (first["OBS_VALUE"], first["OBS_STATUS"]) == (5133382.3, "A")
    second = rows[1]
    assert (second["L_REP_CTY"], second["CBS_BANK_TYPE"], second["OBS_VALUE"]) == ("PA", "4B", 40441.326)
    assert table.source_url.endswith(f"{BIS_PATH}/data/{CBS}/{CBS_KEY}?endPeriod=2024-Q4&startPeriod=2024-Q4")

    paths = _paths(fake)
    # A bare id resolved through the catalogue is asked as its latest version.
    assert f"{BIS_PATH}/dataflow/BIS/WS_CBS_PUB/latest?references=all" in paths
    # The bundled BIS table has no availableconstraint endpoint: none is asked.
    assert not any("availableconstraint" in p for p in paths)


def test_bis_dataset_level_attributes_reach_the_table(make: Make, fake: FakeProviders) -> None:
    _serve_bis(fake)
    (data,) = _call(make(), ("get_data", {"dataset": CBS, "key": CBS_KEY, "provider": "BIS"}))
    table = DataResponse.model_validate(data.structured_content)
    assert table.constant_columns.get("UNIT_MEASURE") == "USD"
    assert table.constant_columns.get("UNIT_MULT") == "6"
    assert table.constant_columns.get("DECIMALS") == "3"
    # A Group's attributes reach the series its key names.
    assert table.constant_columns.get("AVAILABILITY") == "K"
    assert any("UNIT_MULT=6" in hint for hint in table.hints)


@pytest.mark.parametrize("pid", ["UNICEF", "BIS"])
def test_the_bundled_tables_are_the_ones_served(pid: str) -> None:
    """The tests above override nothing but the base, so what they prove is the bundled quirks."""
    bundled = load_providers().get(pid)
    assert bundled.data_flow_ref == "full" and bundled.availableconstraint is False
    assert bundled.structure_references == "all"
