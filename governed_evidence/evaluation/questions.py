"""Labelled questions: ``{id, slice, question, expected: [paths], pages?: [N], note}`` per JSONL line.

``pages`` (optional) makes a question page-level: a result answers it only when it comes from an
expected document *and* its page span overlaps one of those pages (1-based physical PDF pages).
Without it a question is document-level, as over a folder of many short policies, where the right
document is the unit a reader opens. Over a few long PDFs the right document is nearly free and
the unit is the passage.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from governed_evidence.errors import InvalidRequestError

__all__ = ["SLICES", "Question", "load_questions"]

#: ``crosslingual``: a question in French or German about a document in English, scored as
#: ``answerable`` is (a measured slice, thresholded nowhere).
SLICES = ("answerable", "paraphrase", "crosslingual", "unanswerable", "denied", "secret", "superseded")


@dataclass(frozen=True)
class Question:
    id: str
    slice: str
    question: str
    expected: tuple[str, ...]
    note: str = ""
    #: Pages the answer is stated on (page-level question); empty for a document-level one.
    pages: tuple[int, ...] = ()

    def answered_by(self, document: str, pages: tuple[int, int] | None) -> bool:
        """Whether a passage of ``document`` spanning ``pages`` (first, last) answers this question."""
        if document not in self.expected:
            return False
        if not self.pages:
            return True
        if pages is None:
            return False
        first, last = pages
        return any(first <= page <= last for page in self.pages)


def load_questions(path: Path) -> list[Question]:
    questions: list[Question] = []
    seen: set[str] = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            q = Question(
                id=str(raw["id"]),
                slice=str(raw["slice"]),
                question=str(raw["question"]),
                expected=tuple(str(e) for e in raw.get("expected", [])),
                note=str(raw.get("note", "")),
                pages=tuple(int(n) for n in raw.get("pages", [])),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidRequestError(f"{path.name} line {number}: not a question record ({exc})") from None
        if q.slice not in SLICES:
            raise InvalidRequestError(f"{path.name} line {number}: unknown slice {q.slice!r}")
        if q.pages and not q.expected:
            raise InvalidRequestError(f"{path.name} line {number}: pages given without an expected document")
        if q.id in seen:
            raise InvalidRequestError(f"{path.name} line {number}: duplicate id {q.id!r}")
        seen.add(q.id)
        questions.append(q)
    return questions
