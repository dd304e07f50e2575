"""SDMX-JSON, SDMX-ML 3.0, SDMX-CSV 2.0 and ZIP/gzip envelopes, on real files.

Expected values are written by hand from the files (and, for the ECB's SDMX-JSON, from
the tables sdmx1 checks the same files against: khaeru/sdmx-test-data expected/*.txt).
"""

from __future__ import annotations

import gzip
import io
import json
import zipfile

import pytest

from governed_evidence.errors import ResponseTooLargeError, UnusableResponseError
from governed_evidence.sdmx.catalogue import parse_catalogue
from governed_evidence.sdmx.data import parse_data
from governed_evidence.sdmx.envelope import MAX_MEMBERS, unwrap
from governed_evidence.sdmx.formats import detect
from governed_evidence.sdmx.sdmxjson import MAX_JSON_BYTES, parse_json_catalogue, parse_json_structure
from governed_evidence.sdmx.structure import parse_structure, parse_urn
from tests.sdmx.helpers import gzip_bomb, sdmx_test_data, shared

ESTAT_ZIP = "ESTAT/sdmx-test-data/ESTAT/footer2.zip"
ESTAT_CL_FREQ_3 = "ESTAT/sdmx-test-data/ESTAT/CL_FREQ.xml"

# -- SDMX-JSON data ---------------------------------------------------------------------------

#: khaeru/sdmx-test-data expected/xs-json.txt: the four observations of the ECB's EXR sample.
ECB_EXR_OBS = {
    ("NZD", "2013-01-18"): 1.5931,
    ("NZD", "2013-01-21"): 1.5925,
    ("RUB", "2013-01-18"): 40.3426,
    ("RUB", "2013-01-21"): 40.3,
}


@pytest.mark.parametrize(
    "path",
    [
        "ECB_EXR/ts.json",  # SDMX-JSON 1.0, series
        "ECB_EXR/xs.json",  # 1.0, cross-section (CURRENCY at observation level)
        "ECB_EXR/flat.json",  # 1.0, flat observations
        "v3/json/data/exr-time-series.json",  # 2.0
        "v3/json/data/exr-cross-section.json",
        "v3/json/data/exr-flat.json",
    ],
)
def test_sdmx_json_data_matches_the_values_of_the_file(path: str) -> None:
    table = parse_data("json", sdmx_test_data("ECB", path), keep=10, max_rows=100)
    assert table.total_rows == 4
    got = {(r["CURRENCY"], r["TIME_PERIOD"]): table.value("OBS_VALUE", r["OBS_VALUE"]) for r in table.rows}
    assert got == ECB_EXR_OBS
    # Data-set level dimensions are on every row, so they are lifted as constants.
    assert table.constant["FREQ"] == "D" and table.constant["CURRENCY_DENOM"] == "EUR"
    assert table.constant["EXR_TYPE"] == "SP00" and table.constant["OBS_STATUS"] == "A"
    assert {r["TITLE"] for r in table.rows} == {"New Zealand dollar (NZD)", "Russian rouble (RUB)"}
    assert table.labels["CURRENCY"] == {"NZD": "New Zealand dollar", "RUB": "Russian rouble"}


def test_legacy_oecd_sdmx_json_is_read_the_same_way() -> None:
    table = parse_data("json", shared("OECD/sdmx-test-data/OECD/data-PART2-all-all.json"), keep=2, max_rows=100)
    assert table.total_rows == 7
    assert table.rows[0]["LOCATION"] == "AUS" and table.rows[0]["IND"] == "5CLAT"
    assert table.value("OBS_VALUE", table.rows[0]["OBS_VALUE"]) == pytest.approx(11.963615756565)


def test_json_is_detected_by_content_type() -> None:
    assert detect("application/vnd.sdmx.data+json;version=2.0.0", b"{}") == "json"
    assert detect("application/vnd.sdmx.structure+json; version=2.0", b"{}") == "json"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[1, 2]", "not an SDMX-JSON message"),
        (b"{not json", "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "not an SDMX-JSON message"),
        (b'{"structure": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nests deeper"),
        (b'{"dataSets": [], "structure": {}} trailing', "not valid JSON"),
        (b'{"dataSets": [{"observations": {"0": [1]}}], "structure": {', "not valid JSON"),
        # Members no SDMX-JSON data message defines (the hostile answer of the review).
        (b'{"data": {"dataSets": [{"series": {}}]}, "x": [{}, {}, {}]}', "does not define"),
        (b'{"errors": [{"code": 500}]}', "SDMX-JSON error message"),
        (b'{"dataSets": [{"series": {"0:x": {}}}], "structure": {}}', "malformed series"),
    ],
)
def test_hostile_or_broken_json_is_refused(body: bytes, message: str) -> None:
    with pytest.raises(UnusableResponseError, match=message):
        parse_data("json", body, keep=1, max_rows=10)


