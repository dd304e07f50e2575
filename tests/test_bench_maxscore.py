"""benchmarks.maxscore: both ways timed over the same queries, and any differing ranking is an error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks import maxscore
from governed_evidence.config import Classification
from governed_evidence.search import impacts as search_impacts
from governed_evidence.search import maxscore as search_maxscore
from governed_evidence.search.impacts import load_impacts
from governed_evidence.store.connection import connect

QUERIES = [["secur", "polici"], ["access", "review", "secur"], ["zzznotaterm"], []]


def test_both_ways_are_timed_for_every_query(built_index: Path) -> None:
    impacts = load_impacts(connect(built_index, readonly=True), Classification.RESTRICTED)
    assert impacts is not None
    out = maxscore.compare(impacts, QUERIES, depth=2)
    assert out["rows"] == impacts.rows and out["queries"] == len(QUERIES)
    assert out["every_row_ms"]["n"] == out["maxscore_ms"]["n"] == len(QUERIES)
    assert 0 <= out["answered_by_maxscore"] <= len(QUERIES)


def test_a_ranking_that_differs_is_an_error(built_index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    impacts = load_impacts(connect(built_index, readonly=True), Classification.RESTRICTED)
    assert impacts is not None

    def nothing(phrases: list[search_maxscore.Phrase], depth: int, essential_share: float) -> np.ndarray | None:
        return np.zeros(0, dtype=np.int64)

    # MaxScore broken to find nothing: the benchmark refuses to time a ranking that differs.
    monkeypatch.setattr(search_impacts, "pruned_top", nothing)
    with pytest.raises(AssertionError, match="differently"):
        maxscore.compare(impacts, [["secur", "polici"]], depth=2)
