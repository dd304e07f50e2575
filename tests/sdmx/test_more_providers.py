"""IMF, UNICEF, ISTAT, INSEE, BIS and ILO through the service, on their recorded responses.

Every body is a real response from khaeru/sdmx-test-data (read from ../shared or
$SDMX_TEST_DATA, see helpers.sdmx_test_data), served by the fake transport at the URL this
server builds for the provider. Where the recorded request differs from that URL, the
test says so. Catalogues are assembled from the real ``Dataflow`` elements of the
recorded messages (helpers.catalogue_of), as for the first three providers, except
INSEE's, which is a recorded catalogue. What no recording covers is listed in the
module's last test and in tests/fixtures/sdmx/PROVENANCE.md.
"""

from __future__ import annotations

import pytest

from governed_evidence.sdmx.providers import load_providers
from governed_evidence.sdmx.structure import parse_structure
from tests.sdmx.conftest import ServiceFactory
from tests.sdmx.helpers import (
    GENERIC_CT,
    SS_CT,
    STRUCTURE_CT,
    FakeProviders,
    catalogue_of,
    recorded,
    sdmx_test_data,
)


def test_istat_catalogue_structure_and_data(make_service: ServiceFactory, fake: FakeProviders) -> None:
    url, content_type, structure = recorded("ISTAT", "recorded/2556f1775294929a.json")
    # Recorded: dataflow/all/47_850/latest?references=datastructure (the DSD, no codelists).
    assert url.startswith("https://esploradati.istat.it/SDMXWS/rest/dataflow/all/47_850/latest")
    data_url, data_type, data = recorded("ISTAT", "recorded/b1957b05ba522041.json")
    assert data_url == "https://esploradati.istat.it/SDMXWS/rest/data/47_850/A.001001+001002.AUTP.ALL.ALL.1"
    fake.add("/SDMXWS/rest/dataflow/IT1/all/latest", catalogue_of(structure), STRUCTURE_CT)
    fake.add("/SDMXWS/rest/dataflow/IT1/47_850/latest?references=all", structure, content_type)
    fake.add("/SDMXWS/rest/data/47_850/A.001001+001002.AUTP.ALL.ALL.1", data, data_type)
    service = make_service()

    found = service.search_datasets("servizi socio educativi", provider="ISTAT")
    assert found.catalogue_size == 1 and found.results[0].dataset == "IT1,47_850,1.0"
    described = service.describe_dataset("47_850", provider="ISTAT")
    assert described.dataset == "IT1,47_850,1.0"
    assert described.key_template == (
        "FREQ.REF_AREA.DATA_TYPE.TYPE_SOCIO_EDUC_SERVICE.TYPE_MANAGEMENT.HOLDER_SECTOR_PUBPRIV"
    )
    # No availableconstraint was recorded for this flow: the request is made, fails, and says so.
    assert any("/availableconstraint/47_850/all/all/all?mode=exact" in u for u in fake.urls())
    assert any("could not be read" in h for h in described.hints)

    got = service.get_data("47_850", "A.001001+001002.AUTP.ALL.ALL.1", provider="ISTAT", max_rows=50)
    assert got.format == "sdmx-ml-generic" and got.total_rows == 22
    assert got.constant_columns["DATA_TYPE"] == "AUTP" and got.constant_columns["HOLDER_SECTOR_PUBPRIV"] == "1"
    first = dict(zip(got.columns, got.rows[0], strict=True))
    assert (first["REF_AREA"], first["TIME_PERIOD"], first["OBS_VALUE"]) == ("001001", "2013", 0.0)
    assert got.source_url == data_url


def test_istat_actual_constraint_is_read() -> None:
    message = parse_structure(sdmx_test_data("ISTAT", "ISTAT/actualconstraint-0.xml"))
    (constraint,) = message.constraints
    assert (constraint.id, constraint.type, [r.id for r in constraint.attached]) == (
        "CONS_92_143",
        "Actual",
        ["92_143"],
    )
    assert constraint.key_values["FREQ"] == ["A"] and "B1G" in constraint.key_values["DATA_TYPE_AGGR"]


def test_insee_recorded_catalogue_structure_and_generic_data(make_service: ServiceFactory, fake: FakeProviders) -> None:
    fake.add("/series/sdmx/dataflow/FR1/all/latest", sdmx_test_data("INSEE", "INSEE/dataflow.xml"), STRUCTURE_CT)
    fake.add(
        "/series/sdmx/dataflow/FR1/IPI-2010-A21/latest?references=all",
        sdmx_test_data("INSEE", "INSEE/IPI-2010-A21-structure.xml"),
        STRUCTURE_CT,
    )
    fake.add("/series/sdmx/data/IPI-2010-A21/", sdmx_test_data("INSEE", "INSEE/IPI-2010-A21.xml"), GENERIC_CT)
    service = make_service()

    found = service.search_datasets("industrial production index base 2010 NAF level A21", provider="INSEE")
    assert found.catalogue_size == 663
    assert found.results[0].dataset == "FR1,IPI-2010-A21,1.0"
    assert found.results[0].name == "Industrial production index (base 2010) - NAF level A21"
    described = service.describe_dataset("IPI-2010-A21", provider="INSEE", max_codes=50)
    assert described.key_template == "FREQ.PRODUIT.NATURE"
    # INSEE publishes no constraints: codes come from the codelists, unmarked.
    assert described.codes_source == "codelist_only"
    assert not any("availableconstraint" in u for u in fake.urls())

    # The recorded data answer is the whole flow (the recorded query is not known).
    got = service.get_data("IPI-2010-A21", "all", provider="INSEE", max_rows=5)
    assert got.format == "sdmx-ml-generic" and got.total_rows == 3230
    first = dict(zip(got.columns, got.rows[0], strict=True))
    assert (first["FREQ"], first["PRODUIT"], first["NATURE"]) == ("M", "B", "BRUT")
    assert (first["TIME_PERIOD"], first["OBS_VALUE"]) == ("2015-10", 105.61)
    assert got.constant_columns["BASE_PER"] == "2010"
    assert got.source_url == "https://www.bdm.insee.fr/series/sdmx/data/IPI-2010-A21/all"


