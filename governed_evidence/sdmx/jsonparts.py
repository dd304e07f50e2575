"""SDMX-JSON structures and catalogues sent from the parsing child in parts, put back together here.

A structure's codes and a catalogue's rows are what a kept message is made of; the parse
(:func:`~governed_evidence.sdmx.sdmxjson.parse_json_structure`,
:func:`~governed_evidence.sdmx.sdmxjson.parse_json_catalogue`) sends them a part at a time
as it reads them (:func:`~governed_evidence.sdmx.isolated.run_streamed`), so the child never
holds them all, and these classes take the parts as they come through the pipe and give
back what the parse would have returned whole.
"""

from __future__ import annotations

from typing import Any

from governed_evidence.errors import UnusableResponseError
from governed_evidence.sdmx.artefacts import StructureMessage
from governed_evidence.sdmx.catalogue import CatalogueRow, Words

__all__ = ["CatalogueParts", "StructureParts"]


class StructureParts:
    """A structure message's codes, sent in parts by the structure parse, put back together.

    Each part's codes are assigned in the order sent, so a code id read twice keeps its first
    place and its last name, as in one dict. The last part names, in order, the lists the
    message's codelists kept (a codelist read and then replaced is not among them).
    """

    def __init__(self) -> None:
        self._reading: dict[int, dict[str, str]] = {}
        self._read: dict[int, dict[str, str]] = {}
        self._kept: list[int] = []

    def take(self, part: tuple[str, Any, dict[str, str] | None]) -> None:
        kind, serial, codes = part
        if kind == "codes" and codes is not None:
            self._reading.setdefault(serial, {}).update(codes)
        elif kind == "codelist":
            self._read[serial] = self._reading.pop(serial, {})
            # Lists read for this codelist and replaced (``codes`` written twice) are dropped.
            self._reading.clear()
        elif kind == "kept":
            self._kept = list(serial)

    def message(self, message: StructureMessage) -> StructureMessage:
        """``message`` (as the parse returned it) with each codelist's codes."""
        if len(self._kept) != len(message.codelists):
            raise UnusableResponseError("the provider's answer could not be read (its codes were not all received)")
        for codelist, serial in zip(message.codelists, self._kept, strict=True):
            codelist.codes = self._read.pop(serial, {})
        self._read.clear()
        return message


class CatalogueParts:
    """A catalogue's rows and their index words, sent in parts by the catalogue parse, put together."""

    def __init__(self) -> None:
        self._rows: dict[int, list[CatalogueRow]] = {}
        self._words: dict[int, list[Words]] = {}
        self._kept: int | None = None

    def take(self, part: tuple[int | None, list[CatalogueRow] | None, Words | None]) -> None:
        reading, rows, words = part
        if rows is None:
            self._kept = reading
        elif reading is not None and words is not None:
            self._rows.setdefault(reading, []).extend(rows)
            self._words.setdefault(reading, []).append(words)

    def catalogue(self) -> tuple[list[CatalogueRow], list[Words]]:
        """The rows sent with the reading kept, and their words (the parse, sending, returns none)."""
        rows = self._rows.pop(self._kept, []) if self._kept is not None else []
        words = self._words.pop(self._kept, []) if self._kept is not None else []
        self._rows.clear()
        self._words.clear()
        return rows, words
