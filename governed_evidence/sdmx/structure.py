"""SDMX-ML 2.1 and 3.0 structure messages parsed: dataflows, DSDs, codelists, concepts, constraints.

What a message holds, and how its references are resolved, is
:mod:`~governed_evidence.sdmx.artefacts`; this module reads the XML into it, and reads
the codes of an SDMX-ML ``Error`` message (:func:`error_codes`).

The message is streamed (:func:`governed_evidence.sdmx.xml.stream`): each dataflow, data
structure, constraint, code and concept is built alone, read, and let go, so memory
follows what is kept. What is kept is bounded too: :data:`MAX_CODES` counts every code,
concept, artefact, component and constraint value together.

SDMX-ML 3.0 is read by the same code: its namespaces are reported as the 2.1 ones
(:data:`~governed_evidence.sdmx.xml.V3_TO_V21`), and what 3.0 writes differently is read
here: references as URN text instead of ``<Ref>`` elements, ``DataConstraint`` with a
``role`` instead of ``ContentConstraint`` with a ``type``, and key values in the
structure namespace. Constraints are read in both of their shapes: cube regions (codes
per dimension, and attribute values) and data key sets (whole keys, as UNICEF sends).
"""

from __future__ import annotations

import re
from xml.etree.ElementTree import Element

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
from governed_evidence.sdmx.kept import TextBudget, keep_constraint, keep_dataflow, keep_structure
from governed_evidence.sdmx.xml import (
    COM,
    MES,
    STR,
    V3_TO_V21,
    XML_LANG,
    children,
    clean,
    first,
    local,
    localised,
    localised_text,
    plain_text,
    stream,
)

__all__ = ["MAX_CODES", "CodeBudget", "error_codes", "parse_structure", "parse_urn"]

#: Items kept from one message: codes across all codelists (Eurostat's GEO alone has
#: thousands), concepts, dataflows, structures, their components and constraint values.
#: The largest real codelists are of the order of 10,000-20,000 codes (CN8 about 10,000) and
#: the largest recorded message holds 6,405 items: 100,000 leaves five times the first and
#: fifteen times the second. It was 300,000; what a kept code costs the server as Python
#: strings (some 150 bytes each beside its text) took a 16 MiB message of 275,000 codes to
#: 3.4 times its size, where 100,000 longer ones, filling the same 16 MiB, cost 2.9.
MAX_CODES = 100_000
_POSITION_RE = re.compile(r"[0-9]{1,6}")
#: ``urn:sdmx:org.sdmx.infomodel.codelist.Codelist=ECB:CL_FREQ(1.0)``, with ``.ITEM`` for a
#: concept or code inside a scheme. Bounded: provider text.
_URN_RE = re.compile(
    r"urn:sdmx:org\.sdmx\.infomodel\.[A-Za-z]{1,40}\.[A-Za-z]{1,40}="
    r"(?P<agency>[A-Za-z0-9_@$.\-]{1,260}):(?P<id>[A-Za-z0-9_@$\-]{1,100})"
    r"\((?P<version>[A-Za-z0-9_.+*~\-]{1,40})\)(?:\.(?P<item>[A-Za-z0-9_@$.\-]{1,300}))?"
)
_STRUCTURE = f"{{{MES}}}Structure"
_STRUCTURES = f"{{{MES}}}Structures"
_ERROR_MESSAGE = f"{{{MES}}}ErrorMessage"
_CODELIST = f"{{{STR}}}Codelist"
_NAME = f"{{{COM}}}Name"
_CONCEPT_SCHEME = f"{{{STR}}}ConceptScheme"
#: Artefact → the group it is listed in (matched by local name, as providers vary).
_ARTEFACTS = {
    f"{{{STR}}}Dataflow": "Dataflows",
    f"{{{STR}}}DataStructure": "DataStructures",
    f"{{{STR}}}ContentConstraint": "Constraints",
    f"{{{STR}}}DataConstraint": "DataConstraints",
}
#: Inside a codelist or concept scheme, each item (and the scheme's own name) is a unit.
_ITEMS = {
    _CODELIST: frozenset({f"{{{STR}}}Code", _NAME}),
    _CONCEPT_SCHEME: frozenset({f"{{{STR}}}Concept"}),
}


