"""Data in every format the providers send: SDMX-CSV variants and SDMX-ML generic / structure-specific."""

from __future__ import annotations

import pytest

from governed_evidence.errors import ResponseTooLargeError, UnusableResponseError
from governed_evidence.sdmx.data import ordered_columns, parse_data
from governed_evidence.sdmx.formats import detect
from tests.sdmx.helpers import (
    CSV_CT,
    ECB_DATA,
    ESTAT_FOOTER,
    ESTAT_NAMA,
    GENERIC_CT,
    OECD_HOUSE_DATA,
    SS_CT,
    fixture,
    shared,
)


def test_oecd_sdmx_csv() -> None:
    body = shared(OECD_HOUSE_DATA)
    assert detect("application/vnd.sdmx.data+csv; version=1.0.0", body) == "csv"
    table = parse_data("csv", body, keep=10, max_rows=10_000)
    assert table.total_rows == 1694
    assert len(table.rows) == 10
    assert table.columns[:6] == ["REF_AREA", "FREQ", "MEASURE", "UNIT_MEASURE", "TIME_PERIOD", "OBS_VALUE"]
    assert "DATAFLOW" not in table.columns
    assert table.constant["FREQ"] == "A"
    assert table.constant["BASE_PER"] == "2015"
    assert "REF_AREA" not in table.constant and "MEASURE" not in table.constant
    assert table.rows[0]["TIME_PERIOD"] == "2005"
    assert table.value("OBS_VALUE", table.rows[0]["OBS_VALUE"]) == pytest.approx(88.1742083868035)


def test_oecd_csv_with_empty_columns() -> None:
    table = parse_data("csv", fixture("oecd_g20_prices_data.csv"), keep=5, max_rows=1000)
    assert table.total_rows == 41
    assert table.empty == {"BASE_PER", "DURABILITY"}
    assert table.constant["REF_AREA"] == "CHN"
    assert table.constant["TRANSFORMATION"] == "GY"


def test_oecd_csvfilewithlabels_pairs_codes_and_labels() -> None:
    table = parse_data("csv", fixture("oecd_pop_density_labels.csv"), keep=100, max_rows=1000)
    assert table.total_rows == 17
    assert "Reference area" not in table.columns and "STRUCTURE_NAME" not in table.columns
    assert table.columns[:3] == ["FREQ", "TERRITORIAL_LEVEL", "REF_AREA"]
    # A quoted label with a comma stays one cell.
    assert table.labels["REF_AREA"]["DE256"] == "Ansbach, Landkreis"
    assert table.labels["OBS_STATUS"] == {"A": "Normal value", "B": "Time series break"}
    assert "OBS_STATUS" not in table.constant  # the break row differs
    assert "OBS_VALUE" not in table.labels and "TIME_PERIOD" not in table.labels


def test_time_and_value_are_never_lifted_out() -> None:
    # Every one of these recorded rows has OBS_VALUE 0.
    table = parse_data("csv", fixture("oecd_wastewater_labels.csv"), keep=100, max_rows=1000)
    assert table.total_rows == 12
    assert "OBS_VALUE" not in table.constant
    assert table.labels["MEASURE"]["OTHERTR"] == "Unspecified (other) treatment"


def test_sdmx_csv_with_labels_in_cells() -> None:
    body = (
        b"DATAFLOW,REF_AREA: Reference area,FREQ: Frequency,TIME_PERIOD: Time,OBS_VALUE: Value\r\n"
        b"OECD:DF_X(1.0),FRA: France,A: Annual,2020,1.5\r\n"
        b"OECD:DF_X(1.0),DEU: Germany,A: Annual,2020,2.5\r\n"
    )
    table = parse_data("csv", body, keep=10, max_rows=10)
    assert table.columns == ["REF_AREA", "FREQ", "TIME_PERIOD", "OBS_VALUE"]
    assert [r["REF_AREA"] for r in table.rows] == ["FRA", "DEU"]
    assert table.labels["REF_AREA"] == {"FRA": "France", "DEU": "Germany"}


