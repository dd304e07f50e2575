"""SDMX data responses as one flat table: SDMX-CSV 1.0 and 2.0, SDMX-ML 2.1 and 3.0, SDMX-JSON.

Every variant becomes rows of ``column → value`` in one pass, streaming:

- SDMX-CSV 1.0 (``DATAFLOW,...``), optionally ``labels=both`` cells (``AUS: Australia``);
- SDMX-CSV 2.0 (``STRUCTURE,STRUCTURE_ID,ACTION,...``), including the OECD's
  ``csvfilewithlabels`` where every code column is followed by its label column, the
  column delimiter the header declares (``STRUCTURE;`` is a semicolon file, whose
  decimal separator may then be a comma), the multi-value and language markers on
  column names (``ATTR[]``, ``ATTR[en;fr]``, kept as text), ``SERIES_KEY`` and
  ``OBS_KEY`` columns (dropped: they repeat the dimensions), measures other than
  ``OBS_VALUE``, and rows whose ``ACTION`` is ``D`` (deletions, which are not
  observations, so they are skipped);
- SDMX-ML generic and structure-specific data, series or flat (3.0 data is
  structure-specific, read the same way), with the attributes a data set or a group
  gives its series on every row they apply to (an observation's own attribute comes
  first, then its series', its group's, and the data set's). A structure-specific group
  writes its key and its attributes alike as XML attributes, so only the data structure's
  dimension ids tell them apart: without them its groups are counted, not read
  (:attr:`DataTable.unread_groups`);
- SDMX-JSON 1.0 and 2.0 data (:mod:`~governed_evidence.sdmx.jsondata`), streamed like
  the others, under its own byte cap.

Rows go to a :class:`~governed_evidence.sdmx.table.Collector`, which keeps the first
``keep``, tracks constant columns across *all* rows and refuses more than ``max_rows``
observations rather than truncate silently.

Streaming holds memory to what is kept: XML observations are built one ``Obs`` at a time
(:func:`governed_evidence.sdmx.xml.stream`), and CSV is decoded line by line with a bound
on a line's length and on the number of columns, so a row of a million empty cells is
refused before it becomes a million objects.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Collection, Iterator
from xml.etree.ElementTree import Element

from governed_evidence.errors import ResponseTooLargeError, UnusableResponseError
from governed_evidence.sdmx.formats import Format
from governed_evidence.sdmx.jsondata import read_json_data
from governed_evidence.sdmx.table import (
    MAX_LABELS,
    OBS_VALUE,
    TIME_PERIOD,
    Collector,
    DataTable,
    Value,
    ordered_columns,
)
from governed_evidence.sdmx.xml import local, stream

__all__ = [
    "MAX_COLUMNS",
    "MAX_GROUPS",
    "MAX_GROUP_SHAPES",
    "MAX_LABELS",
    "MAX_LINE_CHARS",
    "OBS_VALUE",
    "TIME_PERIOD",
    "DataTable",
    "Value",
    "ordered_columns",
    "parse_data",
]

#: Columns that name the message, not the observation; the dataset is in the response already.
_META_COLUMNS = frozenset(
    {"DATAFLOW", "STRUCTURE", "STRUCTURE_ID", "STRUCTURE_NAME", "ACTION", "SERIES_KEY", "OBS_KEY"}
)
#: SDMX-CSV 2.0's header names its delimiter: ``STRUCTURE`` (with an optional ``[x]``
#: sub-value separator) followed by the delimiter itself.
_CSV2_HEADER_RE = re.compile(r"STRUCTURE(?:\[[^\]]{0,3}\])?(?P<delimiter>[,;\t|])")
#: ``ATTR[]`` or ``ATTR[en;fr]``: markers on a column name, not part of the component id.
_MARKER_RE = re.compile(r"\[[^\]]{0,100}\]")
#: A number written with a decimal comma (semicolon-delimited SDMX-CSV 2.0).
_DECIMAL_COMMA_RE = re.compile(r"-?[0-9]{1,30},[0-9]{1,30}")
#: SDMX-CSV has a column per dimension and attribute (two with labels): tens, not thousands.
MAX_COLUMNS = 1_000
#: Characters in one CSV line (a quoted cell may span lines; each line is bounded).
MAX_LINE_CHARS = 1024 * 1024
#: Footer code the (legacy) Eurostat API uses for "too large, delivered later".
_FOOTER_TOO_LARGE = "413"


def _lines(body: bytes) -> Iterator[str]:
    """The body's lines, decoded as they are read (the whole text never exists at once)."""
    text = io.TextIOWrapper(io.BytesIO(body), encoding="utf-8-sig", newline="")
    try:
        while line := text.readline(MAX_LINE_CHARS + 1):
            # Read with a limit, so an endless line is refused before it is held whole.
            if len(line) > MAX_LINE_CHARS:
                raise UnusableResponseError("the provider's CSV has a line longer than this server reads")
            yield line
    except UnicodeDecodeError:
        raise UnusableResponseError("the provider's CSV is not valid UTF-8") from None


