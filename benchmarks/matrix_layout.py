"""The held matrix's layout: one query's product over row-major against column-major rows.

Up to ``EXACT_ROWS`` a search scores the query against every held vector with one
matrix-vector product. OpenBLAS computes it with a different kernel for each layout: a dot
product per row for a row-major matrix, one pass over each dimension's column for a
column-major one. This times both on the real vectors of the generated indexes, the two
layouts in turn for each query (one BLAS thread, as a search runs), and checks that they
rank the same top 50.

    .venv/bin/python -m benchmarks.matrix_layout --sizes 10000

Needs the generated indexes' vectors (``make bench-quick`` or ``make bench`` writes
``.cache/bench/scifact-N.vectors.npy``) and the saved query vectors.
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # run as a program only: importing this module (the tests) changes nothing
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import time
from typing import Any

import numpy as np

from benchmarks.stats import latency, machine

__all__ = ["main", "time_layouts"]

TOP = 50
WARMUP = 20


def time_layouts(rows: np.ndarray, queries: np.ndarray, passes: int = 3) -> dict[str, Any]:
    """p50/p95 ms of ``rows @ q`` for each layout, alternated per query, and their top-k agreement."""
    layouts = {
        "row_major": np.ascontiguousarray(rows, dtype=np.float32),
        "column_major": np.asfortranarray(rows, dtype=np.float32),
    }
    for q in queries[:WARMUP]:
        for m in layouts.values():
            m @ q
    samples: dict[str, list[float]] = {name: [] for name in layouts}
    names = list(layouts)
    agree = 0
    for p in range(passes):
        for i, q in enumerate(queries):
            order = names if (p + i) % 2 == 0 else names[::-1]
            tops = []
            for name in order:
                t0 = time.perf_counter()
                scores = layouts[name] @ q
                samples[name].append((time.perf_counter() - t0) * 1000)
                tops.append(set(np.argpartition(-scores, TOP - 1)[:TOP].tolist()))
            agree += tops[0] == tops[1]
    out: dict[str, Any] = {name: latency(s) for name, s in samples.items()}
    # From the unrounded medians: a product over a few hundred rows rounds to 0.00 ms.
    row_major, column_major = (float(np.median(samples[name])) for name in names)
    out["speedup_p50"] = round(row_major / column_major, 2) if column_major > 0 else None
    out["same_top_50"] = round(agree / (passes * len(queries)), 4)
    return out


def main(argv: list[str] | None = None) -> None:
    from benchmarks.run import BENCH_DIR

    parser = argparse.ArgumentParser(prog="python -m benchmarks.matrix_layout", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--passes", type=int, default=3)
    ns = parser.parse_args(argv)
    queries = np.load(BENCH_DIR / "query-vectors.npy").astype(np.float32)
    out: dict[str, Any] = {"machine": machine()}
    for size in [int(s) for s in ns.sizes.split(",") if s]:
        path = BENCH_DIR / f"scifact-{size}.vectors.npy"
        if not path.is_file():
            raise SystemExit(f"{path} is absent: `make bench-quick` (10k) or `make bench` writes it")
        rows = np.load(path)
        rows = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
        out[str(size)] = time_layouts(rows, queries, ns.passes)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
