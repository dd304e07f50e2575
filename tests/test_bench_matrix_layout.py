"""benchmarks.matrix_layout: both layouts timed on the same rows, and their rankings compared."""

from __future__ import annotations

import numpy as np

from benchmarks.matrix_layout import time_layouts


def test_both_layouts_are_timed_per_query_and_rank_alike() -> None:
    rng = np.random.default_rng(2)
    rows = rng.standard_normal((500, 32)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    queries = rng.standard_normal((30, 32)).astype(np.float32)
    out = time_layouts(rows, queries, passes=2)
    assert out["row_major"]["n"] == out["column_major"]["n"] == 60
    # The same rows in either layout: the same top 50 for every query.
    assert out["same_top_50"] == 1.0
    assert out["speedup_p50"] > 0
