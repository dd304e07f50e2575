"""Tool inputs as annotated types: their limits appear in the published tool schemas."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from governed_evidence.search.limits import (
    MAX_CITATION_ID_CHARS,
    MAX_CONTEXT,
    MAX_LIMIT,
    MAX_QUERY_CHARS,
    ConfidenceLevel,
    SearchMode,
)

__all__ = ["CitationId", "Confidence", "Context", "Limit", "Mode", "Query"]

Query = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        pattern=r"\S",
        description=f"Words or a question to search the policy documents for (1-{MAX_QUERY_CHARS} characters).",
    ),
]
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description=f"Most results to return (1-{MAX_LIMIT}).")]
Mode = Annotated[
    SearchMode,
    Field(description="hybrid (default): keywords and meaning; keyword: exact words; semantic: meaning only."),
]
Confidence = Annotated[
    ConfidenceLevel,
    Field(description="strict (default) withholds weak matches; normal returns more, less certain ones."),
]
CitationId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_CITATION_ID_CHARS,
        # Ingest never makes a citation id with a control character (names carrying one are
        # refused), so one here is a mistake or a probe: refused before any lookup.
        pattern=r"^[^\x00-\x1f\x7f-\x9f]+$",
        description="A citation_id returned by search_documents (no line breaks or control characters).",
    ),
]
Context = Annotated[
    int, Field(ge=0, le=MAX_CONTEXT, description=f"Neighbouring passages to include on each side (0-{MAX_CONTEXT}).")
]