def test_ecb_generic_data() -> None:
    body = shared(ECB_DATA)
    assert detect(GENERIC_CT, body) == "generic"
    assert detect("application/xml", body) == "generic"
    table = parse_data("generic", body, keep=3, max_rows=10_000)
    assert table.total_rows == 252
    assert table.columns[:5] == ["FREQ", "CURRENCY", "CURRENCY_DENOM", "EXR_TYPE", "EXR_SUFFIX"]
    assert table.constant["CURRENCY"] == "USD"
    assert table.constant["TITLE"] == "US dollar/Euro"
    assert table.rows[0]["TIME_PERIOD"] == "1999-01"
    assert table.rows[0]["OBS_VALUE"] == "1.16078"
    assert table.rows[0]["OBS_STATUS"] == "A"


def test_eurostat_structure_specific_data() -> None:
    body = fixture("estat_nrg_bal_s_data.xml")
    assert detect(SS_CT, body) == "structurespecific"
    table = parse_data("structurespecific", body, keep=100, max_rows=1000)
    assert table.total_rows == 33
    assert table.constant == {"geo": "AL", "siec": "C0000X0350-0370", "unit": "GWH", "freq": "A", "nrg_bal": "AFC"}
    assert [r["TIME_PERIOD"] for r in table.rows][:2] == ["1990", "1991"]
    assert ordered_columns(table.columns, ["freq", "nrg_bal", "siec", "unit", "geo"])[:7] == [
        "freq", "nrg_bal", "siec", "unit", "geo", "TIME_PERIOD", "OBS_VALUE",
    ]  # fmt: skip


def test_eurostat_custom_namespace_prefix() -> None:
    body = shared(ESTAT_NAMA)
    assert detect("application/xml;charset=UTF-8", body) == "structurespecific"
    table = parse_data("structurespecific", body, keep=10, max_rows=10)
    assert [(r["TIME_PERIOD"], r["OBS_VALUE"]) for r in table.rows] == [
        ("2012", "46526.2"), ("2013", "49094.5"), ("2014", "51791.3"), ("2015", "54142.3"),
    ]  # fmt: skip
    assert table.constant["geo"] == "LU"


def test_eurostat_deferred_delivery_footer_is_too_large() -> None:
    with pytest.raises(ResponseTooLargeError, match="narrow"):
        parse_data("generic", shared(ESTAT_FOOTER), keep=10, max_rows=10)


def test_row_cap_refuses_instead_of_truncating_silently() -> None:
    with pytest.raises(ResponseTooLargeError, match="more than 40 observations"):
        parse_data("csv", fixture("oecd_g20_prices_data.csv"), keep=5, max_rows=40)


def test_constant_tracking_covers_all_rows_not_only_kept_ones() -> None:
    table = parse_data("csv", fixture("oecd_pop_density_labels.csv"), keep=1, max_rows=1000)
    assert len(table.rows) == 1
    assert "OBS_STATUS" not in table.constant


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"DATAFLOW,REF_AREA,TIME_PERIOD\r\nX,FRA,2020\r\n",  # no OBS_VALUE
        b"DATAFLOW,REF_AREA,TIME_PERIOD,OBS_VALUE\r\nX,FRA,2020\r\n",  # short row
        b"DATAFLOW,REF_AREA,TIME_PERIOD,OBS_VALUE\r\nX,\xff\xfe,2020,1\r\n",  # not UTF-8
    ],
)
def test_malformed_csv_is_refused(body: bytes) -> None:
    with pytest.raises(UnusableResponseError):
        parse_data("csv", body, keep=10, max_rows=10)


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        (CSV_CT, "csv"),
        ("text/csv", "csv"),
        ("application/json", "json"),
        ("application/vnd.sdmx.data+json;version=1.0.0", "json"),
        ("text/plain", "text"),
        ("text/html", "other"),
        ("", "text"),
    ],
)
def test_detect_by_content_type(content_type: str, expected: str) -> None:
    assert detect(content_type, b"whatever") == expected


def test_xml_root_decides_for_plain_xml() -> None:
    assert detect("application/xml", fixture("oecd_g20_prices_structure.xml")) == "structure"
    assert detect("application/vnd.sdmx.structure+xml;version=2.1", fixture("fmr_error_150.xml")) == "error"
    assert detect("text/xml", b"<html/>") == "other"