def parse_urn(text: str) -> Ref | None:
    """An SDMX URN as a reference (an item's URN names its scheme as the parent); None if it is not one."""
    match = _URN_RE.fullmatch(text.strip())
    if match is None:
        return None
    if match["item"]:
        return Ref(
            id=match["item"],
            agency=match["agency"],
            parent_id=match["id"],
            parent_version=match["version"],
        )
    return Ref(id=match["id"], agency=match["agency"], version=match["version"])


def _ref(container: Element | None) -> Ref | None:
    if container is None:
        return None
    ref = container.find("Ref")
    if ref is None:
        # Some providers qualify Ref with a namespace; match it by local name.
        ref = next((e for e in container if local(e.tag) == "Ref"), None)
    if ref is None:
        # SDMX-ML 3.0 (and 2.1's <URN> child) write the reference as a URN.
        urn = next((e for e in container if local(e.tag) == "URN"), None)
        text = (urn.text if urn is not None else container.text) or ""
        return parse_urn(text) if text.strip().startswith("urn:") else None
    if not ref.get("id"):
        return None
    return Ref(
        id=ref.get("id", ""),
        agency=ref.get("agencyID"),
        version=ref.get("version"),
        parent_id=ref.get("maintainableParentID"),
        parent_version=ref.get("maintainableParentVersion"),
    )


def _annotations(element: Element) -> dict[str, str]:
    out: dict[str, str] = {}
    block = first(element, COM, "Annotations")
    if block is None:
        return out
    for ann in children(block, COM, "Annotation"):
        type_el = first(ann, COM, "AnnotationType")
        kind = (type_el.text or "").strip() if type_el is not None else ""
        title_el = first(ann, COM, "AnnotationTitle")
        title = (title_el.text or "").strip() if title_el is not None else ""
        if not title:
            title = localised(ann, "AnnotationText")
        if kind and kind not in out:
            out[kind] = title
    return out


def _component(element: Element) -> Component:
    position = element.get("position")
    representation = first(element, STR, "LocalRepresentation")
    enumeration = first(representation, STR, "Enumeration") if representation is not None else None
    return Component(
        id=element.get("id", ""),
        # ASCII digits only: str.isdigit() accepts "²", which int() then rejects.
        position=int(position) if position and _POSITION_RE.fullmatch(position) else None,
        concept=_ref(first(element, STR, "ConceptIdentity")),
        codelist=_ref(enumeration),
    )


def _structure(element: Element) -> DataStructure:
    components = first(element, STR, "DataStructureComponents")
    dims: list[Component] = []
    time_dim: Component | None = None
    attrs: list[Component] = []
    if components is not None:
        dim_list = first(components, STR, "DimensionList")
        if dim_list is not None:
            for child in dim_list:
                name = local(child.tag)
                if name == "Dimension":
                    dims.append(_component(child))
                elif name == "TimeDimension":
                    time_dim = _component(child)
        attr_list = first(components, STR, "AttributeList")
        if attr_list is not None:
            attrs = [_component(a) for a in children(attr_list, STR, "Attribute")]
    # Position is authoritative for key order; document order is the fallback.
    ordered = sorted(enumerate(dims), key=lambda p: (p[1].position if p[1].position is not None else 10_000, p[0]))
    return DataStructure(
        agency=element.get("agencyID", ""),
        id=element.get("id", ""),
        version=element.get("version", ""),
        name=localised(element),
        dimensions=[d for _, d in ordered],
        time_dimension=time_dim,
        attributes=attrs,
    )


def _values(element: Element) -> list[str]:
    return [(v.text or "").strip() for v in element if local(v.tag) == "Value" and (v.text or "").strip()]


