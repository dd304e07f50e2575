"""SDMX-JSON structure and catalogue messages read as a stream: the same values, bounded memory.

The values are compared with what the reader that decoded the whole message gave
(``tests/sdmx/reference_sdmxjson.py``, that reader as it was), on every recorded SDMX-JSON
structure message there is and on messages written here to reach its corners.
"""

from __future__ import annotations

import json
import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from governed_evidence.errors import ResponseTooLargeError, UnusableResponseError
from governed_evidence.sdmx import isolated, jsonstructure
from governed_evidence.sdmx.jsonstructure import MAX_ARTEFACT_VALUES, MAX_ITEM_VALUES
from governed_evidence.sdmx.sdmxjson import parse_json_catalogue, parse_json_structure
from tests.sdmx import reference_sdmxjson as reference
from tests.sdmx.conftest import ServiceFactory
from tests.sdmx.helpers import FIXTURES, SHARED, FakeProviders, fixture

#: Every recorded SDMX-JSON structure or catalogue answer: the BIS registry's (copied into
#: tests/fixtures), the OECD's non-standard application/json shape (../shared), and
#: khaeru/sdmx-test-data's 2.0 samples when they are there (../shared or $SDMX_TEST_DATA).
RECORDED = [
    FIXTURES / "BIS" / "details.json",
    FIXTURES / "BIS" / "schema.json",
    SHARED / "OECD" / "isakskogstad-OECD-MCP" / "dataflow-response.json",
    SHARED / "OECD" / "isakskogstad-OECD-MCP" / "structure-response.json",
]
_SAMPLES = [SHARED / "ECB" / "sdmx-test-data" / "v3" / "json" / "structure"]
if os.environ.get("SDMX_TEST_DATA"):
    _SAMPLES.append(Path(os.environ["SDMX_TEST_DATA"]) / "v3" / "json" / "structure")
RECORDED += sorted(p for d in _SAMPLES if d.is_dir() for p in d.glob("*.json"))
STRUCTURE_JSON_CT = "application/vnd.sdmx.structure+json;version=1.0"


def _outcome(parse: Callable[[bytes], Any], body: bytes) -> Any:
    """What ``parse`` gave: its value, or the kind and text of the error it raised."""
    try:
        return parse(body)
    except (UnusableResponseError, ResponseTooLargeError) as exc:
        return type(exc).__name__, str(exc)


def _both(body: bytes) -> None:
    assert _outcome(parse_json_structure, body) == _outcome(reference.parse_json_structure, body)
    assert _outcome(parse_json_catalogue, body) == _outcome(reference.parse_json_catalogue, body)


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: "/".join(Path(p).parts[-2:]))
def test_recorded_structure_messages_read_the_values_the_whole_decoding_read(path: Path) -> None:
    if not path.is_file():
        pytest.skip(f"recorded response not available: {path.name}")
    body = path.read_bytes()
    _both(body)
    _both(b"\xef\xbb\xbf" + body)  # with a byte order mark, as some servers write one


def test_the_bis_recordings_are_read_whole() -> None:
    # The comparison above is not of two empty answers.
    message = parse_json_structure(fixture("BIS/schema.json"))
    assert (len(message.structures), len(message.codelists), len(message.constraints)) == (1, 16, 1)
    assert sum(len(c.codes) for c in message.codelists) == 341 and message.concepts
    assert [r.dataset for r in parse_json_catalogue(fixture("BIS/details.json"))] == [
        "BIS.CBS,CBS_OLD,1.0",
        "BIS.CBS,CBS,1.0",
    ]


_CODELIST: dict[str, Any] = {
    "codes": [
        {"id": "B", "names": {"fr": "Bé"}, "annotations": [{"title": "x"}]},
        "not an object",
        {"name": "no id"},
        {"id": "A", "name": "First", "links": [{"href": "x"}]},
        {"id": "A", "names": {"en": "Second"}},
    ],
    "isPartial": True,
    "id": "CL_X",
    "agencyID": "AG",
    "names": {"en": "Codes"},
}
_CONCEPTS: dict[str, Any] = {
    "concepts": [{"id": "C", "names": {"en": "One"}}, {"id": "C", "names": {"en": "Two"}}, 7],
    "id": "SCHEME",
}
_FLOW: dict[str, Any] = {
    "annotations": [{"type": "T", "text": "first"}, {"type": "T", "title": "second"}, {"type": 3}],
    "descriptions": {"en": "<p>About</p>"},
    "id": "DF",
    "agencyID": "AG",
    "version": "1.0",
    "structure": "urn:sdmx:org.sdmx.infomodel.datastructure.DataStructure=AG:DSD(1.0)",
    "names": {"de": "Fluss"},
}


@pytest.mark.parametrize(
    "doc",
    [
        # Members in any order: an artefact's list before its id, groups in any order.
        {"meta": {"links": [{}] * 5}, "data": {"conceptSchemes": [_CONCEPTS], "codelists": [_CODELIST, 3]}},
        {"data": {"dataflows": [_FLOW, [], {}], "valuelists": [{"x": 1}]}, "meta": {}},
        {"data": {"contentConstraints": [{"id": "B"}], "dataConstraints": [{"id": "A"}], "codelists": []}},
        # Written twice: the last one counts.
        {"data": {"codelists": [_CODELIST], "codelists ": [], "dataflows": [_FLOW], "dataflows2": 1}},
        {"data": {"dataflows": "not a list", "codelists": {"codes": []}}},
        {"data": {"agencySchemes": []}},
        {"data": []},
        {"data": {"codelists": [{"id": "X", "codes": [{"id": "1"}], "codes2": [], "isPartial": "yes"}]}},
        {"errors": [{"code": 100}]},
    ],
)
def test_messages_written_to_reach_the_corners_read_the_same_values(doc: dict[str, Any]) -> None:
    _both(json.dumps(doc).encode())


