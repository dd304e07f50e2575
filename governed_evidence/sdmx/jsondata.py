"""SDMX-JSON data messages (1.0 and 2.0) read as rows, streaming, with bounded memory.

Every dimension and attribute value is an index into the message's ``structure`` (1.0: top
level; 2.0: ``data.structures[dataSet.structure]``), at data set, series or observation
level; series keys and observation keys are ``0:1:2`` indices in key order. A missing
index is an empty cell, never a guess.

The message is read twice as a stream of events (:mod:`~governed_evidence.sdmx.jsonstream`),
because a writer may put the structure after the data sets:

1. the outline: the structures, each data set's own ``structure`` index and attributes,
   and the attributes of any series that writes them after its observations;
2. the observations, each built alone, turned into a row and handed on at once.

What is built is bounded: the outline by :data:`MAX_OUTLINE_VALUES`, an observation by
:data:`MAX_OBSERVATION_VALUES`, the data sets by :data:`MAX_DATASETS`, rows by the caller's
``add``. What is read, built or passed over, is bounded too: each pass reads at most
:func:`event_limit` events, so bulk where nothing is read costs bounded processor time.
Members an SDMX-JSON data message does not define at its top level are refused; anything
else not needed (``meta``, annotations, links) is passed over unbuilt.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from governed_evidence.errors import ResponseTooLargeError, UnusableResponseError
from governed_evidence.sdmx.jsonstream import Budget, Events
from governed_evidence.sdmx.sdmxjson import MAX_JSON_BYTES, as_dict, as_list, as_text, name_of
from governed_evidence.sdmx.xml import clean

__all__ = [
    "EVENTS_BESIDE_ROWS",
    "EVENTS_PER_ROW",
    "MAX_DATASETS",
    "MAX_OBSERVATION_VALUES",
    "MAX_OUTLINE_VALUES",
    "event_limit",
    "read_json_data",
]

#: Values built for the outline (the structures list only the codes the message uses).
MAX_OUTLINE_VALUES = 200_000
#: Values in one observation (its measures and attribute indices).
MAX_OBSERVATION_VALUES = 2_000
#: Data sets in one message (providers send one).
MAX_DATASETS = 1_000
#: Events a pass may read per observation the caller allows (a key, an array, a value and a
#: few attribute indices are six; series add theirs), and for everything else (the header,
#: the structures, annotations): bulk anywhere is refused once these are spent.
EVENTS_PER_ROW = 12
EVENTS_BESIDE_ROWS = 1_000_000
#: The members SDMX-JSON data messages define at their top level (1.0 and 2.0).
_MESSAGE_MEMBERS = frozenset({"header", "meta", "data", "dataSets", "structure", "errors"})
#: Parts of a structure the rows never use, passed over rather than built.
_UNUSED = frozenset({"annotations", "links", "description", "descriptions"})
#: ``0:12:3``: one index per key position, bounded.
_KEY_RE = re.compile(r"[0-9]{1,7}(?::[0-9]{1,7}){0,63}")
_MEASURE = "OBS_VALUE"

Event = tuple[str, Any]
Add = Callable[[dict[str, str]], None]
Label = Callable[[str, str, str], None]


@dataclass
class _DataSetHead:
    structure: Any = 0
    attributes: Any = None
    #: Whether it has a ``series`` object (then its observations are the series').
    has_series: bool = False
    #: Attributes of series (by position) that come after their observations.
    late: dict[int, Any] = field(default_factory=dict)


@dataclass
class _Outline:
    v2: dict[str, Any] | None = None
    structure: Any = None
    datasets: list[_DataSetHead] | None = None
    v2_datasets: list[_DataSetHead] | None = None
    errors: Any = None


def _indices(key: str) -> list[int]:
    if key == "":
        return []
    if not _KEY_RE.fullmatch(key):
        raise UnusableResponseError("the provider's SDMX-JSON has a malformed series or observation key")
    return [int(part) for part in key.split(":")]


class _Level:
    """The components stated at one level (data set, series or observation) of a structure."""

    def __init__(self, components: Any) -> None:
        self.items = [c for c in as_list(components) if isinstance(c, dict) and isinstance(c.get("id"), str)]

    def value(self, position: int, index: Any) -> tuple[str, str, str] | None:
        """(component id, value, label) of the ``index``-th value of the ``position``-th component."""
        if not 0 <= position < len(self.items):
            return None
        component = self.items[position]
        values = as_list(component.get("values"))
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(values):
            return None
        value = as_dict(values[index])
        code = value.get("id")
        if isinstance(code, str):
            return str(component["id"]), clean(code), clean(name_of(value))
        # An uncoded attribute: 2.0 writes its value as "value", 1.0 as "name".
        text = value.get("value", value.get("name"))
        return str(component["id"]), as_text(text), ""


# -- pass 1: the outline ------------------------------------------------------------------


def _head(events: Events, first: Event, budget: Budget) -> _DataSetHead:
    head = _DataSetHead()
    for key in events.members(first):
        value = events.next()
        if key == "structure":
            head.structure = events.build(value, budget)
        elif key == "attributes":
            head.attributes = events.build(value, budget)
        elif key == "series" and value[0] == "start_map":
            head.has_series = True
            for position, _series_key in enumerate(events.members(value)):
                seen_observations = False
                for part in events.members(events.next()):
                    item = events.next()
                    if part == "attributes" and seen_observations:
                        head.late[position] = events.build(item, budget)
                    else:
                        seen_observations = seen_observations or part == "observations"
                        events.skip(item)
        else:
            events.skip(value)
    return head


def _heads(events: Events, first: Event, budget: Budget) -> list[_DataSetHead]:
    heads: list[_DataSetHead] = []
    for element in events.elements(first):
        if len(heads) >= MAX_DATASETS:
            raise UnusableResponseError("the provider's SDMX-JSON holds more data sets than any data message")
        budget.take()
        heads.append(_head(events, element, budget))
    return heads


def _outline(body: bytes, limit: int) -> _Outline:
    events = Events(body, limit)
    first = events.next()
    if first[0] != "start_map":
        raise UnusableResponseError("the provider's JSON is not an SDMX-JSON message")
    budget = Budget(MAX_OUTLINE_VALUES)
    out = _Outline()
    for key in events.members(first):
        if key not in _MESSAGE_MEMBERS:
            # A member no SDMX-JSON data message has: not a message this server knows how to read.
            raise UnusableResponseError("the provider's JSON has members an SDMX-JSON data message does not define")
        value = events.next()
        if key == "data" and value[0] == "start_map":
            out.v2 = {}
            for part in events.members(value):
                item = events.next()
                if part in ("structure", "structures"):
                    out.v2[part] = events.build(item, budget, drop=_UNUSED)
                elif part == "dataSets":
                    out.v2_datasets = _heads(events, item, budget)
                else:
                    events.skip(item)
        elif key == "structure":
            out.structure = events.build(value, budget, drop=_UNUSED)
        elif key == "dataSets":
            out.datasets = _heads(events, value, budget)
        elif key == "errors":
            out.errors = events.build(value, budget, drop=_UNUSED)
        else:
            events.skip(value)
    events.end()
    return out


# -- pass 2: the observations ---------------------------------------------------------------


class _DataSet:
    """One data set's structure, ready to turn keys and value lists into rows."""

    def __init__(self, head: _DataSetHead, structure: dict[str, Any], add: Add, label: Label) -> None:
        dims = as_dict(structure.get("dimensions"))
        attrs = as_dict(structure.get("attributes"))
        ds_dims, self.series_dims, self.obs_dims = (_Level(dims.get(k)) for k in ("dataSet", "series", "observation"))
        ds_attrs, self.series_attrs, self.obs_attrs = (
            _Level(attrs.get(k)) for k in ("dataSet", "series", "observation")
        )
        self.measures = [
            str(m["id"])
            for m in as_list(as_dict(structure.get("measures")).get("observation"))
            if isinstance(m, dict) and isinstance(m.get("id"), str)
        ] or [_MEASURE]
        self.add = add
        self.label = label
        self.head = head
        self.base: dict[str, str] = {}
        # A dimension stated once for the data set has a single value (its index is 0).
        for i in range(len(ds_dims.items)):
            self.put(self.base, ds_dims.value(i, 0))
        for i, value_index in enumerate(as_list(head.attributes)):
            self.put(self.base, ds_attrs.value(i, value_index))

    def put(self, row: dict[str, str], found: tuple[str, str, str] | None) -> None:
        if found is not None:
            column, value, text = found
            row[column] = value
            self.label(column, value, text)

    def series(self, indices: list[int], attributes: Any) -> dict[str, str]:
        prefix = dict(self.base)
        for position, value_index in enumerate(indices):
            self.put(prefix, self.series_dims.value(position, value_index))
        for position, value_index in enumerate(as_list(attributes)):
            self.put(prefix, self.series_attrs.value(position, value_index))
        return prefix

    def observation(self, prefix: dict[str, str], key: str, raw: Any) -> None:
        row = dict(prefix)
        for position, value_index in enumerate(_indices(key)):
            self.put(row, self.obs_dims.value(position, value_index))
        values = as_list(raw)
        for position, measure in enumerate(self.measures):
            row[measure] = as_text(values[position]) if position < len(values) else ""
        for position, value_index in enumerate(values[len(self.measures) :]):
            self.put(row, self.obs_attrs.value(position, value_index))
        self.add(row)