def _time_range(element: Element) -> tuple[str | None, str | None]:
    start_el = next((e for e in element if local(e.tag) == "StartPeriod"), None)
    end_el = next((e for e in element if local(e.tag) == "EndPeriod"), None)
    start = (start_el.text or "").strip() if start_el is not None else None
    end = (end_el.text or "").strip() if end_el is not None else None
    return start or None, end or None


def _constraint(element: Element) -> Constraint:
    attached: list[Ref] = []
    attachment = first(element, STR, "ConstraintAttachment")
    if attachment is not None:
        for target in attachment:
            ref = _ref(target)
            if ref is not None:
                attached.append(ref)
    key_values: dict[str, list[str]] = {}
    attribute_values: dict[str, list[str]] = {}
    keys: list[dict[str, str]] = []
    start = end = None
    regions = children(element, STR, "CubeRegion")
    key_sets = children(element, STR, "DataKeySet")
    # The first included region says what the constraint includes; an excluding one alone
    # is kept as such (and then not used to list codes, see constraints_for).
    region = next((r for r in regions if r.get("include", "true").lower() != "false"), None)
    include = region is not None or not regions
    if region is not None:
        for part in region:
            name = local(part.tag)
            if name == "KeyValue":
                time_range = next((e for e in part if local(e.tag) == "TimeRange"), None)
                if time_range is not None:
                    start, end = _time_range(time_range)
                else:
                    key_values[part.get("id", "")] = _values(part)
            elif name in ("Attribute", "Component"):
                # Attribute selections: 2.1 <com:Attribute>, 3.0 <str:Component>.
                attribute_values[part.get("id", "")] = _values(part)
    included = [k for k in key_sets if k.get("isIncluded", "true").lower() != "false"]
    if not regions and key_sets and not included:
        include = False
    for key_set in included:
        for key in key_set:
            if local(key.tag) != "Key":
                continue
            one: dict[str, str] = {}
            for kv in key:
                if local(kv.tag) == "KeyValue" and kv.get("id"):
                    values = _values(kv)
                    if values:
                        one[kv.get("id", "")] = values[0]
            if one:
                keys.append(one)
                for dim, code in one.items():
                    codes = key_values.setdefault(dim, [])
                    if code not in codes:
                        codes.append(code)
    return Constraint(
        agency=element.get("agencyID", ""),
        id=element.get("id", ""),
        # 2.1 says type=, 3.0 says role=.
        type=element.get("type") or element.get("role") or "Actual",
        attached=attached,
        include=include,
        key_values=key_values,
        time_start=start,
        time_end=end,
        attribute_values=attribute_values,
        keys=keys,
    )


def _dataflow(element: Element) -> Dataflow:
    return Dataflow(
        agency=element.get("agencyID", ""),
        id=element.get("id", ""),
        version=element.get("version", ""),
        name=localised(element),
        description=plain_text(localised_text(element, "Description")),
        structure=_ref(first(element, STR, "Structure")),
        annotations=_annotations(element),
    )


def error_codes(body: bytes) -> list[str]:
    """Codes of an SDMX-ML ``Error`` message (e.g. 100 = no results); the first few, streamed.

    Raises
    ------
    UnusableResponseError
        Unsafe or malformed XML.
    """
    codes: list[str] = []
    for kind, tag, attrib, _element in stream(body, watch=lambda tag: tag == _ERROR_MESSAGE):
        if kind == "start" and tag == _ERROR_MESSAGE:
            codes.append(attrib.get("code", ""))
            if len(codes) >= 10:
                break
    return codes


class CodeBudget(TextBudget):
    """Codes read so far from one message, across all its codelists (bounded by MAX_CODES), and their text."""

    def __init__(self) -> None:
        super().__init__()
        self.used = 0

    def take(self, count: int) -> None:
        self.used += count
        if self.used > MAX_CODES:
            raise ResponseTooLargeError(
                f"the structure lists more codes than this server reads ({MAX_CODES:,} codes and other items)"
            )


