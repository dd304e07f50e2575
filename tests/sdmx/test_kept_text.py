"""What a message's kept text costs in memory is bounded, whatever its characters (sdmx/kept.py).

A count of codes or dataflows does not bound memory: a name with one character outside
Latin-1 is held at two bytes a character, one outside the Basic Multilingual Plane at four,
and a catalogue of distinct words is held again by its search index. The readers count the
text they keep at its size in memory against ``MAX_KEPT_TEXT`` and refuse past it.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from governed_evidence.errors import ResponseTooLargeError, UnusableResponseError
from governed_evidence.sdmx import kept
from governed_evidence.sdmx.catalogue import CatalogueIndex, parse_catalogue
from governed_evidence.sdmx.sdmxjson import parse_json_catalogue, parse_json_structure
from governed_evidence.sdmx.structure import parse_structure
from tests.sdmx.helpers import ESTAT_GOV, catalogue_of, fixture, shared
from tests.sdmx.test_json_structure_stream import RECORDED

REFUSAL = r"keeps names and descriptions that take more memory than this server holds \(12 MiB\)"


def _codelist(names: list[str]) -> bytes:
    codes = [{"id": f"C{i:07d}", "names": {"en": name}} for i, name in enumerate(names)]
    return json.dumps({"data": {"codelists": [{"id": "CL", "codes": codes}]}}, ensure_ascii=False).encode()


def _catalogue(descriptions: list[str]) -> bytes:
    flows = [
        {"id": f"DF{i:07d}", "agencyID": "A", "version": "1.0", "name": f"Flow {i}", "description": text}
        for i, text in enumerate(descriptions)
    ]
    return json.dumps({"data": {"dataflows": flows}}).encode()


def test_names_outside_latin_1_are_counted_at_their_memory_not_their_bytes() -> None:
    # 40,000 names of 100 characters: 4.6 MB of UTF-8 either way, well under MAX_CODES; with
    # one character outside the Basic Multilingual Plane each is held at 4 bytes a character.
    plain = ["n" * 100] * 40_000
    assert len(parse_json_structure(_codelist(plain)).codelists[0].codes) == 40_000
    astral = ["n" * 99 + "\U0001d538"] * 40_000
    with pytest.raises(ResponseTooLargeError, match=REFUSAL):
        parse_json_structure(_codelist(astral))


def test_the_sdmx_ml_readers_count_the_same_text(monkeypatch: pytest.MonkeyPatch) -> None:
    body = shared(ESTAT_GOV)
    parse_structure(body)
    monkeypatch.setattr(kept, "MAX_KEPT_TEXT", 2_000)
    with pytest.raises(ResponseTooLargeError, match="names and descriptions that take more memory"):
        parse_structure(body)
    flows = catalogue_of(fixture("oecd_g20_prices_structure.xml"), fixture("estat_lfsa_egai2d_dataflow.xml"))
    monkeypatch.setattr(kept, "MAX_KEPT_TEXT", 12 * 1024 * 1024)
    rows = parse_catalogue(flows)
    # The index words are counted at their most, the rows' text again.
    text = sum(len(r.dataset_id) + len(r.name) + len(r.description) for r in rows)
    monkeypatch.setattr(kept, "MAX_KEPT_TEXT", text + text // 2)
    with pytest.raises(ResponseTooLargeError, match="names and descriptions that take more memory"):
        parse_catalogue(flows)


def test_a_catalogue_s_index_words_are_counted_with_its_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # Descriptions of the same words leave the index small; distinct words hold them again.
    repeated = ["words of a long description " * 5] * 1_000
    distinct = [" ".join(f"{letter}{i:07d}" for letter in "abcdefghijklmnop") for i in range(1_000)]
    assert len(repeated[0]) <= len(distinct[0])
    monkeypatch.setattr(kept, "MAX_KEPT_TEXT", 220_000)
    parts: list[Any] = []
    assert parse_json_catalogue(_catalogue(repeated), send=parts.append) == []
    assert sum(len(p[1]) for p in parts if p[1]) == 1_000
    with pytest.raises(ResponseTooLargeError, match="names and descriptions that take more memory"):
        parse_json_catalogue(_catalogue(distinct), send=parts.append)


def test_distinct_words_are_held_again_by_the_index() -> None:
    # What the budget counts for the index is the bytes the index holds: runs of ASCII words.
    distinct = [" ".join(f"{letter}{i:07d}" for letter in "abcd") for i in range(100)]
    parts: list[Any] = []
    parse_json_catalogue(_catalogue(distinct), send=parts.append)
    rows = [r for p in parts if p[1] for r in p[1]]
    words = [p[2] for p in parts if p[1]]
    index = CatalogueIndex(rows, words)
    assert index.search("c0000042", 5)[0][0].row.dataset_id == "DF0000042"
    assert sum(len(text) for text, _ in words) >= sum(len(r.description) for r in rows)


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_recorded_messages_keep_far_less_than_the_budget(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not path.is_file():
        pytest.skip(f"recorded message not available: {path.name}")
    # The largest recorded message (Eurostat's lfsa_egai2d structure, SDMX-ML) keeps 0.2 MiB.
    monkeypatch.setattr(kept, "MAX_KEPT_TEXT", 1024 * 1024)
    body = path.read_bytes()
    for parse in (parse_json_structure, lambda b: parse_json_catalogue(b, send=lambda part: None)):
        # The OECD's non-standard shape is not a message these readers take; never too large.
        with contextlib.suppress(UnusableResponseError):
            parse(body)
