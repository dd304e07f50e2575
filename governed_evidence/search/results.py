"""The serve stage: stored passages turned into the response models the tools return.

Whether a document is stale is decided here, per response, against the day the caller's
clock gives: the index stores only the review date, and serves for months.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from governed_evidence.search.candidates import Candidate, Ranking
from governed_evidence.search.gate import GateOutcome
from governed_evidence.search.limits import ConfidenceLevel
from governed_evidence.search.models import PassageView, SearchResponse
from governed_evidence.search.records import Passage
from governed_evidence.store.lifecycle import is_stale

__all__ = ["lifecycle_fields", "passage_view", "search_response", "span"]


def span(start: int | None, end: int | None) -> dict[str, int] | None:
    """A line or page span as the models read it (a lone start is a one-line span)."""
    if start is None:
        return None
    return {"start": int(start), "end": int(end if end is not None else start)}


def lifecycle_fields(
    status: str, owner: str | None, review_by: date | None, effective: date | None, today: date
) -> dict[str, Any]:
    """The lifecycle fields every result, passage and listed document carries."""
    return {
        "status": status,
        "owner": owner,
        "review_by": review_by,
        "effective": effective,
        "stale": is_stale(review_by, today),
    }


def _cited(row: Passage, today: date) -> dict[str, Any]:
    """The fields every served passage carries: what it is, where it is, what it says, and
    whether it is still policy."""
    return {
        **lifecycle_fields(row.status, row.owner, row.review_by, row.effective, today),
        "citation_id": row.citation_id,
        "document": row.document,
        "title": row.title,
        "heading": row.heading,
        "lines": span(row.line_start, row.line_end),
        "pages": span(row.page_start, row.page_end),
        "classification": row.label,
        "text": row.text,
        "source_link": row.source_link,
    }


def passage_view(row: Passage, position: int, today: date) -> PassageView:
    return PassageView.model_validate({**_cited(row, today), "position": position})


def _result(rank: int, candidate: Candidate, today: date) -> dict[str, Any]:
    if candidate.row is None:
        raise ValueError("a served candidate's row is read before its response is built")
    cited = _cited(candidate.row, today)
    cited.update(rank=rank, matched_by=candidate.fused.matched_by, confidence=candidate.confidence)
    return cited


def _score(value: float) -> str:
    """A score as precise as the confidences results carry (four places), trailing zeros dropped.

    Rounded to two decimal places, the strict threshold 0.365 read 0.36, and a best candidate
    of 0.3621 read 0.36 too: "below 0.36, scored 0.36". At four places a score below the
    threshold always reads below it.
    """
    return f"{value:.4f}".rstrip("0").rstrip(".") or "0"


def search_response(
    ranking: Ranking,
    outcome: GateOutcome[Candidate],
    *,
    threshold: float,
    confidence_level: ConfidenceLevel,
    gate_enabled: bool,
    ceiling: str,
    today: date,
    empty_reason: str | None = None,
) -> SearchResponse:
    """The response; ``empty_reason`` says why nothing is returned when a stage after the gate withheld it."""
    results = [_result(i, c, today) for i, c in enumerate(outcome.kept, 1)]
    reason = None
    if not results:
        if empty_reason is not None:
            reason = empty_reason
        elif not ranking.candidates:
            reason = "no passage matched the query"
        else:
            reason = (
                f"no passage reached the {confidence_level} confidence threshold "
                f"({_score(threshold)}); the best candidate scored {_score(outcome.best)}"
            )
    return SearchResponse.model_validate(
        {
            "status": "OK" if results else "NO_RELEVANT_CONTEXT",
            "reason": reason,
            "requested_mode": ranking.requested_mode,
            "search_mode": ranking.search_mode,
            "search_mode_reason": ranking.mode_reason,
            "confidence": confidence_level,
            "gate": "on" if gate_enabled else "off",
            "ceiling": ceiling,
            "withheld": outcome.withheld,
            "results": results,
        }
    )