def test_json_over_its_cap_and_rows_over_the_limit_are_refused() -> None:
    with pytest.raises(ResponseTooLargeError):
        parse_data("json", b" " * (MAX_JSON_BYTES + 1), keep=1, max_rows=10)
    with pytest.raises(ResponseTooLargeError, match="more than 3 observations"):
        parse_data("json", sdmx_test_data("ECB", "ECB_EXR/ts.json"), keep=1, max_rows=3)


def test_sdmx_json_error_100_is_an_empty_table() -> None:
    table = parse_data("json", b'{"errors": [{"code": 100, "title": "No results"}]}', keep=1, max_rows=10)
    assert table.total_rows == 0


# -- SDMX-JSON structures ---------------------------------------------------------------------


def test_sdmx_json_structure_message_is_read_like_sdmx_ml() -> None:
    body = sdmx_test_data("ECB", "v3/json/structure/constructed-sample.json")
    message = parse_json_structure(body)
    flow = message.dataflow("EXR", "ECB")
    assert flow is not None and flow.name == "Exchange Rates"
    dsd = message.structure_for(flow)
    assert dsd is not None and dsd.id == "ECB_EXR1"
    assert [d.id for d in dsd.dimensions] == ["FREQ", "CURRENCY", "CURRENCY_DENOM", "EXR_TYPE", "EXR_SUFFIX"]
    assert dsd.time_dimension is not None and dsd.time_dimension.id == "TIME_PERIOD"
    freq = message.codelist(dsd.dimensions[0].codelist)
    assert freq is not None and freq.codes == {"A": "Annual", "M": "Monthly", "Q": "Quarterly"} and freq.partial
    assert message.concept_name(dsd.dimensions[2]) == "Currency denominator"
    (constraint,) = message.constraints_for(flow, "Allowed")
    assert constraint.key_values["EXR_TYPE"] == ["NRP0", "ERU1", "ERC0", "SP00"]
    assert constraint.key_values["FREQ"] == ["A", "Q", "M"]
    assert [r.dataset for r in parse_json_catalogue(body)] == ["ECB,EXR,1.0"]


def test_sdmx_json_cube_values_may_be_objects_and_kinds_lower_case() -> None:
    """The Fusion Metadata Registry's form (tests/fixtures/sdmx/BIS/schema.json): ``{"value": ...}``
    members and ``"type": "actual"``."""
    body = json.dumps(
        {
            "data": {
                "codelists": [],
                "contentConstraints": [
                    {"id": "C", "agencyID": "A", "type": "actual", "cubeRegions": [{"isIncluded": True, "keyValues": [
                        {"id": "REF_AREA", "values": [{"value": "AT"}, {"value": "BE", "validFrom": "2020-01-01"}]},
                        {"id": "FREQ", "values": ["Q", {"value": ""}, 7]},
                    ], "attributes": [{"id": "OBS_STATUS", "values": [{"value": "A"}]}]}]},
                    {"id": "D", "agencyID": "A", "role": "ALLOWED", "cubeRegions": []},
                ],
            }
        }
    ).encode()  # fmt: skip
    actual, allowed = parse_json_structure(body).constraints
    assert (actual.type, allowed.type) == ("Actual", "Allowed")
    assert actual.key_values == {"REF_AREA": ["AT", "BE"], "FREQ": ["Q", "7"]}
    assert actual.attribute_values == {"OBS_STATUS": ["A"]}


def test_non_sdmx_json_structures_are_refused() -> None:
    # The OECD's own application/json shape ({"resources": [], "references": {...}}).
    with pytest.raises(UnusableResponseError, match="not an SDMX-JSON structure message"):
        parse_json_structure(shared("OECD/isakskogstad-OECD-MCP/dataflow-response.json"))


# -- SDMX-ML 3.0 ------------------------------------------------------------------------------


