"""UNICEF and BIS recorded responses, served on 127.0.0.1 and read through the MCP tools.

The bodies are real provider answers copied byte for byte from licensed repositories into
tests/fixtures/sdmx/<PROVIDER>/ (see PROVENANCE.md there: repository, path, commit, licence
and the request each answers). A real HTTP server on 127.0.0.1
(:class:`~tests.sdmx.helpers.LocalProvider`) serves them, and each provider keeps its bundled
providers.toml table; only ``base_url`` is pointed at the local server. The expected values
were read from the files by hand.

The BIS leg of a catalogue and an Actual constraint is served from the BIS registry's own
SDMX-JSON answers (BIS/details.json, BIS/schema.json): no stats.bis.org catalogue or
constrained structure was found recorded with a licence. Structure-specific BIS data with
groups is written here (CBS_STRUCTURE_SPECIFIC), from the generic recording's values.

Legs not covered here (no licensed recording found): a UNICEF structure under 200 KB (the CME
one served here is 987 KB), and anything of ILO. tests/sdmx/test_more_providers.py covers
other legs on unlicensed recordings read from ../shared.
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
    SS_CT,
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
    "BIS/details.json": "1d740b2388c9ad21fab898029635a3fd2d27ab924f4596632c1775fb74f18405",
    "BIS/schema.json": "c629d34952582a218cd11eaabcaf752bb5243188fa219c3e6b175c6e43c74fdc",
}

#: The path part of each bundled base (the local server answers under the same paths).
UNICEF_PATH = "/ws/public/sdmxapi/rest"
BIS_PATH = "/api/v1"
CME = "UNICEF,CME,1.0"
CME_KEY = "USA+BRA.CME_MRY0T4.._T._T._T"
CBS = "BIS,WS_CBS_PUB,1.0"
#: All 176 series of the recorded answer: the five dimensions it varies are left empty.
CBS_KEY = "Q.S....C.A.A.TO1.A."

#: The dataflow of the BIS registry answers (BIS/details.json, BIS/schema.json).
REGISTRY_CBS = "BIS.CBS,CBS,1.0"
#: Their Content-Type was not kept; the bodies are SDMX-JSON structure messages.
STRUCTURE_JSON_CT = "application/vnd.sdmx.structure+json;version=1.0"

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


_CBS_KEY_PARTS = 'L_MEASURE="S" L_POSITION="C" L_INSTR="A" REM_MATURITY="A" CURR_TYPE_BOOK="TO1" L_CP_SECTOR="A"'


def _cbs_group(country: str, bank: str, basis: str, counterpart: str) -> str:
    return (
        f'<Group xsi:type="ns1:Sibling" {_CBS_KEY_PARTS} L_REP_CTY="{country}" CBS_BANK_TYPE="{bank}" '
        f'CBS_BASIS="{basis}" L_CP_COUNTRY="{counterpart}" AVAILABILITY="K"/>'
    )


def _cbs_series(country: str, bank: str, basis: str, counterpart: str, value: str) -> str:
    return (
        f'<Series FREQ="Q" {_CBS_KEY_PARTS} L_REP_CTY="{country}" CBS_BANK_TYPE="{bank}" CBS_BASIS="{basis}" '
        f'L_CP_COUNTRY="{counterpart}" COLLECTION="E" ORG_VISIBILITY="E">'
        f'<Obs TIME_PERIOD="2024-Q4" OBS_VALUE="{value}" OBS_STATUS="A" OBS_CONF="F"/></Series>'
    )


#: WS_CBS_PUB as structure-specific data, written here (no structure-specific BIS answer with
#: groups was found recorded with a licence): the first three series of BIS/generic_dataser_groups.xml
#: with their values and attributes, the data set's attributes, and the Sibling groups (AVAILABILITY K)
#: of the first two only, so that the third shows a group reaching only the series it names. The
#: group's form is that of pysdmx's BIS_DER sample tests/io/xml/sdmx21/reader/samples/str_ser_group.xml
#: (key and attributes side by side as XML attributes, ``xsi:type`` naming the group).
CBS_STRUCTURE_SPECIFIC = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<message:StructureSpecificData xmlns:message="http://www.sdmx.org/resources/sdmxml/schemas/v2_1/message"'
    ' xmlns:ss="http://www.sdmx.org/resources/sdmxml/schemas/v2_1/data/structurespecific"'
    ' xmlns:ns1="urn:sdmx:org.sdmx.infomodel.datastructure.Dataflow=BIS:WS_CBS_PUB(1.0):ObsLevelDim:TIME_PERIOD"'
    ' xmlns:common="http://www.sdmx.org/resources/sdmxml/schemas/v2_1/common"'
    ' xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">'
    "<message:Header><message:ID>hand-written</message:ID><message:Test>true</message:Test>"
    '<message:Prepared>2025-06-28T10:48:57Z</message:Prepared><message:Sender id="UNKNOWN"/>'
    '<message:Structure structureID="BIS_WS_CBS_PUB_1_0" dimensionAtObservation="TIME_PERIOD"'
    ' namespace="urn:sdmx:org.sdmx.infomodel.datastructure.Dataflow=BIS:WS_CBS_PUB(1.0):ObsLevelDim:TIME_PERIOD">'
    '<common:StructureUsage><Ref agencyID="BIS" id="WS_CBS_PUB" version="1.0"/></common:StructureUsage>'
    "</message:Structure></message:Header>"
    '<message:DataSet ss:structureRef="BIS_WS_CBS_PUB_1_0" xsi:type="ns1:DataSetType" ss:dataScope="DataStructure"'
    ' DECIMALS="3" UNIT_MULT="6" UNIT_MEASURE="USD">'
    + _cbs_group("JP", "4R", "U", "5J")
    + _cbs_group("PA", "4B", "F", "5J")
    + _cbs_series("JP", "4R", "U", "5J", "5133382.3")
    + _cbs_series("PA", "4B", "F", "5J", "40441.326")
    + _cbs_series("PA", "4B", "F", "1E", "3.804")
    + "</message:DataSet></message:StructureSpecificData>"
).encode()


def _serve_cbs_structure_specific(fake: FakeProviders, *, structure: bool = True) -> None:
    _serve_bis(fake)
    fake.add(f"{BIS_PATH}/data/{CBS}/{CBS_KEY}", CBS_STRUCTURE_SPECIFIC, SS_CT)
    if structure:
        fake.add(f"{BIS_PATH}/dataflow/BIS/WS_CBS_PUB/1.0?references=all", fixture("BIS/read_datastructure_group.xml"))


def _availability(table: DataResponse) -> list[tuple[str, str, str]]:
    rows = [dict(zip(table.columns, row, strict=True)) for row in table.rows]
    return [(str(r["L_REP_CTY"]), str(r["L_CP_COUNTRY"]), str(r.get("AVAILABILITY") or "")) for r in rows]


def test_bis_structure_specific_groups_read_with_the_cached_structure(make: Make, fake: FakeProviders) -> None:
    _serve_cbs_structure_specific(fake)
    _, data = _call(
        make(),
        ("describe_dataset", {"dataset": CBS, "provider": "BIS"}),
        ("get_data", {"dataset": CBS, "key": CBS_KEY, "provider": "BIS"}),
    )
    table = DataResponse.model_validate(data.structured_content)
    assert table.format == "sdmx-ml-structure-specific" and table.total_rows == 3
    # The BIS_CBS structure names the dimensions: the groups' other values are attributes of
    # the series their keys name, and the third series has no group.
    assert _availability(table) == [("JP", "5J", "K"), ("PA", "5J", "K"), ("PA", "1E", "")]
    assert table.constant_columns["UNIT_MULT"] == "6" and table.constant_columns["COLLECTION"] == "E"
    assert [r[table.columns.index("OBS_VALUE")] for r in table.rows] == [5133382.3, 40441.326, 3.804]
    # The structure described first is the one used: no second structure request.
    assert sum("/dataflow/" in p for p in _paths(fake)) == 1


def test_bis_structure_specific_groups_fetch_the_structure_they_need(make: Make, fake: FakeProviders) -> None:
    _serve_cbs_structure_specific(fake)
    (data,) = _call(make(), ("get_data", {"dataset": CBS, "key": CBS_KEY, "provider": "BIS"}))
    table = DataResponse.model_validate(data.structured_content)
    assert _availability(table) == [("JP", "5J", "K"), ("PA", "5J", "K"), ("PA", "1E", "")]
    assert _paths(fake) == [
        f"{BIS_PATH}/data/{CBS}/{CBS_KEY}",
        f"{BIS_PATH}/dataflow/BIS/WS_CBS_PUB/1.0?references=all",
    ]
    # Once cached, the structure serves the next answer without a request.
    (again,) = _call(make(), ("get_data", {"dataset": CBS, "key": CBS_KEY, "provider": "BIS"}))
    assert _availability(DataResponse.model_validate(again.structured_content))[0] == ("JP", "5J", "K")
    assert len(_paths(fake)) == 2


def test_bis_structure_specific_groups_left_out_say_so(make: Make, fake: FakeProviders) -> None:
    # The structure request finds nothing (the local server answers 404).
    _serve_cbs_structure_specific(fake, structure=False)
    (data,) = _call(make(), ("get_data", {"dataset": CBS, "key": CBS_KEY, "provider": "BIS"}))
    table = DataResponse.model_validate(data.structured_content)
    assert table.total_rows == 3 and "AVAILABILITY" not in table.columns + list(table.constant_columns)
    assert any(
        h.startswith("The attributes this answer's groups give their series are left out: the dataset's structure "
                     "could not be fetched (NOT_FOUND)") for h in table.hints
    )  # fmt: skip


def test_groups_and_labels_without_a_structure_ask_for_it_once(make: Make, fake: FakeProviders) -> None:
    # Both the groups and the labels need the structure; the one request fails (404).
    _serve_cbs_structure_specific(fake, structure=False)
    args = {"dataset": CBS, "key": CBS_KEY, "provider": "BIS", "labels": True}
    (data,) = _call(make(), ("get_data", args))
    table = DataResponse.model_validate(data.structured_content)
    assert sum("/dataflow/" in p for p in _paths(fake)) == 1
    assert any(h.startswith("The attributes this answer's groups give their series are left out") for h in table.hints)
    assert any(
        h.startswith("Codes are shown without labels: the dataset's structure could not be fetched (NOT_FOUND)")
        for h in table.hints
    )


def test_bis_registry_catalogue_and_actual_constraint_through_the_tools(make: Make, fake: FakeProviders) -> None:
    # Recorded: the BIS registry's dataflows of agency BIS.CBS (CBS and CBS_OLD, with their
    # 33 provision agreements); the request is not known: served as the BIS catalogue.
    fake.add(f"{BIS_PATH}/dataflow/BIS/all/latest", fixture("BIS/details.json"), STRUCTURE_JSON_CT)
    # Recorded: the schema of BIS.CBS:CBS(1.0) (DSD BIS_CBS, 16 codelists, the Actual
    # constraint BIS_CBS); served at the structure request this server makes for the flow.
    fake.add(f"{BIS_PATH}/dataflow/BIS.CBS/CBS/1.0?references=all", fixture("BIS/schema.json"), STRUCTURE_JSON_CT)
    found, described = _call(
        make(),
        ("search_datasets", {"query": "consolidated banking statistics", "provider": "BIS"}),
        # The reference the search gives (a bare id would be taken as agency BIS, the default).
        ("describe_dataset", {"dataset": REGISTRY_CBS, "provider": "BIS", "max_codes": 5}),
    )

    search = DatasetSearchResponse.model_validate(found.structured_content)
    assert search.catalogue_size == 2
    assert [(r.dataset, r.name) for r in search.results] == [
        (REGISTRY_CBS, "Consolidated Banking Statistics"),
        ("BIS.CBS,CBS_OLD,1.0", "Consolidated Banking Statistics (OLD)"),
    ]
    assert search.results[0].description == "This dataflow is associated to the BIS_CBS DSD."

    description = DatasetDescription.model_validate(described.structured_content)
    # The schema carries no Dataflow: the data structure names the dataset.
    assert (description.dataset, description.name) == (REGISTRY_CBS, "Consolidated Banking Statistics")
    assert description.key_template == (
        "FREQ.L_MEASURE.L_REP_CTY.CBS_BANK_TYPE.CBS_BASIS.L_POSITION.L_INSTR.REM_MATURITY.CURR_TYPE_BOOK."
        "L_CP_SECTOR.L_CP_COUNTRY"
    )
    # The constraint is Actual (written "actual"), attached to nothing, its values objects.
    assert description.codes_source == "actual_constraint"
    dims = {d.id: d for d in description.dimensions}
    # L_REP_CTY: 32 of the 249 codes of the (partial) CL_BIS_IF_REF_AREA have data.
    reporting = dims["L_REP_CTY"]
    assert (reporting.codes_with_data, reporting.total_codes) == (32, 249)
    assert [(c.id, c.name, c.has_data) for c in reporting.codes[:3]] == [
        ("AT", "Austria", True),
        ("AU", "Australia", True),
        ("BE", "Belgium", True),
    ]
    assert (dims["CBS_BANK_TYPE"].codes_with_data, dims["L_CP_COUNTRY"].codes_with_data) == (35, 245)
    # CURR_TYPE_BOOK: FC1, LC1 and TO1 have data, USD (the fourth code of CL_CURRENCY_3POS) has none.
    currency = dims["CURR_TYPE_BOOK"]
    assert (currency.codes_with_data, currency.total_codes) == (3, 4)
    assert [(c.id, c.has_data) for c in currency.codes] == [("FC1", True), ("LC1", True), ("TO1", True), ("USD", False)]
    # Dimensions the constraint does not name keep their codelist, unmarked.
    assert dims["CBS_BASIS"].codes_with_data is None and dims["CBS_BASIS"].total_codes == 5

    assert _paths(fake) == [
        f"{BIS_PATH}/dataflow/BIS/all/latest",
        f"{BIS_PATH}/dataflow/BIS.CBS/CBS/1.0?references=all",
    ]


@pytest.mark.parametrize("pid", ["UNICEF", "BIS"])
def test_the_bundled_tables_are_the_ones_served(pid: str) -> None:
    """The tests above override nothing but the base, so what they prove is the bundled quirks."""
    bundled = load_providers().get(pid)
    assert bundled.data_flow_ref == "full" and bundled.availableconstraint is False
    assert bundled.structure_references == "all"
