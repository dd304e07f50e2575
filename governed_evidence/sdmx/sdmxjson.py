"""SDMX-JSON messages read: data (1.0 and 2.0) as rows, structures (2.0) as a StructureMessage.

Providers that answer only in JSON (the ABS's and the IMF's new APIs among them, and any
provider whose ``data_accept`` asks for ``application/vnd.sdmx.data+json``) are readable
through this module; what comes out is what the SDMX-ML readers produce, so the rest of
the package does not know which format a provider spoke.

- Data: every dimension and attribute value is an index into the message's
  ``structure`` (1.0: top level; 2.0: ``data.structures[dataSet.structure]``), at data set,
  series or observation level; series keys and observation keys are ``0:1:2`` indices in
  key order. A missing index is an empty cell, never a guess.
- Structures (2.0 ``data.dataflows``, ``dataStructures``, ``codelists``,
  ``conceptSchemes``, ``dataConstraints`` or 1.0-style ``contentConstraints``): references
  are URNs, read as :func:`~governed_evidence.sdmx.structure.parse_urn` reads them.

Bounds. The standard library has no streaming JSON parser, so a JSON message is decoded
whole: its size is capped by :data:`MAX_JSON_BYTES` (below the byte caps of XML
structures, which are streamed), nesting deeper than Python's parser allows is refused,
and what is kept is bounded like the XML readers (codes by
:data:`~governed_evidence.sdmx.structure.MAX_CODES`, rows by the caller's ``max_rows``).
Every text that is kept passes :func:`~governed_evidence.sdmx.xml.clean`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from governed_evidence.errors import ResponseTooLargeError, UnusableResponseError
from governed_evidence.sdmx.artefacts import (
    Codelist,
    Component,
    Constraint,
    Dataflow,
    DataStructure,
    Ref,
    StructureMessage,
)
from governed_evidence.sdmx.catalogue import MAX_DATAFLOWS, CatalogueRow, catalogue_row
from governed_evidence.sdmx.structure import CodeBudget, parse_urn
from governed_evidence.sdmx.xml import clean, plain_text

__all__ = ["MAX_JSON_BYTES", "parse_json_catalogue", "parse_json_structure", "read_json_data"]

#: A JSON message is decoded whole, so it is held to this many bytes (see the module docstring).
MAX_JSON_BYTES = 16 * 1024 * 1024
#: ``0:12:3``: one index per key position, bounded.
_KEY_RE = re.compile(r"[0-9]{1,7}(?::[0-9]{1,7}){0,63}")
_MEASURE = "OBS_VALUE"


def _load(body: bytes) -> dict[str, Any]:
    if len(body) > MAX_JSON_BYTES:
        raise ResponseTooLargeError(
            f"the provider's JSON message is larger than {MAX_JSON_BYTES} bytes; narrow the key or the period"
        )
    try:
        doc = json.loads(body)
    except RecursionError:
        raise UnusableResponseError("the provider's JSON nests deeper than any SDMX-JSON message") from None
    except (ValueError, UnicodeDecodeError):
        # ValueError covers malformed JSON and integers longer than Python converts.
        raise UnusableResponseError("the provider's response is not valid JSON") from None
    if not isinstance(doc, dict):
        raise UnusableResponseError("the provider's JSON is not an SDMX-JSON message")
    return doc


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str:
    """A scalar as the text a CSV or XML message would have carried."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, str):
        return clean(value)
    return ""


def _name(item: dict[str, Any], key: str = "name") -> str:
    """The English text of ``name``/``names`` (1.0 has only ``name``), else the first one."""
    names = _dict(item.get(key + "s"))
    text = names.get("en")
    if not isinstance(text, str):
        text = (
            item.get(key)
            if isinstance(item.get(key), str)
            else next((v for v in names.values() if isinstance(v, str)), "")
        )
    return str(text or "")


# -- data -----------------------------------------------------------------------------------


