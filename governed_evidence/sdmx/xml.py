"""Safe XML reading for provider responses: defusedxml only, no DTDs, no entities.

SDMX-ML never needs a DTD, so any ``<!DOCTYPE`` is refused outright: that closes entity
expansion ("billion laughs"), external entities and external DTD fetches in one rule.
Elements are matched by namespace URI and local name, never by prefix (providers use
``message:``, ``mes:``, ``m:`` and custom prefixes for the same namespaces).
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Iterator
from xml.etree.ElementTree import Element, ParseError

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException

from governed_evidence.errors import UnusableResponseError

__all__ = [
    "COM",
    "MES",
    "STR",
    "children",
    "first",
    "iter_events",
    "local",
    "localised",
    "namespace",
    "parse",
    "plain_text",
]

MES = "http://www.sdmx.org/resources/sdmxml/schemas/v2_1/message"
STR = "http://www.sdmx.org/resources/sdmxml/schemas/v2_1/structure"
COM = "http://www.sdmx.org/resources/sdmxml/schemas/v2_1/common"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"

_TAG_RE = re.compile(r"<[^>]{0,2000}>")
_SPACE_RE = re.compile(r"\s+")


def _refuse(exc: Exception) -> UnusableResponseError:
    if isinstance(exc, DefusedXmlException):
        return UnusableResponseError(
            "the provider's XML declares a DTD or entities, which this server refuses to process"
        )
    return UnusableResponseError("the provider's response is not well-formed XML")


def parse(body: bytes) -> Element:
    """The document's root element.

    Raises
    ------
    UnusableResponseError
        On a DTD, entity declaration, external reference or malformed XML.
    """
    try:
        return SafeET.fromstring(body, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except (DefusedXmlException, ParseError, ValueError) as exc:
        raise _refuse(exc) from None


def iter_events(body: bytes) -> Iterator[tuple[str, Element]]:
    """Streaming ``start``/``end`` events with the same refusals as :func:`parse`."""
    try:
        yield from SafeET.iterparse(
            io.BytesIO(body), events=("start", "end"), forbid_dtd=True, forbid_entities=True, forbid_external=True
        )
    except (DefusedXmlException, ParseError, ValueError) as exc:
        raise _refuse(exc) from None


def local(tag: str) -> str:
    """``{ns}Name`` → ``Name``."""
    return tag.rsplit("}", 1)[-1]


def namespace(tag: str) -> str:
    return tag[1:].split("}", 1)[0] if tag.startswith("{") else ""


def children(element: Element, ns: str, name: str) -> list[Element]:
    return element.findall(f"{{{ns}}}{name}")


def first(element: Element, ns: str, name: str) -> Element | None:
    return element.find(f"{{{ns}}}{name}")


def localised(element: Element, name: str = "Name", lang: str = "en") -> str:
    """The ``common:Name`` (or Description) in ``lang``, else the first one, else ''."""
    found = element.findall(f"{{{COM}}}{name}")
    for item in found:
        if item.get(XML_LANG) == lang:
            return (item.text or "").strip()
    return (found[0].text or "").strip() if found else ""


def plain_text(text: str, limit: int = 500) -> str:
    """Provider descriptions carry escaped HTML; keep words only, bounded."""
    cleaned = _SPACE_RE.sub(" ", html.unescape(_TAG_RE.sub(" ", text))).strip()
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1].rstrip() + "…"
