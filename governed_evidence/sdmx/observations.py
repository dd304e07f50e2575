"""What ``get_data`` returns: a dataset's observations for a key, as a compact, labelled table.

A key's length is checked against a cached structure before anything is downloaded, so
a mistake costs no download budget. Columns that hold one value on every row are lifted
out of the table (``constant_columns``) and empty ones dropped; codes get their labels
from the response where the provider sent them (SDMX-CSV with labels), else from the
cached structure's codelists. An empty selection is an empty table with hints saying why
and which nearby keys have data (:mod:`~governed_evidence.sdmx.emptiness`).

Structure-specific data writes a group's key and its attributes alike as XML attributes,
so its groups are read with the data structure's dimension ids: those of the cached
structure, else, only when the answer has such groups, of the structure fetched through
the fetch path (cached, spent from the structure budget). Failing that, the table comes
without the groups' attributes and a hint says so.

Asked for ``labels``, the answer puts each code's label beside it (``REF_AREA`` then
``REF_AREA_label``, in the rows and in ``constant_columns``), fetching the dataset's
structure through the fetch path (cached, spent from the structure budget) when neither
the response nor the cache has the codelists; failing that, the table comes without them
and a hint says so. Labels are provider text: whitespace is collapsed, each is cut to
:data:`MAX_LABEL_CHARS`, and the label columns of the rows may add at most
:data:`LABEL_BUDGET_CHARS` characters; a column beyond that keeps its labels in the compact
``labels`` mapping instead, and a hint says so.
"""

from __future__ import annotations

import re

from governed_evidence.errors import ErrorCode, InvalidRequestError, NotFoundError, StatisticsError
from governed_evidence.sdmx.artefacts import DataStructure, StructureMessage
from governed_evidence.sdmx.cache import CacheEntry
from governed_evidence.sdmx.data import OBS_VALUE, TIME_PERIOD, DataTable, ordered_columns
from governed_evidence.sdmx.emptiness import explain_empty
from governed_evidence.sdmx.fetch import KEY_HINT, Fetcher, provenance
from governed_evidence.sdmx.formats import Format
from governed_evidence.sdmx.models import DataResponse
from governed_evidence.sdmx.parsed import ParsedResponses
from governed_evidence.sdmx.providers import Provider
from governed_evidence.sdmx.resolve import peek_structure
from governed_evidence.sdmx.urls import data_request, structure_request
from governed_evidence.sdmx.validate import MAX_ROWS_LIMIT, DatasetRef

__all__ = ["LABEL_BUDGET_CHARS", "LABEL_SUFFIX", "MAX_LABEL_CHARS", "observations"]

