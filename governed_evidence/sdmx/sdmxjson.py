"""SDMX-JSON structure messages (2.0) read as a StructureMessage, and the helpers its readers share.

Providers that answer only in JSON (the ABS's and the IMF's new APIs among them, and any
provider whose ``data_accept`` asks for ``application/vnd.sdmx.data+json``) are readable
through this module and :mod:`~governed_evidence.sdmx.jsondata` (data messages); what comes
out is what the SDMX-ML readers produce, so the rest of the package does not know which
format a provider spoke.

Structures (2.0 ``data.dataflows``, ``dataStructures``, ``codelists``, ``conceptSchemes``,
``dataConstraints`` or 1.0-style ``contentConstraints``): references are URNs, read as
:func:`~governed_evidence.sdmx.structure.parse_urn` reads them.

Bounds. A structure message is read as a stream of events, one artefact at a time
(:mod:`~governed_evidence.sdmx.jsonstructure`), never decoded whole: its size is capped by
:data:`MAX_JSON_BYTES`, members a structure message does not define at its top level are
refused, what is not read is passed over unbuilt, what is built is bounded per artefact
and per code, and what is kept is bounded like the XML readers (codes by
:data:`~governed_evidence.sdmx.structure.MAX_CODES`, catalogue rows by
:data:`~governed_evidence.sdmx.catalogue.MAX_DATAFLOWS`, the memory of their text and index
words by :data:`~governed_evidence.sdmx.kept.MAX_KEPT_TEXT`). Data messages are streamed too
(:mod:`~governed_evidence.sdmx.jsondata`, under the same byte cap). Every text that is
kept passes :func:`~governed_evidence.sdmx.xml.clean`.
"""

from __future__ import annotations

from itertools import count
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
from governed_evidence.sdmx.catalogue import MAX_DATAFLOWS, CatalogueRow, catalogue_row, index_words
from governed_evidence.sdmx.isolated import Send
from governed_evidence.sdmx.jsonstructure import Group, Groups, read_groups
from governed_evidence.sdmx.kept import TextBudget, keep_constraint, keep_dataflow, keep_structure
from governed_evidence.sdmx.structure import CodeBudget, parse_urn
from governed_evidence.sdmx.xml import clean, plain_text

__all__ = [
    "MAX_JSON_BYTES",
    "PART_ITEMS",
    "as_dict",
    "as_list",
    "as_text",
    "name_of",
    "parse_json_catalogue",
    "parse_json_structure",
]

#: The largest JSON message read, structure or data.
MAX_JSON_BYTES = 16 * 1024 * 1024
#: Codes or catalogue rows a parse that sends its answer in parts (``send``) sends at once:
#: a few hundred KiB of text, where the whole answer may be tens of MB.
PART_ITEMS = 4096


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


#: Members of artefacts the structure readers never use, passed over at every level.
_UNUSED = frozenset({"links", "annotations", "description", "descriptions"})
#: ``data`` holds at least one of these in a structure message this server reads.
_STRUCTURE_GROUPS = ("dataflows", "dataStructures", "codelists", "conceptSchemes")


class _Codes:
    """A codelist's codes as they are read: id -> name, and how many elements were read.

    With ``send``, the codes go out every :data:`PART_ITEMS` as ``("codes", serial, codes)``,
    ``serial`` telling this list from another read for the same codelist (``codes`` written
    twice); ``("codelist", serial, None)`` once its codelist is read says which list it kept.
    """

    def __init__(self, send: Send | None = None, serial: int = 0) -> None:
        self.codes: dict[str, str] = {}
        self.read = 0
        self.send = send
        self.serial = serial

    def add(self, code: str, name: str) -> None:
        self.codes[code] = name
        if self.send is not None and len(self.codes) >= PART_ITEMS:
            self.flush()

    def flush(self) -> None:
        if self.send is not None and self.codes:
            self.send(("codes", self.serial, self.codes))
            self.codes = {}


def _check(found: Groups) -> None:
    if not found.data or not any(k in found.members for k in _STRUCTURE_GROUPS):
        raise UnusableResponseError("the provider's JSON is not an SDMX-JSON structure message")


def _too_large(body: bytes) -> None:
    if len(body) > MAX_JSON_BYTES:
        raise ResponseTooLargeError(
            f"the provider's JSON message is larger than {MAX_JSON_BYTES} bytes; narrow the key or the period"
        )