def test_imf_structure_and_data_of_the_weo(make_service: ServiceFactory, fake: FakeProviders) -> None:
    structure = sdmx_test_data("IMF", "IMF_RES/WEO-structure.xml")
    fake.add("/external/sdmx/2.1/dataflow/all/all/latest", catalogue_of(structure), STRUCTURE_CT)
    fake.add("/external/sdmx/2.1/dataflow/IMF.RES/WEO/9.0.0?references=descendants", structure, STRUCTURE_CT)
    fake.add(
        "/external/sdmx/2.1/data/IMF.RES,WEO,9.0.0/SVK.NGDP_R.A", sdmx_test_data("IMF", "IMF_RES/WEO-data.xml"), SS_CT
    )
    service = make_service()

    found = service.search_datasets("world economic outlook", provider="IMF")
    assert found.results[0].dataset == "IMF.RES,WEO,9.0.0"
    described = service.describe_dataset("WEO", provider="IMF")
    assert described.dataset == "IMF.RES,WEO,9.0.0"
    assert described.key_template == "COUNTRY.INDICATOR.FREQUENCY"
    assert described.name == "World Economic Outlook (WEO)"
    got = service.get_data("IMF.RES,WEO,9.0.0", "SVK.NGDP_R.A", provider="IMF")
    assert got.format == "sdmx-ml-structure-specific" and got.total_rows == 1
    assert got.rows == [["2018", 94669000000.0]]
    assert got.constant_columns["SCALE"] == "9"


def test_imf_availability_constraint_is_read() -> None:
    message = parse_structure(sdmx_test_data("IMF", "IMF_STA/availableconstraint_CPI.xml"))
    (constraint,) = message.constraints_for(None, "Actual")
    assert constraint.agency == "IMF_STA" and set(constraint.key_values) == {"COUNTRY", "FREQUENCY", "INDICATOR"}
    assert len(constraint.key_values["FREQUENCY"]) == 3


def test_unicef_describe_offers_the_three_sex_codes_of_its_data_key_set(
    make_service: ServiceFactory, fake: FakeProviders
) -> None:
    structure = sdmx_test_data("UNICEF", "UNICEF/GLOBAL_DATAFLOW-structure.xml")
    fake.add("/sdmxapi/rest/dataflow/UNICEF/all/latest", catalogue_of(structure), STRUCTURE_CT)
    fake.add("/sdmxapi/rest/dataflow/UNICEF/GLOBAL_DATAFLOW/latest?references=all", structure, STRUCTURE_CT)
    service = make_service()
    assert service.search_datasets("cross-sector indicators", provider="UNICEF").results[0].dataset == (
        "UNICEF,GLOBAL_DATAFLOW,1.0"
    )
    described = service.describe_dataset("GLOBAL_DATAFLOW", provider="UNICEF", max_codes=100)
    assert described.codes_source == "allowed_constraint"
    sex = next(d for d in described.dimensions if d.id == "SEX")
    # CL_SEX has 7 codes; the constraint's keys name 3.
    assert [(c.id, c.name) for c in sex.codes] == [("F", "Female"), ("M", "Male"), ("_T", "Total")]
    assert sex.total_codes == 3
    # Dimensions the keys do not name keep their whole codelist (one code in this reduced specimen).
    area = next(d for d in described.dimensions if d.id == "REF_AREA")
    assert [c.id for c in area.codes] == ["AFG"]


def test_bis_and_ilo_structures_are_read() -> None:
    bis = parse_structure(sdmx_test_data("BIS", "BIS/actualconstraint-0.xml"))
    (constraint,) = bis.constraints
    assert (constraint.id, constraint.type, constraint.attached[0].id) == ("CBP_D_24D", "Actual", "WS_CBPOL_D")
    _, content_type, body = recorded("ILO", "recorded/8ef5b1633e82e0ac.json")
    assert content_type.startswith("application/vnd.sdmx.structure+xml")
    ilo = parse_structure(body)
    eco = next(c for c in ilo.codelists if c.id == "CL_ECO")
    assert eco.agency == "ILO" and len(eco.codes) > 0
    assert "IMF_ILOSTAT" in {d.id for d in ilo.structures}


@pytest.mark.parametrize("pid", ["IMF", "BIS", "UNICEF", "ILO", "ISTAT", "INSEE"])
def test_new_providers_are_bundled_with_their_reasons(pid: str) -> None:
    provider = load_providers().get(pid)
    assert provider.base_url.startswith("https://") and provider.notes