def _units(parent: str, tag: str) -> bool:
    group = _ARTEFACTS.get(tag)
    if group is not None:
        return local(parent) == group
    items = _ITEMS.get(parent)
    return items is not None and tag in items


def _watched(tag: str) -> bool:
    return tag in _ITEMS or tag == _STRUCTURES


def parse_structure(body: bytes) -> StructureMessage:
    """Read an SDMX-ML 2.1 or 3.0 Structure message.

    Raises
    ------
    UnusableResponseError
        Not a structure message, unsafe, or malformed.
    ResponseTooLargeError
        More than :data:`MAX_CODES` items, or more text than ``MAX_KEPT_TEXT``.
    """
    message = StructureMessage()
    budget = CodeBudget()
    root_seen = False
    #: The codelist or concept scheme being read: its tag, attributes, and items so far.
    scheme: tuple[str, dict[str, str]] | None = None
    codes: dict[str, str] = {}
    scheme_name = ""
    for kind, tag, attrib, element in stream(body, units=_units, watch=_watched, rename=V3_TO_V21):
        if not root_seen:
            root_seen = True
            if kind != "start" or tag != _STRUCTURE:
                # The root's name is provider text, so it is not repeated; an SDMX Error
                # message is named in this package's words.
                got = ", got an SDMX error message" if tag == f"{{{MES}}}Error" else ""
                raise UnusableResponseError(f"expected an SDMX-ML structure message{got}")
            continue
        if kind == "start" and tag in _ITEMS:
            scheme, codes, scheme_name = (tag, attrib), {}, ""
        elif kind == "end" and tag in _ITEMS and scheme is not None:
            if tag == _CODELIST:
                budget.take(1)
                budget.keep(scheme_name)
                message.codelists.append(
                    Codelist(
                        agency=scheme[1].get("agencyID", ""),
                        id=scheme[1].get("id", ""),
                        version=scheme[1].get("version", ""),
                        name=scheme_name,
                        codes=codes,
                        partial=scheme[1].get("isPartial", "false").lower() == "true",
                    )
                )
            scheme = None
        elif element is not None:
            _add(message, budget, tag, element, scheme, codes)
            # A scheme's name in English where it has one, else its first name.
            if tag == _NAME and (not scheme_name or element.get(XML_LANG) == "en"):
                scheme_name = clean(element.text or "")
    message.size = budget.used
    return message


def _add(
    message: StructureMessage,
    budget: CodeBudget,
    tag: str,
    element: Element,
    scheme: tuple[str, dict[str, str]] | None,
    codes: dict[str, str],
) -> None:
    name = local(tag)
    if name == "Dataflow":
        flow = _dataflow(element)
        budget.take(1 + len(flow.annotations))
        keep_dataflow(budget, flow)
        message.dataflows.append(flow)
    elif name == "DataStructure":
        dsd = _structure(element)
        budget.take(1 + len(dsd.dimensions) + len(dsd.attributes))
        keep_structure(budget, dsd)
        message.structures.append(dsd)
    elif name in ("ContentConstraint", "DataConstraint"):
        constraint = _constraint(element)
        budget.take(
            1
            + len(constraint.attached)
            + sum(len(v) for v in constraint.key_values.values())
            + sum(len(v) for v in constraint.attribute_values.values())
            + sum(len(k) for k in constraint.keys)
        )
        keep_constraint(budget, constraint)
        message.constraints.append(constraint)
    elif name == "Code" and scheme is not None:
        budget.take(1)
        code, label = element.get("id", ""), localised(element)
        budget.keep(code, label)
        codes[code] = label
    elif name == "Concept" and scheme is not None:
        budget.take(1)
        cid, label = element.get("id", ""), localised(element)
        budget.keep(cid, label)
        message.concepts[(scheme[1].get("id", ""), cid)] = label
        message.concepts.setdefault(("", cid), label)