def _delimiter(body: bytes) -> str:
    """The column delimiter: the one SDMX-CSV 2.0's header declares, else a comma."""
    head = body[:64].lstrip(b"\xef\xbb\xbf").decode("ascii", "replace")
    match = _CSV2_HEADER_RE.match(head)
    return match["delimiter"] if match else ","


def _parse_csv(body: bytes, out: Collector) -> None:
    delimiter = _delimiter(body)
    reader: Iterator[list[str]] = csv.reader(_lines(body), delimiter=delimiter)
    try:
        header = next(reader)
    except StopIteration:
        raise UnusableResponseError("the provider's CSV is empty") from None
    except csv.Error:
        raise UnusableResponseError("the provider's CSV could not be read") from None
    if len(header) > MAX_COLUMNS:
        raise UnusableResponseError("the provider's CSV has more columns than any SDMX-CSV")
    header = [_MARKER_RE.sub("", h).strip() for h in header]
    version2 = bool(header) and header[0] == "STRUCTURE"
    labelled_pairs = "STRUCTURE_NAME" in header
    # SDMX-CSV 1.0 with labels=both writes "ID: Label" in the header and in code cells.
    colon_labels = not labelled_pairs and any(": " in h for h in header)
    action = header.index("ACTION") if "ACTION" in header else None
    # (column id, index of its value cell, index of its label cell or None)
    plan: list[tuple[str, int, int | None]] = []
    i = 0
    while i < len(header):
        name = header[i].split(": ", 1)[0] if colon_labels else header[i]
        if name in _META_COLUMNS:
            i += 1
            continue
        if labelled_pairs:
            plan.append((name, i, i + 1 if i + 1 < len(header) else None))
            i += 2
        else:
            plan.append((name, i, None))
            i += 1
    # SDMX-CSV 2.0 may name its measures otherwise (OBS_VALUE1, MEAS_1); 1.0 always has OBS_VALUE.
    if OBS_VALUE not in {p[0] for p in plan} and not version2:
        raise UnusableResponseError("the provider's CSV has no OBS_VALUE column; it is not SDMX-CSV data")
    try:
        for cells in reader:
            if not cells:
                continue
            if len(cells) != len(header):
                raise UnusableResponseError("the provider's CSV has rows of different widths")
            if action is not None and cells[action].strip() == "D":
                continue
            row: dict[str, str] = {}
            for name, vi, li in plan:
                value = cells[vi].strip()
                if colon_labels and ": " in value and name not in (OBS_VALUE, TIME_PERIOD):
                    value, text = value.split(": ", 1)
                    out.label(name, value, text.strip())
                elif li is not None and name != OBS_VALUE:
                    out.label(name, value, cells[li].strip())
                elif name == OBS_VALUE and delimiter != "," and _DECIMAL_COMMA_RE.fullmatch(value):
                    value = value.replace(",", ".")
                row[name] = value
            out.add(row)
    except csv.Error:
        raise UnusableResponseError("the provider's CSV could not be read") from None


def _values(container: Element | None, out: dict[str, str]) -> None:
    """Generic-data ``<Value id= value=>`` pairs into ``out``."""
    if container is None:
        return
    for item in container:
        if local(item.tag) == "Value" and item.get("id"):
            out[item.get("id", "")] = item.get("value", "")


