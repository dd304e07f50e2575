"""SDMX-JSON data read as a stream: members in any order, bounded memory, generic media types sniffed."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest

from governed_evidence.errors import ResponseTooLargeError, UnusableResponseError
from governed_evidence.sdmx.data import parse_data
from governed_evidence.sdmx.envelope import unwrap
from governed_evidence.sdmx.formats import detect
from governed_evidence.sdmx.jsondata import EVENTS_BESIDE_ROWS, EVENTS_PER_ROW, MAX_OBSERVATION_VALUES
from tests.sdmx.conftest import ServiceFactory
from tests.sdmx.helpers import FakeProviders, shared

PART2 = "OECD/sdmx-test-data/OECD/data-PART2-all-all.json"
ESTAT_ZIP = "ESTAT/sdmx-test-data/ESTAT/footer2.zip"

_STRUCTURE_10: dict[str, Any] = {
    "dimensions": {
        "dataSet": [{"id": "FREQ", "values": [{"id": "A", "name": "Annual"}]}],
        "series": [{"id": "REF_AREA", "values": [{"id": "FR", "name": "France"}, {"id": "DE", "name": "Germany"}]}],
        "observation": [{"id": "TIME_PERIOD", "values": [{"id": "2020"}, {"id": "2021"}]}],
    },
    "attributes": {
        "dataSet": [{"id": "UNIT", "values": [{"id": "EUR", "name": "Euro"}]}],
        "series": [{"id": "TITLE", "values": [{"name": "France, annual"}, {"name": "Germany, annual"}]}],
        "observation": [{"id": "OBS_STATUS", "values": [{"id": "A"}, {"id": "E", "name": "Estimated"}]}],
    },
    "annotations": [{"title": "never read"}],
}

#: What the message above holds, in every member order a writer may choose.
_ROWS_10 = [
    {"FREQ": "A", "UNIT": "EUR", "REF_AREA": "FR", "TITLE": "France, annual", "TIME_PERIOD": "2020",
     "OBS_VALUE": "1.5", "OBS_STATUS": "A"},
    {"FREQ": "A", "UNIT": "EUR", "REF_AREA": "FR", "TITLE": "France, annual", "TIME_PERIOD": "2021",
     "OBS_VALUE": "2", "OBS_STATUS": "E"},
    {"FREQ": "A", "UNIT": "EUR", "REF_AREA": "DE", "TITLE": "Germany, annual", "TIME_PERIOD": "2020",
     "OBS_VALUE": ""},
]  # fmt: skip


def _message_10(*, structure_first: bool, attributes_last: bool) -> bytes:
    fr: dict[str, Any] = {"observations": {"0": [1.5, 0], "1": [2, 1]}}
    de: dict[str, Any] = {"observations": {"0": [None]}}
    dataset: dict[str, Any] = {"series": {"0": fr, "1": de}}
    if attributes_last:
        fr["attributes"], de["attributes"], dataset["attributes"] = [0], [1], [0]
    else:
        fr = {"attributes": [0], **fr}
        de = {"attributes": [1], **de}
        dataset = {"attributes": [0], "series": {"0": fr, "1": de}}
    header = {"id": "x", "prepared": "2020-01-01"}
    if structure_first:
        doc = {"header": header, "structure": _STRUCTURE_10, "dataSets": [dataset]}
    else:
        doc = {"header": header, "dataSets": [dataset], "structure": _STRUCTURE_10}
    return json.dumps(doc).encode()


@pytest.mark.parametrize("structure_first", [True, False])
@pytest.mark.parametrize("attributes_last", [True, False])
def test_members_in_any_order_give_the_same_rows(structure_first: bool, attributes_last: bool) -> None:
    body = _message_10(structure_first=structure_first, attributes_last=attributes_last)
    table = parse_data("json", body, keep=10, max_rows=10)
    assert table.total_rows == 3
    assert table.rows == _ROWS_10
    assert table.labels["REF_AREA"] == {"FR": "France", "DE": "Germany"}
    assert table.labels["OBS_STATUS"] == {"E": "Estimated"}


def test_a_2_0_data_set_reads_the_structure_it_names() -> None:
    wrong = {"dimensions": {"observation": [{"id": "OTHER", "values": [{"id": "X"}]}]}}
    right = {
        "dimensions": {"observation": [{"id": "TIME_PERIOD", "values": [{"id": "2020"}, {"id": "2021"}]}]},
        "measures": {"observation": [{"id": "OBS_VALUE"}, {"id": "OBS_COUNT"}]},
    }
    doc = {
        "meta": {"schema": "https://json.sdmx.org/2.0.0/sdmx-json-data-schema.json", "links": [{"x": 1}] * 50},
        "data": {
            "dataSets": [{"structure": 1, "observations": {"1": [3.25, 7], "0": ["NaN", 1]}}],
            "structures": [wrong, right],
        },
    }
    table = parse_data("json", json.dumps(doc).encode(), keep=10, max_rows=10)
    assert table.rows == [
        {"TIME_PERIOD": "2021", "OBS_VALUE": "3.25", "OBS_COUNT": "7"},
        {"TIME_PERIOD": "2020", "OBS_VALUE": "NaN", "OBS_COUNT": "1"},
    ]


def test_the_recorded_oecd_message_reads_the_values_json_loads_reads() -> None:
    body = shared(PART2)
    doc = json.loads(body)
    expected = sorted(float(v[0]) for v in doc["dataSets"][0]["observations"].values())
    table = parse_data("json", body, keep=10, max_rows=100)
    assert table.total_rows == len(expected) == 7
    assert sorted(float(r["OBS_VALUE"]) for r in table.rows) == expected
    # With a byte order mark, as some servers write one.
    again = parse_data("json", b"\xef\xbb\xbf" + body, keep=10, max_rows=100)
    assert again.rows == table.rows


def _junk_in_meta(size: int) -> bytes:
    prefix, suffix = b'{"meta": {"x": [', b'{}]}, "data": {"dataSets": [{"series": {}}]}}'
    return prefix + b"{}," * ((size - len(prefix) - len(suffix)) // 3) + suffix


def test_bulk_in_a_member_that_is_not_read_costs_no_memory() -> None:
    # json.loads built a Python object per {} (about 25 times the bytes); passed over, it builds none.
    body = _junk_in_meta(1024 * 1024)
    tracemalloc.start()
    try:
        table = parse_data("json", body, keep=10, max_rows=10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert table.total_rows == 0
    # What remains is the parser's events for one slice of the body, whatever the body's size.
    assert peak < len(body)


def test_bulk_past_the_event_limit_is_refused_wherever_it_is() -> None:
    # Passing over a value costs an event at a time: the limit bounds the processor time.
    events = 2 * (EVENTS_PER_ROW * 10 + EVENTS_BESIDE_ROWS)
    with pytest.raises(ResponseTooLargeError, match="more than this server reads"):
        parse_data("json", _junk_in_meta(events // 2 * 3), keep=1, max_rows=10)
    # The same bulk is read when the caller's row limit allows for it.
    assert parse_data("json", _junk_in_meta(events // 2 * 3), keep=1, max_rows=500_000).total_rows == 0


@pytest.mark.parametrize(
    ("body", "error", "message"),
    [
        # The review's answer: millions of objects under a member no data message has.
        (b'{"data": {"dataSets": [{"series": {}}]}, "x": [' + b"{}," * 1000 + b"{}]}", UnusableResponseError,
         "does not define"),
        # Bulk inside what is built: the outline's budget, not the memory, gives out first.
        (b'{"structure": {"x": [' + b"{}," * 250_000 + b'{}]}, "dataSets": [{}]}', ResponseTooLargeError,
         "more than this server reads"),
        (b'{"dataSets": [{"observations": {"0": [' + b"0," * MAX_OBSERVATION_VALUES + b'0]}}], "structure": {}}',
         ResponseTooLargeError, "more than this server reads"),
        (b'{"dataSets": [' + b"{}," * 1000 + b'{}], "structure": {}}', UnusableResponseError, "more data sets"),
    ],
)  # fmt: skip
def test_hostile_bulk_is_refused(body: bytes, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        parse_data("json", body, keep=1, max_rows=10)


# -- generic media types ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "body", "expected"),
    [
        ("application/octet-stream", b'{"data": {}}', "json"),
        ("text/plain; charset=utf-8", b'\xef\xbb\xbf {"dataSets": []}', "json"),
        ("", b'{"dataSets": []}', "json"),
        ("application/json", b"DATAFLOW,REF_AREA,TIME_PERIOD,OBS_VALUE\nX,FR,2020,1\n", "csv"),
        ("application/octet-stream", b"STRUCTURE,STRUCTURE_ID,ACTION,OBS_VALUE\n", "csv"),
        (
            "application/json",
            b'<?xml version="1.0"?><message:GenericData xmlns:message='
            b'"http://www.sdmx.org/resources/sdmxml/schemas/v2_1/message"/>',
            "generic",
        ),
        # Nothing to go by: read as the media type says.
        ("text/plain", b"NoResultsFound", "text"),
        ("application/octet-stream", b"\x00\x01binary", "other"),
        ("application/json", b"[1, 2]", "json"),
    ],
)
def test_a_generic_media_type_is_decided_by_the_body(content_type: str, body: bytes, expected: str) -> None:
    assert detect(content_type, body) == expected


@pytest.mark.parametrize("content_type", ["application/octet-stream", "binary/octet-stream", "application/x-download"])
def test_a_zip_under_a_generic_media_type_is_opened(content_type: str) -> None:
    inner_type, body = unwrap(content_type, shared(ESTAT_ZIP), max_bytes=1 << 20)
    assert detect(inner_type, body) == "generic"
    assert parse_data("generic", body, keep=1, max_rows=100).total_rows == 43


@pytest.mark.parametrize(
    ("path", "content_type", "rows", "fmt"),
    [
        (PART2, "application/json", 7, "sdmx-json"),
        (PART2, "application/octet-stream", 7, "sdmx-json"),
        (PART2, "text/plain;charset=UTF-8", 7, "sdmx-json"),
        (ESTAT_ZIP, "application/octet-stream", 43, "sdmx-ml-generic"),
        (ESTAT_ZIP, "binary/octet-stream", 43, "sdmx-ml-generic"),
    ],
)
def test_recordings_served_under_generic_media_types_are_read(
    make_service: ServiceFactory, fake: FakeProviders, path: str, content_type: str, rows: int, fmt: str
) -> None:
    fake.add("/data/", shared(path), content_type)
    data = make_service().get_data("ESTAT,NAMA_10_GDP,1.0", "all", provider="ESTAT", max_rows=5)
    assert (data.total_rows, data.format) == (rows, fmt)
    assert data.source_url.startswith("https://")