def _observations(events: Events, first: Event, dataset: _DataSet, prefix: dict[str, str]) -> None:
    budget = Budget(MAX_OBSERVATION_VALUES)
    for key in events.members(first):
        budget.left = MAX_OBSERVATION_VALUES
        dataset.observation(prefix, key, events.build(events.next(), budget))


def _series(events: Events, first: Event, dataset: _DataSet) -> None:
    budget = Budget(MAX_OBSERVATION_VALUES)
    for position, key in enumerate(events.members(first)):
        indices = _indices(key)  # a malformed key is refused even when the series has no observations
        attributes: Any = dataset.head.late.get(position)
        for part in events.members(events.next()):
            item = events.next()
            if part == "attributes" and position not in dataset.head.late:
                budget.left = MAX_OBSERVATION_VALUES
                attributes = events.build(item, budget)
            elif part == "observations":
                _observations(events, item, dataset, dataset.series(indices, attributes))
            else:
                events.skip(item)


def _read_datasets(events: Events, first: Event, datasets: list[_DataSet]) -> None:
    for position, element in enumerate(events.elements(first)):
        dataset = datasets[position]
        for key in events.members(element):
            value = events.next()
            if key == "series" and value[0] == "start_map":
                _series(events, value, dataset)
            elif key == "observations" and not dataset.head.has_series:
                _observations(events, value, dataset, dataset.base)
            else:
                events.skip(value)


