"""What ``describe_dataset`` says about a dataset: its dimensions, their codes, its time coverage.

Dimensions come in key order, each with its codes, those that actually have data first.
Which codes have data is read from the best source the provider offers, in this order
(the answer names it as ``codes_source``):

1. an Actual content constraint sent with the structure (the OECD's ``references=all``);
2. the ``/availableconstraint`` endpoint, where the provider has one;
3. a partial codelist, cut down to the codes in use (Eurostat's ``referencepartial``);
4. an Allowed constraint (codes permitted, not codes with data: the ECB);
5. the full codelists, with nothing marked.

A constraint may state its codes as cube regions (codes per dimension) or as data key
sets (whole keys, as UNICEF does); both narrow the codes listed
(:class:`~governed_evidence.sdmx.artefacts.Constraint`). Attribute values a cube region
names (OBS_STATUS A, E) are listed with their attribute.

Time coverage comes from the constraint, else from dataflow annotations (Eurostat). The
example key is the provider's default selection where it publishes one.
"""

from __future__ import annotations

from governed_evidence.errors import InvalidRequestError, NotFoundError, StatisticsError
from governed_evidence.logging import get_logger
from governed_evidence.sdmx.artefacts import Component, Constraint, Dataflow, DataStructure, StructureMessage
from governed_evidence.sdmx.fetch import FIND_DATASET_HINT, Fetcher, provenance
from governed_evidence.sdmx.models import (
    AttributeInfo,
    CodeInfo,
    CodesSource,
    DatasetDescription,
    DimensionInfo,
    TimeCoverage,
)
from governed_evidence.sdmx.parsed import ParsedResponses
from governed_evidence.sdmx.providers import Provider
from governed_evidence.sdmx.urls import availability_request, structure_request
from governed_evidence.sdmx.validate import MAX_CODES_LIMIT, DatasetRef

__all__ = ["describe"]

log = get_logger("sdmx")


def describe(
    fetcher: Fetcher, parsed: ParsedResponses, provider: Provider, ref: DatasetRef, max_codes: int
) -> DatasetDescription:
    """Dimensions in key order with their codes (codes with data first), time coverage and an example key.

    ``ref`` is resolved (it names an agency); ``max_codes`` is already checked.

    Raises
    ------
    NotFoundError
        When the provider returns no data structure for the dataset.
    """
    message, fetched = fetcher.fetch(provider, structure_request(provider, ref), parsed.structure)
    flow = message.dataflow(ref.id, ref.agency)
    dsd = message.structure_for(flow)
    if dsd is None:
        raise NotFoundError(
            f"provider {provider.id} returned no data structure for {ref.text}; use search_datasets to find a dataset",
            hint=FIND_DATASET_HINT,
        )
    hints: list[str] = []
    actual, source = _codes_with_data(fetcher, parsed, provider, ref, message, flow, dsd, hints)
    dimensions = [
        _dimension(i + 1, dim.id, message, dsd, actual, source, max_codes) for i, dim in enumerate(dsd.dimensions)
    ]
    coverage = _time_coverage(flow, actual)
    key_template = ".".join(d.id for d in dsd.dimensions)
    example = _example_key(flow, dimensions)
    hints.append(
        f"A key has {len(dimensions)} positions in the order {key_template}; leave a position empty for all "
        "codes and join several codes with '+'."
    )
    if any(d.truncated for d in dimensions):
        hints.append(
            f"Some dimensions list only {max_codes} codes (codes with data first); raise max_codes "
            f"(up to {MAX_CODES_LIMIT}) to see more."
        )
    if source == "allowed_constraint":
        hints.append(
            f"{provider.id} reports which codes are allowed, not which have data; an allowed combination may be empty."
        )
    resolved_version = flow.version if flow is not None and flow.version else ref.version
    resolved_agency = flow.agency if flow is not None and flow.agency else (ref.agency or "")
    return DatasetDescription(
        provider=provider.id,
        dataset=f"{resolved_agency},{ref.id if flow is None else flow.id},{resolved_version}",
        id=ref.id if flow is None else flow.id,
        agency=resolved_agency,
        version=resolved_version,
        name=(flow.name if flow is not None else "") or dsd.name,
        description=flow.description if flow is not None else "",
        dimensions=dimensions,
        time_dimension=dsd.time_dimension.id if dsd.time_dimension is not None else None,
        time_coverage=coverage,
        attributes=[_attribute(a, message, actual, source, max_codes) for a in dsd.attributes],
        codes_source=source,
        key_template=key_template,
        example_key=example,
        **provenance(fetched, hints),
    )


def _codes_with_data(
    fetcher: Fetcher,
    parsed: ParsedResponses,
    provider: Provider,
    ref: DatasetRef,
    message: StructureMessage,
    flow: Dataflow | None,
    dsd: DataStructure,
    hints: list[str],
) -> tuple[Constraint | None, CodesSource]:
    """The constraint that says which codes to list (if any), and what kind of source it is.

    Asks ``/availableconstraint`` when the structure carries no Actual constraint and the
    provider has one; when that fails, a hint says so and the next source is used.
    """
    actual = message.constraints_for(flow, "Actual")
    if actual:
        return actual[0], "actual_constraint"
    if provider.availableconstraint:
        try:
            available, _ = fetcher.fetch(provider, availability_request(provider, ref), parsed.structure)
            found = available.constraints_for(None, "Actual")
            if found:
                return found[0], "available_constraint"
        except (StatisticsError, NotFoundError, InvalidRequestError) as exc:
            log.info("sdmx_availability_skipped", provider=provider.id, error=type(exc).__name__)
            hints.append("The provider's availability of codes could not be read; codes are not marked.")
    codelists = [message.codelist(d.codelist) for d in dsd.dimensions]
    if any(cl is not None and cl.partial for cl in codelists):
        return None, "partial_codelist"
    allowed = message.constraints_for(flow, "Allowed")
    with_codes = [c for c in allowed if c.key_values]
    if with_codes:
        return with_codes[0], "allowed_constraint"
    return None, "codelist_only"


