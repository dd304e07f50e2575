"""Narrow patterns for everything a caller can put into an SDMX request.

Nothing a caller supplies reaches a URL without passing one of these checks first, so a
URL can only ever contain letters, digits and ``_ @ $ - . + ,``. Identifiers a provider
supplies (a catalogue's agency, id and version) pass the same checks before they are put
into a URL (:func:`provider_dataset_ref`). The patterns are exported so the MCP input
schemas publish the same limits the service enforces.

Every pattern is compiled with ``re.ASCII``: in a Python ``str`` pattern ``\\d`` would also
match Arabic-Indic, fullwidth and other decimal digits, which are not SDMX digits (and
``str.isdigit`` accepts even more, such as superscripts). The published patterns keep
``\\d``, which JSON Schema (ECMA-262) already reads as ``[0-9]``, so the frozen MCP schemas
and the server mean the same thing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from governed_evidence.errors import InvalidRequestError

__all__ = [
    "DATASET_PATTERN",
    "KEY_PATTERN",
    "MAX_CODES_LIMIT",
    "MAX_CODES_PER_POSITION",
    "MAX_CODE_CHARS",
    "MAX_KEY_CHARS",
    "MAX_KEY_POSITIONS",
    "MAX_QUERY_CHARS",
    "MAX_ROWS_LIMIT",
    "MAX_SEARCH_LIMIT",
    "PERIOD_PATTERN",
    "PROVIDER_PATTERN",
    "DatasetRef",
    "is_agency",
    "parse_dataset_ref",
    "provider_dataset_ref",
    "validate_key",
    "validate_period",
    "validate_periods",
    "validate_provider_id",
]

#: SDMX IDType: what agencies, dataflows and codes may be made of.
_ID = r"[A-Za-z0-9_@$\-]{1,100}"
#: Agencies may be nested (OECD.SDD.NAD); each part starts with a letter.
_AGENCY = r"[A-Za-z][A-Za-z0-9_\-]{0,49}(?:\.[A-Za-z][A-Za-z0-9_\-]{0,49}){0,4}"
_VERSION = r"(?:\d{1,4}(?:\.\d{1,4}){0,2}|latest)"

PROVIDER_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,31}$"
#: ``AGENCY,ID,VERSION`` with agency and version optional, or ``AGENCY:ID(VERSION)`` as
#: providers print it in SDMX-CSV.
DATASET_PATTERN = rf"^(?:(?:{_AGENCY},)?{_ID}(?:,{_VERSION}?)?|{_AGENCY}:{_ID}(?:\({_VERSION}\))?)$"
#: Dot-separated positions, each empty (all codes) or codes joined by ``+``; or ``all``.
#: Unbounded repetition keeps the compiled pattern small (schema validators refuse huge
#: ones); lengths and counts are bounded by ``validate_key`` and the schema's max_length.
_CODES = r"[A-Za-z0-9_@$\-]+(?:\+[A-Za-z0-9_@$\-]+)*"
KEY_PATTERN = rf"^(?:all|(?:{_CODES})?(?:\.(?:{_CODES})?)*)$"
#: Years, months, quarters, semesters, weeks and days as SDMX reporting periods.
PERIOD_PATTERN = (
    r"^\d{4}(?:-(?:0[1-9]|1[0-2])(?:-(?:0[1-9]|[12]\d|3[01]))?|-Q[1-4]|-S[12]|-W(?:0[1-9]|[1-4]\d|5[0-3]))?$"
)
MAX_KEY_CHARS = 1000
#: Bounds on the tools' numeric arguments and the search text. They live here, beside the
#: patterns, so the MCP schemas and the CLI can publish them without importing the service
#: (and with it the HTTP client and the parsers).
MAX_SEARCH_LIMIT = 50
MAX_CODES_LIMIT = 500
MAX_ROWS_LIMIT = 1000
MAX_QUERY_CHARS = 500
MAX_KEY_POSITIONS = 40
MAX_CODE_CHARS = 60
MAX_CODES_PER_POSITION = 200

# re.ASCII: digits are 0-9 only (see the module docstring).
_PROVIDER_RE = re.compile(PROVIDER_PATTERN, re.ASCII)
_DATASET_RE = re.compile(DATASET_PATTERN, re.ASCII)
_KEY_RE = re.compile(KEY_PATTERN, re.ASCII)
_PERIOD_RE = re.compile(PERIOD_PATTERN, re.ASCII)
_AGENCY_RE = re.compile(rf"^{_AGENCY}$", re.ASCII)
_VERSION_RE = re.compile(rf"^{_VERSION}$", re.ASCII)
_PRINTED_RE = re.compile(rf"^(?P<agency>{_AGENCY}):(?P<id>{_ID})(?:\((?P<version>{_VERSION})\))?$", re.ASCII)


@dataclass(frozen=True)
class DatasetRef:
    """A validated dataflow reference; ``agency`` and ``version`` may still be unknown."""

    #: Maintenance agency, e.g. ``OECD.SDD.NAD``; None until resolved.
    agency: str | None
    #: Dataflow id, e.g. ``DSD_NAMAIN1@DF_QNA``.
    id: str
    #: Version such as ``1.0``; ``latest`` when unspecified.
    version: str = "latest"

    @property
    def text(self) -> str:
        """The form callers pass back in: ``AGENCY,ID,VERSION``."""
        return ",".join(p for p in (self.agency, self.id, self.version) if p)


def _short(value: str) -> str:
    # Echo at most a short prefix of a rejected value, as data not instructions.
    return repr(value[:40] + ("…" if len(value) > 40 else ""))


def is_agency(value: str) -> bool:
    """True for an SDMX agency id such as ``ECB`` or ``OECD.SDD.NAD``."""
    return bool(_AGENCY_RE.fullmatch(value))


def validate_provider_id(value: str) -> str:
    """A provider id as configured (upper-cased); the caller never supplies a URL."""
    if not isinstance(value, str) or not _PROVIDER_RE.fullmatch(value):
        raise InvalidRequestError(f"provider {_short(str(value))} is not a provider id (letters, digits, _)")
    return value.upper()


def parse_dataset_ref(value: str) -> DatasetRef:
    """Parse ``AGENCY,ID,VERSION`` (agency and version optional) or ``AGENCY:ID(VERSION)``."""
    text = value.strip() if isinstance(value, str) else ""
    if not text or len(text) > 200 or not _DATASET_RE.fullmatch(text):
        raise InvalidRequestError(
            f"dataset {_short(text)} is not a dataset reference; use the `dataset` value from "
            "search_datasets, e.g. OECD.SDD.NAD,DSD_NAMAIN1@DF_QNA,1.0"
        )
    printed = _PRINTED_RE.fullmatch(text)
    if printed:
        return DatasetRef(printed["agency"], printed["id"], printed["version"] or "latest")
    parts = text.split(",")
    if len(parts) == 1:
        return DatasetRef(None, parts[0])
    if len(parts) == 2:
        # Two parts are either AGENCY,ID or ID,VERSION; a version-shaped second part decides.
        if parts[1] == "" or _VERSION_RE.fullmatch(parts[1]):
            return DatasetRef(None, parts[0], parts[1] or "latest")
        return DatasetRef(parts[0], parts[1])
    return DatasetRef(parts[0], parts[1], parts[2] or "latest")


def provider_dataset_ref(agency: str, dataset_id: str, version: str) -> DatasetRef | None:
    """A provider's ``agency``, ``id`` and ``version`` as a reference, if a caller could have sent them.

    None when any part fails the caller's rules (``..``, a slash, an empty part, non-ASCII
    digits, ...): such a value must never be put into a URL.
    """
    ref = DatasetRef(agency, dataset_id, version)
    try:
        parsed = parse_dataset_ref(ref.text)
    except InvalidRequestError:
        return None
    # ``text`` drops empty parts and the parser fills defaults, so compare part by part.
    return ref if parsed == ref else None


def validate_key(value: str) -> str:
    """A series key such as ``Q.FRA+DEU..B1GQ`` (empty position = all codes) or ``all``."""
    key = value.strip() if isinstance(value, str) else ""
    if key == "":
        return "all"
    positions = key.split(".")
    if (
        len(key) > MAX_KEY_CHARS
        or not _KEY_RE.fullmatch(key)
        or len(positions) > MAX_KEY_POSITIONS
        or any(len(p.split("+")) > MAX_CODES_PER_POSITION for p in positions)
        or any(len(code) > MAX_CODE_CHARS for p in positions for code in p.split("+"))
    ):
        raise InvalidRequestError(
            f"key {_short(key)} is not a series key: one position per dimension separated by '.', "
            "codes joined by '+', an empty position for all codes (e.g. Q.FRA+DEU..B1GQ); see describe_dataset"
        )
    return key


def validate_period(value: str | None, name: str) -> str | None:
    """A reporting period: 2020, 2020-07, 2020-Q3, 2020-S1, 2020-W05 or 2020-07-31."""
    if value is None:
        return None
    text = value.strip() if isinstance(value, str) else ""
    if text == "":
        return None
    if not _PERIOD_RE.fullmatch(text):
        raise InvalidRequestError(
            f"{name} {_short(text)} is not a period; use forms like 2020, 2020-Q3, 2020-07 or 2020-07-31"
        )
    return text


def validate_periods(start: str | None, end: str | None) -> tuple[str | None, str | None]:
    start_v = validate_period(start, "start_period")
    end_v = validate_period(end, "end_period")
    # Years decide the order; finer comparisons across forms (Q vs month) are the provider's.
    if start_v and end_v and int(start_v[:4]) > int(end_v[:4]):
        raise InvalidRequestError("start_period is after end_period")
    return start_v, end_v
