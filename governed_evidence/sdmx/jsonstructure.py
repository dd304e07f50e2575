"""SDMX-JSON structure messages read as a stream of events, one artefact built at a time.

``json.loads`` built the whole message before anything looked at it: 16 MiB of empty
objects anywhere in a structure or catalogue answer cost some 25 times its size, and
held the interpreter lock throughout. Here (:mod:`~governed_evidence.sdmx.jsonstream`)
the message is read forward once:

- members an SDMX-JSON structure message does not define at its top level are refused;
- of ``data``, only the members a reader asks for (:class:`Group`) are read, artefact by
  artefact; the others (agency schemes, value lists, ``meta``) are passed over unbuilt;
- each artefact is built alone, under :data:`MAX_ARTEFACT_VALUES`, and handed to its
  reader at once, which keeps only what it converts it to; the long lists inside an
  artefact (a codelist's codes, a scheme's concepts) are built one item at a time, each
  under :data:`MAX_ITEM_VALUES`, so a codelist of many codes is never held built whole;
- each message is at most :data:`STRUCTURE_EVENTS` events, built or passed over, which
  bounds the processor time.

What the readers keep is bounded by them (``MAX_CODES``, ``MAX_DATAFLOWS``, and its text's
memory by ``MAX_KEPT_TEXT``). Values come
out as ``json.loads`` gives them; a member written twice counts as the last one written,
as there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from governed_evidence.errors import UnusableResponseError
from governed_evidence.sdmx.jsonstream import Budget, Events

__all__ = ["MAX_ARTEFACT_VALUES", "MAX_ITEM_VALUES", "STRUCTURE_EVENTS", "Group", "Groups", "read_groups"]

#: Values built for one artefact (a dataflow, a DSD, a constraint; its items apart): a DSD
#: with a hundred components is a few thousand, a large constraint a few tens of thousands.
MAX_ARTEFACT_VALUES = 200_000
#: Values built for one item of an artefact's list (a code, a concept, with its names).
MAX_ITEM_VALUES = 10_000
#: Events one message may have, built or passed over. A recorded structure message has one
#: per 31 bytes (BIS's 396 KB schema: 12,619), and MAX_CODES codes with their names are under
#: 3 million; bulk made to be slow to pass over (``{},`` is two events in three bytes) stops here.
STRUCTURE_EVENTS = 6_000_000
#: The members SDMX-JSON structure messages (1.0 and 2.0) define at their top level.
_MESSAGE_MEMBERS = frozenset({"header", "meta", "data", "errors"})

Built = dict[str, Any]


@dataclass(frozen=True)
class Group:
    """How the artefacts of one member of ``data`` (``codelists``, ``dataflows``...) are read.

    ``artefact`` gets each artefact built (an empty object for an element that is not one)
    with what its ``items`` member's elements were gathered into (``collect()``, each
    element built and handed to ``item`` with it, then dropped), and returns what is kept.
    Members named in ``drop`` are passed over at every level. ``begin`` is called as the
    member's artefacts start, each time it is read (a member written twice is read twice,
    the last read counting), for a reader that hands its artefacts on as it goes.
    """

    artefact: Callable[[Built, Any], Any]
    drop: frozenset[str] = frozenset({"links"})
    items: str | None = None
    collect: Callable[[], Any] = list
    item: Callable[[Any, Built], None] | None = None
    begin: Callable[[], None] | None = None


@dataclass
class Groups:
    """What was read: whether ``data`` was an object, which members it has, each group's artefacts."""

    data: bool = False
    members: set[str] = field(default_factory=set)
    read: dict[str, list[Any]] = field(default_factory=dict)


def _artefact(events: Events, first: tuple[str, Any], group: Group) -> Any:
    if first[0] != "start_map":
        events.skip(first)
        return group.artefact({}, group.collect())
    budget = Budget(MAX_ARTEFACT_VALUES)
    budget.take()
    built: Built = {}
    items = group.collect()
    for key in events.members(first):
        value = events.next()
        if key == group.items and group.item is not None:
            items = group.collect()  # written twice: the last one counts
            for element in events.elements(value):
                if element[0] == "start_map":
                    group.item(items, events.build(element, Budget(MAX_ITEM_VALUES), drop=group.drop))
                else:
                    events.skip(element)
                    group.item(items, {})
        elif key in group.drop:
            events.skip(value)
        else:
            built[key] = events.build(value, budget, drop=group.drop)
    return group.artefact(built, items)


def read_groups(body: bytes, groups: Mapping[str, Group]) -> Groups:
    """The artefacts of ``groups`` in an SDMX-JSON structure message, each turned into what its reader keeps.

    Raises
    ------
    UnusableResponseError
        Malformed JSON, or JSON that is not an SDMX-JSON message (not an object, or with
        top-level members none defines).
    ResponseTooLargeError
        An artefact or an item larger than this module builds, more events than
        :data:`STRUCTURE_EVENTS`, or what a reader raises.
    """
    events = Events(body, STRUCTURE_EVENTS)
    first = events.next()
    if first[0] != "start_map":
        raise UnusableResponseError("the provider's JSON is not an SDMX-JSON message")
    found = Groups()
    for key in events.members(first):
        if key not in _MESSAGE_MEMBERS:
            raise UnusableResponseError("the provider's JSON is not an SDMX-JSON structure message")
        value = events.next()
        if key != "data":
            events.skip(value)
            continue
        found = Groups(data=value[0] == "start_map")  # written twice: the last one counts
        for part in events.members(value):
            found.members.add(part)
            item = events.next()
            group = groups.get(part)
            if group is None:
                events.skip(item)
                continue
            if group.begin is not None:
                group.begin()
            found.read[part] = [_artefact(events, element, group) for element in events.elements(item)]
    events.end()
    return found