def test_sdmx_ml_3_codelists_from_eurostat_and_the_imf() -> None:
    estat = parse_structure(shared(ESTAT_CL_FREQ_3))
    (freq,) = estat.codelists
    assert (freq.agency, freq.id, freq.version, freq.name) == ("ESTAT", "FREQ", "3.9", "Time frequency")
    assert freq.codes == {"P": "Pluri-annual"}
    imf = parse_structure(sdmx_test_data("IMF", "IMF/CL_FREQ-3.0-structure.xml"))
    (cl,) = imf.codelists
    assert (cl.agency, cl.id, cl.version) == ("IMF", "CL_FREQ", "1.0.3")
    assert list(cl.codes)[:2] == ["A", "D"] and cl.codes["A"] == "Annual" and len(cl.codes) == 6


def test_sdmx_ml_3_references_are_urns() -> None:
    flows = parse_structure(sdmx_test_data("IMF", "IMF/01R.xml")).dataflows
    assert flows[0].structure is not None
    assert (flows[0].structure.agency, flows[0].structure.id, flows[0].structure.version) == (
        "IMF", "ECOFIN_DSD", "1.0",
    )  # fmt: skip
    rows = parse_catalogue(sdmx_test_data("IMF", "IMF/01R.xml"))
    assert [r.dataset for r in rows] == ["IMF,01R,1.0"]
    dsd = parse_structure(sdmx_test_data("ECB", "v3/xml/ECB_EXR1.xml")).structures[0]
    assert [d.id for d in dsd.dimensions][:3] == ["FREQ", "CURRENCY", "CURRENCY_DENOM"]
    assert dsd.dimensions[0].codelist is not None and dsd.dimensions[0].codelist.id == "CL_FREQ"
    concept = dsd.dimensions[0].concept
    assert concept is not None and (concept.id, concept.parent_id) == ("FREQ", "ECB_CONCEPTS")
    assert parse_urn("urn:sdmx:org.sdmx.infomodel.codelist.Codelist=ECB:CL_FREQ(1.0)") is not None
    assert parse_urn("not a urn") is None


def test_sdmx_ml_3_data_constraints_have_a_role() -> None:
    message = parse_structure(sdmx_test_data("ECB", "v3/xml/codelist - discriminated union.xml"))
    isic = next(c for c in message.constraints if c.id == "ISIC_CONSTRAINT")
    assert (isic.type, isic.include, isic.key_values) == ("Allowed", True, {"ACTIVITY": ["ISIC4_%"]})
    assert [r.id for r in isic.attached] == ["LABOUR_ISIC"]


# -- DataKeySet and cube-region attributes ------------------------------------------------------


def test_unicef_data_key_set_narrows_sex_to_three_codes() -> None:
    message = parse_structure(sdmx_test_data("UNICEF", "UNICEF/GLOBAL_DATAFLOW-structure.xml"))
    flow = message.dataflow("GLOBAL_DATAFLOW", "UNICEF")
    (constraint,) = message.constraints_for(flow, "Allowed")
    assert constraint.id == "CONSTR_SEX"
    assert constraint.keys == [{"SEX": "F"}, {"SEX": "M"}, {"SEX": "_T"}]
    assert constraint.key_values == {"SEX": ["F", "M", "_T"]}
    dsd = message.structure_for(flow)
    assert dsd is not None
    sex = message.codelist(next(d for d in dsd.dimensions if d.id == "SEX").codelist)
    assert sex is not None and len(sex.codes) == 7


def test_cube_region_attribute_values_are_kept() -> None:
    body = b"""<m:Structure xmlns:m="http://www.sdmx.org/resources/sdmxml/schemas/v2_1/message"
 xmlns:s="http://www.sdmx.org/resources/sdmxml/schemas/v2_1/structure"
 xmlns:c="http://www.sdmx.org/resources/sdmxml/schemas/v2_1/common"><m:Header/><m:Structures><s:Constraints>
<s:ContentConstraint id="CR_A" agencyID="A" type="Actual"><s:CubeRegion include="true">
<c:KeyValue id="FREQ"><c:Value>A</c:Value></c:KeyValue>
<c:Attribute id="OBS_STATUS"><c:Value>A</c:Value><c:Value>E</c:Value></c:Attribute>
</s:CubeRegion></s:ContentConstraint></s:Constraints></m:Structures></m:Structure>"""
    (constraint,) = parse_structure(body).constraints
    assert constraint.key_values == {"FREQ": ["A"]}
    assert constraint.attribute_values == {"OBS_STATUS": ["A", "E"]}


# -- SDMX-CSV 2.0 -------------------------------------------------------------------------------


