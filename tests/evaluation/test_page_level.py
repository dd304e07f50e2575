"""Page-level questions: over a few long PDFs the passage, not the document, is what is scored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from governed_evidence.config import Classification
from governed_evidence.errors import InvalidRequestError
from governed_evidence.evaluation.questions import Question, load_questions
from governed_evidence.evaluation.runner import answer_rank, retrieval_report
from governed_evidence.search.models import SearchResponse, SearchResult, Span


def _result(rank: int, document: str, pages: tuple[int, int] | None) -> SearchResult:
    return SearchResult(
        rank=rank,
        citation_id=f"c{rank}",
        document=document,
        title="t",
        heading="",
        pages=None if pages is None else Span(start=pages[0], end=pages[1]),
        classification="public",
        matched_by="both",
        confidence=0.5,
        text="x",
    )


def test_a_page_level_question_is_answered_only_by_a_passage_on_its_pages() -> None:
    q = Question("q", "answerable", "?", ("a.pdf",), pages=(12, 30))
    assert q.answered_by("a.pdf", (12, 12))
    assert q.answered_by("a.pdf", (11, 13)), "a span over a page break overlaps"
    assert q.answered_by("a.pdf", (29, 31))
    assert not q.answered_by("a.pdf", (13, 29)), "between the two pages, neither is covered"
    assert not q.answered_by("b.pdf", (12, 12)), "another document's page 12"
    assert not q.answered_by("a.pdf", None), "a passage without pages cannot be placed"


def test_a_document_level_question_is_answered_by_any_passage_of_its_document() -> None:
    q = Question("q", "answerable", "?", ("a.md",))
    assert q.answered_by("a.md", None)
    assert q.answered_by("a.md", (1, 1))
    assert not q.answered_by("b.md", None)


def test_answer_rank_counts_passages_for_page_level_and_documents_otherwise() -> None:
    results = [
        _result(1, "a.pdf", (1, 1)),
        _result(2, "b.pdf", (5, 5)),
        _result(3, "a.pdf", (7, 8)),
        _result(4, "a.pdf", (9, 9)),
    ]
    assert answer_rank(Question("q", "answerable", "?", ("a.pdf",), pages=(8,)), results) == 3
    assert answer_rank(Question("q", "answerable", "?", ("a.pdf",), pages=(9,)), results) == 4
    assert answer_rank(Question("q", "answerable", "?", ("a.pdf",), pages=(2,)), results) is None
    # Document level: a.pdf is the first distinct document, b.pdf the second.
    assert answer_rank(Question("q", "answerable", "?", ("b.pdf",)), results) == 2
    assert answer_rank(Question("q", "answerable", "?", ("c.pdf",)), results) is None


def _write(path: Path, record: dict[str, object]) -> Path:
    path.write_text(json.dumps(record) + "\n")
    return path


def test_pages_are_read_from_the_question_file(tmp_path: Path) -> None:
    record = {"id": "x", "slice": "answerable", "question": "?", "expected": ["a.pdf"], "pages": [3, 4]}
    (q,) = load_questions(_write(tmp_path / "q.jsonl", record))
    assert q.pages == (3, 4)


@pytest.mark.parametrize(
    ("record", "words"),
    [
        ({"id": "x", "slice": "unanswerable", "question": "?", "expected": [], "pages": [3]}, "without an expected"),
        ({"id": "x", "slice": "answerable", "question": "?", "expected": ["a.pdf"], "pages": ["three"]}, "line 1"),
    ],
)
def test_bad_pages_fail_with_the_line(tmp_path: Path, record: dict[str, object], words: str) -> None:
    with pytest.raises(InvalidRequestError, match=words):
        load_questions(_write(tmp_path / "q.jsonl", record))


class _Fixed:
    """A searcher answering every question with the same passages."""

    ceiling = Classification.PUBLIC

    def __init__(self, results: list[SearchResult]) -> None:
        self.results = results

    def search(self, query: str, **_: object) -> SearchResponse:
        return SearchResponse(
            status="OK", requested_mode="hybrid", search_mode="hybrid", confidence="strict", gate="on",
            ceiling="public", withheld=0, results=self.results,
        )  # fmt: skip


def test_the_strict_report_scores_page_level_questions_by_passage_and_lists_the_pages_it_got() -> None:
    searcher = _Fixed([_result(1, "a.pdf", (1, 1)), _result(2, "a.pdf", (4, 5)), _result(3, "a.pdf", (9, 9))])
    questions = [
        Question("on-4", "answerable", "?", ("a.pdf",), pages=(4,)),
        Question("on-30", "answerable", "?", ("a.pdf",), pages=(30,)),
    ]
    report = retrieval_report(questions, searcher, "hybrid", "pdfs:answerable")
    assert report.metrics["hit@1"] == 0.0
    assert report.metrics["hit@3"] == 0.5
    assert report.metrics["mrr"] == 0.25
    assert report.failures == [{"id": "on-30", "outcome": "miss", "got": ["a.pdf p. 1", "a.pdf pp. 4-5", "a.pdf p. 9"]}]
