"""Reading by citation, listing sources and the index's status, under the caller's ceiling.

Each is a plain function of a connection and the ceiling: every statement carries the
ceiling in its WHERE clause, and a passage above it reads exactly like a missing one.

Reading, unlike search, reaches documents kept out of search (superseded, draft,
deprecated): what they are is said by their ``status`` and ``superseded_by``, and whether
they are overdue for review by ``stale``, decided against ``today``.
"""

from __future__ import annotations

from datetime import date
from typing import Literal

import apsw

from governed_evidence.config import Classification
from governed_evidence.errors import InvalidRequestError, NotFoundError
from governed_evidence.search import sql
from governed_evidence.search.limits import MAX_CONTEXT
from governed_evidence.search.models import (
    DocumentSummary,
    IndexStatus,
    LevelCount,
    ReadPassageResponse,
    SourcesResponse,
)
from governed_evidence.search.records import label
from governed_evidence.search.results import lifecycle_fields, passage_view
from governed_evidence.store.meta import IndexMeta

__all__ = [
    "MAX_LISTED_DOCUMENTS",
    "NOT_FOUND_HINT",
    "NOT_FOUND_MESSAGE",
    "index_status",
    "level_counts",
    "list_sources",
    "read_passage",
    "unavailable_status",
]

MAX_LISTED_DOCUMENTS = 500
NOT_FOUND_MESSAGE = "No passage with that citation_id is available."
#: The same whether the passage is missing or above the caller's ceiling (denied == missing).
NOT_FOUND_HINT = "Call search_documents to get current citation ids, then read_passage with one of them."


def read_passage(
    conn: apsw.Connection, ceiling: Classification, citation_id: str, context: int, today: date
) -> ReadPassageResponse:
    if not 0 <= context <= MAX_CONTEXT:
        raise InvalidRequestError(f"context must be between 0 and {MAX_CONTEXT}")
    row = sql.passage_by_citation(conn, ceiling, citation_id)
    if row is None:
        raise NotFoundError(NOT_FOUND_MESSAGE, hint=NOT_FOUND_HINT)
    around = {r.ordinal: r for r in sql.neighbours(conn, ceiling, row.document_id, row.ordinal, context)}
    return ReadPassageResponse(
        passage=passage_view(row, 0, today),
        before=[passage_view(around[o], o - row.ordinal, today) for o in sorted(around) if o < row.ordinal],
        after=[passage_view(around[o], o - row.ordinal, today) for o in sorted(around) if o > row.ordinal],
        superseded_by=row.superseded_by,
    )


def level_counts(conn: apsw.Connection, ceiling: Classification) -> list[LevelCount]:
    return [
        LevelCount(
            classification=label(level),  # type: ignore[arg-type]
            documents=docs,
            passages=passages,
            superseded_documents=superseded,
        )
        for level, docs, passages, superseded in sql.level_counts(conn, ceiling)
    ]


def list_sources(conn: apsw.Connection, ceiling: Classification, today: date) -> SourcesResponse:
    docs = sql.documents(conn, ceiling, MAX_LISTED_DOCUMENTS + 1)
    return SourcesResponse(
        ceiling=ceiling.label,  # type: ignore[arg-type]
        totals=level_counts(conn, ceiling),
        documents=[
            DocumentSummary(
                document=d.path,
                title=d.title,
                format=d.format,  # type: ignore[arg-type]
                classification=label(d.classification),  # type: ignore[arg-type]
                **lifecycle_fields(d.status, d.owner, d.review_by, d.effective, today),
                passages=d.passages,
                superseded_by=d.superseded_by,
                source_link=d.source_link,
            )
            for d in docs[:MAX_LISTED_DOCUMENTS]
        ],
        truncated=len(docs) > MAX_LISTED_DOCUMENTS,
    )


def unavailable_status(problem: str, ceiling: Classification) -> IndexStatus:
    """The status of an index that cannot be opened."""
    return IndexStatus(
        ok=False,
        problem=problem,
        integrity="unknown",
        semantic_search="unavailable",
        semantic_search_reason="no index",
        ceiling=ceiling.label,  # type: ignore[arg-type]
    )


def index_status(
    conn: apsw.Connection,
    meta: IndexMeta,
    ceiling: Classification,
    *,
    integrity: str,
    semantic_unavailable: str | None,
    vector_search: Literal["exact product", "sign-code prefilter", "vec0 KNN"] | None = None,
) -> IndexStatus:
    counts = level_counts(conn, ceiling)
    return IndexStatus(
        ok=integrity == "ok",
        problem=None if integrity == "ok" else "the index failed its integrity check; rebuild it",
        integrity=integrity,  # type: ignore[arg-type]
        schema_version=meta.schema_version,
        built_at=meta.built_at or None,
        embedding_model=meta.embedding_model,
        embedding_dimension=meta.embedding_dimension or None,
        embedding_model_checksum=meta.embedding_model_checksum or None,
        semantic_search="unavailable" if semantic_unavailable else "available",
        semantic_search_reason=semantic_unavailable,
        vector_search=None if semantic_unavailable else vector_search,
        ceiling=ceiling.label,  # type: ignore[arg-type]
        documents=sum(c.documents for c in counts),
        passages=sum(c.passages for c in counts),
        by_classification=counts,
    )
