"""The figures that justify the gate's thresholds, measured on the sample corpus eval slices.

Real default model, the committed question set (evals/questions.jsonl), strict gate, caller
ceiling internal. Measured when the thresholds were chosen (hybrid):

    answerable   n=26  hit@1 0.96  hit@3 1.00  false abstentions 0
    paraphrase   n=21  hit@1 0.67  hit@3 0.81  false abstentions 3
    unanswerable n=15  abstained 8 (0.53)
    superseded   n=9   successor found 9, superseded cited 0
    denied       n=22  leaks 0 (ceiling internal, gate off, k=20)
    secret       n=5   violations 0 (ceiling restricted, gate off, k=20)

The bounds below leave a little room for platform float noise, never for a regression in
what the gate promises. The must-be-zero slices are exact zeros.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from governed_evidence.config import Classification
from governed_evidence.evaluation import load_questions, run_slices
from governed_evidence.search.gate import GateThresholds
from governed_evidence.search.service import SearchService
from governed_evidence.store.connection import connect

QUESTIONS = Path(__file__).resolve().parents[2] / "evals" / "questions.jsonl"


@pytest.fixture(scope="module")
def reports(sample_index: Path, minilm) -> dict[str, dict[str, object]]:  # type: ignore[no-untyped-def]
    conn = connect(sample_index, readonly=True)
    superseded = {str(r[0]) for r in conn.execute("SELECT path FROM documents WHERE status = 'superseded'")}
    conn.close()

    def service(ceiling: Classification, gate: bool) -> SearchService:
        return SearchService(sample_index, ceiling=ceiling, embedder_factory=lambda: minilm, gate_enabled=gate)

    out = run_slices(load_questions(QUESTIONS), service, mode="hybrid", superseded_documents=superseded)
    return {r.slice: r.as_dict() for r in out}


def test_answerable_are_found_and_not_abstained(reports: dict[str, dict[str, object]]) -> None:
    m = reports["answerable"]["metrics"]
    assert m["hit@3"] >= 0.96  # type: ignore[index]
    assert m["false_abstention"] == 0.0  # type: ignore[index]


def test_paraphrases_are_found_by_meaning(reports: dict[str, dict[str, object]]) -> None:
    m = reports["paraphrase"]["metrics"]
    assert m["hit@3"] >= 0.80  # type: ignore[index]
    assert m["false_abstention"] <= 3 / 21 + 1e-3  # type: ignore[index]  (metrics are rounded to 4 places)


def test_strict_gate_abstains_on_most_unanswerable(reports: dict[str, dict[str, object]]) -> None:
    assert reports["unanswerable"]["metrics"]["abstention_rate"] >= 0.5  # type: ignore[index]


def test_must_be_zero_slices(reports: dict[str, dict[str, object]]) -> None:
    assert reports["denied"]["metrics"]["leaks"] == 0  # type: ignore[index]
    assert reports["secret"]["metrics"]["violations"] == 0  # type: ignore[index]
    assert reports["superseded"]["metrics"]["superseded_cited"] == 0  # type: ignore[index]
    assert reports["superseded"]["pass"] == reports["superseded"]["n"]


def test_gate_off_abstains_on_nothing(sample_index: Path, minilm) -> None:  # type: ignore[no-untyped-def]
    """Sabotage check: without the gate, every unanswerable question gets an answer."""
    svc = SearchService(
        sample_index, ceiling=Classification.INTERNAL, embedder_factory=lambda: minilm, gate_enabled=False
    )
    questions = [q for q in load_questions(QUESTIONS) if q.slice == "unanswerable"]
    assert all(svc.search(q.question).status == "OK" for q in questions)


def test_thresholds_are_ordered() -> None:
    t = GateThresholds()
    assert 0.0 < t.normal < t.strict < 1.0
