"""Cached responses in their parsed forms: structures, catalogues and data tables.

These are the ``parse`` steps of the fetch path (:class:`~governed_evidence.sdmx.fetch.Fetcher`):
each checks that the provider sent the kind of message asked for before parsing it.
Parsing a large structure or catalogue is the expensive part of an answer, so the parsed
forms are kept per response body (by its SHA-256): a catalogue is parsed once, not once
per search, and its rows are persisted in the cache for the next process. The structures
kept in memory are bounded by count and by the items they hold together.

A body that is a ZIP or gzip file is opened first (:mod:`~governed_evidence.sdmx.envelope`),
under the byte cap of its kind, and what is inside is read like any other body: SDMX-ML
2.1 or 3.0, SDMX-JSON or SDMX-CSV, chosen by :func:`~governed_evidence.sdmx.formats.detect`.
SDMX-JSON (data, structures and catalogues) is read in a forked child
(:mod:`~governed_evidence.sdmx.isolated`), one at a time, so a hostile answer's processor
time is never taken under the server's interpreter lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection, Mapping

from governed_evidence.errors import UnusableResponseError
from governed_evidence.sdmx.artefacts import StructureMessage
from governed_evidence.sdmx.cache import CacheEntry, ResponseCache
from governed_evidence.sdmx.catalogue import CatalogueIndex, Words, parse_catalogue
from governed_evidence.sdmx.data import DataTable, parse_data
from governed_evidence.sdmx.envelope import unwrap
from governed_evidence.sdmx.formats import Format, detect
from governed_evidence.sdmx.isolated import run_isolated, run_streamed
from governed_evidence.sdmx.jsonparts import CatalogueParts, StructureParts
from governed_evidence.sdmx.providers import Provider
from governed_evidence.sdmx.sdmxjson import parse_json_catalogue, parse_json_structure
from governed_evidence.sdmx.structure import MAX_CODES, error_codes, parse_structure
from governed_evidence.sdmx.urls import Kind

__all__ = ["ParsedResponses"]

#: Parsed structures kept in memory (keyed by body hash), by count and by the items they
#: hold together: one message may hold up to MAX_CODES, sixteen such must not pile up.
_STRUCTURE_MEMO = 16
_STRUCTURE_MEMO_ITEMS = MAX_CODES
#: Byte caps for what an envelope may expand to, when the service does not pass its own
#: (the defaults of GOVERNED_EVIDENCE_SDMX_MAX_BYTES_*).
_DEFAULT_MAX_BYTES = {"catalogue": 64 * 1024 * 1024, "structure": 32 * 1024 * 1024, "data": 16 * 1024 * 1024}


def _json_table(body: bytes, keep: int, max_rows: int) -> DataTable:
    return parse_data("json", body, keep=keep, max_rows=max_rows)


def _empty() -> DataTable:
    return DataTable([], [], 0, {}, set())


class ParsedResponses:
    """Parses cache entries, memoising structures and catalogues per body; thread-safe."""

    def __init__(
        self, cache: ResponseCache, *, max_rows_parsed: int, max_bytes: Mapping[Kind, int] | None = None
    ) -> None:
        self.cache = cache
        self.max_rows_parsed = max_rows_parsed
        self.max_bytes: dict[str, int] = dict(_DEFAULT_MAX_BYTES)
        for kind, limit in (max_bytes or {}).items():
            self.max_bytes[kind] = limit
        self._lock = threading.Lock()
        self._catalogues: dict[str, tuple[str, CatalogueIndex]] = {}
        self._structures: OrderedDict[str, StructureMessage] = OrderedDict()

    def structure(self, entry: CacheEntry) -> StructureMessage:
        """The structure message in ``entry``.

        Raises
        ------
        UnusableResponseError
            When the entry is not a success or holds another kind of message.
        """
        if not 200 <= entry.status < 300:
            raise UnusableResponseError("the provider sent no structure")
        key = entry.body_sha256
        with self._lock:
            memo = self._structures.get(key)
            if memo is not None:
                self._structures.move_to_end(key)
                return memo
        content_type, body = self._opened(entry)
        fmt = detect(content_type, body)
        if fmt == "json":
            # Event-by-event Python work, like JSON data: in a child, off the server's interpreter
            # lock; its codes sent in parts as they are read, so the child never holds them all.
            parts = StructureParts()
            message = parts.message(run_streamed(parse_json_structure, parts.take, body))
        elif fmt == "structure":
            message = parse_structure(body)
        else:
            raise UnusableResponseError(f"expected a structure message from the provider, got {fmt}")
        with self._lock:
            self._structures[key] = message
            while len(self._structures) > 1 and (
                len(self._structures) > _STRUCTURE_MEMO
                or sum(m.size for m in self._structures.values()) > _STRUCTURE_MEMO_ITEMS
            ):
                self._structures.popitem(last=False)
        return message

    def catalogue(self, entry: CacheEntry) -> CatalogueIndex:
        """The provider's dataflow catalogue in ``entry``, searchable (one per provider kept)."""
        key = entry.body_sha256
        with self._lock:
            memo = self._catalogues.get(entry.provider)
            if memo is not None and memo[0] == key:
                return memo[1]
        rows = self.cache.load_catalogue(entry.provider, key)
        words: list[Words] | None = None
        if rows is None:
            content_type, body = self._opened(entry)
            fmt = detect(content_type, body)
            if fmt == "json":
                # Sent in parts as they are read, like a structure's codes, with their index words.
                catalogue = CatalogueParts()
                run_streamed(parse_json_catalogue, catalogue.take, body)
                rows, words = catalogue.catalogue()
            elif fmt == "structure":
                rows = parse_catalogue(body)
            else:
                raise UnusableResponseError(f"expected the provider's dataflow catalogue, got {fmt}")
            self.cache.save_catalogue(entry.provider, key, rows)
        index = CatalogueIndex(rows, words)
        with self._lock:
            self._catalogues[entry.provider] = (key, index)
        return index

    def table(
        self, provider: Provider, entry: CacheEntry, keep: int, dimensions: Collection[str] | None = None
    ) -> tuple[DataTable, Format | None]:
        """The data in ``entry`` (its first ``keep`` rows), and its format; an empty selection is an empty table.

        ``dimensions`` (the data structure's dimension ids) let structure-specific groups be read.
        """
        if entry.status == 404:
            # Cached only when it meant an empty selection (see fetch.check_status).
            return _empty(), None
        content_type, body = self._opened(entry)
        fmt = detect(content_type, body)
        if fmt == "text" and provider.says_no_results(body):
            return _empty(), None
        if fmt == "error":
            if "100" in error_codes(body):
                return _empty(), None
            raise UnusableResponseError("the provider answered with an SDMX error message")
        if fmt == "json":
            # Event-by-event Python work: in a child, so it never holds the server's interpreter lock.
            return run_isolated(_json_table, body, keep, self.max_rows_parsed), fmt
        return parse_data(fmt, body, keep=keep, max_rows=self.max_rows_parsed, dimensions=dimensions), fmt

    def _opened(self, entry: CacheEntry) -> tuple[str, bytes]:
        """The entry's content type and body, out of a ZIP or gzip envelope when it came in one."""
        return unwrap(
            entry.content_type, entry.body, max_bytes=self.max_bytes.get(entry.kind, _DEFAULT_MAX_BYTES["data"])
        )