class _Level:
    """The components stated at one level (data set, series or observation) of a structure."""

    def __init__(self, components: Any) -> None:
        self.items = [c for c in _list(components) if isinstance(c, dict) and isinstance(c.get("id"), str)]

    def value(self, position: int, index: Any) -> tuple[str, str, str] | None:
        """(component id, value, label) of the ``index``-th value of the ``position``-th component."""
        if not 0 <= position < len(self.items):
            return None
        component = self.items[position]
        values = _list(component.get("values"))
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(values):
            return None
        value = _dict(values[index])
        code = value.get("id")
        if isinstance(code, str):
            return str(component["id"]), clean(code), clean(_name(value))
        # An uncoded attribute: 2.0 writes its value as "value", 1.0 as "name".
        text = value.get("value", value.get("name"))
        return str(component["id"]), _str(text), ""


def _indices(key: str) -> list[int]:
    if key == "":
        return []
    if not _KEY_RE.fullmatch(key):
        raise UnusableResponseError("the provider's SDMX-JSON has a malformed series or observation key")
    return [int(part) for part in key.split(":")]


def read_json_data(body: bytes, add: Callable[[dict[str, str]], None], label: Callable[[str, str, str], None]) -> None:
    """Each observation of an SDMX-JSON 1.0 or 2.0 data message passed to ``add`` as a row.

    Raises
    ------
    UnusableResponseError
        Malformed JSON, a message that is not SDMX-JSON data, or an SDMX-JSON error message.
    ResponseTooLargeError
        A message over :data:`MAX_JSON_BYTES` (rows are bounded by ``add``).
    """
    doc = _load(body)
    data = doc.get("data")
    if isinstance(data, dict):  # 2.0
        structures = [_dict(s) for s in _list(data.get("structures"))] or [_dict(data.get("structure"))]
        datasets = _list(data.get("dataSets"))
    else:  # 1.0
        structures = [_dict(doc.get("structure"))]
        datasets = _list(doc.get("dataSets"))
    if not datasets:
        codes = [_dict(e).get("code") for e in _list(doc.get("errors"))]
        if codes and 100 not in codes and "100" not in codes:
            raise UnusableResponseError("the provider answered with an SDMX-JSON error message")
        if not any(structures) and not codes:
            raise UnusableResponseError("the provider's JSON is not an SDMX-JSON data message")
        return
    for raw in datasets:
        dataset = _dict(raw)
        index = dataset.get("structure", 0)
        if not isinstance(index, int) or not 0 <= index < len(structures):
            index = 0
        _read_dataset(dataset, structures[index], add, label)


def _read_dataset(
    dataset: dict[str, Any],
    structure: dict[str, Any],
    add: Callable[[dict[str, str]], None],
    label: Callable[[str, str, str], None],
) -> None:
    dims = _dict(structure.get("dimensions"))
    attrs = _dict(structure.get("attributes"))
    ds_dims, series_dims, obs_dims = (_Level(dims.get(k)) for k in ("dataSet", "series", "observation"))
    ds_attrs, series_attrs, obs_attrs = (_Level(attrs.get(k)) for k in ("dataSet", "series", "observation"))
    measures = [
        str(m["id"])
        for m in _list(_dict(structure.get("measures")).get("observation"))
        if isinstance(m, dict) and isinstance(m.get("id"), str)
    ] or [_MEASURE]

    def put(row: dict[str, str], found: tuple[str, str, str] | None) -> None:
        if found is not None:
            column, value, text = found
            row[column] = value
            label(column, value, text)

    base: dict[str, str] = {}
    # A dimension stated once for the data set has a single value (its index is 0).
    for i in range(len(ds_dims.items)):
        put(base, ds_dims.value(i, 0))
    for i, value_index in enumerate(_list(dataset.get("attributes"))):
        put(base, ds_attrs.value(i, value_index))

    def observations(container: dict[str, Any], prefix: dict[str, str]) -> None:
        for key, raw in _dict(container.get("observations")).items():
            row = dict(prefix)
            for position, value_index in enumerate(_indices(str(key))):
                put(row, obs_dims.value(position, value_index))
            values = _list(raw)
            for position, measure in enumerate(measures):
                row[measure] = _str(values[position]) if position < len(values) else ""
            for position, value_index in enumerate(values[len(measures) :]):
                put(row, obs_attrs.value(position, value_index))
            add(row)

    series = dataset.get("series")
    if isinstance(series, dict):
        for key, raw in series.items():
            one = _dict(raw)
            prefix = dict(base)
            for position, value_index in enumerate(_indices(str(key))):
                put(prefix, series_dims.value(position, value_index))
            for position, value_index in enumerate(_list(one.get("attributes"))):
                put(prefix, series_attrs.value(position, value_index))
            observations(one, prefix)
    else:
        observations(dataset, base)