def _rows(body: bytes, limit: int, v2: bool, datasets: list[_DataSet]) -> None:
    events = Events(body, limit)
    for key in events.members(events.next()):
        value = events.next()
        if v2 and key == "data" and value[0] == "start_map":
            for part in events.members(value):
                item = events.next()
                if part == "dataSets":
                    _read_datasets(events, item, datasets)
                else:
                    events.skip(item)
        elif not v2 and key == "dataSets":
            _read_datasets(events, value, datasets)
        else:
            events.skip(value)


def event_limit(max_rows: int) -> int:
    """Events one pass may read: what ``max_rows`` observations need, with the structures."""
    return EVENTS_PER_ROW * max_rows + EVENTS_BESIDE_ROWS


def read_json_data(body: bytes, add: Add, label: Label, *, max_rows: int) -> None:
    """Each observation of an SDMX-JSON 1.0 or 2.0 data message passed to ``add`` as a row.

    Raises
    ------
    UnusableResponseError
        Malformed JSON, a message that is not SDMX-JSON data (or has top-level members
        none has), or an SDMX-JSON error message.
    ResponseTooLargeError
        A message over :data:`~governed_evidence.sdmx.sdmxjson.MAX_JSON_BYTES`, or an outline
        or an observation larger than this module builds (rows are bounded by ``add``).
    """
    if len(body) > MAX_JSON_BYTES:
        raise ResponseTooLargeError(
            f"the provider's JSON message is larger than {MAX_JSON_BYTES} bytes; narrow the key or the period"
        )
    outline = _outline(body, event_limit(max_rows))
    if outline.v2 is not None:  # 2.0
        structures = [as_dict(s) for s in as_list(outline.v2.get("structures"))] or [
            as_dict(outline.v2.get("structure"))
        ]
        heads = outline.v2_datasets or []
    else:  # 1.0
        structures = [as_dict(outline.structure)]
        heads = outline.datasets or []
    if not heads:
        codes = [as_dict(e).get("code") for e in as_list(outline.errors)]
        if codes and 100 not in codes and "100" not in codes:
            raise UnusableResponseError("the provider answered with an SDMX-JSON error message")
        if not any(structures) and not codes:
            raise UnusableResponseError("the provider's JSON is not an SDMX-JSON data message")
        return
    datasets: list[_DataSet] = []
    for head in heads:
        index = head.structure
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(structures):
            index = 0
        datasets.append(_DataSet(head, structures[index], add, label))
    _rows(body, event_limit(max_rows), outline.v2 is not None, datasets)
