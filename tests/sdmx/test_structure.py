"""Real SDMX-ML 2.1 structure messages from the OECD, the ECB, Eurostat and SPC."""

from __future__ import annotations

import pytest

from governed_evidence.errors import ResponseTooLargeError, UnusableResponseError
from governed_evidence.sdmx import structure as structure_module
from governed_evidence.sdmx.structure import error_codes, parse_structure
from governed_evidence.sdmx.xml import parse as parse_xml
from governed_evidence.sdmx.xml import plain_text
from tests.sdmx.helpers import (
    ECB_DSD_ONLY,
    ECB_STRUCTURE_FULL,
    ESTAT_GOV,
    ESTAT_LFSA_DSD,
    ESTAT_NRG_STRUCTURE,
    OECD_ACTUAL,
    OECD_HOUSE_STRUCTURE,
    SPC_ACTUAL,
    fixture,
    shared,
)


def test_oecd_references_all_holds_everything_describe_needs() -> None:
    message = parse_structure(shared(OECD_HOUSE_STRUCTURE))
    flow = message.dataflow("DSD_AN_HOUSE_PRICES@DF_HOUSE_PRICES", "OECD.ECO.MPD")
    assert flow is not None
    assert (flow.agency, flow.version, flow.name) == ("OECD.ECO.MPD", "1.0", "Analytical house prices indicators")
    assert flow.description.startswith("Residential Property Prices Indices")
    assert "<" not in flow.description and "&" not in flow.description.replace("R&D", "")
    assert flow.annotations["DEFAULT"] == "MEASURE=RHP,FREQ=Q,LASTNPERIODS=20"
    dsd = message.structure_for(flow)
    assert dsd is not None
    assert [d.id for d in dsd.dimensions] == ["REF_AREA", "FREQ", "MEASURE", "UNIT_MEASURE"]
    assert dsd.time_dimension is not None and dsd.time_dimension.id == "TIME_PERIOD"
    assert [a.id for a in dsd.attributes] == ["OBS_STATUS", "UNIT_MULT", "ADJUSTMENT", "DECIMALS", "BASE_PER"]
    area = message.codelist(dsd.dimensions[0].codelist)
    assert area is not None and area.id == "CL_AREA" and area.codes["FRA"] == "France"
    assert message.concept_name(dsd.dimensions[0]) == "Reference area"
    actual = message.constraints_for(flow, "Actual")
    assert [c.id for c in actual] == ["CR_A_DSD_AN_HOUSE_PRICES@DF_HOUSE_PRICES"]
    assert len(actual[0].key_values["REF_AREA"]) == 51
    assert actual[0].key_values["FREQ"] == ["A", "Q"]
    assert (actual[0].time_start, actual[0].time_end) == ("1956-01-01T00:00:00", "2025-06-30T00:00:00")
    allowed = message.constraints_for(flow, "Allowed")
    assert [c.id for c in allowed] == ["CR_DSD_AN_HOUSE_PRICES@DF_HOUSE_PRICES"]
    # The constraint's Dataflow reference is not mistaken for a dataflow definition.
    assert len(message.dataflows) == 1


def test_oecd_dataflow_and_dsd_without_codelists() -> None:
    message = parse_structure(fixture("oecd_g20_prices_structure.xml"))
    flow = message.dataflow("DSD_G20_PRICES@DF_G20_PRICES")
    assert flow is not None and flow.name == "G20 - Consumer price indices, all items"
    dsd = message.structure_for(flow)
    assert dsd is not None
    assert [d.id for d in dsd.dimensions] == [
        "REF_AREA", "FREQ", "METHODOLOGY", "MEASURE", "UNIT_MEASURE", "EXPENDITURE", "ADJUSTMENT", "TRANSFORMATION",
    ]  # fmt: skip
    assert message.codelists == [] and message.constraints == []
    assert message.codelist(dsd.dimensions[0].codelist) is None


def test_ecb_has_only_an_allowed_constraint() -> None:
    message = parse_structure(shared(ECB_STRUCTURE_FULL))
    flow = message.dataflow("EXR", "ECB")
    assert flow is not None and flow.name == "Exchange Rates"
    dsd = message.structure_for(flow)
    assert dsd is not None and dsd.id == "ECB_EXR1"
    assert [d.id for d in dsd.dimensions] == ["FREQ", "CURRENCY", "CURRENCY_DENOM", "EXR_TYPE", "EXR_SUFFIX"]
    assert message.constraints_for(flow, "Actual") == []
    allowed = message.constraints_for(flow, "Allowed")
    assert len(allowed) == 1 and "SP00" in allowed[0].key_values["EXR_TYPE"]
    assert message.codelist(dsd.dimensions[1].codelist).codes["USD"] == "US dollar"  # type: ignore[union-attr]
    assert message.concept_name(dsd.dimensions[1]) == "Currency"


