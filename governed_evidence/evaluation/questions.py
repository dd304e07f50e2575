"""Labelled questions: ``{id, slice, question, expected: [paths], note}`` per JSONL line."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from governed_evidence.errors import InvalidRequestError

__all__ = ["SLICES", "Question", "load_questions"]

SLICES = ("answerable", "paraphrase", "unanswerable", "denied", "secret", "superseded")


@dataclass(frozen=True)
class Question:
    id: str
    slice: str
    question: str
    expected: tuple[str, ...]
    note: str = ""


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
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidRequestError(f"{path.name} line {number}: not a question record ({exc})") from None
        if q.slice not in SLICES:
            raise InvalidRequestError(f"{path.name} line {number}: unknown slice {q.slice!r}")
        if q.id in seen:
            raise InvalidRequestError(f"{path.name} line {number}: duplicate id {q.id!r}")
        seen.add(q.id)
        questions.append(q)
    return questions
