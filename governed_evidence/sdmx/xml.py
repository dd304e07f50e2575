"""Safe, bounded XML reading for provider responses: defusedxml only, no DTDs, no entities.

SDMX-ML never needs a DTD, so any ``<!DOCTYPE`` is refused outright: that closes entity
expansion ("billion laughs"), external entities and external DTD fetches in one rule.
Elements are matched by namespace URI and local name, never by prefix (providers use
``message:``, ``mes:``, ``m:`` and custom prefixes for the same namespaces).

Memory follows what a reader keeps, not what the provider sent. A tree of a whole
response costs tens of times its size (a 60 MB catalogue of tiny elements took 1.4 GB),
so no reader builds one: :func:`stream` feeds the body to defusedxml's parser in chunks
and builds only the *units* its caller asks for (a ``Dataflow``, a ``Code``, an ``Obs``),
one at a time, hands each over complete and lets it go. Every other element is at most a
start and an end event, never kept. What the parser itself keeps is bounded too:

- nesting deeper than :data:`MAX_DEPTH` is refused (the open-element stacks grow with it);
- more than :data:`MAX_NAMES` distinct element and attribute names is refused (the parser
  remembers every name for the rest of the document);
- :data:`MAX_TOKEN_BYTES` fed without a single parser event (one start tag with a million
  attributes, a giant comment) is refused before the parser buffers more of it;
- a unit of more than :data:`MAX_UNIT_ELEMENTS` elements, or a document of more than
  :data:`MAX_ELEMENTS`, is refused (the last bounds the time a parse takes).

SDMX-ML 3.0 names the same elements in other namespaces (``.../v3_0/structure``); a
reader that understands both passes ``rename=V3_TO_V21`` and sees 2.1 tags throughout,
so one reader serves both versions and only what really differs (references written as
URNs, ``DataConstraint`` with a ``role``) needs code of its own.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from typing import Literal
from xml.etree.ElementTree import Element, ParseError, SubElement

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException

from governed_evidence.errors import ResponseTooLargeError, UnusableResponseError
from governed_evidence.sdmx.models import visible

__all__ = [
    "COM",
    "MAX_DEPTH",
    "MAX_ELEMENTS",
    "MAX_NAMES",
    "MAX_NAME_CHARS",
    "MAX_TOKEN_BYTES",
    "MAX_UNIT_ELEMENTS",
    "MES",
    "MES3",
    "STR",
    "V3_TO_V21",
    "XML_LANG",
    "Event",
    "children",
    "clean",
    "first",
    "local",
    "localised",
    "localised_text",
    "namespace",
    "parse",
    "plain_text",
    "stream",
]

MES = "http://www.sdmx.org/resources/sdmxml/schemas/v2_1/message"
STR = "http://www.sdmx.org/resources/sdmxml/schemas/v2_1/structure"
COM = "http://www.sdmx.org/resources/sdmxml/schemas/v2_1/common"
MES3 = "http://www.sdmx.org/resources/sdmxml/schemas/v3_0/message"
#: SDMX-ML 3.0 namespaces → their 2.1 counterparts (see the module docstring).
V3_TO_V21 = {
    MES3: MES,
    "http://www.sdmx.org/resources/sdmxml/schemas/v3_0/structure": STR,
    "http://www.sdmx.org/resources/sdmxml/schemas/v3_0/common": COM,
}
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"

#: Real SDMX-ML nests about 11 deep and uses under 100 names; these leave wide margins.
MAX_DEPTH = 48
MAX_NAMES = 2_000
MAX_TOKEN_BYTES = 1024 * 1024
MAX_UNIT_ELEMENTS = 200_000
#: Real messages spend 40 or more bytes per element, so this is over 2.5 times the
#: elements of the largest response the default byte caps let in.
MAX_ELEMENTS = 4_000_000
#: Bytes handed to the parser at a time.
_CHUNK = 64 * 1024
#: Names and labels are shown to a model; longer than this is not a name.
MAX_NAME_CHARS = 500

_TAG_RE = re.compile(r"<[^>]{0,2000}>")

#: ``("start", tag, attributes, None)``, ``("end", tag, {}, None)`` or
#: ``("unit", tag, attributes, element)`` with the unit's whole subtree.
Event = tuple[Literal["start", "end", "unit"], str, dict[str, str], Element | None]
_NO_ATTRIBUTES: dict[str, str] = {}


def _never(parent: str, tag: str) -> bool:
    return False


def _nothing(tag: str) -> bool:
    return False


def _refuse(exc: Exception) -> UnusableResponseError:
    if isinstance(exc, DefusedXmlException):
        return UnusableResponseError(
            "the provider's XML declares a DTD or entities, which this server refuses to process"
        )
    return UnusableResponseError("the provider's response is not well-formed XML")


class _Builder:
    """The parser's target: keeps the one unit being built and the events not yet handed over."""

    def __init__(
        self, units: Callable[[str, str], bool], watch: Callable[[str], bool], rename: dict[str, str] | None = None
    ) -> None:
        self._units = units
        self._watch = watch
        #: Namespace URI → the one to report it as (``{uri}`` prefixes, built once).
        self._rename = {f"{{{k}}}": f"{{{v}}}" for k, v in (rename or {}).items()}
        self.events: list[Event] = []
        #: Parser callbacks so far: the feed loop's measure of progress.
        self.calls = 0
        self._stack: list[str] = []
        self._names: set[str] = set()
        self._elements = 0
        self._open: list[Element] = []
        self._unit_elements = 0
        self._text: list[str] = []

    def _renamed(self, tag: str) -> str:
        if self._rename and tag.startswith("{"):
            prefix = tag[: tag.find("}") + 1]
            new = self._rename.get(prefix)
            if new is not None:
                return new + tag[len(prefix) :]
        return tag

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        self.calls += 1
        tag = self._renamed(tag)
        self._elements += 1
        if self._elements > MAX_ELEMENTS:
            raise ResponseTooLargeError("the provider's XML holds more elements than this server reads")
        stack = self._stack
        if len(stack) >= MAX_DEPTH:
            raise UnusableResponseError(f"the provider's XML nests deeper than {MAX_DEPTH} elements")
        names = self._names
        if tag not in names or (attrib and not names.issuperset(attrib)):
            names.add(tag)
            names.update(attrib)
            if len(names) > MAX_NAMES:
                raise UnusableResponseError("the provider's XML uses more distinct names than any SDMX message")
        parent = stack[-1] if stack else ""
        stack.append(tag)
        building = self._open
        if building:
            self._take_text(building[-1])
            self._unit_elements += 1
            if self._unit_elements > MAX_UNIT_ELEMENTS:
                raise ResponseTooLargeError("an element of the provider's XML holds more than this server reads")
            building.append(SubElement(building[-1], tag, attrib))
        elif self._units(parent, tag):
            self._unit_elements = 1
            building.append(Element(tag, attrib))
        elif not parent or self._watch(tag):
            self.events.append(("start", tag, attrib, None))

    def data(self, text: str) -> None:
        self.calls += 1
        if self._open:
            self._text.append(text)

    def end(self, tag: str) -> None:
        self.calls += 1
        tag = self._renamed(tag)
        self._stack.pop()
        building = self._open
        if building:
            element = building.pop()
            self._take_text(element)
            if not building:
                self.events.append(("unit", tag, element.attrib, element))
        elif not self._stack or self._watch(tag):
            self.events.append(("end", tag, _NO_ATTRIBUTES, None))

    def _take_text(self, element: Element) -> None:
        # Text before an element's first child is its ``text``. Text after a child (a tail)
        # is never read by the SDMX readers, so it is dropped rather than kept.
        if self._text:
            if len(element) == 0 and element.text is None:
                element.text = "".join(self._text)
            self._text.clear()


