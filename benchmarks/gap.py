"""Where the project's search stands against the peers, cut into parts, in one rotation.

    .cache/peers-venv/bin/python -m benchmarks.gap --size 10000

Each SciFact test query runs, in the balanced rotation of `make bench-peers`
(:func:`benchmarks.peers.interleaved`), through:

- ``project_search``: what `make bench-peers` times (``SearchService.search``: ceiling
  internal, gate off, 10 results, the query vector computed beforehand);
- ``project_rank``: ``SearchService.rank``: both rankings, the second ceiling check, every
  candidate's distance, coverage, fusion, confidence and order; not the gate, the served
  rows, the response or the log line;
- ``project_served_rrf``: the retrieval part's ten passages served as a search serves what its
  gate keeps (rows read whole from the file with the read's ceiling check, cited results, the
  validated response, the log line): the search with its candidates' signals costing nothing,
  the bound a faster signals step could reach;
- ``project_retrieval_rrf``: only the project's two rankings from its in-memory copies (the
  keyword impact lists and the vectors), fused by plain RRF as the peers' glue is: the project
  with no governance after its rankings;
- tantivy + numpy and bm25s + numpy, exactly as `make bench-peers` builds and times them.

It prints one JSON object: each system's latency and each project part's p95 against the best
peer's. The rotation holds four project parts and two peers, so the peers here mostly follow
a project call, and a call runs slower after one that filled the caches with other data (the
peers too): these ratios compare the parts with one another, and are not the
`make bench-peers` ratio.
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # run as a program only: importing this module (the tests) changes nothing
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.peers import CANDIDATES, CEILING, LIMIT, PEERS_DIR, interleaved, load_corpus, log_product_to, rrf
from benchmarks.stats import latency, load_average, machine
from governed_evidence.errors import IndexUnavailableError
from governed_evidence.search.candidates import RowCache
from governed_evidence.search.fusion import Fused, FusedColumns
from governed_evidence.search.gate import GateOutcome, Signals
from governed_evidence.search.impacts import ImpactCopier
from governed_evidence.search.models import SearchResponse
from governed_evidence.search.plan import plan_query, searched_level
from governed_evidence.search.ranking import Candidate, Columns, Ranking
from governed_evidence.search.service import SearchService
from governed_evidence.search.stages import Stopwatch
from governed_evidence.search.vectors import VectorCopier
from governed_evidence.search.visible_rows import VisibleRowsCopier

__all__ = ["PARTS", "main", "retrieval_rrf", "served_rrf"]

#: The project's four parts, in the order the JSON lists them.
PARTS = ("project_search", "project_rank", "project_served_rrf", "project_retrieval_rrf")


def retrieval_rrf(service: SearchService, text: str, *, depth: int = CANDIDATES, limit: int = LIMIT) -> list[int]:
    """The ids ``service``'s two rankings return for ``text`` (``depth`` each, from its held
    copies), fused by plain RRF as the peers' glue fuses theirs, best ``limit`` first."""
    generation, conn, meta = service.reader.snapshot()
    level = searched_level(service.ceiling, meta)
    impacts = service.impacts.get(generation, level, ImpactCopier())
    matrix = service.vectors.get(generation, level, VectorCopier(meta.embedding_dimension))
    if impacts is None or matrix is None:
        raise IndexUnavailableError("the keyword impact lists and the vectors must be held in memory (warm first)")
    plan = plan_query(conn, meta, level, text, impacts)
    keyword = impacts.rank(list(plan.phrases), depth) if plan.tokens and "" not in plan.phrases else []
    nearest, _ = matrix.knn_scored(service.query_embedder.embed(text), depth)
    return rrf([keyword, [pid for pid, _ in nearest]], depth=limit)