def _child(element: Element, name: str) -> Element | None:
    return next((c for c in element if local(c.tag) == name), None)


def _generic_obs(obs: Element, base: dict[str, str], time_id: str) -> dict[str, str]:
    row = dict(base)
    _values(_child(obs, "ObsKey"), row)
    dim = _child(obs, "ObsDimension")
    if dim is not None:
        row[dim.get("id") or time_id] = dim.get("value", "")
    value = _child(obs, "ObsValue")
    row[OBS_VALUE] = value.get("value", "") if value is not None else ""
    _values(_child(obs, "Attributes"), row)
    return row


class _Groups:
    """``Group`` attributes, looked up by the key values of each series.

    A group names some dimensions' values and attributes for every series with those
    values: generic data in ``GroupKey`` and ``Attributes``, structure-specific data as the
    ``Group`` element's own XML attributes. Groups are indexed by the dimensions they name
    (a message has a few group shapes, however many groups), so a row costs one lookup per
    shape.
    """

    def __init__(self) -> None:
        #: Dimension ids of a shape → that shape's values → the group's attributes.
        self.shapes: dict[tuple[str, ...], dict[tuple[str, ...], dict[str, str]]] = {}
        self.count = 0

    def add(self, group: Element) -> None:
        """A generic-data group."""
        key: dict[str, str] = {}
        attributes: dict[str, str] = {}
        _values(_child(group, "GroupKey"), key)
        _values(_child(group, "Attributes"), attributes)
        self._add(key, attributes)

    def add_specific(self, group: Element, dimensions: Collection[str]) -> None:
        """A structure-specific group: its XML attributes that name a dimension are its key."""
        key: dict[str, str] = {}
        attributes: dict[str, str] = {}
        for name, value in group.attrib.items():
            # Qualified attributes (xsi:type names the group's type) are not components.
            if not name.startswith("{"):
                (key if name in dimensions else attributes)[name] = value
        self._add(key, attributes)

    def _add(self, key: dict[str, str], attributes: dict[str, str]) -> None:
        if not key or not attributes:
            return
        self.count += 1
        if self.count > MAX_GROUPS or len(key) > MAX_COLUMNS:
            raise UnusableResponseError("the provider's data has more groups than any SDMX data set")
        dims = tuple(sorted(key))
        if dims not in self.shapes and len(self.shapes) >= MAX_GROUP_SHAPES:
            # Each shape costs every row a lookup; a structure defines a few group types.
            raise UnusableResponseError("the provider's data has more kinds of group than any SDMX data set")
        values = tuple(key[d] for d in dims)
        self.shapes.setdefault(dims, {}).setdefault(values, {}).update(attributes)

    def apply(self, row: dict[str, str]) -> None:
        """Attributes of the groups ``row`` belongs to, where ``row`` has none of its own."""
        for dims, groups in self.shapes.items():
            found = groups.get(tuple(row.get(d, "") for d in dims))
            if found is not None:
                for attr, value in found.items():
                    row.setdefault(attr, value)


def _dataset_attributes(attrib: dict[str, str]) -> dict[str, str]:
    """A structure-specific ``DataSet``'s own attributes: its XML attributes but the standard ones."""
    return {k: v for k, v in attrib.items() if not k.startswith("{") and k not in _DATASET_XML_ATTRIBUTES}


_SERIES_PARTS = frozenset({"SeriesKey", "Attributes"})
_WATCHED = frozenset({"DataSet", "Series", "Structure", "Message"})
#: Groups remembered per data set (a group is about a series or more; rows are capped likewise).
MAX_GROUPS = 200_000
#: Distinct sets of dimensions groups name (a structure defines a few group types).
MAX_GROUP_SHAPES = 64
#: The XML attributes every SDMX-ML 2.1 and 3.0 ``DataSet`` may carry; the others are
#: the data set's attributes (structure-specific data writes them there).
_DATASET_XML_ATTRIBUTES = frozenset(
    {
        "structureRef",
        "setID",
        "action",
        "reportingBeginDate",
        "reportingEndDate",
        "validFromDate",
        "validToDate",
        "publicationYear",
        "publicationPeriod",
        "dataScope",
    }
)


