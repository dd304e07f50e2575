"""What an SDMX 2.1 structure message holds: dataflows, DSDs, codelists, concepts, constraints.

Only what describing a dataset needs is kept (the parser is
:mod:`~governed_evidence.sdmx.structure`). Dimensions are listed in key order (their
``position``), the time dimension separately. References are resolved the way providers
use them: exact agency/id/version first, then the same id in any version (Eurostat sends
two versions of GEO in one message; the DSD names the one it uses).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "Codelist",
    "Component",
    "Constraint",
    "DataStructure",
    "Dataflow",
    "Ref",
    "StructureMessage",
]


@dataclass(frozen=True)
class Ref:
    """A ``<Ref>`` to another artefact (``parent_*`` for items inside a scheme)."""

    id: str
    agency: str | None = None
    version: str | None = None
    parent_id: str | None = None
    parent_version: str | None = None


@dataclass
class Codelist:
    agency: str
    id: str
    version: str
    name: str
    #: Code id → label, in the provider's order.
    codes: dict[str, str]
    #: Eurostat's ``detail=referencepartial`` marks lists cut down to the codes in use.
    partial: bool = False


@dataclass(frozen=True)
class Component:
    """A dimension, time dimension or attribute of a DSD."""

    id: str
    position: int | None
    concept: Ref | None
    codelist: Ref | None


@dataclass
class DataStructure:
    agency: str
    id: str
    version: str
    name: str
    #: Key order.
    dimensions: list[Component]
    time_dimension: Component | None
    attributes: list[Component]


@dataclass
class Dataflow:
    agency: str
    id: str
    version: str
    name: str
    description: str
    structure: Ref | None
    #: AnnotationType → AnnotationTitle (or text); carries OECD DEFAULT selections and
    #: Eurostat OBS_PERIOD_OVERALL_OLDEST/LATEST.
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass
class Constraint:
    """A content constraint: Actual (codes that have data) or Allowed (codes permitted).

    Providers state one in two shapes, and both end up in ``key_values``: a cube region
    lists codes per dimension (the OECD, the ECB), a data key set lists whole keys
    (UNICEF), whose codes are gathered per dimension here while the keys themselves are
    kept in ``keys`` (which combinations exist, for explaining an empty result).
    """

    agency: str
    id: str
    type: str
    #: Dataflows (or other artefacts) it is attached to.
    attached: list[Ref]
    include: bool
    #: Dimension id → codes, for the first included cube region or the included data key sets.
    key_values: dict[str, list[str]]
    time_start: str | None = None
    time_end: str | None = None
    #: Attribute id → the values a cube region allows or reports (e.g. OBS_STATUS A, E).
    attribute_values: dict[str, list[str]] = field(default_factory=dict)
    #: Whole keys of an included data key set (dimension id → code), in the provider's order.
    keys: list[dict[str, str]] = field(default_factory=list)


@dataclass
class StructureMessage:
    dataflows: list[Dataflow] = field(default_factory=list)
    structures: list[DataStructure] = field(default_factory=list)
    codelists: list[Codelist] = field(default_factory=list)
    #: (scheme id, concept id) → name, plus ("", concept id) for lookups without a scheme.
    concepts: dict[tuple[str, str], str] = field(default_factory=dict)
    constraints: list[Constraint] = field(default_factory=list)
    #: Items kept (see :data:`~governed_evidence.sdmx.structure.MAX_CODES`): what a memo of
    #: parsed messages weighs them by.
    size: int = 0

    def dataflow(self, flow_id: str, agency: str | None = None) -> Dataflow | None:
        matches = [d for d in self.dataflows if d.id.upper() == flow_id.upper()]
        exact = [d for d in matches if agency in (None, "all") or d.agency == agency]
        found = exact or matches
        return found[0] if found else None

    def structure_for(self, flow: Dataflow | None) -> DataStructure | None:
        if flow is not None and flow.structure is not None:
            ref = flow.structure
            for dsd in self.structures:
                if dsd.id == ref.id and (ref.agency in (None, dsd.agency)) and ref.version in (None, dsd.version):
                    return dsd
            for dsd in self.structures:
                if dsd.id == ref.id:
                    return dsd
        return self.structures[0] if len(self.structures) == 1 else None

    def codelist(self, ref: Ref | None) -> Codelist | None:
        if ref is None:
            return None
        same_id = [c for c in self.codelists if c.id == ref.id]
        for cl in same_id:
            if ref.agency in (None, cl.agency) and ref.version in (None, cl.version):
                return cl
        return same_id[0] if same_id else None

    def concept_name(self, component: Component) -> str:
        ref = component.concept
        if ref is not None:
            name = self.concepts.get((ref.parent_id or "", ref.id)) or self.concepts.get(("", ref.id))
            if name:
                return name
        return self.concepts.get(("", component.id), "")

    def constraints_for(self, flow: Dataflow | None, kind: str) -> list[Constraint]:
        """Constraints of ``kind`` attached to ``flow`` (all of that kind when the flow is unknown)."""
        found = [c for c in self.constraints if c.type == kind and c.include]
        if flow is None:
            return found
        return [c for c in found if not c.attached or any(r.id == flow.id for r in c.attached)]
