"""The projected product: how many principal directions and rescored rows keep the exact top k.

From ``PROJECTED_ROWS`` to ``EXACT_ROWS`` held vectors, a search picks its candidates with a
product over the vectors projected onto their leading principal directions, then ranks those
by their exact cosine (``governed_evidence/search/vectors.py``). This measures, for each
number of directions and of rescored rows, recall@10 and recall@50 against the full product
and the time of the product's own ``knn`` (50 nearest, one BLAS thread), alternated query by
query with the full product.

The choice is made on SciFact *train* queries (embedded here with the real model); the test
queries' figures are reported beside them, not used to choose. Rule, fixed before measuring:
the fastest setting whose recall@50 is at least 0.995 on every set of vectors.

    .venv/bin/python -m benchmarks.projection

Sets of vectors: the generated 10k index and the first 50,000 rows of the generated 100k one
(``make bench`` writes them; perturbed real MiniLM vectors), and the real MiniLM vectors of
the 5,183 SciFact abstracts (``make bench-scifact`` builds that index), each when present.
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # run as a program only: importing this module (the tests) changes nothing
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.stats import latency, machine
from governed_evidence.config import Classification
from governed_evidence.search import vectors
from governed_evidence.search.vectors import Projection, VectorMatrix, principal_basis

__all__ = ["main", "measure", "rescoring"]

K = 50
WARMUP = 20
DIMENSIONS = (48, 64, 96, 128)
RESCORED = (300, 500, 800, 1000)


@contextmanager
def rescoring(count: int) -> Iterator[None]:
    """Make the product rescore exactly ``count`` rows (its rule sets more at larger sizes)."""
    saved = vectors.PROJECTED_RESCORE_PER_K, vectors.PROJECTED_RESCORE_MIN, vectors.PROJECTED_RESCORE_FRACTION
    vectors.PROJECTED_RESCORE_PER_K, vectors.PROJECTED_RESCORE_MIN, vectors.PROJECTED_RESCORE_FRACTION = 0, count, 2**62
    try:
        yield
    finally:
        vectors.PROJECTED_RESCORE_PER_K, vectors.PROJECTED_RESCORE_MIN, vectors.PROJECTED_RESCORE_FRACTION = saved


def _recall(truth: list[set[int]], found: list[list[int]], depth: int) -> float:
    return round(float(np.mean([len(t_ & set(f[:depth])) / depth for t_, f in zip(truth, found, strict=True)])), 4)


def measure(rows: np.ndarray, query_sets: dict[str, np.ndarray], passes: int = 2) -> dict[str, Any]:
    """Every setting's recall against the full product on each query set, and its time on the first."""
    rows = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    ids = np.arange(1, rows.shape[0] + 1, dtype=np.int64)
    level = Classification.PUBLIC
    exact = VectorMatrix(level, ids, np.asfortranarray(rows, dtype=np.float32))
    gathered = np.ascontiguousarray(rows, dtype=np.float32)
    truth = {name: [[p for p, _ in exact.knn(q, K)] for q in qs] for name, qs in query_sets.items()}
    timed_name = next(iter(query_sets))
    timed = query_sets[timed_name]
    out: dict[str, Any] = {"rows": int(rows.shape[0]), "timed_on": timed_name, "settings": []}
    exact_ms: list[float] = []
    for dimension in DIMENSIONS:
        basis = principal_basis(gathered, dimension)
        held = VectorMatrix(level, ids, gathered, projection=Projection(basis, np.asfortranarray(gathered @ basis)))
        for count in RESCORED:
            with rescoring(count):
                row: dict[str, Any] = {"dimensions": dimension, "rescored": count}
                for name, qs in query_sets.items():
                    found = [[p for p, _ in held.knn(q, K)] for q in qs]
                    row[f"recall_at_10_{name}"] = _recall([set(t[:10]) for t in truth[name]], found, 10)
                    row[f"recall_at_50_{name}"] = _recall([set(t) for t in truth[name]], found, K)
                for q in timed[:WARMUP]:
                    held.knn(q, K)
                    exact.knn(q, K)
                samples: list[float] = []
                for p in range(passes):
                    for i, q in enumerate(timed):
                        # Alternated, so neither always runs on caches the other warmed.
                        first, second = (held, exact) if (p + i) % 2 == 0 else (exact, held)
                        for matrix in (first, second):
                            t0 = time.perf_counter()
                            matrix.knn(q, K)
                            ms = (time.perf_counter() - t0) * 1000
                            (samples if matrix is held else exact_ms).append(ms)
                row["ms"] = latency(samples)
                out["settings"].append(row)
    out["full_product_ms"] = latency(exact_ms)
    return out


