"""The keyword top k by MaxScore against scoring every row: where pruning starts to pay.

For each generated index present, the SciFact queries' phrases are ranked (50 best, the
impact lists of ceiling ``internal``) both ways, alternated query by query: every row scored
(``ImpactIndex.rank`` without pruning, what a search does below the threshold) and MaxScore
(``search/maxscore.py``, scoring every row itself when pruning would not pay). Every ranking
is compared: the two must be equal. ``SearchTuning.pruned_rows`` (``search/tuning.py``) is
set from this: between the largest size measured at which MaxScore is slower and the smallest at which
it is faster at p50 and p95.

    .venv/bin/python -m benchmarks.maxscore --sizes 100000,300000,1000000

Needs the generated indexes (``make bench`` builds 10k, 100k and 1M; other sizes with
``python -m benchmarks.run --phase build --db .cache/bench/scifact-N.sqlite --size N``).
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # run as a program only: importing this module (the tests) changes nothing
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import time
from pathlib import Path
from typing import Any

from benchmarks.stats import latency, machine
from governed_evidence.config import Classification
from governed_evidence.search.impacts import ImpactIndex, load_impacts
from governed_evidence.search.maxscore import pruned_top
from governed_evidence.search.plan import plan_query
from governed_evidence.search.tuning import DEFAULT_TUNING
from governed_evidence.store.connection import connect, read_meta

__all__ = ["compare", "main"]

DEPTH = 50
CEILING = Classification.INTERNAL


def compare(impacts: ImpactIndex, queries: list[list[str]], depth: int = DEPTH) -> dict[str, Any]:
    """Both ways over each query's phrases, alternated; raises if any ranking differs."""
    every: list[float] = []
    pruned: list[float] = []
    answered = 0
    for phrases in queries:
        started = time.perf_counter()
        expected = impacts.rank(phrases, depth)
        middle = time.perf_counter()
        top = impacts.rank(phrases, depth, essential_share=DEFAULT_TUNING.essential_share)
        ended = time.perf_counter()
        answered += pruned_top(impacts.phrases(phrases), depth, DEFAULT_TUNING.essential_share) is not None
        if top != expected:
            raise AssertionError(f"MaxScore ranked {phrases} differently")
        every.append((middle - started) * 1000)
        pruned.append((ended - middle) * 1000)
    return {
        "rows": impacts.rows,
        "queries": len(queries),
        "answered_by_maxscore": answered,
        "every_row_ms": latency(every),
        "maxscore_ms": latency(pruned),
    }


def main(argv: list[str] | None = None) -> None:
    from benchmarks.run import BENCH_DIR, DATASET
    from benchmarks.search import load_queries

    parser = argparse.ArgumentParser(prog="python -m benchmarks.maxscore", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,300000,1000000")
    parser.add_argument("--queries", type=int, default=300)
    ns = parser.parse_args(argv)
    texts = load_queries(DATASET, ns.queries)
    out: dict[str, Any] = {"machine": machine(), "depth": DEPTH}
    for size in [int(s) for s in ns.sizes.split(",") if s]:
        db = Path(BENCH_DIR / f"scifact-{size}.sqlite")
        if not db.is_file():
            out[str(size)] = f"{db} is absent"
            continue
        conn = connect(db, readonly=True)
        meta = read_meta(conn)
        impacts = load_impacts(conn, CEILING)
        if impacts is None:
            continue
        phrases = [list(plan_query(conn, meta, impacts.level, text, impacts).phrases) for text in texts]
        compare(impacts, phrases[:20])  # warm-up, untimed
        out[str(size)] = compare(impacts, phrases)
        conn.close()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