def test_sdmx_csv_2_plain_and_with_labels() -> None:
    plain = parse_data("csv", sdmx_test_data("ECB", "v3/csv/example-01.csv"), keep=5, max_rows=10)
    assert plain.total_rows == 2
    assert plain.rows[0] == {
        "DIM_1": "A", "DIM_2": "B", "DIM_3": "2014-01", "OBS_VALUE": "12.4", "ATTR_2": "Y",
        "ATTR_3": "Normal, special and other values", "ATTR_1": "N", "UPDATED": "2021-01-22T13:15:41Z",
    }  # fmt: skip
    labelled = parse_data("csv", sdmx_test_data("ECB", "v3/csv/example-05.csv"), keep=5, max_rows=10)
    assert labelled.rows[1]["ATTR_1"] == "Y" and labelled.labels["ATTR_1"] == {"N": "No", "Y": "Yes"}
    pairs = parse_data("csv", sdmx_test_data("ECB", "v3/csv/example-06.csv"), keep=5, max_rows=10)
    assert pairs.labels["DIM_1"] == {"A": "Value A"} and pairs.rows[0]["OBS_VALUE"] == "12.4"


def test_sdmx_csv_2_semicolons_decimal_commas_and_key_columns() -> None:
    table = parse_data("csv", sdmx_test_data("ECB", "v3/csv/example-04.csv"), keep=5, max_rows=10)
    assert [table.value("OBS_VALUE", r["OBS_VALUE"]) for r in table.rows] == [12.4, 10.8]
    assert "SERIES_KEY" not in table.columns and "OBS_KEY" not in table.columns
    assert table.labels["ATTR_2"] == {"Y": "Oui"}


def test_sdmx_csv_2_multi_values_other_measures_and_deletions() -> None:
    multi = parse_data("csv", sdmx_test_data("ECB", "v3/csv/example-07.csv"), keep=5, max_rows=10)
    assert multi.rows[0]["ATTR_3"] == "A;B;C" and "ATTR_3" in multi.columns  # [] dropped from the id
    measures = parse_data("csv", sdmx_test_data("ECB", "v3/csv/example-02.csv"), keep=5, max_rows=10)
    assert (measures.rows[0]["OBS_VALUE1"], measures.rows[0]["OBS_VALUE2"]) == ("12.4", "12.5")
    deleted = parse_data("csv", sdmx_test_data("ECB", "v3/csv/example-16.csv"), keep=5, max_rows=10)
    assert deleted.total_rows == 0
    mixed = parse_data("csv", sdmx_test_data("ECB", "v3/csv/example-09A.csv"), keep=5, max_rows=10)
    assert [r["TIME_PERIOD" if "TIME_PERIOD" in r else "DIM_3"] for r in mixed.rows] == [
        "2014-01", "2014-02", "2014-03",
    ]  # fmt: skip


# -- ZIP and gzip envelopes ---------------------------------------------------------------------


def test_eurostat_deferred_delivery_zip_is_read() -> None:
    content_type, body = unwrap("application/octet-stream", shared(ESTAT_ZIP), max_bytes=1 << 20)
    assert detect(content_type, body) == "generic"
    table = parse_data("generic", body, keep=2, max_rows=100)
    # sdmx1 counts the same 43 observations (tests/test_sources.py, footer2.zip).
    assert table.total_rows == 43
    assert table.rows[0] == {
        "UNIT": "CLV05_MEUR", "NA_ITEM": "B1GQ", "GEO": "AL", "FREQ": "A",
        "TIME_PERIOD": "2017", "OBS_VALUE": "9820.6", "OBS_FLAG": "e",
    }  # fmt: skip