def stream(
    body: bytes,
    *,
    units: Callable[[str, str], bool] = _never,
    watch: Callable[[str], bool] = _nothing,
    rename: dict[str, str] | None = None,
) -> Iterator[Event]:
    """Events for the root element, the ``watch``-ed tags and each complete unit, in document order.

    ``units(parent_tag, tag)`` says which elements to build whole (never inside another
    unit); ``watch(tag)`` which other elements to report as start and end events.
    Tags are ``{namespace}local``, with the namespaces in ``rename`` reported as their
    mapped ones (:data:`V3_TO_V21`).

    Raises
    ------
    UnusableResponseError
        On a DTD, entity declaration, external reference, malformed XML, or a shape no
        SDMX message has (too deep, too many names, one token too large).
    ResponseTooLargeError
        On more elements in a unit or in the document than this server reads.
    """
    builder = _Builder(units, watch, rename)
    parser = SafeET.XMLParser(target=builder, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    idle = 0
    try:
        for offset in range(0, len(body), _CHUNK):
            before = builder.calls
            parser.feed(body[offset : offset + _CHUNK])
            if builder.calls != before:
                idle = 0
            else:
                # Nothing came out of this chunk: the parser is buffering one token.
                idle += _CHUNK
                if idle > MAX_TOKEN_BYTES:
                    raise UnusableResponseError(
                        "the provider's XML has a single tag or comment larger than this server reads"
                    )
            if builder.events:
                events, builder.events = builder.events, []
                yield from events
        parser.close()
    except (DefusedXmlException, ParseError, ValueError) as exc:
        raise _refuse(exc) from None
    yield from builder.events


def parse(body: bytes) -> Element:
    """The whole document as one element tree, under the same bounds as :func:`stream`.

    Meant for small bodies (error messages); the readers of large responses stream.

    Raises
    ------
    UnusableResponseError
        On a DTD, entity declaration, external reference or malformed XML.
    ResponseTooLargeError
        On a document of more than :data:`MAX_UNIT_ELEMENTS` elements.
    """
    for _kind, _tag, _attrib, element in stream(body, units=lambda parent, tag: not parent):
        if element is not None:
            return element
    raise UnusableResponseError("the provider's response is not well-formed XML")  # pragma: no cover


def local(tag: str) -> str:
    """``{ns}Name`` → ``Name``."""
    return tag.rsplit("}", 1)[-1]


def namespace(tag: str) -> str:
    return tag[1:].split("}", 1)[0] if tag.startswith("{") else ""


def children(element: Element, ns: str, name: str) -> list[Element]:
    return element.findall(f"{{{ns}}}{name}")


def first(element: Element, ns: str, name: str) -> Element | None:
    return element.find(f"{{{ns}}}{name}")


def clean(text: str, limit: int = MAX_NAME_CHARS) -> str:
    """Provider text as it may be served: invisible characters removed, spaces folded, bounded."""
    # Invisible characters go first: a zero-width one between two spaces must not keep both.
    cleaned = " ".join(visible(text).split())
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1].rstrip() + "…"


def localised_text(element: Element, name: str = "Name", lang: str = "en") -> str:
    """The raw text of the ``common:Name`` (or Description) in ``lang``, else of the first one, else ''."""
    found = element.findall(f"{{{COM}}}{name}")
    for item in found:
        if item.get(XML_LANG) == lang:
            return item.text or ""
    return (found[0].text or "") if found else ""


def localised(element: Element, name: str = "Name", lang: str = "en") -> str:
    """:func:`localised_text`, cleaned and bounded as a name."""
    return clean(localised_text(element, name, lang))


def plain_text(text: str, limit: int = 500) -> str:
    """Provider descriptions carry escaped HTML; keep words only, bounded."""
    if "<" in text:
        text = _TAG_RE.sub(" ", text)
    # Unescaping can produce invisible characters (&#x200b;), so clean after it.
    return clean(html.unescape(text), limit)
