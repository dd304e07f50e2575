"""Run question slices against a SearchService and score them.

How each slice is run (the governance slices run the way an attacker would want):

* answerable / paraphrase: strict gate at the service's ceiling; hit@1, hit@3, MRR over
  documents; an abstention is a *false abstention*, counted apart from a wrong answer.
* unanswerable: strict gate; pass = abstained; a false answer lists the document and score.
* superseded: strict gate; pass = the successor is in the top 3 and the superseded
  document is never cited.
* denied: run at a ceiling *below* the expected documents, gate off, k=20; any result from
  an expected document or above that ceiling is a leak.
* secret: highest ceiling, gate off, k=20; any credential-shaped text in a result is a
  violation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from governed_evidence.config import Classification
from governed_evidence.evaluation.questions import Question
from governed_evidence.ingest.guards import find_credentials
from governed_evidence.search.limits import ConfidenceLevel, SearchMode
from governed_evidence.search.models import SearchResponse, SearchResult

__all__ = [
    "GATE_LIMIT",
    "GOVERNANCE_SLICES",
    "Searcher",
    "SliceReport",
    "abstention_report",
    "answer_rank",
    "retrieval_report",
    "run_slices",
]

#: Slices that test governance rather than quality; run through the MCP tools in `eval`.
GOVERNANCE_SLICES = ("denied", "secret", "superseded")
#: Results asked for when a slice is scored as the gate is judged: strict confidence, 8 results.
GATE_LIMIT = 8


class Searcher(Protocol):
    """Anything that answers a search like SearchService does (the service or an MCP client)."""

    ceiling: Classification

    def search(
        self, query: str, *, limit: int = ..., mode: SearchMode = ..., confidence_level: ConfidenceLevel = ...
    ) -> SearchResponse: ...


SearcherFor = Callable[[Classification, bool], Searcher]


@dataclass
class SliceReport:
    slice: str
    mode: str
    n: int = 0
    passed: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return self.n - self.passed

    def as_dict(self) -> dict[str, Any]:
        return {
            "slice": self.slice,
            "mode": self.mode,
            "n": self.n,
            "pass": self.passed,
            "fail": self.failed,
            "metrics": {k: round(v, 4) for k, v in self.metrics.items()},
            "failures": self.failures,
        }


def _documents(results: Sequence[SearchResult]) -> list[str]:
    """The results' documents, each once, in order."""
    return list(dict.fromkeys(r.document for r in results))


def _span(result: SearchResult) -> tuple[int, int] | None:
    return None if result.pages is None else (result.pages.start, result.pages.end)


def _cited(result: SearchResult) -> str:
    """A passage as a page-level miss lists it: its document and pages."""
    span = _span(result)
    if span is None:
        return result.document
    return f"{result.document} p. {span[0]}" if span[0] == span[1] else f"{result.document} pp. {span[0]}-{span[1]}"


def answer_rank(question: Question, results: Sequence[SearchResult]) -> int | None:
    """1-based rank of the first answer among ``results``: over distinct documents in order for a
    document-level question, over the passages themselves for a page-level one."""
    if question.pages:
        return next((i + 1 for i, r in enumerate(results) if question.answered_by(r.document, _span(r))), None)
    return next((i + 1 for i, d in enumerate(_documents(results)) if d in question.expected), None)


def retrieval_report(questions: list[Question], service: Searcher, mode: SearchMode, name: str) -> SliceReport:
    """hit@1, hit@3, MRR and false abstention of ``questions`` at strict confidence (distinct
    documents in order, or passages for a page-level question: :func:`answer_rank`)."""
    report = SliceReport(name, mode)
    hit1 = hit3 = rr = 0.0
    abstained = 0
    for q in questions:
        response = service.search(q.question, limit=GATE_LIMIT, mode=mode, confidence_level="strict")
        docs = _documents(response.results)
        report.n += 1
        rank = answer_rank(q, response.results)
        if response.status == "NO_RELEVANT_CONTEXT":
            abstained += 1
            report.failures.append({"id": q.id, "outcome": "false_abstention"})
            continue
        if rank is not None:
            rr += 1.0 / rank
            hit1 += rank == 1
            hit3 += rank <= 3
        if rank is not None and rank <= 3:
            report.passed += 1
        else:
            got = [_cited(r) for r in response.results[:3]] if q.pages else docs[:3]
            report.failures.append({"id": q.id, "outcome": "miss", "got": got})
    n = max(report.n, 1)
    report.metrics = {"hit@1": hit1 / n, "hit@3": hit3 / n, "mrr": rr / n, "false_abstention": abstained / n}
    return report