def parse_json_structure(body: bytes, send: Send | None = None) -> StructureMessage:
    """An SDMX-JSON 2.0 structure message as the SDMX-ML reader would have produced it.

    Read as a stream (:mod:`~governed_evidence.sdmx.jsonstructure`): each artefact is
    built alone and turned into what is kept at once, each code and concept alone. With
    ``send``, the codes are sent in parts as they are read and the codelists returned
    without them: :class:`~governed_evidence.sdmx.jsonparts.StructureParts` puts them back.

    Raises
    ------
    UnusableResponseError
        Malformed JSON, or JSON that is not an SDMX-JSON structure message.
    ResponseTooLargeError
        Over :data:`MAX_JSON_BYTES`, more than ``MAX_CODES`` items or ``MAX_KEPT_TEXT`` bytes
        of text, or an artefact larger than the stream reader builds.
    """
    _too_large(body)
    # Counts what is read as it is read, so a message with too much is refused before it is
    # all built (a member written twice counts each time); the size recorded is what is kept.
    budget = CodeBudget()
    serials = count()
    #: id(codelist) -> the serial of its codes, when they are sent (the codelists live to the end).
    sent: dict[int, int] = {}

    def dataflow(item: dict[str, Any], _: object) -> tuple[Dataflow, int]:
        flow = _dataflow(item)
        budget.take(1 + len(flow.annotations))
        keep_dataflow(budget, flow)
        return flow, 1 + len(flow.annotations)

    def structure(item: dict[str, Any], _: object) -> tuple[DataStructure, int]:
        dsd = _structure(item)
        size = 1 + len(dsd.dimensions) + len(dsd.attributes)
        budget.take(size)
        keep_structure(budget, dsd)
        return dsd, size

    def code(codes: _Codes, item: dict[str, Any]) -> None:
        budget.take(1)
        codes.read += 1
        if isinstance(item.get("id"), str):
            code, name = clean(item["id"]), clean(name_of(item))
            budget.keep(code, name)
            codes.add(code, name)

    def new_codes() -> _Codes:
        return _Codes(send, next(serials))

    def codelist(item: dict[str, Any], codes: _Codes) -> tuple[Codelist, int]:
        budget.take(1)
        name = clean(name_of(item))
        budget.keep(name)
        if send is not None:
            codes.flush()
            send(("codelist", codes.serial, None))
        found = Codelist(
            agency=str(item.get("agencyID", "")),
            id=str(item.get("id", "")),
            version=str(item.get("version", "")),
            name=name,
            codes=codes.codes,
            partial=item.get("isPartial") is True,
        )
        sent[id(found)] = codes.serial
        return found, 1 + codes.read

    def concept(concepts: list[tuple[str, str]], item: dict[str, Any]) -> None:
        budget.take(1)
        cid, name = str(item.get("id", "")), clean(name_of(item))
        budget.keep(cid, name)
        concepts.append((cid, name))

    def scheme(item: dict[str, Any], concepts: list[tuple[str, str]]) -> tuple[str, list[tuple[str, str]]]:
        return str(item.get("id", "")), concepts

    def constraint(item: dict[str, Any], _: object) -> tuple[Constraint, int]:
        found = _constraint(item)
        size = 1 + sum(len(v) for v in found.key_values.values()) + len(found.keys)
        budget.take(size)
        keep_constraint(budget, found)
        return found, size

    found = read_groups(
        body,
        {
            "dataflows": Group(dataflow),
            "dataStructures": Group(structure, drop=_UNUSED),
            "codelists": Group(codelist, drop=_UNUSED, items="codes", collect=new_codes, item=code),
            "conceptSchemes": Group(scheme, drop=_UNUSED, items="concepts", item=concept),
            "dataConstraints": Group(constraint, drop=_UNUSED),
            "contentConstraints": Group(constraint, drop=_UNUSED),
        },
    )
    _check(found)
    read = found.read
    message = StructureMessage()
    for group, kept in (
        ("dataflows", message.dataflows),
        ("dataStructures", message.structures),
        ("codelists", message.codelists),
        ("dataConstraints", message.constraints),
        ("contentConstraints", message.constraints),
    ):
        for artefact, size in read.get(group, []):
            kept.append(artefact)
            message.size += size
    for scheme_id, concepts in read.get("conceptSchemes", []):
        message.size += len(concepts)
        for cid, text in concepts:
            message.concepts[(scheme_id, cid)] = text
            message.concepts.setdefault(("", cid), text)
    if send is not None:
        send(("kept", [sent[id(c)] for c in message.codelists], None))
    return message


def parse_json_catalogue(body: bytes, send: Send | None = None) -> list[CatalogueRow]:
    """The dataflows of an SDMX-JSON 2.0 structure message, as catalogue rows.

    With ``send``, the rows are sent in parts as they are read and none returned:
    :class:`~governed_evidence.sdmx.jsonparts.CatalogueParts` puts them together.

    Raises
    ------
    UnusableResponseError
        Malformed JSON, or JSON that is not an SDMX-JSON structure message.
    ResponseTooLargeError
        Over :data:`MAX_JSON_BYTES`, more than ``MAX_DATAFLOWS`` dataflows or ``MAX_KEPT_TEXT``
        bytes of text and index words, or a dataflow larger than the stream reader builds.
    """
    _too_large(body)
    count = 0
    # The rows' text and their index words, counted as they are made (with ``send``: without,
    # the words are made later, from the rows returned).
    budget = TextBudget()
    # Rows not yet sent, and which reading of ``dataflows`` they are from (written twice,
    # the last reading counts).
    pending: list[CatalogueRow] = []
    reading = -1

    def flush() -> None:
        nonlocal pending
        if send is not None and pending:
            # With their words for the search index, made here rather than in the server.
            words = index_words(pending)
            budget.add(len(words[0]))
            send((reading, pending, words))
            pending = []

    def begin() -> None:
        nonlocal reading
        flush()
        reading += 1

    def row(item: dict[str, Any], _: object) -> CatalogueRow | None:
        nonlocal count
        count += 1
        if count > MAX_DATAFLOWS:
            raise ResponseTooLargeError("the catalogue lists more dataflows than this server reads")
        flow = _dataflow(item)
        found = catalogue_row(flow.agency, flow.id, flow.version or "latest", flow.name, flow.description)
        if found is not None:
            budget.keep(found.dataset_id, found.name, found.description)
        if send is None or found is None:
            return found
        pending.append(found)
        if len(pending) >= PART_ITEMS:
            flush()
        return None

    found = read_groups(body, {"dataflows": Group(row, begin=begin)})
    _check(found)
    if send is None:
        return [r for r in found.read.get("dataflows", []) if r is not None]
    flush()
    # Which reading's rows are the catalogue: none when ``data`` was written again without dataflows.
    send((reading if "dataflows" in found.read else None, None, None))
    return []