@pytest.mark.parametrize("fmt", ["structure", "text", "other", "error"])
def test_non_data_formats_are_refused(fmt: str) -> None:
    with pytest.raises(UnusableResponseError, match="format"):
        parse_data(fmt, b"{}", keep=1, max_rows=1)  # type: ignore[arg-type]


def test_json_that_is_not_sdmx_json_data_is_refused() -> None:
    with pytest.raises(UnusableResponseError, match="not an SDMX-JSON data message"):
        parse_data("json", b"{}", keep=1, max_rows=1)


_GENERIC_HEAD = (
    b'<message:GenericData xmlns:message="http://www.sdmx.org/resources/sdmxml/schemas/v2_1/message"'
    b' xmlns:generic="http://www.sdmx.org/resources/sdmxml/schemas/v2_1/data/generic">'
)


def _v(**values: str) -> bytes:
    return b"".join(f'<generic:Value id="{k}" value="{v}"/>'.encode() for k, v in values.items())


def _series(area: str, *obs: bytes, attrs: bytes = b"") -> bytes:
    attributes = b"<generic:Attributes>" + attrs + b"</generic:Attributes>" if attrs else b""
    return (
        b"<generic:Series><generic:SeriesKey>" + _v(FREQ="A", REF_AREA=area) + b"</generic:SeriesKey>"
        + attributes + b"".join(obs) + b"</generic:Series>"
    )  # fmt: skip


def _obs(period: str, value: str, attrs: bytes = b"") -> bytes:
    attributes = b"<generic:Attributes>" + attrs + b"</generic:Attributes>" if attrs else b""
    return (
        f'<generic:Obs><generic:ObsDimension value="{period}"/><generic:ObsValue value="{value}"/>'.encode()
        + attributes + b"</generic:Obs>"
    )  # fmt: skip


def _group(area: str, attrs: bytes) -> bytes:
    return (
        b'<generic:Group type="Sibling"><generic:GroupKey>' + _v(REF_AREA=area) + b"</generic:GroupKey>"
        b"<generic:Attributes>" + attrs + b"</generic:Attributes></generic:Group>"
    )


def _dataset(*parts: bytes, attrs: bytes = b"") -> bytes:
    attributes = b"<generic:Attributes>" + attrs + b"</generic:Attributes>" if attrs else b""
    return b'<message:DataSet structureRef="X">' + attributes + b"".join(parts) + b"</message:DataSet>"


def test_generic_dataset_and_group_attributes_reach_their_rows() -> None:
    body = (
        _GENERIC_HEAD
        + _dataset(
            _group("MX", _v(AVAILABILITY="K", UNIT_MEASURE="MXN")),
            _series("MX", _obs("2020", "1"), _obs("2021", "2", _v(UNIT_MULT="3"))),
            _series("JP", _obs("2020", "3"), attrs=_v(UNIT_MEASURE="JPY")),
            _series("CH", _obs("2020", "4")),
            attrs=_v(UNIT_MEASURE="USD", UNIT_MULT="6", DECIMALS="3"),
        )
        + b"</message:GenericData>"
    )
    table = parse_data("generic", body, keep=10, max_rows=10)
    rows = {(r["REF_AREA"], r["TIME_PERIOD"]): r for r in table.rows}
    # Observation > series > group > data set.
    assert rows["MX", "2020"]["UNIT_MEASURE"] == "MXN" and rows["MX", "2020"]["UNIT_MULT"] == "6"
    assert rows["MX", "2021"]["UNIT_MULT"] == "3"
    assert rows["JP", "2020"]["UNIT_MEASURE"] == "JPY"
    assert rows["CH", "2020"]["UNIT_MEASURE"] == "USD"
    # A group's attributes reach only the series its key names.
    assert [r.get("AVAILABILITY", "") for r in table.rows] == ["K", "K", "", ""]
    assert table.constant["DECIMALS"] == "3"
    # The key still leads; what the data set and groups add comes after.
    assert table.columns[:4] == ["FREQ", "REF_AREA", "TIME_PERIOD", "OBS_VALUE"]


