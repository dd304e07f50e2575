"""Where a hybrid search's milliseconds go, stage by stage, on the generated indexes.

Each search logs its stages (``stages_ms`` in the ``search`` event, see
``governed_evidence/search/stages.py``); this runs the SciFact test queries through
SearchService as ``make bench-peers`` does (ceiling internal, gate off, 10 results, the
query vectors computed beforehand, the in-memory copies loaded before timing) and reports
the median and mean of each stage against the whole search.

    .venv/bin/python -m benchmarks.stages --sizes 10000,100000

Needs the generated indexes (``make bench`` or ``make bench-peers`` builds them) and the
query vectors the search benchmark saves (``.cache/bench/query-vectors.npy``).
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # run as a program only: importing this module (the tests) changes nothing
    # One BLAS thread, as the side-by-side protocol and the server run it (set before numpy
    # loads). OpenBLAS's default of one thread a core halves the product on an idle machine
    # and so would not show the stage a served search spends.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import structlog.testing

__all__ = ["main", "run_stages"]

LIMIT = 10
WARMUP = 20


def run_stages(db: Path, texts: list[str], vectors: np.ndarray, passes: int) -> dict[str, Any]:
    from benchmarks.search import gate_off_service
    from governed_evidence.embeddings.minilm import MiniLMEmbedder

    service, _ = gate_off_service(db, MiniLMEmbedder(), {t: vectors[i] for i, t in enumerate(texts)})
    for text in texts[:WARMUP]:
        service.search(text, limit=LIMIT)
    with structlog.testing.capture_logs() as events:
        for _ in range(passes):
            for text in texts:
                service.search(text, limit=LIMIT)
    searches = [e for e in events if e.get("event") == "search"]
    stages: dict[str, list[float]] = {}
    for event in searches:
        for stage, ms in event["stages_ms"].items():
            stages.setdefault(stage, []).append(float(ms))
    total = np.asarray([float(e["ms"]) for e in searches])
    held = service.impacts.copy
    service.close()
    return {
        "searches": len(searches),
        "total_ms": {"p50": round(float(np.median(total)), 2), "mean": round(float(total.mean()), 2)},
        "stages_ms": {
            stage: {"p50": round(float(np.median(v)), 3), "mean": round(float(np.mean(v)), 3)}
            for stage, v in stages.items()
        },
        "keyword_impacts_mb": round(held.nbytes / 2**20, 1) if held is not None else None,
        "keyword_impacts_bytes_per_passage": round(held.nbytes / held.rows) if held is not None else None,
    }


def main(argv: list[str] | None = None) -> None:
    from benchmarks.run import BENCH_DIR, DATASET
    from benchmarks.search import load_queries

    parser = argparse.ArgumentParser(prog="python -m benchmarks.stages", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--passes", type=int, default=2)
    ns = parser.parse_args(argv)
    vectors = np.load(BENCH_DIR / "query-vectors.npy").astype(np.float32)
    texts = load_queries(DATASET, len(vectors))[: ns.queries]
    out: dict[str, Any] = {}
    for size in [int(s) for s in ns.sizes.split(",") if s]:
        db = BENCH_DIR / f"scifact-{size}.sqlite"
        if not db.is_file():
            raise SystemExit(f"{db} is absent: `make bench-peers PEERS_SIZES={size}` builds it")
        out[str(size)] = run_stages(db, texts, vectors[: len(texts)], ns.passes)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