def test_ecb_dsd_alone() -> None:
    message = parse_structure(shared(ECB_DSD_ONLY))
    assert message.dataflows == []
    dsd = message.structure_for(None)
    assert dsd is not None and len(dsd.attributes) == 24


def test_eurostat_partial_codelists_pick_the_version_the_dsd_names() -> None:
    message = parse_structure(shared(ESTAT_GOV))
    flow = message.dataflow("GOV_10Q_GGNFA")
    dsd = message.structure_for(flow)
    assert dsd is not None
    assert [d.id for d in dsd.dimensions] == ["freq", "unit", "s_adj", "sector", "na_item", "geo"]
    geo_ref = dsd.dimensions[-1].codelist
    geo = message.codelist(geo_ref)
    assert geo is not None and geo_ref is not None
    # Two versions of GEO travel in this message; the DSD's reference decides.
    assert sorted(c.version for c in message.codelists if c.id == "GEO") == ["13.0", "13.1"]
    assert geo.version == geo_ref.version
    assert flow is not None
    assert flow.annotations["OBS_PERIOD_OVERALL_LATEST"] == "2022-Q3"


def test_eurostat_referencepartial_marks_partial_lists() -> None:
    message = parse_structure(shared(ESTAT_NRG_STRUCTURE))
    dsd = message.structure_for(message.dataflow("NRG_BAL_S"))
    assert dsd is not None and [d.id for d in dsd.dimensions] == ["freq", "nrg_bal", "siec", "unit", "geo"]
    partial = {c.id for c in message.codelists if c.partial}
    assert {"GEO", "NRG_BAL", "SIEC", "UNIT", "FREQ"} <= partial


def test_eurostat_full_dsd_with_lower_case_dimensions() -> None:
    message = parse_structure(shared(ESTAT_LFSA_DSD))
    dsd = message.structure_for(None)
    assert dsd is not None
    assert [d.id for d in dsd.dimensions] == ["freq", "isco08", "age", "sex", "unit", "geo"]
    geo = message.codelist(dsd.dimensions[-1].codelist)
    assert geo is not None and len(geo.codes) == 4290 and not geo.partial


@pytest.mark.parametrize(
    ("body", "constraint_id", "first_dimension", "end"),
    [
        (lambda: shared(OECD_ACTUAL), "CR_A_DSD_DEBT_TRANS_COLL@DF_MICRO", "DD_ID", "2023-04-25T00:00:00"),
        (lambda: fixture("spc_availableconstraint.xml"), "CC", "FREQ", "2025-07-31T00:00:00"),
        (lambda: shared(SPC_ACTUAL), "CR_A_DF_ADBKI", "FREQ", "2022-12-31T00:00:00"),
    ],
)
def test_actual_and_available_constraints(body, constraint_id: str, first_dimension: str, end: str) -> None:  # type: ignore[no-untyped-def]
    message = parse_structure(body())
    (constraint,) = message.constraints_for(None, "Actual")
    assert constraint.id == constraint_id
    assert next(iter(constraint.key_values)) == first_dimension
    assert "TIME_PERIOD" not in constraint.key_values
    assert constraint.time_end == end


def test_availableconstraint_response_values() -> None:
    (constraint,) = parse_structure(fixture("spc_availableconstraint.xml")).constraints
    assert constraint.key_values == {"FREQ": ["M"], "COMMODITY": ["GOLD"], "INDICATOR": ["COMPRICE"]}
    assert [r.id for r in constraint.attached] == ["DF_COMMODITY_PRICES"]


def test_error_message_is_not_a_structure() -> None:
    body = fixture("fmr_error_150.xml")
    with pytest.raises(UnusableResponseError, match="got an SDMX error message"):
        parse_structure(body)
    assert error_codes(body) == ["150"]
    assert parse_xml(body).tag.endswith("}Error")


def test_data_message_is_not_a_structure() -> None:
    with pytest.raises(UnusableResponseError):
        parse_structure(fixture("estat_nrg_bal_s_data.xml"))


def test_code_count_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(structure_module, "MAX_CODES", 50)
    with pytest.raises(ResponseTooLargeError):
        parse_structure(shared(ESTAT_GOV))


def test_plain_text_strips_markup_and_bounds_length() -> None:
    assert plain_text("<p style='x'>GDP&nbsp;<b>growth</b> &amp; R&amp;D</p>") == "GDP growth & R&D"
    assert len(plain_text("word " * 500, 50)) == 50