@pytest.mark.parametrize(
    "body",
    [
        b'{"data": {"codelists": [{"id": "X", "codes": []}], "codelists": [{"id": "Y"}]}}',
        b'{"data": {"dataflows": []}, "data": {"codelists": []}}',
        b'{"data": {"codelists": [{"id": "X", "codes": [{"id": "A"}], "codes": [{"id": "B"}]}]}}',
        b"{not json",
        b'{"data": {"codelists": []}} trailing',
        b'{"data": {"codelists": [',
        b"[1, 2]",
        b'"text"',
    ],
)
def test_duplicates_and_broken_json_read_the_same_values(body: bytes) -> None:
    _both(body)


def _bulk(prefix: bytes, suffix: bytes, size: int) -> bytes:
    return prefix + b"{}," * ((size - len(prefix) - len(suffix)) // 3) + suffix


@pytest.mark.parametrize(
    ("prefix", "suffix"),
    [
        (b'{"meta": {"x": [', b'{}]}, "data": {"dataflows": [], "codelists": []}}'),
        (b'{"data": {"dataflows": [], "codelists": [], "valuelists": [', b"{}]}}"),
        (b'{"data": {"dataflows": [{"id": "DF", "agencyID": "AG", "names": {"en": "F"}, "links": [', b"{}]}]}}"),
    ],
)
def test_bulk_in_a_member_that_is_not_read_costs_no_memory(prefix: bytes, suffix: bytes) -> None:
    # json.loads built a Python object per {} (about 25 times the bytes); passed over, it builds none.
    body = _bulk(prefix, suffix, 1024 * 1024)
    tracemalloc.start()
    try:
        message = parse_json_structure(body)
        rows = parse_json_catalogue(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(message.dataflows) == len(rows) == (1 if b'"DF"' in body else 0)
    # What remains is the parser's events for one slice of the body, whatever the body's size.
    assert peak < len(body)


@pytest.mark.parametrize("parse", [parse_json_structure, parse_json_catalogue])
def test_members_no_structure_message_defines_are_refused(parse: Callable[[bytes], object]) -> None:
    # The review's answer, as a structure: millions of objects beside a valid message.
    body = b'{"data": {"dataflows": [], "codelists": []}, "x": [' + b"{}," * 1000 + b"{}]}"
    with pytest.raises(UnusableResponseError, match="not an SDMX-JSON structure message"):
        parse(body)


@pytest.mark.parametrize(
    "body",
    [
        # Inside an artefact that is built: its budget, not the memory, gives out first.
        b'{"data": {"dataStructures": [{"id": "DSD", "x": [' + b"{}," * MAX_ARTEFACT_VALUES + b"{}]}]}}",
        b'{"data": {"dataflows": [{"id": "DF", "names": {"en": [' + b"0," * MAX_ARTEFACT_VALUES + b"0]}}]}}",
        # Inside one code: each is built alone, under a budget of its own.
        b'{"data": {"codelists": [{"id": "CL", "codes": [{"id": "A", "x": [' + b"0," * MAX_ITEM_VALUES + b"0]}]}]}}",
    ],
)
def test_bulk_inside_what_is_built_is_refused(body: bytes) -> None:
    with pytest.raises(ResponseTooLargeError, match="more than this server reads"):
        parse_json_structure(body)


def test_bulk_past_the_event_limit_is_refused_wherever_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    # Passing over a value costs an event at a time: the limit bounds the processor time.
    monkeypatch.setattr(jsonstructure, "STRUCTURE_EVENTS", 10_000)
    body = _bulk(b'{"meta": {"x": [', b'{}]}, "data": {"dataflows": []}}', 3 * 6_000)
    with pytest.raises(ResponseTooLargeError, match="more than this server reads"):
        parse_json_catalogue(body)
    assert parse_json_catalogue(_bulk(b'{"meta": {"x": [', b'{}]}, "data": {"dataflows": []}}', 3 * 4_000)) == []


def test_deep_nesting_is_refused() -> None:
    body = b'{"data": {"dataStructures": [{"x": ' + b"[" * 100 + b"]" * 100 + b"}]}}"
    with pytest.raises(UnusableResponseError, match="nests deeper"):
        parse_json_structure(body)


def test_json_structures_and_catalogues_are_parsed_in_the_child(
    make_service: ServiceFactory, fake: FakeProviders, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids: list[int] = []
    fork = os.fork

    def counted() -> int:
        pid = fork()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(isolated.os, "fork", counted)
    fake.add("/dataflow/BIS/all/latest", fixture("BIS/details.json"), STRUCTURE_JSON_CT)
    fake.add("/dataflow/BIS.CBS/CBS/1.0?references=all", fixture("BIS/schema.json"), STRUCTURE_JSON_CT)
    service = make_service()
    found = service.search_datasets("consolidated banking statistics", provider="BIS")
    assert [r.dataset for r in found.results] == ["BIS.CBS,CBS,1.0", "BIS.CBS,CBS_OLD,1.0"]
    assert len(pids) == 1
    described = service.describe_dataset("BIS.CBS,CBS,1.0", provider="BIS", max_codes=5)
    assert described.codes_source == "actual_constraint" and len(described.dimensions) == 11
    assert len(pids) == 2