def test_each_generic_dataset_has_its_own_attributes() -> None:
    body = (
        _GENERIC_HEAD
        + _dataset(_group("MX", _v(AVAILABILITY="K")), _series("MX", _obs("2020", "1")), attrs=_v(UNIT_MEASURE="USD"))
        + _dataset(_series("MX", _obs("2020", "2")))
        + b"</message:GenericData>"
    )
    table = parse_data("generic", body, keep=10, max_rows=10)
    assert [(r.get("UNIT_MEASURE", ""), r.get("AVAILABILITY", "")) for r in table.rows] == [("USD", "K"), ("", "")]


def test_generic_group_shapes_are_bounded() -> None:
    groups = b"".join(
        b'<generic:Group type="G"><generic:GroupKey>' + _v(**{f"D{i}": "x"}) + b"</generic:GroupKey>"
        b"<generic:Attributes>" + _v(A="1") + b"</generic:Attributes></generic:Group>"
        for i in range(100)
    )
    body = _GENERIC_HEAD + _dataset(groups) + b"</message:GenericData>"
    with pytest.raises(UnusableResponseError, match="kinds of group"):
        parse_data("generic", body, keep=10, max_rows=10)


def test_structure_specific_dataset_attributes_reach_every_row() -> None:
    body = (
        b'<message:StructureSpecificData xmlns:message="http://www.sdmx.org/resources/sdmxml/schemas/v2_1/message"'
        b' xmlns:ss="http://www.sdmx.org/resources/sdmxml/schemas/v2_1/data/structurespecific"'
        b' xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">'
        b'<message:DataSet ss:dataScope="DataStructure" xsi:type="ns1:DataSetType" ss:structureRef="X"'
        b' action="Information" UNIT_MEASURE="USD" UNIT_MULT="6">'
        b'<Series FREQ="A" REF_AREA="MX"><Obs TIME_PERIOD="2020" OBS_VALUE="1"/></Series>'
        b'<Series FREQ="A" REF_AREA="JP" UNIT_MULT="9"><Obs TIME_PERIOD="2020" OBS_VALUE="2"/></Series>'
        b"</message:DataSet></message:StructureSpecificData>"
    )
    table = parse_data("structurespecific", body, keep=10, max_rows=10)
    assert [(r["UNIT_MEASURE"], r["UNIT_MULT"]) for r in table.rows] == [("USD", "6"), ("USD", "9")]
    assert not {"action", "dataScope", "structureRef"} & set(table.columns)


# Structure-specific groups, in the shape of pysdmx's tests/io/xml/sdmx21/reader/samples/str_ser_group.xml
# (BIS_DER written by the library: ``<Group xsi:type="ns1:SiblingType" AVAILABILITY="K" DER_TYPE="U" ...>``
# before the series, dimensions and attributes side by side as XML attributes).
_SS_HEAD = (
    b'<message:StructureSpecificData xmlns:message="http://www.sdmx.org/resources/sdmxml/schemas/v2_1/message"'
    b' xmlns:ss="http://www.sdmx.org/resources/sdmxml/schemas/v2_1/data/structurespecific"'
    b' xmlns:ns1="urn:sdmx:org.sdmx.infomodel.datastructure.DataStructure=X:X(1.0):ObsLevelDim:TIME_PERIOD"'
    b' xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">'
)
_SS_DIMENSIONS = frozenset({"FREQ", "REF_AREA", "SECTOR"})


def _ss(*parts: bytes, dataset: bytes = b"") -> bytes:
    return (
        _SS_HEAD + b'<message:DataSet ss:structureRef="X" xsi:type="ns1:DataSetType" ' + dataset + b">"
        + b"".join(parts) + b"</message:DataSet></message:StructureSpecificData>"
    )  # fmt: skip


def _ss_group(kind: str, **values: str) -> bytes:
    return (
        f'<Group xsi:type="ns1:{kind}" '.encode() + " ".join(f'{k}="{v}"' for k, v in values.items()).encode() + b"/>"
    )