def _zip(*members: tuple[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as archive:
        for name, data in members:
            archive.writestr(name, data)
    return out.getvalue()


def test_gzip_file_is_opened_and_read_as_what_it_holds() -> None:
    csv = b"DATAFLOW,REF_AREA,TIME_PERIOD,OBS_VALUE\nX,AUS,2020,1.5\n"
    content_type, body = unwrap("application/gzip", gzip.compress(csv), max_bytes=1000)
    assert (detect(content_type, body), body) == ("csv", csv)
    # Not an envelope: passed through unchanged.
    assert unwrap("application/vnd.sdmx.data+csv", csv, max_bytes=10) == ("application/vnd.sdmx.data+csv", csv)


@pytest.mark.parametrize(
    ("content_type", "body", "error", "message"),
    [
        ("application/zip", b"PK\x03\x04 not really a zip", UnusableResponseError, "could not be read"),
        ("application/zip", _zip(("a.xml", b"<a/>"), ("b.xml", b"<b/>")), UnusableResponseError, "holds 2 files"),
        ("application/zip", _zip(("../../etc/passwd", b"x")), UnusableResponseError, "outside the archive"),
        ("application/zip", _zip(("/abs.xml", b"x")), UnusableResponseError, "outside the archive"),
        ("application/zip", _zip(("a\\..\\b.xml", b"x")), UnusableResponseError, "outside the archive"),
        ("application/zip", _zip(("inner.zip", _zip(("a.xml", b"<a/>")))), UnusableResponseError, "another archive"),
        ("application/zip", _zip(("data.xml", gzip.compress(b"<a/>"))), UnusableResponseError, "another archive"),
        ("application/gzip", gzip.compress(_zip(("a.xml", b"<a/>"))), UnusableResponseError, "another archive"),
        ("application/gzip", gzip.compress(b"a") + gzip.compress(b"b"), UnusableResponseError, "more than one"),
        ("application/gzip", gzip.compress(b"abc" * 100)[:-12], UnusableResponseError, "truncated|could not"),
        (
            "application/zip",
            _zip(*[(f"d{i}/", b"") for i in range(MAX_MEMBERS)], ("a.xml", b"<a/>")),
            UnusableResponseError,
            "more entries",
        ),
        ("application/zip", _zip(("big.xml", b"<" + b"a" * 5000 + b"/>")), ResponseTooLargeError, "expands"),
        ("application/gzip", gzip.compress(b"x" * 5000), ResponseTooLargeError, "expands"),
    ],
)
def test_hostile_archives_are_refused(content_type: str, body: bytes, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        unwrap(content_type, body, max_bytes=4096)


def test_bombs_are_refused_within_the_cap() -> None:
    # A gzip of 256 MiB of zeros (about 256 KiB on the wire), and the same inside a ZIP
    # whose member header understates its size.
    bomb = gzip_bomb(256 * 1024 * 1024)
    with pytest.raises(ResponseTooLargeError):
        unwrap("application/x-gzip", bomb, max_bytes=1 << 20)
    with pytest.raises(ResponseTooLargeError):
        unwrap("application/octet-stream", bomb, max_bytes=1 << 20)
    zipped = _zip(("data.xml", b"\0" * (8 * 1024 * 1024)))
    with pytest.raises(ResponseTooLargeError):
        unwrap("application/zip", zipped, max_bytes=1 << 20)
    # A header that understates the size: reading stops at the declared size, whose CRC
    # then fails, so the member is refused without being expanded.
    with pytest.raises(UnusableResponseError, match="could not be read"):
        unwrap("application/zip", _understate(zipped), max_bytes=1 << 20)


def _understate(archive: bytes) -> bytes:
    """The archive with its member's declared sizes set to 10 bytes (local and central headers)."""
    data = bytearray(archive)
    local = data.find(b"PK\x03\x04")
    data[local + 22 : local + 26] = (10).to_bytes(4, "little")
    central = data.find(b"PK\x01\x02")
    data[central + 24 : central + 28] = (10).to_bytes(4, "little")
    return bytes(data)


def _long_listing(entries: int, *, stated: int | None = None) -> bytes:
    """A ZIP of one small file whose central directory lists it ``entries`` times.

    ``stated`` is the count the end record gives (by default the true one): zipfile reads
    the directory until its stated size is consumed, whatever the count says.
    """
    one = _zip(("data.xml", b"<a/>"))
    central = one.find(b"PK\x01\x02")
    end = one.find(b"PK\x05\x06")
    record = one[central:end]
    directory = record * entries
    count = min(stated if stated is not None else entries, 0xFFFF).to_bytes(2, "little")
    tail = b"PK\x05\x06" + b"\0" * 4 + count + count + len(directory).to_bytes(4, "little")
    return one[:central] + directory + tail + central.to_bytes(4, "little") + b"\0\0"


@pytest.mark.parametrize("stated", [None, 1], ids=["count-stated", "count-understated"])
def test_a_long_archive_listing_is_refused_before_it_is_read(stated: int | None) -> None:
    import tracemalloc

    body = _long_listing(100_000, stated=stated)
    tracemalloc.start()
    try:
        with pytest.raises(UnusableResponseError, match=r"more entries|larger directory"):
            unwrap("application/zip", body, max_bytes=1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Reading the listing would build 100,000 ZipInfo objects (tens of MB); its end record
    # alone says it is not one SDMX delivery.
    assert peak < 1024 * 1024
