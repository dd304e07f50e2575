"""Why a ``get_data`` answer is empty, and which nearby keys do have data.

An empty table alone leaves an assistant guessing. With the dataset's availability (the
Actual constraint of a cached structure, else one ``/availableconstraint`` request where
the provider has it, spent from the same rate budget as any request), the answer says
which of these it is:

- a code of the key has no data at all: the dimension and the code are named;
- every code has data, but not in the requested period: the period that has data is given;
- every code has data on its own, but not this combination: said as such.

and suggests up to :data:`MAX_SUGGESTIONS` keys that differ from the asked one in a single
position: a code with data in place of one without, or, for a combination, one position
left empty (all codes). When the provider lists whole keys (a data key set), suggestions
are keys it lists. Availability per dimension cannot promise that a suggested combination
has data, and the hint says so. Codes are provider text; they are shown only if they are
SDMX identifiers, and at most a few.
"""

from __future__ import annotations

import re

from governed_evidence.errors import StatisticsError
from governed_evidence.logging import get_logger
from governed_evidence.sdmx.artefacts import Constraint, Dataflow, DataStructure, StructureMessage
from governed_evidence.sdmx.fetch import Fetcher
from governed_evidence.sdmx.parsed import ParsedResponses
from governed_evidence.sdmx.providers import Provider
from governed_evidence.sdmx.urls import availability_request
from governed_evidence.sdmx.validate import DatasetRef

__all__ = ["MAX_SUGGESTIONS", "explain_empty"]

log = get_logger("sdmx")

MAX_SUGGESTIONS = 3
#: Codes shown as alternatives for one dimension.
_MAX_ALTERNATIVES = 5
_CODE_RE = re.compile(r"[A-Za-z0-9_@$\-]{1,60}")
_GENERIC = (
    "No observations match this key and period. describe_dataset lists the codes that have data and "
    "the time coverage; widen the period or use fewer fixed positions."
)


def _availability(
    fetcher: Fetcher,
    parsed: ParsedResponses,
    provider: Provider,
    ref: DatasetRef,
    message: StructureMessage | None,
    flow: Dataflow | None,
) -> Constraint | None:
    """Codes with data for the whole flow: the cached structure's Actual constraint, else one request."""
    if message is not None:
        actual = [c for c in message.constraints_for(flow, "Actual") if c.key_values or c.keys]
        if actual:
            return actual[0]
    if not provider.availableconstraint:
        return None
    try:
        available, _ = fetcher.fetch(provider, availability_request(provider, ref), parsed.structure)
    except StatisticsError as exc:
        log.info("sdmx_empty_diagnosis_skipped", provider=provider.id, error=type(exc).__name__)
        return None
    found = [c for c in available.constraints_for(None, "Actual") if c.key_values or c.keys]
    return found[0] if found else None


def _year(period: str | None) -> int | None:
    return int(period[:4]) if period and period[:4].isdigit() else None


def _outside(constraint: Constraint, start: str | None, end: str | None) -> bool:
    """Whether the requested period lies wholly outside the one with data (compared by year)."""
    first, last = _year(constraint.time_start), _year(constraint.time_end)
    asked_start, asked_end = _year(start), _year(end)
    return bool(
        (asked_start is not None and last is not None and asked_start > last)
        or (asked_end is not None and first is not None and asked_end < first)
    )


def _shown(codes: list[str]) -> str:
    safe = [c for c in codes if _CODE_RE.fullmatch(c)][:_MAX_ALTERNATIVES]
    return "+".join(safe)


def explain_empty(
    fetcher: Fetcher,
    parsed: ParsedResponses,
    provider: Provider,
    ref: DatasetRef,
    key: str,
    start: str | None,
    end: str | None,
    message: StructureMessage | None,
    flow: Dataflow | None,
    dsd: DataStructure | None,
) -> list[str]:
    """Hints for an empty answer to ``key``: why, and up to three keys one position away that have data."""
    if dsd is None or key == "all":
        return [_GENERIC]
    constraint = _availability(fetcher, parsed, provider, ref, message, flow)
    if constraint is None:
        return [_GENERIC]
    dims = [d.id for d in dsd.dimensions]
    positions = [p.split("+") if p else [] for p in key.split(".")]
    if len(positions) != len(dims):
        return [_GENERIC]
    missing: list[tuple[int, list[str]]] = []
    for i, codes in enumerate(positions):
        with_data = constraint.key_values.get(dims[i])
        if with_data is None or not codes:
            continue
        present = set(with_data)
        absent = [c for c in codes if c not in present]
        if absent:
            missing.append((i, absent))
    hints: list[str] = []
    suggestions: list[str] = []
    period = ""
    if constraint.time_start or constraint.time_end:
        period = f"{(constraint.time_start or '?').split('T')[0]} to {(constraint.time_end or '?').split('T')[0]}"
    if missing:
        parts = [f"{dims[i]} {_shown(absent) or 'as given'}" for i, absent in missing]
        hints.append("No observations: these codes have no data in this dataset at all: " + "; ".join(parts) + ".")
        for i, _absent in missing:
            available = [c for c in constraint.key_values.get(dims[i], []) if _CODE_RE.fullmatch(c)]
            if available:
                hints.append(f"{dims[i]} codes that have data include {_shown(available)}.")
            for code in available:
                candidate = list(positions)
                candidate[i] = [code]
                suggestions.append(".".join("+".join(p) for p in candidate))
                if len(suggestions) >= MAX_SUGGESTIONS:
                    break
    elif period and _outside(constraint, start, end):
        hints.append(f"No observations in the requested period: this dataset has data from {period}.")
    else:
        hints.append(
            "No observations: each code of this key has data, but not in this combination"
            + (f" (the dataset's data run from {period})" if period else "")
            + "."
        )
        suggestions = _one_away(constraint, dims, positions)
    suggestions = list(dict.fromkeys(s for s in suggestions if s != key))[:MAX_SUGGESTIONS]
    if suggestions:
        hints.append(
            "Keys one position away to try: "
            + ", ".join(suggestions)
            + (
                " (each listed by the provider as having data)."
                if constraint.keys
                else " (codes with data per dimension; a combination may still be empty)."
            )
        )
    return hints


def _one_away(constraint: Constraint, dims: list[str], positions: list[list[str]]) -> list[str]:
    """Keys differing from ``positions`` in one place: the provider's listed keys, else one position widened."""
    out: list[str] = []
    if constraint.keys:
        for listed in constraint.keys:
            differ = [
                i for i, codes in enumerate(positions) if codes and dims[i] in listed and listed[dims[i]] not in codes
            ]
            if len(differ) == 1 and _CODE_RE.fullmatch(listed[dims[differ[0]]]):
                candidate = list(positions)
                candidate[differ[0]] = [listed[dims[differ[0]]]]
                out.append(".".join("+".join(p) for p in candidate))
            if len(out) >= MAX_SUGGESTIONS:
                return out
    for i, codes in enumerate(positions):
        if codes and len(out) < MAX_SUGGESTIONS:
            candidate = list(positions)
            candidate[i] = []
            out.append(".".join("+".join(p) for p in candidate))
    return out