def choose(results: dict[str, dict[str, Any]], query_set: str, floor: float = 0.995) -> dict[str, Any] | None:
    """The rule: the fastest setting (p50 summed over the sets) with recall@50 >= ``floor`` on every set."""
    settings: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for result in results.values():
        for row in result["settings"]:
            settings.setdefault((row["dimensions"], row["rescored"]), []).append(row)
    eligible = [
        (sum(r["ms"]["p50"] for r in rows), key)
        for key, rows in settings.items()
        if len(rows) == len(results) and all(r[f"recall_at_50_{query_set}"] >= floor for r in rows)
    ]
    if not eligible:
        return None
    _, (dimension, count) = min(eligible)
    return {"dimensions": dimension, "rescored": count, "rule": f"fastest with recall@50 >= {floor} on every set"}


def _train_queries(dataset: Path, count: int) -> np.ndarray:
    from governed_evidence.embeddings.minilm import MiniLMEmbedder

    train = {line.split("\t")[0] for line in (dataset / "qrels" / "train.tsv").read_text().splitlines()[1:]}
    rows = [json.loads(line) for line in (dataset / "queries.jsonl").read_text(encoding="utf-8").splitlines() if line]
    texts = [str(r["text"])[:500] for r in rows if r["_id"] in train][:count]
    return np.asarray(MiniLMEmbedder().embed(texts), dtype=np.float32)


def _scifact_abstracts(db: Path) -> np.ndarray | None:
    if not db.is_file():
        return None
    from governed_evidence.store.connection import connect

    conn = connect(db, readonly=True)
    blobs = [bytes(b) for (b,) in conn.execute("SELECT embedding FROM passage_vectors ORDER BY passage_id")]
    conn.close()
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1) if blobs else None


def main(argv: list[str] | None = None) -> None:
    from benchmarks.run import BENCH_DIR, DATASET, ROOT

    parser = argparse.ArgumentParser(prog="python -m benchmarks.projection", description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--passes", type=int, default=2)
    ns = parser.parse_args(argv)
    query_sets = {
        "train": _train_queries(DATASET, ns.queries),
        "test": np.load(BENCH_DIR / "query-vectors.npy").astype(np.float32)[: ns.queries],
    }
    sets: dict[str, np.ndarray] = {}
    for name, path, rows in (
        ("generated 10k", BENCH_DIR / "scifact-10000.vectors.npy", None),
        ("generated 50k", BENCH_DIR / "scifact-100000.vectors.npy", 50_000),
    ):
        if path.is_file():
            sets[name] = np.load(path, mmap_mode="r")[:rows].astype(np.float32)
    abstracts = _scifact_abstracts(ROOT / ".cache" / "beir-scifact.sqlite")
    if abstracts is not None:
        sets["SciFact abstracts (real vectors)"] = abstracts
    if not sets:
        raise SystemExit("no vectors: `make bench-quick` writes the generated 10k, `make bench-scifact` the abstracts")
    results = {name: measure(rows, query_sets, ns.passes) for name, rows in sets.items()}
    shipped = {"dimensions": vectors.PROJECTED_DIMENSION, "rescored": vectors.projected_count(10_000, K)}
    print(
        json.dumps(
            {"machine": machine(), "k": K, "sets": results, "chosen": choose(results, "train"), "shipped": shipped},
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
