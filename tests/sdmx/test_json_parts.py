"""SDMX-JSON structures and catalogues sent from the parsing child in parts: the same values, a bounded child.

A structure's codes and a catalogue's rows go through the pipe a part at a time as they are
read (``run_streamed``) and are put back together in the server; what comes out must be
what the parse gives in one piece, on every recorded message and on messages that write a
member twice, repeat a code id across parts or interleave codelists.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from governed_evidence.errors import ResponseTooLargeError, UnusableResponseError
from governed_evidence.sdmx import sdmxjson
from governed_evidence.sdmx.catalogue import CatalogueIndex
from governed_evidence.sdmx.isolated import run_streamed
from governed_evidence.sdmx.jsonparts import CatalogueParts, StructureParts
from governed_evidence.sdmx.sdmxjson import parse_json_catalogue, parse_json_structure
from tests.sdmx.test_json_structure_stream import RECORDED


def _codes(n: int, prefix: str = "C") -> list[dict[str, Any]]:
    return [{"id": f"{prefix}{i}", "names": {"en": f"Code {prefix}{i}"}} for i in range(n)]


def _flow(i: int) -> dict[str, Any]:
    return {"id": f"DF{i}", "agencyID": "AG", "version": "1.0", "names": {"en": f"Flow {i}"}}


CORNERS = [
    # Two codelists, one id read twice across parts (first place, last name), elements that are not artefacts.
    {"data": {"codelists": [
        {"id": "CL_A", "codes": [*_codes(5), {"id": "C1", "names": {"en": "again"}}, 7]},
        {"id": "CL_B", "codes": _codes(3, "B")},
        "not a codelist",
    ]}},
    # Dataflows, one a caller could not send back (skipped).
    {"data": {"dataflows": [*(_flow(i) for i in range(9)), {"id": "bad id", "agencyID": "AG"}]}},
]  # fmt: skip


def _json(message: dict[str, Any]) -> bytes:
    # Written by hand so a member can be written twice (a dict cannot hold it twice).
    return json.dumps(message).encode()


def _outcome(read: Any, body: bytes) -> Any:
    try:
        return read(body)
    except (UnusableResponseError, ResponseTooLargeError) as exc:
        return type(exc).__name__, str(exc)


def _structure_in_parts(body: bytes) -> Any:
    parts = StructureParts()
    return parts.message(run_streamed(parse_json_structure, parts.take, body))


def _catalogue_in_parts(body: bytes) -> Any:
    catalogue = CatalogueParts()
    assert run_streamed(parse_json_catalogue, catalogue.take, body) == []
    rows, words = catalogue.catalogue()
    # The index made of the words sent with the rows is the one made of the rows here.
    index, here = CatalogueIndex(rows, words), CatalogueIndex(rows)
    for query in ("price", "consumer prices", "trade gdp", "flow", "df1 employment"):
        assert index.search(query, 20) == here.search(query, 20)
    return rows


def _bodies() -> list[bytes]:
    bodies = [p.read_bytes() for p in RECORDED if Path(p).is_file()]
    corners = [_json(message) for message in CORNERS]
    # A member written twice (the last one counts), which a dict cannot hold: joined by hand.
    # ``codelists`` and ``dataflows`` twice in ``data``:
    corners.append(
        b'{"data": {"codelists": [{"id": "CL1", "codes": ' + _json(_codes(5)) + b'}], "dataflows": '
        + _json([_flow(1)]) + b', "codelists": [{"id": "CL2", "codes": ' + _json(_codes(4)) + b'}], "dataflows": '
        + _json([_flow(2), _flow(3)]) + b"}}"
    )  # fmt: skip
    # ``codes`` twice in one codelist:
    corners.append(
        b'{"data": {"codelists": [{"id": "CL", "codes": ' + _json(_codes(7)) + b', "codes": '
        + _json(_codes(3, "Z")) + b"}]}}"
    )  # fmt: skip
    # ``data`` twice, the second without codelists or dataflows:
    corners.append(
        b'{"data": {"codelists": [{"id": "CL1", "codes": ' + _json(_codes(5)) + b'}], "dataflows": '
        + _json([_flow(1), _flow(2)]) + b'}, "data": {"conceptSchemes": []}}'
    )  # fmt: skip
    return bodies + corners


@pytest.mark.parametrize("part_items", [2, 4096])
def test_what_is_sent_in_parts_is_what_the_parse_gives_whole(monkeypatch: pytest.MonkeyPatch, part_items: int) -> None:
    # Parts of two items cross every boundary there is: a code id read again in a later
    # part, a list replaced after some of it was sent, a reading of a group that is dropped.
    monkeypatch.setattr(sdmxjson, "PART_ITEMS", part_items)
    bodies = _bodies()
    # The corners, the three joined by hand and the two recordings kept in the repository;
    # ../shared, when beside it, adds more.
    assert len(bodies) >= len(CORNERS) + 3 + 2
    for body in bodies:
        assert _outcome(_structure_in_parts, body) == _outcome(parse_json_structure, body)
        assert _outcome(_catalogue_in_parts, body) == _outcome(parse_json_catalogue, body)


def test_a_duplicate_code_keeps_its_first_place_and_its_last_name_across_parts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sdmxjson, "PART_ITEMS", 2)
    codes = [*_codes(5), {"id": "C1", "names": {"en": "again"}}]
    message = _structure_in_parts(_json({"data": {"codelists": [{"id": "CL", "codes": codes}]}}))
    assert list(message.codelists[0].codes.items())[:3] == [("C0", "Code C0"), ("C1", "again"), ("C2", "Code C2")]


def test_the_child_holds_one_part_of_the_codes_not_all_of_them() -> None:
    # 60,000 codes kept are some 9 MB as Python objects; sent a part at a time, the parse
    # holds one part of them (and the message's parser state), whatever their number.
    codes = [{"id": f"C{i:07d}", "names": {"en": f"Code number {i:07d}, kept"}} for i in range(60_000)]
    body = _json({"data": {"codelists": [{"id": "CL", "codes": codes}]}})
    sent: list[int] = []

    def send(part: tuple[str, Any, Any]) -> None:
        if part[0] == "codes":
            sent.append(len(part[2]))

    tracemalloc.start()
    try:
        whole = parse_json_structure(body)
        _, peak_whole = tracemalloc.get_traced_memory()
        del whole
        tracemalloc.reset_peak()
        in_parts = parse_json_structure(body, send)
        _, peak_in_parts = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sum(sent) == 60_000 and max(sent) <= sdmxjson.PART_ITEMS
    assert in_parts.codelists[0].codes == {}
    assert peak_whole > 8_000_000
    assert peak_in_parts < 2_000_000
