"""The SDMX-JSON structure reader as it was before it streamed: each message decoded whole.

Kept unchanged (``governed_evidence/sdmx/sdmxjson.py`` before ADR 0017 covered structures)
so that ``test_json_structure_stream.py`` can check the streamed reader gives the same
values on every recorded message. Not used by the package.
"""

from __future__ import annotations

import json
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

__all__ = [
    "MAX_JSON_BYTES",
    "as_dict",
    "as_list",
    "as_text",
    "name_of",
    "parse_json_catalogue",
    "parse_json_structure",
]

#: The largest JSON message read (a structure message is decoded whole; see the module docstring).
MAX_JSON_BYTES = 16 * 1024 * 1024


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


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` if it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def as_text(value: Any) -> str:
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


def name_of(item: dict[str, Any], key: str = "name") -> str:
    """The English text of ``name``/``names`` (1.0 has only ``name``), else the first one."""
    names = as_dict(item.get(key + "s"))
    text = names.get("en")
    if not isinstance(text, str):
        text = (
            item.get(key)
            if isinstance(item.get(key), str)
            else next((v for v in names.values() if isinstance(v, str)), "")
        )
    return str(text or "")


# -- structures -----------------------------------------------------------------------------


def _urn_ref(value: Any) -> Ref | None:
    return parse_urn(value) if isinstance(value, str) else None


def _component(item: dict[str, Any]) -> Component:
    position = item.get("position")
    representation = as_dict(item.get("localRepresentation"))
    return Component(
        id=str(item.get("id", "")),
        position=position if isinstance(position, int) and not isinstance(position, bool) else None,
        concept=_urn_ref(item.get("conceptIdentity")),
        codelist=_urn_ref(representation.get("enumeration")),
    )


def _structure(item: dict[str, Any]) -> DataStructure:
    components = as_dict(item.get("dataStructureComponents"))
    dim_list = as_dict(components.get("dimensionList"))
    dims = [_component(d) for d in as_list(dim_list.get("dimensions")) if isinstance(d, dict)]
    times = [_component(d) for d in as_list(dim_list.get("timeDimensions")) if isinstance(d, dict)]
    if not times and isinstance(dim_list.get("timeDimension"), dict):
        times = [_component(dim_list["timeDimension"])]
    attrs = [
        _component(a)
        for a in as_list(as_dict(components.get("attributeList")).get("attributes"))
        if isinstance(a, dict)
    ]
    ordered = sorted(enumerate(dims), key=lambda p: (p[1].position if p[1].position is not None else 10_000, p[0]))
    return DataStructure(
        agency=str(item.get("agencyID", "")),
        id=str(item.get("id", "")),
        version=str(item.get("version", "")),
        name=clean(name_of(item)),
        dimensions=[d for _, d in ordered],
        time_dimension=times[0] if times else None,
        attributes=attrs,
    )


def _dataflow(item: dict[str, Any]) -> Dataflow:
    annotations: dict[str, str] = {}
    for ann in as_list(item.get("annotations")):
        ann = as_dict(ann)
        kind = ann.get("type")
        if isinstance(kind, str) and kind and kind not in annotations:
            title = ann.get("title") if isinstance(ann.get("title"), str) else name_of(ann, "text")
            annotations[clean(kind)] = clean(str(title or ""))
    return Dataflow(
        agency=str(item.get("agencyID", "")),
        id=str(item.get("id", "")),
        version=str(item.get("version", "")),
        name=clean(name_of(item)),
        description=plain_text(name_of(item, "description")),
        structure=_urn_ref(item.get("structure")),
        annotations=annotations,
    )


#: A constraint's kind as the SDMX-ML readers name it (the Fusion Metadata Registry writes ``"actual"``).
_CONSTRAINT_KINDS = {"actual": "Actual", "allowed": "Allowed"}


def _members(values: Any) -> list[str]:
    """A cube region's values: plain strings, or objects with ``value`` (and validity dates, not kept)."""
    found = (as_text(as_dict(v).get("value")) if isinstance(v, dict) else as_text(v) for v in as_list(values))
    return [v for v in found if v]


def _constraint(item: dict[str, Any]) -> Constraint:
    attachment = as_dict(item.get("constraintAttachment"))
    attached = [r for v in attachment.values() for r in map(_urn_ref, as_list(v)) if r is not None]
    key_values: dict[str, list[str]] = {}
    attribute_values: dict[str, list[str]] = {}
    keys: list[dict[str, str]] = []
    start = end = None
    regions = [as_dict(r) for r in as_list(item.get("cubeRegions"))]
    region = next((r for r in regions if r.get("isIncluded", r.get("include", True)) is not False), None)
    include = region is not None or not regions
    if region is not None:
        for kv in as_list(region.get("keyValues")):
            kv = as_dict(kv)
            dim = str(kv.get("id", ""))
            time_range = as_dict(kv.get("timeRange"))
            if time_range:
                start = as_text(as_dict(time_range.get("startPeriod")).get("period")) or None
                end = as_text(as_dict(time_range.get("endPeriod")).get("period")) or None
            else:
                key_values[dim] = _members(kv.get("values"))
        for part in as_list(region.get("components")) + as_list(region.get("attributes")):
            part = as_dict(part)
            attribute_values[str(part.get("id", ""))] = _members(part.get("values"))
    for key_set in as_list(item.get("dataKeySets")):
        key_set = as_dict(key_set)
        if key_set.get("isIncluded", True) is False:
            continue
        for key in as_list(key_set.get("keys")):
            one = {
                str(as_dict(kv).get("id", "")): as_text(as_dict(kv).get("value"))
                for kv in as_list(as_dict(key).get("keyValues"))
                if as_text(as_dict(kv).get("value"))
            }
            if one:
                keys.append(one)
                for dim, code in one.items():
                    codes = key_values.setdefault(dim, [])
                    if code not in codes:
                        codes.append(code)
    kind = as_text(item.get("type") or item.get("role")) or "Actual"
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
    for item in map(as_dict, as_list(data.get("dataflows"))):
        flow = _dataflow(item)
        budget.take(1 + len(flow.annotations))
        message.dataflows.append(flow)
    for item in map(as_dict, as_list(data.get("dataStructures"))):
        dsd = _structure(item)
        budget.take(1 + len(dsd.dimensions) + len(dsd.attributes))
        message.structures.append(dsd)
    for item in map(as_dict, as_list(data.get("codelists"))):
        codes: dict[str, str] = {}
        for code in map(as_dict, as_list(item.get("codes"))):
            budget.take(1)
            if isinstance(code.get("id"), str):
                codes[clean(code["id"])] = clean(name_of(code))
        budget.take(1)
        message.codelists.append(
            Codelist(
                agency=str(item.get("agencyID", "")),
                id=str(item.get("id", "")),
                version=str(item.get("version", "")),
                name=clean(name_of(item)),
                codes=codes,
                partial=item.get("isPartial") is True,
            )
        )
    for item in map(as_dict, as_list(data.get("conceptSchemes"))):
        scheme = str(item.get("id", ""))
        for concept in map(as_dict, as_list(item.get("concepts"))):
            budget.take(1)
            cid, text = str(concept.get("id", "")), clean(name_of(concept))
            message.concepts[(scheme, cid)] = text
            message.concepts.setdefault(("", cid), text)
    for group in ("dataConstraints", "contentConstraints"):
        for item in map(as_dict, as_list(data.get(group))):
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
    flows = as_list(_structures_of(body).get("dataflows"))
    if len(flows) > MAX_DATAFLOWS:
        raise ResponseTooLargeError("the catalogue lists more dataflows than this server reads")
    for item in map(as_dict, flows):
        flow = _dataflow(item)
        row = catalogue_row(flow.agency, flow.id, flow.version or "latest", flow.name, flow.description)
        if row is not None:
            rows.append(row)
    return rows