# -- structures -----------------------------------------------------------------------------


def _urn_ref(value: Any) -> Ref | None:
    return parse_urn(value) if isinstance(value, str) else None


def _component(item: dict[str, Any]) -> Component:
    position = item.get("position")
    representation = _dict(item.get("localRepresentation"))
    return Component(
        id=str(item.get("id", "")),
        position=position if isinstance(position, int) and not isinstance(position, bool) else None,
        concept=_urn_ref(item.get("conceptIdentity")),
        codelist=_urn_ref(representation.get("enumeration")),
    )


def _structure(item: dict[str, Any]) -> DataStructure:
    components = _dict(item.get("dataStructureComponents"))
    dim_list = _dict(components.get("dimensionList"))
    dims = [_component(d) for d in _list(dim_list.get("dimensions")) if isinstance(d, dict)]
    times = [_component(d) for d in _list(dim_list.get("timeDimensions")) if isinstance(d, dict)]
    if not times and isinstance(dim_list.get("timeDimension"), dict):
        times = [_component(dim_list["timeDimension"])]
    attrs = [
        _component(a) for a in _list(_dict(components.get("attributeList")).get("attributes")) if isinstance(a, dict)
    ]
    ordered = sorted(enumerate(dims), key=lambda p: (p[1].position if p[1].position is not None else 10_000, p[0]))
    return DataStructure(
        agency=str(item.get("agencyID", "")),
        id=str(item.get("id", "")),
        version=str(item.get("version", "")),
        name=clean(_name(item)),
        dimensions=[d for _, d in ordered],
        time_dimension=times[0] if times else None,
        attributes=attrs,
    )


def _dataflow(item: dict[str, Any]) -> Dataflow:
    annotations: dict[str, str] = {}
    for ann in _list(item.get("annotations")):
        ann = _dict(ann)
        kind = ann.get("type")
        if isinstance(kind, str) and kind and kind not in annotations:
            title = ann.get("title") if isinstance(ann.get("title"), str) else _name(ann, "text")
            annotations[clean(kind)] = clean(str(title or ""))
    return Dataflow(
        agency=str(item.get("agencyID", "")),
        id=str(item.get("id", "")),
        version=str(item.get("version", "")),
        name=clean(_name(item)),
        description=plain_text(_name(item, "description")),
        structure=_urn_ref(item.get("structure")),
        annotations=annotations,
    )


#: A constraint's kind as the SDMX-ML readers name it (the Fusion Metadata Registry writes ``"actual"``).
_CONSTRAINT_KINDS = {"actual": "Actual", "allowed": "Allowed"}


def _members(values: Any) -> list[str]:
    """A cube region's values: plain strings, or objects with ``value`` (and validity dates, not kept)."""
    found = (_str(_dict(v).get("value")) if isinstance(v, dict) else _str(v) for v in _list(values))
    return [v for v in found if v]


def _constraint(item: dict[str, Any]) -> Constraint:
    attachment = _dict(item.get("constraintAttachment"))
    attached = [r for v in attachment.values() for r in map(_urn_ref, _list(v)) if r is not None]
    key_values: dict[str, list[str]] = {}
    attribute_values: dict[str, list[str]] = {}
    keys: list[dict[str, str]] = []
    start = end = None
    regions = [_dict(r) for r in _list(item.get("cubeRegions"))]
    region = next((r for r in regions if r.get("isIncluded", r.get("include", True)) is not False), None)
    include = region is not None or not regions
    if region is not None:
        for kv in _list(region.get("keyValues")):
            kv = _dict(kv)
            dim = str(kv.get("id", ""))
            time_range = _dict(kv.get("timeRange"))
            if time_range:
                start = _str(_dict(time_range.get("startPeriod")).get("period")) or None
                end = _str(_dict(time_range.get("endPeriod")).get("period")) or None
            else:
                key_values[dim] = _members(kv.get("values"))
        for part in _list(region.get("components")) + _list(region.get("attributes")):
            part = _dict(part)
            attribute_values[str(part.get("id", ""))] = _members(part.get("values"))
    for key_set in _list(item.get("dataKeySets")):
        key_set = _dict(key_set)
        if key_set.get("isIncluded", True) is False:
            continue
        for key in _list(key_set.get("keys")):
            one = {
                str(_dict(kv).get("id", "")): _str(_dict(kv).get("value"))
                for kv in _list(_dict(key).get("keyValues"))
                if _str(_dict(kv).get("value"))
            }
            if one:
                keys.append(one)
                for dim, code in one.items():
                    codes = key_values.setdefault(dim, [])
                    if code not in codes:
                        codes.append(code)
    kind = _str(item.get("type") or item.get("role")) or "Actual"
    return Constraint(
        agency=str(item.get("agencyID", "")),
        id=str(item.get("id", "")),
        type=_CONSTRAINT_KINDS.get(kind.lower(), kind),
        attached=attached,
        include=include,
        key_values=key_values,
        time_start=start,
        time_end=end,
        attribute_values=attribute_values,
        keys=keys,
    )


