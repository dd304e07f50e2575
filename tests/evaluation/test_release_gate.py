"""The eval gate file and its checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from governed_evidence.errors import ConfigError, InvalidRequestError
from governed_evidence.evaluation.questions import load_questions
from governed_evidence.evaluation.release_gate import evaluate_gate, load_gate
from governed_evidence.evaluation.runner import SliceReport

REPO = Path(__file__).resolve().parents[2]


def test_committed_gate_file_loads_with_hard_zeros() -> None:
    spec = load_gate(REPO / "evals" / "gate.toml")
    assert spec["denied"]["max_leaks"] == 0
    assert spec["secret"]["max_violations"] == 0
    assert spec["superseded"]["max_superseded_cited"] == 0


@pytest.mark.parametrize(
    "text",
    [
        "[denied]\nmax_leaks = 1\n",
        "[secret]\nmax_violations = 2\n",
        "[superseded]\nmax_superseded_cited = 1\n",
    ],
)
def test_a_gate_file_cannot_loosen_a_must_be_zero_check(tmp_path: Path, text: str) -> None:
    path = tmp_path / "gate.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="must be 0"):
        load_gate(path)


def test_missing_must_be_zero_sections_are_added(tmp_path: Path) -> None:
    path = tmp_path / "gate.toml"
    path.write_text("[answerable]\nmin_hit_at_3 = 0.9\n")
    spec = load_gate(path)
    assert spec["denied"] == {"max_leaks": 0.0}


def test_unknown_bound_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "gate.toml"
    path.write_text("[answerable]\nmin_vibes = 0.9\n")
    with pytest.raises(ConfigError, match="unknown bound"):
        load_gate(path)


def test_checks_pass_fail_and_missing() -> None:
    spec = {"answerable": {"min_hit_at_3": 0.9}, "denied": {"max_leaks": 0.0}, "secret": {"max_violations": 0.0}}
    reports = [
        SliceReport("answerable", "hybrid", 10, 9, {"hit@3": 0.9}),
        SliceReport("denied", "hybrid", 5, 4, {"leaks": 1.0}),
    ]
    checks = {(c.slice, c.metric): c for c in evaluate_gate(spec, reports)}
    assert checks[("answerable", "hit@3")].passed
    assert not checks[("denied", "leaks")].passed and checks[("denied", "leaks")].must_be_zero
    assert checks[("secret", "violations")].value is None and not checks[("secret", "violations")].passed


def test_question_file_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"id": "a", "slice": "answerable", "question": "q", "expected": []}\n{"id": "b"}\n')
    with pytest.raises(InvalidRequestError, match="line 2"):
        load_questions(path)
    path.write_text('{"id": "a", "slice": "vibes", "question": "q"}\n')
    with pytest.raises(InvalidRequestError, match="unknown slice"):
        load_questions(path)


def test_committed_question_set_has_every_slice_at_its_size() -> None:
    questions = load_questions(REPO / "evals" / "questions.jsonl")
    counts: dict[str, int] = {}
    for q in questions:
        counts[q.slice] = counts.get(q.slice, 0) + 1
    minimum = {"answerable": 25, "paraphrase": 20, "unanswerable": 15, "denied": 20, "secret": 5, "superseded": 8}
    assert all(counts.get(s, 0) >= n for s, n in minimum.items()), counts
