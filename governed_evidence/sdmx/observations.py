"""What ``get_data`` returns: a dataset's observations for a key, as a compact, labelled table.

A key's length is checked against a cached structure before anything is downloaded, so
a mistake costs no download budget. Columns that hold one value on every row are lifted
out of the table (``constant_columns``) and empty ones dropped; codes get their labels
from the response where the provider sent them (SDMX-CSV with labels), else from the
cached structure's codelists. An empty selection is an empty table with hints saying why
and which nearby keys have data (:mod:`~governed_evidence.sdmx.emptiness`).
"""

from __future__ import annotations

import re

from governed_evidence.errors import InvalidRequestError
from governed_evidence.sdmx.artefacts import DataStructure, StructureMessage
from governed_evidence.sdmx.data import DataTable, ordered_columns
from governed_evidence.sdmx.emptiness import explain_empty
from governed_evidence.sdmx.fetch import Fetcher, provenance
from governed_evidence.sdmx.formats import Format
from governed_evidence.sdmx.models import DataResponse
from governed_evidence.sdmx.parsed import ParsedResponses
from governed_evidence.sdmx.providers import Provider
from governed_evidence.sdmx.resolve import peek_structure
from governed_evidence.sdmx.urls import data_request
from governed_evidence.sdmx.validate import MAX_ROWS_LIMIT, DatasetRef

__all__ = ["observations"]

#: What a unit multiplier may look like when repeated to a caller.
_UNIT_MULT_RE = re.compile(r"[0-9]{1,2}")
_FORMAT_NAMES: dict[Format, str] = {
    "csv": "sdmx-csv",
    "generic": "sdmx-ml-generic",
    "structurespecific": "sdmx-ml-structure-specific",
    "json": "sdmx-json",
}


def observations(
    fetcher: Fetcher,
    parsed: ParsedResponses,
    provider: Provider,
    ref: DatasetRef,
    key: str,
    start: str | None,
    end: str | None,
    max_rows: int,
) -> DataResponse:
    """Observations for ``key`` as a compact table with constant columns lifted out and a citable URL.

    ``ref`` is resolved; ``key``, the periods and ``max_rows`` are already checked.

    Raises
    ------
    InvalidRequestError
        When a cached structure shows the key has the wrong number of positions.
    """
    peeked = peek_structure(fetcher, parsed, provider, ref)
    dsd = peeked[0].structure_for(peeked[1]) if peeked is not None else None
    if dsd is not None and key != "all" and len(key.split(".")) != len(dsd.dimensions):
        # Caught here rather than by the provider, so a mistake costs no download budget.
        raise InvalidRequestError(
            f"the key has {len(key.split('.'))} positions but {ref.id} has {len(dsd.dimensions)} dimensions "
            f"({'.'.join(d.id for d in dsd.dimensions)}); leave a position empty for all codes"
        )
    request = data_request(provider, ref, key, start, end)
    (table, fmt), fetched = fetcher.fetch(provider, request, lambda e: parsed.table(provider, e, max_rows))
    dims = [d.id for d in dsd.dimensions] if dsd is not None else None
    columns = [c for c in ordered_columns(table.columns, dims) if c not in table.constant and c not in table.empty]
    rows = [[table.value(c, row.get(c, "")) for c in columns] for row in table.rows]
    labels = _labels(table, columns, peeked[0] if peeked is not None else None, dsd)
    hints: list[str] = []
    if table.total_rows == 0:
        message, flow = peeked if peeked is not None else (None, None)
        hints.extend(explain_empty(fetcher, parsed, provider, ref, key, start, end, message, flow, dsd))
    elif len(rows) < table.total_rows:
        hints.append(
            f"Showing the first {len(rows)} of {table.total_rows} rows; narrow the key or the period, or raise "
            f"max_rows (up to {MAX_ROWS_LIMIT})."
        )
    unit_mult = table.constant.get("UNIT_MULT")
    if unit_mult and _UNIT_MULT_RE.fullmatch(unit_mult) and unit_mult != "0":
        hints.append(f"UNIT_MULT={unit_mult}: values are in units of 10^{unit_mult}.")
    return DataResponse(
        provider=provider.id,
        dataset=ref.text,
        key=key,
        start_period=start,
        end_period=end,
        columns=columns,
        rows=rows,
        constant_columns=dict(table.constant),
        labels=labels,
        total_rows=table.total_rows,
        returned_rows=len(rows),
        truncated=len(rows) < table.total_rows,
        format=_FORMAT_NAMES.get(fmt, "none") if fmt is not None else "none",  # type: ignore[arg-type]
        **provenance(fetched, hints),
    )


def _labels(
    table: DataTable, columns: list[str], message: StructureMessage | None, dsd: DataStructure | None
) -> dict[str, dict[str, str]]:
    """Labels of the codes used in the served columns and the constant ones: sent ones first, then codelists'."""
    used: dict[str, set[str]] = {c: {v} for c, v in table.constant.items()}
    for row in table.rows:
        for c in columns:
            value = row.get(c, "")
            if value:
                used.setdefault(c, set()).add(value)
    components = {c.id: c for c in ([*dsd.dimensions, *dsd.attributes] if dsd is not None else [])}
    labels: dict[str, dict[str, str]] = {}
    for column, codes in used.items():
        sent = table.labels.get(column, {})
        codelist = message.codelist(components[column].codelist) if message and column in components else None
        known = codelist.codes if codelist is not None else {}
        found = {code: sent.get(code) or known.get(code, "") for code in sorted(codes)}
        found = {k: v for k, v in found.items() if v}
        if found:
            labels[column] = found
    return labels
