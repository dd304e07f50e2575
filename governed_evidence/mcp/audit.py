"""The audit trail: one JSON line per tool call, to a file or stderr the operator chose.

A line says who called (name and how they were identified), the clearance applied, the
tool, its status, what it returned by identifier (citation ids, dataset references), the id
of the receipt the answer carried, and how long it took. Query text is recorded only when the operator turns it on
(``GOVERNED_EVIDENCE_AUDIT_QUERIES=on``); passage text, statistics values and credentials
never are: the line is built from identifiers this package wrote, not from the response.

Lines are appended with one ``write`` each under a lock, so concurrent calls never interleave
inside a line; a file opened in append mode is shared safely by replicas on one host.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from governed_evidence.access.caller import Caller
from governed_evidence.config import Classification
from governed_evidence.errors import ConfigError
from governed_evidence.receipts.model import Receipt
from governed_evidence.sdmx.models import DataResponse, DatasetDescription, DatasetSearchResponse
from governed_evidence.search.models import ReadPassageResponse, SearchResponse, SourcesResponse

__all__ = ["AuditSink", "Returned", "returned"]


@dataclass(frozen=True)
class Returned:
    """What a tool call returned, by identifier only."""

    ids: tuple[str, ...] = ()
    #: The most sensitive classification among the returned passages (None: no passage).
    most_sensitive: str | None = None
    search_mode: str | None = None
    from_cache: bool | None = None
    #: The id of the receipt the answer carried.
    receipt: str | None = None


def _most_sensitive(labels: list[str]) -> str | None:
    levels = [Classification[label.upper()] for label in labels]
    return max(levels).label if levels else None


def returned(result: object) -> Returned:
    """The identifiers a response carries (the response models are this package's own)."""
    found = _returned(result)
    receipt = getattr(result, "receipt", None)
    return dataclasses.replace(found, receipt=receipt.id) if isinstance(receipt, Receipt) else found


def _returned(result: object) -> Returned:
    if isinstance(result, SearchResponse):
        return Returned(
            tuple(r.citation_id for r in result.results),
            _most_sensitive([r.classification for r in result.results]),
            search_mode=result.search_mode,
        )
    if isinstance(result, ReadPassageResponse):
        views = [*result.before, result.passage, *result.after]
        return Returned(tuple(v.citation_id for v in views), _most_sensitive([v.classification for v in views]))
    if isinstance(result, SourcesResponse):
        return Returned(most_sensitive=_most_sensitive([d.classification for d in result.documents]))
    if isinstance(result, DatasetSearchResponse):
        return Returned(tuple(hit.dataset for hit in result.results), from_cache=result.from_cache)
    if isinstance(result, DatasetDescription | DataResponse):
        return Returned((result.dataset,), from_cache=result.from_cache)
    return Returned()


class AuditSink:
    """Appends audit lines to one stream."""

    def __init__(self, stream: IO[str], *, record_queries: bool = False, owned: bool = False) -> None:
        self._stream = stream
        self.record_queries = record_queries
        self._owned = owned
        self._lock = threading.Lock()

    @classmethod
    def open(cls, target: str, *, record_queries: bool = False) -> AuditSink:
        """``stderr`` or a file path (appended to, created 0600)."""
        if target == "stderr":
            return cls(sys.stderr, record_queries=record_queries)
        path = Path(target)
        try:
            path.touch(mode=0o600, exist_ok=True)
            stream = path.open("a", encoding="utf-8", buffering=1)
        except OSError as exc:
            raise ConfigError(f"cannot open the audit log {path}: {exc.strerror or exc}") from None
        return cls(stream, record_queries=record_queries, owned=True)

    def record(
        self,
        *,
        tool: str,
        caller: Caller,
        clearance_applied: Classification | None,
        status: str,
        results: int,
        result: Returned,
        ms: float,
        error: str | None = None,
        query: str | None = None,
        provider: str | None = None,
    ) -> None:
        line: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "event": "tool_call",
            "caller": caller.name,
            "via": caller.via,
            "clearance_applied": clearance_applied.label if clearance_applied is not None else None,
            "tool": tool,
            "status": status,
            "results": results,
            "returned": list(result.ids),
            "ms": ms,
        }
        if result.most_sensitive is not None:
            line["most_sensitive"] = result.most_sensitive
        if provider is not None:
            line["provider"] = provider
        if result.from_cache is not None:
            line["from_cache"] = result.from_cache
        if result.receipt is not None:
            line["receipt"] = result.receipt
        if error is not None:
            line["error"] = error
        if self.record_queries and query is not None:
            line["query"] = query
        text = json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"
        with self._lock:
            self._stream.write(text)
            self._stream.flush()

    def close(self) -> None:
        if self._owned:
            self._stream.close()
