"""Turning stored passages into the response models the tools return."""

from __future__ import annotations

from typing import Any

from governed_evidence.search.gate import GateOutcome
from governed_evidence.search.limits import ConfidenceLevel
from governed_evidence.search.models import PassageView, SearchResponse, SearchResult, Span
from governed_evidence.search.ranking import Candidate, Ranking
from governed_evidence.search.rows import Passage

__all__ = ["passage_view", "search_response", "span"]


def span(start: int | None, end: int | None) -> Span | None:
    if start is None:
        return None
    return Span(start=int(start), end=int(end if end is not None else start))


def _cited(row: Passage) -> dict[str, Any]:
    """The fields every served passage carries: what it is, where it is, what it says."""
    return {
        "citation_id": row.citation_id,
        "document": row.document,
        "title": row.title,
        "heading": row.heading,
        "lines": span(row.line_start, row.line_end),
        "pages": span(row.page_start, row.page_end),
        "classification": row.label,
        "text": row.text,
    }


def passage_view(row: Passage, position: int) -> PassageView:
    return PassageView(**_cited(row), position=position)


def _result(rank: int, candidate: Candidate) -> SearchResult:
    return SearchResult(
        **_cited(candidate.row),
        rank=rank,
        matched_by=candidate.fused.matched_by,  # type: ignore[arg-type]
        confidence=candidate.confidence,
    )


def search_response(
    ranking: Ranking,
    outcome: GateOutcome[Candidate],
    *,
    threshold: float,
    confidence_level: ConfidenceLevel,
    gate_enabled: bool,
    ceiling: str,
    empty_reason: str | None = None,
) -> SearchResponse:
    """The response; ``empty_reason`` says why nothing is returned when a stage after the gate withheld it."""
    results = [_result(i, c) for i, c in enumerate(outcome.kept, 1)]
    reason = None
    if not results:
        if empty_reason is not None:
            reason = empty_reason
        elif not ranking.candidates:
            reason = "no passage matched the query"
        else:
            reason = (
                f"no passage reached the {confidence_level} confidence threshold "
                f"({threshold:.2f}); the best candidate scored {outcome.best:.2f}"
            )
    return SearchResponse(
        status="OK" if results else "NO_RELEVANT_CONTEXT",
        reason=reason,
        requested_mode=ranking.requested_mode,
        search_mode=ranking.search_mode,
        search_mode_reason=ranking.mode_reason,
        confidence=confidence_level,
        gate="on" if gate_enabled else "off",
        ceiling=ceiling,  # type: ignore[arg-type]
        withheld=outcome.withheld,
        results=results,
    )
