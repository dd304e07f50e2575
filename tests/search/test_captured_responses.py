"""Every way a search can run gives the captured answers on the sample corpus.

The capture (tests/search/captured.py says how it is made and when to make it again) holds
1,298 answers: every question of the sample corpus's suite in each mode at each ceiling, and
hybrid at the normal gate and without the gate. Each strategy :mod:`~governed_evidence.search.strategy`
can pick is forced in turn and must give them all, within what the contract allows: a
confidence may move by one step in its fourth place, and results whose confidences tie may
change places.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from governed_evidence.config import Classification
from tests.search import captured


@dataclass(frozen=True)
class Forced:
    """A strategy forced by its memory and thresholds, and the sources it must be seen to use
    (the search's log names them too)."""

    memory: int
    lists_held: bool
    vector_search: str
    tuning: dict[str, Any] = field(default_factory=dict)


#: The strategies a search can take.
STRATEGIES = {
    "shipped: impact lists, exact product": Forced(captured.SHIPPED_MEMORY, True, "exact product"),
    "SQL alone: FTS5, vec0 KNN": Forced(0, False, "vec0 KNN"),
    "MaxScore, sign-code prefilter, query on a worker": Forced(
        captured.SHIPPED_MEMORY,
        True,
        "sign-code prefilter",
        {"pruned_rows": 0, "exact_rows": 0, "prefilter_min_recall": 0.0, "caller_thread_rows": 0},
    ),
}


@pytest.fixture(scope="module")
def embedder() -> captured.RecordedEmbedder:
    return captured.RecordedEmbedder()


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, embedder: captured.RecordedEmbedder) -> Path:
    return captured.build(tmp_path_factory.mktemp("captured") / "index.sqlite", embedder)


@pytest.fixture(scope="module")
def capture() -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    return captured.load()


@pytest.fixture(params=list(STRATEGIES))
def strategy(
    request: pytest.FixtureRequest, index: Path, embedder: captured.RecordedEmbedder
) -> Iterator[tuple[str, captured.Services]]:
    forced = STRATEGIES[request.param]
    services = captured.searchers(index, embedder, forced.memory, **forced.tuning)
    yield request.param, services
    for service in services.values():
        service.close()
        service.reader.close()


def test_every_strategy_gives_the_captured_answers(
    strategy: tuple[str, captured.Services],
    capture: tuple[dict[str, dict[str, Any]], dict[str, list[str]]],
) -> None:
    name, services = strategy
    forced = STRATEGIES[name]
    for (ceiling, _), service in services.items():
        assert (service.impacts.copy is not None) is forced.lists_held, (name, ceiling)
        assert service.status().vector_search == forced.vector_search, (name, ceiling)

    chosen = list(captured.cases())
    answers, passages = captured.run(services, chosen)
    expected, expected_passages = capture

    assert set(answers) == set(expected), "the cases differ from the capture's: record again"
    departures = {key: found for key in expected if (found := captured.differences(expected[key], answers[key]))}
    assert not departures, f"{len(departures)} of {len(expected)} answers differ, e.g. {list(departures.items())[:3]}"
    # What each served passage is (its level, its document, its heading) is as captured.
    assert passages == {cid: expected_passages.get(cid) for cid in passages}
    # The capture is not empty of what it is meant to check.
    served = [a for a in expected.values() if a["results"]]
    assert len(served) > 300 and any(a["status"] == "NO_RELEVANT_CONTEXT" for a in expected.values())


def test_nothing_served_above_the_ceiling_in_the_capture(
    capture: tuple[dict[str, dict[str, Any]], dict[str, list[str]]],
) -> None:
    """The capture itself obeys the ceiling: an answer recorded after a leak could not pass."""
    answers, passages = capture
    rank = {c.label: c for c in Classification}
    for key, one in answers.items():
        ceiling = rank[key.split("|")[1]]
        for cid, *_ in one["results"]:
            assert rank[passages[cid][0]] <= ceiling, (key, cid)


# -- the comparison itself ------------------------------------------------------------


def _answer(*results: tuple[str, str, float], reason: str | None = None) -> dict[str, Any]:
    return {
        "status": "OK" if results else "NO_RELEVANT_CONTEXT",
        "reason": reason,
        "search_mode": "hybrid",
        "search_mode_reason": None,
        "withheld": 3,
        "results": [list(r) for r in results],
    }


def test_the_comparison_allows_what_the_contract_allows() -> None:
    want = _answer(("a", "both", 0.61), ("b", "keyword", 0.42), ("c", "semantic", 0.42), ("d", "both", 0.3))
    # Tied confidences swapped; one confidence moved by one step in the fourth place.
    got = _answer(("a", "both", 0.6101), ("c", "semantic", 0.42), ("b", "keyword", 0.42), ("d", "both", 0.3))
    assert captured.differences(want, got) == []
    # The last results tie, and the limit cut between equals: another of the same confidence.
    want = _answer(("a", "both", 0.61), ("b", "keyword", 0.42), ("c", "semantic", 0.42))
    got = _answer(("a", "both", 0.61), ("b", "keyword", 0.42), ("e", "semantic", 0.42))
    assert captured.differences(want, got) == []
    # A reason's score moved in its fourth place.
    want = _answer(reason="no passage reached the strict confidence threshold (0.365); the best candidate scored 0.2")
    got = _answer(reason="no passage reached the strict confidence threshold (0.365); the best candidate scored 0.2001")
    assert captured.differences(want, got) == []


def test_the_comparison_finds_what_the_contract_forbids() -> None:
    want = _answer(("a", "both", 0.61), ("b", "keyword", 0.42), ("d", "both", 0.3))
    # An order that is not a tie's.
    assert captured.differences(want, _answer(("b", "keyword", 0.42), ("a", "both", 0.61), ("d", "both", 0.3)))
    # A confidence moved by more than one step of the fourth place.
    assert captured.differences(want, _answer(("a", "both", 0.6102), ("b", "keyword", 0.42), ("d", "both", 0.3)))
    # Another passage, matched otherwise, one result fewer, another count withheld.
    assert captured.differences(want, _answer(("a", "both", 0.61), ("x", "keyword", 0.42), ("d", "both", 0.3)))
    assert captured.differences(want, _answer(("a", "semantic", 0.61), ("b", "keyword", 0.42), ("d", "both", 0.3)))
    assert captured.differences(want, _answer(("a", "both", 0.61), ("b", "keyword", 0.42)))
    assert captured.differences(want, {**want, "withheld": 4})
    # A reason that says something else.
    assert captured.differences(_answer(reason="no passage matched the query"), _answer(reason="another"))