def _ss_message() -> bytes:
    return _ss(
        _ss_group("Sibling", REF_AREA="MX", AVAILABILITY="K", UNIT_MEASURE="MXN"),
        _ss_group("BySector", SECTOR="B", TITLE="Banks"),
        b'<Series FREQ="A" REF_AREA="MX" SECTOR="B"><Obs TIME_PERIOD="2020" OBS_VALUE="1"/>'
        b'<Obs TIME_PERIOD="2021" OBS_VALUE="2" UNIT_MEASURE="EUR"/></Series>',
        b'<Series FREQ="A" REF_AREA="JP" SECTOR="B" UNIT_MEASURE="JPY">'
        b'<Obs TIME_PERIOD="2020" OBS_VALUE="3"/></Series>',
        b'<Series FREQ="A" REF_AREA="CH" SECTOR="H"><Obs TIME_PERIOD="2020" OBS_VALUE="4"/></Series>',
        dataset=b'UNIT_MEASURE="USD" AVAILABILITY="A"',
    )


def test_structure_specific_group_attributes_reach_their_series() -> None:
    table = parse_data("structurespecific", _ss_message(), keep=10, max_rows=10, dimensions=_SS_DIMENSIONS)
    rows = {(r["REF_AREA"], r["TIME_PERIOD"]): r for r in table.rows}
    # Observation > series > group > data set.
    assert rows["MX", "2020"]["UNIT_MEASURE"] == "MXN" and rows["MX", "2021"]["UNIT_MEASURE"] == "EUR"
    assert rows["JP", "2020"]["UNIT_MEASURE"] == "JPY" and rows["CH", "2020"]["UNIT_MEASURE"] == "USD"
    assert [r["AVAILABILITY"] for r in table.rows] == ["K", "K", "A", "A"]
    # A second group type, keyed by another dimension, reaches the series it names.
    assert [r.get("TITLE", "") for r in table.rows] == ["Banks", "Banks", "Banks", ""]
    # The key and the group's type are not attributes of the series.
    assert all(r["REF_AREA"] in ("MX", "JP", "CH") for r in table.rows)
    assert not any(c.startswith("{") or c == "type" for c in table.columns)
    assert table.unread_groups == 0


def test_structure_specific_groups_need_the_dimension_ids() -> None:
    table = parse_data("structurespecific", _ss_message(), keep=10, max_rows=10)
    assert table.unread_groups == 2
    assert "TITLE" not in table.columns
    # What the series and the data set say still reaches the rows.
    assert [r["AVAILABILITY"] for r in table.rows] == ["A", "A", "A", "A"]


def test_a_structure_specific_group_without_attributes_is_ignored() -> None:
    body = _ss(
        _ss_group("Sibling", REF_AREA="MX"), b'<Series FREQ="A" REF_AREA="MX"><Obs TIME_PERIOD="2020"/></Series>'
    )
    table = parse_data("structurespecific", body, keep=10, max_rows=10, dimensions=_SS_DIMENSIONS)
    assert table.columns == ["FREQ", "REF_AREA", "TIME_PERIOD"]


def test_structure_specific_group_shapes_are_bounded() -> None:
    groups = b"".join(_ss_group("G", **{f"D{i}": "x", "A": "1"}) for i in range(100))
    dimensions = frozenset(f"D{i}" for i in range(100))
    with pytest.raises(UnusableResponseError, match="kinds of group"):
        parse_data("structurespecific", _ss(groups), keep=10, max_rows=10, dimensions=dimensions)


@pytest.mark.parametrize("dimensions", [_SS_DIMENSIONS, None], ids=["read", "counted"])
def test_structure_specific_groups_are_bounded_in_number(
    dimensions: frozenset[str] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import governed_evidence.sdmx.data as data

    monkeypatch.setattr(data, "MAX_GROUPS", 3)
    groups = b"".join(_ss_group("Sibling", REF_AREA=f"A{i}", AVAILABILITY="K") for i in range(4))
    with pytest.raises(UnusableResponseError, match="more groups"):
        parse_data("structurespecific", _ss(groups), keep=10, max_rows=10, dimensions=dimensions)
    assert parse_data("structurespecific", _ss(groups[: groups.rindex(b"<Group")]), keep=10, max_rows=10,
                      dimensions=dimensions).total_rows == 0  # fmt: skip