def abstention_report(
    questions: list[Question], service: Searcher, mode: SearchMode, name: str = "unanswerable"
) -> SliceReport:
    """The share of ``questions`` abstained on at strict confidence; each answer is a failure."""
    report = SliceReport(name, mode)
    for q in questions:
        response = service.search(q.question, limit=GATE_LIMIT, mode=mode, confidence_level="strict")
        report.n += 1
        if response.status == "NO_RELEVANT_CONTEXT":
            report.passed += 1
        else:
            top = response.results[0]
            report.failures.append(
                {"id": q.id, "outcome": "false_answer", "document": top.document, "confidence": top.confidence}
            )
    report.metrics = {"abstention_rate": report.passed / max(report.n, 1)}
    return report


def _superseded(questions: list[Question], service: Searcher, mode: SearchMode, superseded: set[str]) -> SliceReport:
    report = SliceReport("superseded", mode)
    cited_old = 0
    for q in questions:
        response = service.search(q.question, limit=GATE_LIMIT, mode=mode, confidence_level="strict")
        docs = _documents(response.results)
        report.n += 1
        old = [d for d in docs if d in superseded]
        cited_old += bool(old)
        if not old and any(d in q.expected for d in docs[:3]):
            report.passed += 1
        else:
            report.failures.append({"id": q.id, "outcome": "superseded_cited" if old else "miss", "got": docs[:3]})
    report.metrics = {"superseded_cited": float(cited_old)}
    return report


def _denied(questions: list[Question], service: Searcher, mode: SearchMode) -> SliceReport:
    report = SliceReport("denied", mode)
    leaks = 0
    for q in questions:
        response = service.search(q.question, limit=20, mode=mode, confidence_level="normal")
        report.n += 1
        bad = [
            r.citation_id
            for r in response.results
            if r.document in q.expected or Classification[r.classification.upper()] > service.ceiling
        ]
        if bad:
            leaks += len(bad)
            report.failures.append({"id": q.id, "outcome": "leak", "count": len(bad)})
        else:
            report.passed += 1
    report.metrics = {"leaks": float(leaks)}
    return report


def _secret(questions: list[Question], service: Searcher, mode: SearchMode) -> SliceReport:
    report = SliceReport("secret", mode)
    violations = 0
    for q in questions:
        response = service.search(q.question, limit=20, mode=mode, confidence_level="normal")
        report.n += 1
        found = [r.citation_id for r in response.results if find_credentials(r.text)]
        if found:
            violations += len(found)
            report.failures.append({"id": q.id, "outcome": "credential_served", "count": len(found)})
        else:
            report.passed += 1
    report.metrics = {"violations": float(violations)}
    return report


def run_slices(
    questions: Iterable[Question],
    service_for: SearcherFor,
    *,
    mode: SearchMode = "hybrid",
    ceiling: Classification = Classification.INTERNAL,
    superseded_documents: set[str] | None = None,
    governance_for: SearcherFor | None = None,
) -> list[SliceReport]:
    """Score every slice present in ``questions``.

    ``service_for(ceiling, gate_on)`` answers the quality slices; ``governance_for`` (default:
    the same) answers denied, secret and superseded.
    """
    by_slice: dict[str, list[Question]] = {}
    for q in questions:
        by_slice.setdefault(q.slice, []).append(q)
    governance_for = governance_for or service_for
    gated = service_for(ceiling, True)
    reports: list[SliceReport] = []
    for name in ("answerable", "paraphrase", "crosslingual"):
        if name in by_slice:
            reports.append(retrieval_report(by_slice[name], gated, mode, name))
    if "unanswerable" in by_slice:
        reports.append(abstention_report(by_slice["unanswerable"], gated, mode))
    if "superseded" in by_slice:
        reports.append(
            _superseded(by_slice["superseded"], governance_for(ceiling, True), mode, superseded_documents or set())
        )
    if "denied" in by_slice:
        below = Classification(int(Classification.RESTRICTED) - 1)
        reports.append(_denied(by_slice["denied"], governance_for(below, False), mode))
    if "secret" in by_slice:
        reports.append(_secret(by_slice["secret"], governance_for(Classification.RESTRICTED, False), mode))
    return reports