def _dimension(
    position: int,
    dim_id: str,
    message: StructureMessage,
    dsd: DataStructure,
    constraint: Constraint | None,
    source: CodesSource,
    max_codes: int,
) -> DimensionInfo:
    """One dimension with its first ``max_codes`` codes, those with data first where that is known."""
    component = next(d for d in dsd.dimensions if d.id == dim_id)
    codelist = message.codelist(component.codelist)
    names = dict(codelist.codes) if codelist is not None else {}
    constrained = constraint.key_values.get(dim_id) if constraint is not None else None
    if source in ("actual_constraint", "available_constraint") and constrained is not None:
        with_data = list(dict.fromkeys(constrained))
        ordered = with_data + [c for c in names if c not in set(with_data)]
        flags: dict[str, bool | None] = {c: c in set(with_data) for c in ordered}
        count: int | None = len(with_data)
    elif source == "partial_codelist" and codelist is not None and codelist.partial:
        ordered = list(names)
        flags = dict.fromkeys(ordered, True)
        count = len(ordered)
    elif source == "allowed_constraint" and constrained is not None:
        # Codes outside an Allowed constraint cannot be asked for: leave them out.
        ordered = list(dict.fromkeys(constrained))
        flags = dict.fromkeys(ordered, None)
        count = None
    else:
        ordered = list(names)
        flags = dict.fromkeys(ordered, None)
        count = None
    codes = [CodeInfo(id=c, name=names.get(c) or None, has_data=flags[c]) for c in ordered[:max_codes]]
    return DimensionInfo(
        position=position,
        id=dim_id,
        name=message.concept_name(component) or (codelist.name if codelist is not None else None) or None,
        codes=codes,
        total_codes=len(ordered),
        codes_with_data=count,
        truncated=len(ordered) > max_codes,
    )


def _attribute(
    component: Component, message: StructureMessage, constraint: Constraint | None, source: CodesSource, max_codes: int
) -> AttributeInfo:
    """An attribute with the values a cube region of the constraint names for it (OECD, UNICEF and
    .Stat Suite constraints list e.g. the OBS_STATUS values in use), labelled from its codelist."""
    values = constraint.attribute_values.get(component.id, []) if constraint is not None else []
    codelist = message.codelist(component.codelist)
    names = codelist.codes if codelist is not None else {}
    reports_data = source in ("actual_constraint", "available_constraint")
    codes = [
        CodeInfo(id=v, name=names.get(v) or None, has_data=True if reports_data else None)
        for v in list(dict.fromkeys(values))[:max_codes]
    ]
    return AttributeInfo(id=component.id, name=message.concept_name(component) or None, codes=codes)


def _period(value: str | None) -> str | None:
    """``2025-06-30T00:00:00`` → ``2025-06-30`` (constraints carry timestamps for periods)."""
    if not value:
        return None
    return value.split("T", 1)[0]


def _time_coverage(flow: Dataflow | None, constraint: Constraint | None) -> TimeCoverage | None:
    """The periods with data, from the constraint or else the dataflow's annotations; None when unknown."""
    if constraint is not None and (constraint.time_start or constraint.time_end):
        return TimeCoverage(start=_period(constraint.time_start), end=_period(constraint.time_end), source="constraint")
    if flow is not None:
        # Eurostat states coverage as dataflow annotations.
        start = flow.annotations.get("OBS_PERIOD_OVERALL_OLDEST")
        end = flow.annotations.get("OBS_PERIOD_OVERALL_LATEST")
        if start or end:
            return TimeCoverage(start=start or None, end=end or None, source="annotation")
    return None


def _example_key(flow: Dataflow | None, dimensions: list[DimensionInfo]) -> str:
    """The provider's default selection where it publishes one; else fix only single-code dimensions."""
    defaults: dict[str, str] = {}
    if flow is not None:
        for part in flow.annotations.get("DEFAULT", "").split(","):
            dim, _, code = part.partition("=")
            if dim and code:
                defaults[dim.strip()] = code.strip()
    positions: list[str] = []
    for d in dimensions:
        usable = [c.id for c in d.codes if c.has_data is not False]
        default = defaults.get(d.id)
        if default and (default in usable or d.truncated):
            positions.append(default)
        elif len(usable) == 1 and not d.truncated:
            positions.append(usable[0])
        else:
            positions.append("")
    if positions and all(p == "" for p in positions):
        # An all-wildcard key can be huge; fix the first dimension that has a code.
        for i, d in enumerate(dimensions):
            usable = [c.id for c in d.codes if c.has_data is not False]
            if usable:
                positions[i] = usable[0]
                break
    return ".".join(positions)
