"""benchmarks.projection: every setting measured against the full product, and the rule that chooses."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import projection
from governed_evidence.search import vectors


def test_every_setting_is_measured_and_rescoring_everything_is_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(projection, "DIMENSIONS", (4, 8))
    monkeypatch.setattr(projection, "RESCORED", (60, 600))
    rng = np.random.default_rng(4)
    rows = rng.standard_normal((600, 32)).astype(np.float32)
    queries = {"train": rng.standard_normal((8, 32)).astype(np.float32), "test": rng.standard_normal((5, 32))}
    out = projection.measure(rows, {k: v.astype(np.float32) for k, v in queries.items()}, passes=1)
    assert [(s["dimensions"], s["rescored"]) for s in out["settings"]] == [(4, 60), (4, 600), (8, 60), (8, 600)]
    for setting in out["settings"]:
        assert setting["ms"]["n"] == 8
        if setting["rescored"] == 600:
            # Every row rescored exactly: the full product's top 50, whatever the projection.
            assert setting["recall_at_50_train"] == setting["recall_at_50_test"] == 1.0
    # 60 rescored of 600 random rows through 4 of 32 directions cannot find all 50 nearest.
    assert out["settings"][0]["recall_at_50_train"] < 1.0
    # The rescoring count is the product's own again afterwards.
    assert vectors.projected_count(10_000, 50) == 500


def test_the_rule_takes_the_fastest_setting_that_keeps_recall_on_every_set() -> None:
    def row(d: int, r: int, recall: float, ms: float) -> dict[str, object]:
        return {"dimensions": d, "rescored": r, "recall_at_50_train": recall, "ms": {"p50": ms}}

    results = {
        "a": {"settings": [row(64, 500, 0.990, 0.2), row(96, 500, 0.998, 0.3), row(128, 500, 0.999, 0.4)]},
        "b": {"settings": [row(64, 500, 0.999, 0.2), row(96, 500, 0.996, 0.3), row(128, 500, 0.999, 0.4)]},
    }
    chosen = projection.choose(results, "train")
    assert chosen is not None and (chosen["dimensions"], chosen["rescored"]) == (96, 500)
    assert projection.choose(results, "train", floor=0.9999) is None