def _structures_of(body: bytes) -> dict[str, Any]:
    doc = _load(body)
    data = doc.get("data")
    if not isinstance(data, dict) or not any(
        k in data for k in ("dataflows", "dataStructures", "codelists", "conceptSchemes")
    ):
        raise UnusableResponseError("the provider's JSON is not an SDMX-JSON structure message")
    return data


def parse_json_structure(body: bytes) -> StructureMessage:
    """An SDMX-JSON 2.0 structure message as the SDMX-ML reader would have produced it.

    Raises
    ------
    UnusableResponseError
        Malformed JSON, or JSON that is not an SDMX-JSON structure message.
    ResponseTooLargeError
        Over :data:`MAX_JSON_BYTES`, or more than ``MAX_CODES`` items.
    """
    data = _structures_of(body)
    message = StructureMessage()
    budget = CodeBudget()
    for item in map(_dict, _list(data.get("dataflows"))):
        flow = _dataflow(item)
        budget.take(1 + len(flow.annotations))
        message.dataflows.append(flow)
    for item in map(_dict, _list(data.get("dataStructures"))):
        dsd = _structure(item)
        budget.take(1 + len(dsd.dimensions) + len(dsd.attributes))
        message.structures.append(dsd)
    for item in map(_dict, _list(data.get("codelists"))):
        codes: dict[str, str] = {}
        for code in map(_dict, _list(item.get("codes"))):
            budget.take(1)
            if isinstance(code.get("id"), str):
                codes[clean(code["id"])] = clean(_name(code))
        budget.take(1)
        message.codelists.append(
            Codelist(
                agency=str(item.get("agencyID", "")),
                id=str(item.get("id", "")),
                version=str(item.get("version", "")),
                name=clean(_name(item)),
                codes=codes,
                partial=item.get("isPartial") is True,
            )
        )
    for item in map(_dict, _list(data.get("conceptSchemes"))):
        scheme = str(item.get("id", ""))
        for concept in map(_dict, _list(item.get("concepts"))):
            budget.take(1)
            cid, text = str(concept.get("id", "")), clean(_name(concept))
            message.concepts[(scheme, cid)] = text
            message.concepts.setdefault(("", cid), text)
    for group in ("dataConstraints", "contentConstraints"):
        for item in map(_dict, _list(data.get(group))):
            constraint = _constraint(item)
            budget.take(1 + sum(len(v) for v in constraint.key_values.values()) + len(constraint.keys))
            message.constraints.append(constraint)
    message.size = budget.used
    return message


def parse_json_catalogue(body: bytes) -> list[CatalogueRow]:
    """The dataflows of an SDMX-JSON 2.0 structure message, as catalogue rows.

    Raises
    ------
    UnusableResponseError
        Malformed JSON, or JSON that is not an SDMX-JSON structure message.
    ResponseTooLargeError
        More than ``MAX_DATAFLOWS`` dataflows.
    """
    rows: list[CatalogueRow] = []
    flows = _list(_structures_of(body).get("dataflows"))
    if len(flows) > MAX_DATAFLOWS:
        raise ResponseTooLargeError("the catalogue lists more dataflows than this server reads")
    for item in map(_dict, flows):
        flow = _dataflow(item)
        row = catalogue_row(flow.agency, flow.id, flow.version or "latest", flow.name, flow.description)
        if row is not None:
            rows.append(row)
    return rows
