"""Tool inputs as annotated types: their limits appear in the published tool schemas."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

__all__ = ["CitationId", "Confidence", "Context", "Limit", "Mode", "Query"]

Query = Annotated[
    str,
    Field(
        min_length=1,
        max_length=500,
        pattern=r"\S",
        description="Words or a question to search the policy documents for (1-500 characters).",
    ),
]
Limit = Annotated[int, Field(ge=1, le=20, description="Most results to return (1-20).")]
Mode = Annotated[
    Literal["hybrid", "keyword", "semantic"],
    Field(description="hybrid (default): keywords and meaning; keyword: exact words; semantic: meaning only."),
]
Confidence = Annotated[
    Literal["strict", "normal"],
    Field(description="strict (default) withholds weak matches; normal returns more, less certain ones."),
]
CitationId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=1000,
        # Ingest never makes a citation id with a control character (names carrying one are
        # refused), so one here is a mistake or a probe: refused before any lookup.
        pattern=r"^[^\x00-\x1f\x7f-\x9f]+$",
        description="A citation_id returned by search_documents (no line breaks or control characters).",
    ),
]
Context = Annotated[int, Field(ge=0, le=3, description="Neighbouring passages to include on each side (0-3).")]