def _generic_unit(parent: str, tag: str) -> bool:
    # Each observation whole; a series' key and attributes whole (they precede its Obs);
    # the data set's attributes and each group whole (they precede its series).
    name = local(tag)
    if name == "Obs":
        return True
    where = local(parent)
    return (name in _SERIES_PARTS and where == "Series") or (name in ("Attributes", "Group") and where == "DataSet")


def _specific_unit(parent: str, tag: str) -> bool:
    # Structure-specific observations and groups are unqualified elements carrying attributes;
    # each group whole (they precede the data set's series).
    return tag == "Obs" or (tag == "Group" and local(parent) == "DataSet")


def _watched(tag: str) -> bool:
    return local(tag) in _WATCHED


def _parse_xml(body: bytes, fmt: Format, out: Collector, dimensions: Collection[str] | None) -> None:
    time_id = TIME_PERIOD
    #: The current series' key and attributes (None outside a series).
    base: dict[str, str] | None = None
    #: The current data set's attributes and groups (each data set has its own).
    dataset: dict[str, str] = {}
    groups = _Groups()
    footer_codes: list[str] = []
    units = _generic_unit if fmt == "generic" else _specific_unit
    for kind, tag, attrib, element in stream(body, units=units, watch=_watched):
        name = local(tag)
        if kind == "start":
            if name == "Series":
                base = {} if fmt == "generic" else dict(attrib)
            elif name == "DataSet":
                dataset = {} if fmt == "generic" else _dataset_attributes(attrib)
                groups = _Groups()
            elif name == "Structure" and attrib.get("dimensionAtObservation") not in (None, "AllDimensions"):
                time_id = attrib.get("dimensionAtObservation", TIME_PERIOD)
            elif name == "Message" and attrib.get("code") and len(footer_codes) < 100:
                footer_codes.append(attrib.get("code", ""))
        elif kind == "end":
            if name == "Series":
                base = None
        elif element is not None:
            if name == "Group":
                _add_group(groups, element, fmt, dimensions, out)
            elif name in _SERIES_PARTS:
                _values(element, base if base is not None else dataset)
            else:
                row = (
                    _generic_obs(element, base or {}, time_id)
                    if fmt == "generic"
                    else {**(base or {}), **element.attrib}
                )
                # Precedence: the observation's, the series', the group's, the data set's.
                if groups.shapes:
                    groups.apply(row)
                for attr, value in dataset.items():
                    row.setdefault(attr, value)
                out.add(row)
    if out.total == 0 and _FOOTER_TOO_LARGE in footer_codes:
        raise ResponseTooLargeError(
            "the provider would only deliver this selection later as a file; narrow the key or the period"
        )


def _add_group(
    groups: _Groups, group: Element, fmt: Format, dimensions: Collection[str] | None, out: Collector
) -> None:
    if fmt == "generic":
        groups.add(group)
    elif dimensions is not None:
        groups.add_specific(group, dimensions)
    else:
        out.unread_groups += 1
        if out.unread_groups > MAX_GROUPS:
            raise UnusableResponseError("the provider's data has more groups than any SDMX data set")


def parse_data(
    fmt: Format, body: bytes, *, keep: int, max_rows: int, dimensions: Collection[str] | None = None
) -> DataTable:
    """Parse a data response already classified as ``fmt``.

    ``dimensions`` are the data structure's dimension ids, which tell a structure-specific
    group's key from its attributes; without them such groups are only counted.

    Raises
    ------
    UnusableResponseError
        For formats that are not data, and malformed or hostile bodies.
    ResponseTooLargeError
        For more than ``max_rows`` observations.
    """
    out = Collector(keep, max_rows)
    if fmt == "csv":
        _parse_csv(body, out)
    elif fmt in ("generic", "structurespecific"):
        _parse_xml(body, fmt, out, dimensions)
    elif fmt == "json":
        read_json_data(body, out.add, out.label, max_rows=max_rows)
    else:
        raise UnusableResponseError(f"the provider answered in a format this server does not read ({fmt})")
    return out.table()
