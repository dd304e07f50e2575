"""A data response as one flat table, collected row by row whatever the format.

:class:`Collector` is what every reader of :mod:`~governed_evidence.sdmx.data` hands its rows
to: it counts them (more than ``max_rows`` is refused rather than truncated silently),
keeps only the first ``keep``, tracks each column for being constant across *all* rows
(so callers can lift constants out of the table) and remembers code labels up to
:data:`MAX_LABELS`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from governed_evidence.errors import ResponseTooLargeError

__all__ = ["MAX_LABELS", "OBS_VALUE", "TIME_PERIOD", "Collector", "DataTable", "Value", "ordered_columns"]

TIME_PERIOD = "TIME_PERIOD"
OBS_VALUE = "OBS_VALUE"
#: Labels remembered per response (a label per code, not per row).
MAX_LABELS = 20_000
Value = str | float | None


@dataclass
class DataTable:
    """A parsed data response."""

    #: Column ids in first-seen order (dimensions first where the provider sends them so).
    columns: list[str]
    #: The first rows, as column → raw text.
    rows: list[dict[str, str]]
    total_rows: int
    #: Columns with the same non-empty value on every row.
    constant: dict[str, str]
    #: Columns empty on every row.
    empty: set[str]
    #: Code labels the provider sent (column → code → label).
    labels: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Structure-specific groups left unread because no dimension ids were given.
    unread_groups: int = 0

    def value(self, column: str, raw: str) -> Value:
        """Observation values as numbers (None when missing); everything else as text."""
        if column != OBS_VALUE:
            return raw
        if raw in ("", "NaN", "nan"):
            return None
        try:
            return float(raw)
        except ValueError:
            return raw


class Collector:
    """Rows as a reader finds them, kept and summarised as :class:`DataTable` needs."""

    def __init__(self, keep: int, max_rows: int) -> None:
        self.keep = keep
        self.max_rows = max_rows
        self.columns: dict[str, None] = {}
        self.rows: list[dict[str, str]] = []
        self.total = 0
        self.first: dict[str, str] = {}
        self.varies: set[str] = set()
        self.labels: dict[str, dict[str, str]] = {}
        self._label_count = 0
        self.unread_groups = 0

    def add(self, row: dict[str, str]) -> None:
        self.total += 1
        if self.total > self.max_rows:
            raise ResponseTooLargeError(
                f"the response holds more than {self.max_rows} observations; narrow the key or the period"
            )
        for col in row:
            if col not in self.columns:
                self.columns[col] = None
                # Earlier rows lacked this column, i.e. were empty in it.
                self.first[col] = "" if self.total > 1 else row[col]
        for col in self.columns:
            if col not in self.varies and row.get(col, "") != self.first[col]:
                self.varies.add(col)
        if len(self.rows) < self.keep:
            self.rows.append(row)

    def label(self, column: str, code: str, text: str) -> None:
        if not text or not code or text == code or self._label_count >= MAX_LABELS:
            return
        per_column = self.labels.setdefault(column, {})
        if code not in per_column:
            per_column[code] = text
            self._label_count += 1

    def table(self) -> DataTable:
        # The period and the value are the observation itself, never lifted out.
        lifted = [c for c in self.columns if c not in self.varies and c not in (TIME_PERIOD, OBS_VALUE)]
        constant = {c: self.first[c] for c in lifted if self.first[c] != ""}
        empty = {c for c in lifted if self.first[c] == ""}
        return DataTable(list(self.columns), self.rows, self.total, constant, empty, self.labels, self.unread_groups)


def ordered_columns(columns: Iterable[str], dimensions: list[str] | None) -> list[str]:
    """Key dimensions in key order, then the time period and value, then everything else."""
    cols = list(columns)
    lead = [d for d in dimensions or [] if d in cols]
    lead += [c for c in (TIME_PERIOD, OBS_VALUE) if c in cols and c not in lead]
    return lead + [c for c in cols if c not in lead]
