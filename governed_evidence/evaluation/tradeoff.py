"""What the report draws beside the slices: the gate's trade-off as its threshold moves, and
recall before the gate.

The gate answers a question when at least one candidate reaches the threshold, so a question's
fate at *any* threshold follows from one number: the best confidence among its candidates. One
ranking per question (the ranking a search makes before the gate) gives that number and where
the answer stood among the first 50 candidates; from them:

* the trade-off curve: at each threshold, the share of unanswerable questions abstained on
  against the share of answerable (and paraphrase) questions falsely withheld. At the shipped
  threshold it reads what the slices measured (a test holds the two equal);
* ``recall@10`` and ``recall@50``: the answer among the first 10 or 50 candidates of the mode's
  own ranking, which no reordering and no threshold can improve on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from governed_evidence.evaluation.questions import Question
from governed_evidence.search.limits import SearchMode

if TYPE_CHECKING:
    from governed_evidence.search.candidates import Candidate, Ranking
    from governed_evidence.search.service import SearchService

__all__ = [
    "RETRIEVAL_SLICES",
    "QuestionProbe",
    "answer_position",
    "candidate_pages",
    "probe_questions",
    "recall_figures",
    "tradeoff_curve",
]

#: Slices whose questions have an answer in the corpus (a withheld one is a false abstention).
RETRIEVAL_SLICES = ("answerable", "paraphrase")
#: Candidates looked through for recall (``recall@50``).
_RECALL_DEPTH = 50
#: Thresholds the curve is read at (0.00 to 1.00 by 0.01), besides the shipped one.
_GRID = tuple(i / 100 for i in range(101))


@dataclass(frozen=True)
class QuestionProbe:
    """One question's ranking as the gate and recall read it."""

    id: str
    slice: str
    #: The best confidence among its candidates (0 with none): withheld at any threshold above it.
    best: float
    #: 0-based position of the first candidate answering it among the first 50 (None: not there,
    #: or an unanswerable question).
    answer_at: int | None


def candidate_pages(ranking: Ranking, candidate: Candidate) -> tuple[int, int] | None:
    """A candidate's page span (first, last), None for a document without pages."""
    row = ranking.rows([candidate.passage_id])[candidate.passage_id]
    if row.page_start is None or row.page_end is None:
        return None
    return row.page_start, row.page_end


def answer_position(question: Question, ranking: Ranking, depth: int) -> int | None:
    """Where the first candidate that answers ``question`` stands in ``ranking`` (0-based, within
    ``depth``); a candidate's row (its pages) is read only when its document is an expected one."""
    paths = ranking.document_paths()[:depth]
    for i, (candidate, path) in enumerate(zip(ranking.candidates, paths, strict=False)):
        if path in question.expected and question.answered_by(path, candidate_pages(ranking, candidate)):
            return i
    return None


def probe_questions(questions: Iterable[Question], service: SearchService, mode: SearchMode) -> list[QuestionProbe]:
    """Rank each answerable, paraphrase and unanswerable question once, as a search would before
    its gate, at the service's ceiling."""
    probes: list[QuestionProbe] = []
    for q in questions:
        if q.slice not in (*RETRIEVAL_SLICES, "unanswerable"):
            continue
        ranking = service.rank(q.question, mode)
        best = max(0.0, max((c.confidence for c in ranking.candidates), default=0.0))
        answer_at = None if q.slice == "unanswerable" else answer_position(q, ranking, _RECALL_DEPTH)
        probes.append(QuestionProbe(q.id, q.slice, best, answer_at))
    return probes


def _share(values: Sequence[float], threshold: float) -> float:
    """The share of ``values`` below ``threshold`` (withheld by a gate at it), to 4 places."""
    return round(sum(v < threshold for v in values) / len(values), 4) if values else 0.0


def tradeoff_curve(probes: Sequence[QuestionProbe], shipped: float) -> dict[str, Any]:
    """The share abstained and the share falsely withheld at each threshold of the grid and at
    ``shipped``; points in threshold order."""
    answerable = [p.best for p in probes if p.slice in RETRIEVAL_SLICES]
    unanswerable = [p.best for p in probes if p.slice == "unanswerable"]
    thresholds = sorted({*_GRID, shipped})
    return {
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "points": [
            {
                "threshold": t,
                "abstained": _share(unanswerable, t),
                "falsely_withheld": _share(answerable, t),
            }
            for t in thresholds
        ],
        "shipped": {
            "threshold": shipped,
            "abstained": _share(unanswerable, shipped),
            "falsely_withheld": _share(answerable, shipped),
        },
    }


def recall_figures(probes: Sequence[QuestionProbe]) -> dict[str, Any]:
    """Recall before the gate of the answerable and paraphrase questions, per slice and together."""
    out: dict[str, Any] = {}
    groups = {name: [p for p in probes if p.slice == name] for name in RETRIEVAL_SLICES}
    groups["all"] = [p for p in probes if p.slice in RETRIEVAL_SLICES]
    for name, members in groups.items():
        if not members:
            continue
        n = len(members)
        out[name] = {
            "n": n,
            "recall@10": round(sum(p.answer_at is not None and p.answer_at < 10 for p in members) / n, 4),
            "recall@50": round(sum(p.answer_at is not None for p in members) / n, 4),
        }
    return out