def served_rrf(service: SearchService, text: str, *, depth: int = CANDIDATES, limit: int = LIMIT) -> SearchResponse:
    """:func:`retrieval_rrf`'s passages served as a search serves what its gate keeps: checked
    against the ceiling a second time, their rows read whole from the file, each made a cited result,
    the response validated and the search's log line written (``SearchService.respond``, as a
    search serves). What a search would cost if the candidates' signals (the pool's second
    ceiling check, distances, coverage, fusion, confidences, order and the gate) cost nothing:
    the bound a faster signals step can reach."""
    started = time.perf_counter()
    watch = Stopwatch()
    fused = retrieval_rrf(service, text, depth=depth, limit=limit)
    generation, conn, meta = service.reader.snapshot()
    level = searched_level(service.ceiling, meta)
    cache = RowCache(conn, level, held=service.visible_rows.get(generation, level, VisibleRowsCopier()))
    cache.documents_of(np.asarray(fused, dtype=np.int64))
    cache.prefetch(fused)
    kept = [
        Candidate(Fused(pid, 0.0, rank, rank), Signals(None, 0.0, True), 0.0, cache.row(pid))
        for rank, pid in enumerate(fused, 1)
        if pid in cache.visible
    ]
    watch.mark("served_rows")
    # No fused columns: the response reads them only to say why nothing matched.
    columns = Columns(FusedColumns([], [], [], []), [], [], [], None, [], [], cache)
    return service.respond(
        Ranking("hybrid", "hybrid", None, columns, watch),
        GateOutcome(kept, 0, 0.0),
        threshold=service.thresholds.strict,
        confidence_level="strict",
        started=started,
    )


def run_gap(size: int, queries: int, passes: int, peers_dir: Path, parts: tuple[str, ...] = PARTS) -> dict[str, Any]:
    from benchmarks.peers import Bm25sNumpy, Project, TantivyNumpy, _test_queries
    from benchmarks.run import BENCH_DIR, DATASET, VECTOR_CACHE, _index_for
    from governed_evidence.embeddings.minilm import MiniLMEmbedder

    db, info = _index_for(size, False, bench_dir=BENCH_DIR, vector_cache=VECTOR_CACHE)
    corpus = load_corpus(db, int(CEILING))
    _, texts, _ = _test_queries(DATASET, queries)
    model = MiniLMEmbedder()
    vectors = {t: np.asarray(model.embed([t])[0], dtype=np.float32) for t in texts}
    folder = peers_dir / f"gap-{size}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    project = Project(db, info, model, vectors)
    tantivy = TantivyNumpy(corpus, folder / "tantivy-numpy")
    bm25s = Bm25sNumpy(corpus, folder / "bm25s-numpy")
    service = project.service
    calls = {
        "project_search": lambda i: project.search(texts[i]),
        "project_rank": lambda i: service.rank(texts[i], "hybrid"),
        "project_served_rrf": lambda i: served_rrf(service, texts[i]),
        "project_retrieval_rrf": lambda i: retrieval_rrf(service, texts[i]),
        "tantivy_numpy": lambda i: tantivy.rank(texts[i], vectors[texts[i]], LIMIT, CANDIDATES),
        "bm25s_numpy": lambda i: bm25s.rank(texts[i], vectors[texts[i]], LIMIT, CANDIDATES),
    }
    calls = {name: call for name, call in calls.items() if name in parts or name not in PARTS}
    load_before = load_average()
    timings = {name: latency(samples) for name, samples in interleaved(calls, len(texts), passes=passes).items()}
    best = min(timings[name]["p95"] for name in calls if name not in PARTS)
    return {
        "passages": size,
        "passages_ranked": len(corpus.ids),
        "queries": len(texts),
        "passes": passes,
        "machine": machine(),
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "ms": timings,
        "p95_ratio_to_best_peer": {name: round(timings[name]["p95"] / best, 2) for name in PARTS if name in calls},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gap", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000, help="passages (a generated SciFact index)")
    parser.add_argument("--queries", type=int, default=300, help="SciFact test queries (300 in all)")
    parser.add_argument("--passes", type=int, default=3, help="round-robin passes over the queries")
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help="the project's parts in the rotation, comma-separated (fewer: the peers follow a project call less often)",
    )
    parser.add_argument("--peers-dir", default=str(PEERS_DIR), help="scratch folder for the peers' indexes")
    ns = parser.parse_args(argv)
    parts = tuple(part for part in ns.parts.split(",") if part)
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:
        parser.error(f"--parts takes some of: {', '.join(PARTS)} (got {ns.parts!r})")
    peers_dir = Path(ns.peers_dir)
    log_product_to(peers_dir / "gap-product-log.jsonl")
    print(json.dumps(run_gap(ns.size, ns.queries, ns.passes, peers_dir, parts)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
