"""Hybrid search: FTS5 + sqlite-vec rankings, fusion, the confidence gate, the ceiling.

``SearchService`` is imported on first use: the command line reads the search limits from
this package for every command, and the service's imports (numpy, apsw, the models) took a
third of the start of commands that search nothing (`stats`, `token`, `--help`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from governed_evidence.search.service import SearchService

__all__ = ["SearchService"]


def __getattr__(name: str) -> Any:
    if name == "SearchService":
        from governed_evidence.search.service import SearchService

        return SearchService
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