#: A label column is named after its code column with this suffix (REF_AREA_label).
LABEL_SUFFIX = "_label"
#: Longest label served beside a code (provider text; longer ones are cut with an ellipsis).
MAX_LABEL_CHARS = 80
#: Most characters the label columns may add to the rows of one answer (about 6,000 tokens).
LABEL_BUDGET_CHARS = 24_000

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
    labels: bool = False,
) -> DataResponse:
    """Observations for ``key`` as a compact table with constant columns lifted out and a citable URL.

    ``ref`` is resolved; ``key``, the periods and ``max_rows`` are already checked. With
    ``labels``, each labelled code column is followed by its ``_label`` column.

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
            f"({'.'.join(d.id for d in dsd.dimensions)}); leave a position empty for all codes",
            hint=KEY_HINT,
        )
    request = data_request(provider, ref, key, start, end)
    dimensions = _dimension_ids(dsd)
    (table, fmt), fetched = fetcher.fetch(provider, request, lambda e: parsed.table(provider, e, max_rows, dimensions))
    hints: list[str] = []
    message = peeked[0] if peeked is not None else None
    structure = _StructureRequest(fetcher, parsed, provider, ref)
    if table.unread_groups:
        message, dsd, table = _with_groups(
            structure, parsed, provider, ref, fetched.entry, max_rows, table, message, hints
        )
    # Labels the provider sent are its answer for this table (a code without one is labelled
    # by itself); without them, and without a cached structure, the structure is asked for.
    if labels and message is None and not table.labels and _has_codes(table):
        message = structure.get(hints, "Codes are shown without labels", "describe_dataset names the codes")
        dsd = _data_structure(message, ref)
    dims = [d.id for d in dsd.dimensions] if dsd is not None else None
    columns = [c for c in ordered_columns(table.columns, dims) if c not in table.constant and c not in table.empty]
    rows = [[table.value(c, row.get(c, "")) for c in columns] for row in table.rows]
    found = _labels(table, columns, message, dsd)
    constant = dict(table.constant)
    if labels:
        columns, rows, constant, found = _beside(columns, rows, constant, found, hints)
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
    response = DataResponse(
        provider=provider.id,
        dataset=ref.text,
        key=key,
        start_period=start,
        end_period=end,
        columns=columns,
        rows=rows,
        constant_columns=constant,
        labels=found,
        total_rows=table.total_rows,
        returned_rows=len(rows),
        truncated=len(rows) < table.total_rows,
        format=_FORMAT_NAMES.get(fmt, "none") if fmt is not None else "none",  # type: ignore[arg-type]
        **provenance(fetched, hints),
    )
    response._body_sha256 = fetched.entry.body_sha256
    return response


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


def _has_codes(table: DataTable) -> bool:
    """Whether the table has a column other than the period and the value (one a label could name)."""
    return table.total_rows > 0 and any(c not in (TIME_PERIOD, OBS_VALUE) for c in table.columns)


class _StructureRequest:
    """The dataset's structure through the fetch path, asked for at most once per answer: the
    groups and the labels may both need it, and a request that failed is not sent again."""

    def __init__(self, fetcher: Fetcher, parsed: ParsedResponses, provider: Provider, ref: DatasetRef) -> None:
        self._fetcher, self._parsed, self._provider, self._ref = fetcher, parsed, provider, ref
        self._asked = False
        self._message: StructureMessage | None = None
        self._failure: ErrorCode | None = None

    def get(self, hints: list[str], without: str, then: str) -> StructureMessage | None:
        """The structure, or None and a hint saying what the answer is ``without`` and what
        ``then`` does once the structure can be fetched."""
        if not self._asked:
            self._asked = True
            request = structure_request(self._provider, self._ref)
            try:
                self._message, _ = self._fetcher.fetch(self._provider, request, self._parsed.structure)
            except (StatisticsError, NotFoundError, InvalidRequestError) as exc:
                self._failure = exc.code
        if self._message is None:
            hints.append(
                f"{without}: the dataset's structure could not be fetched ({self._failure}); {then} once it can be."
            )
        return self._message


def _data_structure(message: StructureMessage | None, ref: DatasetRef) -> DataStructure | None:
    return message.structure_for(message.dataflow(ref.id, ref.agency)) if message is not None else None


def _dimension_ids(dsd: DataStructure | None) -> frozenset[str] | None:
    return frozenset(d.id for d in dsd.dimensions) if dsd is not None else None


_GROUPS_LEFT_OUT = "The attributes this answer's groups give their series are left out"


def _with_groups(
    structure: _StructureRequest,
    parsed: ParsedResponses,
    provider: Provider,
    ref: DatasetRef,
    entry: CacheEntry,
    max_rows: int,
    table: DataTable,
    cached: StructureMessage | None,
    hints: list[str],
) -> tuple[StructureMessage | None, DataStructure | None, DataTable]:
    """The structure, its data structure and the table read again with its groups, when the
    answer has structure-specific groups and no data structure was at hand to read them
    (``cached``: the cached structure, kept when none can be fetched)."""
    message = structure.get(hints, _GROUPS_LEFT_OUT, "get_data gives them")
    dsd = _data_structure(message, ref)
    if dsd is None:
        if message is not None:
            hints.append(f"{_GROUPS_LEFT_OUT}: the dataset's structure does not say which of their values are keys.")
        return message or cached, None, table
    reread, _ = parsed.table(provider, entry, max_rows, _dimension_ids(dsd))
    return message, dsd, reread


def _label_text(text: str) -> str:
    """A label as served beside its code: one line, at most :data:`MAX_LABEL_CHARS` characters."""
    line = " ".join(text.split())
    return line if len(line) <= MAX_LABEL_CHARS else line[: MAX_LABEL_CHARS - 1].rstrip() + "\u2026"


def _beside(
    columns: list[str],
    rows: list[list[str | float | None]],
    constant: dict[str, str],
    found: dict[str, dict[str, str]],
    hints: list[str],
) -> tuple[list[str], list[list[str | float | None]], dict[str, str], dict[str, dict[str, str]]]:
    """Label columns beside their code columns, within the budget; what does not fit stays in ``found``."""
    taken = set(columns) | set(constant)
    beside_constant: dict[str, str] = {}
    for column, code in constant.items():
        beside_constant[column] = code
        label = found.get(column, {}).get(code)
        if label and column + LABEL_SUFFIX not in taken:
            beside_constant[column + LABEL_SUFFIX] = _label_text(label)
    spent = 0
    inline: list[str] = []
    kept: dict[str, dict[str, str]] = {}
    for i, column in enumerate(columns):
        labels = found.get(column)
        if not labels or column + LABEL_SUFFIX in taken:
            continue
        cost = sum(len(_label_text(labels.get(str(row[i]), ""))) + 4 for row in rows)
        if spent + cost > LABEL_BUDGET_CHARS:
            kept[column] = labels
            continue
        spent += cost
        inline.append(column)
    if kept:
        hints.append(
            f"Labels of {', '.join(kept)} are in `labels`, not beside each row: there they would make the answer "
            "too long. Narrow the key or lower max_rows to have them beside."
        )
    if not inline:
        return columns, rows, beside_constant, kept
    at = {c: columns.index(c) for c in inline}
    out_columns: list[str] = []
    for column in columns:
        out_columns.append(column)
        if column in at:
            out_columns.append(column + LABEL_SUFFIX)
    out_rows: list[list[str | float | None]] = []
    for row in rows:
        out: list[str | float | None] = []
        for i, value in enumerate(row):
            out.append(value)
            column = columns[i]
            if column in at:
                label = found[column].get(str(value)) if value is not None else None
                out.append(_label_text(label) if label else None)
        out_rows.append(out)
    return out_columns, out_rows, beside_constant, kept
