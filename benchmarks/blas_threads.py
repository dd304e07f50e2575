"""Search latency with one BLAS thread against OpenBLAS's default, on an idle and a busy machine.

The commands run numpy's BLAS on one thread unless the operator sets its threads
(governed_evidence/_threads.py). This measures why: the same hybrid searches (SciFact test
queries, query vectors computed beforehand, gate off, 10 results, in-memory copies loaded)
in a fresh process per setting, first with nothing else running, then beside ``--busy``
processes that each keep one core busy (what other callers, the query embedder or a copy
loading do to a server). OpenBLAS reads its thread count when numpy loads, hence one process
per setting. Bounded: ``--queries`` x ``--passes`` searches per run, the busy processes stop
with their run.

    .venv/bin/python -m benchmarks.blas_threads --sizes 10000,100000 [--busy 1]

Needs the generated indexes and query vectors (``make bench-quick`` / ``make bench`` build them).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import structlog

ROOT = Path(__file__).resolve().parents[1]


def search_latency(db: Path, queries: int, passes: int) -> dict[str, Any]:
    """Run in the child process: hybrid search alone, as the stage benchmark runs it."""
    import numpy as np

    from benchmarks.run import BENCH_DIR, DATASET
    from benchmarks.search import gate_off_service, load_queries, time_each
    from benchmarks.stats import latency
    from governed_evidence.embeddings.minilm import MiniLMEmbedder

    vectors = np.load(BENCH_DIR / "query-vectors.npy").astype(np.float32)
    texts = load_queries(DATASET, len(vectors))[:queries]
    service, _ = gate_off_service(db, MiniLMEmbedder(), {t: vectors[i] for i, t in enumerate(texts)})
    try:
        return latency(time_each(lambda text: service.search(text, limit=10), texts * passes))
    finally:
        service.close()


def _run(db: Path, threads: str | None, busy: int, queries: int, passes: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    # "default": OpenBLAS's own choice (one thread a core), as a process that sets nothing gets.
    if threads is not None:
        env["OPENBLAS_NUM_THREADS"] = threads
    env["PYTHONPATH"] = str(ROOT)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        time.sleep(0.5 if busy else 0)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.blas_threads",
                "--child",
                str(db),
                "--queries",
                str(queries),
                "--passes",
                str(passes),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    if done.returncode != 0:
        raise SystemExit(f"the search process failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    from benchmarks.run import BENCH_DIR

    parser = argparse.ArgumentParser(prog="python -m benchmarks.blas_threads", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--busy", default="0,1", help="busy processes beside the searches, one run each")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.child is not None:
        # One measurement in this process, whose BLAS threads the parent set before numpy loaded.
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
        print(json.dumps(search_latency(ns.child, ns.queries, ns.passes)))
        return
    out: dict[str, Any] = {"cores": os.cpu_count()}
    for size in [int(s) for s in ns.sizes.split(",") if s]:
        db = BENCH_DIR / f"scifact-{size}.sqlite"
        if not db.is_file():
            raise SystemExit(f"{db} is absent: `make bench-quick` (10k) or `make bench` builds it")
        for busy in [int(b) for b in ns.busy.split(",")]:
            for label, threads in (("one thread", "1"), ("OpenBLAS default", None)):
                key = f"{size} passages, {busy} busy, {label}"
                out[key] = _run(db, threads, busy, ns.queries, ns.passes)
                print(f"[blas] {key}: {out[key]}", file=sys.stderr)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
