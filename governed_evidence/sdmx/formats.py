"""Decide how to read a response from its Content-Type (and, for plain XML, its root element).

Providers ignore or vary format requests (the OECD answers ``format=csv`` with CSV under
several media types; plain ``application/xml`` may be any SDMX-ML message), so what was
asked for is never used to choose a parser. SDMX-ML 2.1 and 3.0 are told apart by the
root's namespace and read by the same readers; ``json`` is SDMX-JSON (data 1.0 and 2.0,
structure 2.0), read by :mod:`~governed_evidence.sdmx.sdmxjson`. ZIP and gzip files are
opened before this is asked (:mod:`~governed_evidence.sdmx.envelope`).

A *generic* media type (``application/json``, ``application/octet-stream``, ``text/plain``,
none at all: :data:`GENERIC_TYPES`) says nothing about which SDMX message it is, and
providers use them (the OECD's legacy API served SDMX-JSON data as ``application/json``,
Eurostat serves its deferred files as ``application/octet-stream``), so the body's first
bytes decide: ``{`` is JSON, ``<`` is XML whose root is checked, a header line opening with
an SDMX-CSV column is CSV; anything else is read as its media type says (``text/plain``
stays text, such as a provider's plain-text refusal).
"""

from __future__ import annotations

from typing import Literal

from governed_evidence.sdmx.xml import MES, MES3, local, namespace, stream

__all__ = ["GENERIC_TYPES", "Format", "detect", "media_type", "sniff"]

Format = Literal["structure", "generic", "structurespecific", "csv", "error", "text", "json", "other"]

_ROOTS: dict[str, Format] = {
    "Structure": "structure",
    "GenericData": "generic",
    "GenericTimeSeriesData": "generic",
    "StructureSpecificData": "structurespecific",
    "StructureSpecificTimeSeriesData": "structurespecific",
    "Error": "error",
}


#: Media types that do not say which SDMX message a body is; the body is sniffed instead.
GENERIC_TYPES = frozenset(
    {
        "",
        "application/json",
        "text/json",
        "application/octet-stream",
        "binary/octet-stream",
        "application/download",
        "application/x-download",
        "application/force-download",
        "text/plain",
    }
)
#: First columns an SDMX-CSV header opens with (1.0: DATAFLOW; 2.0: STRUCTURE, maybe with [x]).
_CSV_HEADS = (b"DATAFLOW,", b"DATAFLOW;", b"STRUCTURE,", b"STRUCTURE;", b"STRUCTURE\t", b"STRUCTURE|", b"STRUCTURE[")
_BOM = b"\xef\xbb\xbf"


def media_type(content_type: str) -> str:
    """``application/vnd.sdmx.data+csv; charset=utf-8`` → ``application/vnd.sdmx.data+csv``."""
    return content_type.split(";", 1)[0].strip().lower()


def _sniff_xml(body: bytes) -> Format:
    # The first event is the root's start; the rest of the body is never parsed.
    for _kind, tag, _attrib, _element in stream(body):
        if namespace(tag) not in (MES, MES3):
            return "other"
        return _ROOTS.get(local(tag), "other")
    return "other"


def sniff(body: bytes) -> Format | None:
    """What the first bytes of ``body`` say it is, or None when they say nothing.

    Raises
    ------
    UnusableResponseError
        When an XML body is hostile or malformed before its root element.
    """
    head = body[:256].removeprefix(_BOM).lstrip(b" \t\r\n")
    if head.startswith(b"{"):
        return "json"
    if head.startswith(b"<"):
        return _sniff_xml(body)
    if head.startswith(_CSV_HEADS):
        return "csv"
    return None


def detect(content_type: str, body: bytes) -> Format:
    """The parser to use for ``body``.

    Raises
    ------
    UnusableResponseError
        When an XML body is hostile or malformed before its root element.
    """
    mt = media_type(content_type)
    if mt in GENERIC_TYPES:
        found = sniff(body)
        if found is not None:
            return found
    if "csv" in mt:
        return "csv"
    if "genericdata" in mt or "generictimeseriesdata" in mt:
        return "generic"
    if "structurespecific" in mt:
        return "structurespecific"
    if mt.endswith("xml"):
        # structure+xml, error responses sent as XML, and plain application/xml all get
        # their root checked, so an Error message is never mistaken for a structure.
        return _sniff_xml(body)
    if "json" in mt:
        return "json"
    if mt.startswith("text/plain") or mt == "":
        return "text"
    return "other"
