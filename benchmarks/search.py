"""Search latency on one generated index, through SearchService, against an exact numpy reference.

The query embedding is timed on its own (the real MiniLM model, one query at a time);
the per-mode search timings then use a stub embedder with the real model's identity that
returns the precomputed query vectors, so they measure the search alone. Hybrid is also
timed end to end with the real model, which is what a caller waits for.

The caller's ceiling is ``internal``: restricted passages are filtered inside both
rankings, and the numpy reference applies the same filter (classification <= internal,
not superseded).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.corpus import load_reference
from benchmarks.stats import latency, peak_rss_mb
from governed_evidence.config import Classification
from governed_evidence.embeddings.base import Embedder, ModelIdentity, Vectors
from governed_evidence.embeddings.minilm import MiniLMEmbedder
from governed_evidence.search import sql
from governed_evidence.search.candidates import CANDIDATES
from governed_evidence.search.query import match_expression, query_tokens
from governed_evidence.search.service import SearchService

__all__ = ["gate_off_service", "load_queries", "run_search", "time_each"]

CEILING = Classification.INTERNAL
WARMUP = 20
#: The server's default vector memory budget (GOVERNED_EVIDENCE_VECTOR_MEMORY_MB).
VECTOR_MEMORY = 4096 * 2**20


class PrecomputedEmbedder:
    """The real model's identity; returns query vectors computed beforehand (or, when live, the model's)."""

    def __init__(self, model: Embedder, vectors: dict[str, np.ndarray]) -> None:
        self._model = model
        self._identity = model.identity
        self._vectors = vectors
        #: True: embed with the real model (what a caller waits for).
        self.live = False

    @property
    def identity(self) -> ModelIdentity:
        return self._identity

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self.live:
            return self._model.embed(texts)
        return np.stack([self._vectors[t] for t in texts]).astype(np.float32)


def gate_off_service(
    db: Path, model: Embedder, vectors: dict[str, np.ndarray]
) -> tuple[SearchService, PrecomputedEmbedder]:
    """The service as the side-by-side and stage benchmarks time it: ceiling :data:`CEILING`, gate
    off, the server's memory budget with the copies loaded, and ``vectors`` (query text -> vector)
    behind a stub with ``model``'s identity (``stub.live`` embeds with ``model`` instead)."""
    stub = PrecomputedEmbedder(model, vectors)
    service = SearchService(
        db, ceiling=CEILING, embedder_factory=lambda: stub, gate_enabled=False, vector_memory_bytes=VECTOR_MEMORY
    )
    service.warm()
    return service, stub


def load_queries(dataset: Path, count: int) -> list[str]:
    """SciFact test queries first, then the others, ``count`` in all."""
    test_ids = {
        line.split("\t")[0] for line in (dataset / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]
    }
    rows = [json.loads(line) for line in (dataset / "queries.jsonl").read_text(encoding="utf-8").splitlines() if line]
    ordered = [r for r in rows if r["_id"] in test_ids] + [r for r in rows if r["_id"] not in test_ids]
    return [str(r["text"])[:500] for r in ordered[:count]]


def time_each(fn: Any, items: Sequence[Any]) -> list[float]:
    """Milliseconds of ``fn`` on each item, after :data:`WARMUP` untimed calls."""
    for item in items[:WARMUP]:
        fn(item)
    out = []
    for item in items:
        t0 = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def run_search(db: Path, dataset: Path, queries: int) -> dict[str, Any]:
    texts = load_queries(dataset, queries)
    model = MiniLMEmbedder()
    model.embed(["warm up"])
    query_vectors: dict[str, np.ndarray] = {}

    def embed_one(text: str) -> None:
        query_vectors[text] = model.embed([text])[0]

    embed_ms = time_each(embed_one, texts)
    # Kept for the quantised-KNN experiment (benchmarks/quantisation.py).
    np.save(db.parent / "query-vectors.npy", np.stack([query_vectors[t] for t in texts]))
    stub = PrecomputedEmbedder(model, query_vectors)

    service = SearchService(db, ceiling=CEILING, embedder_factory=lambda: stub, vector_memory_bytes=VECTOR_MEMORY)
    result: dict[str, Any] = {"queries": len(texts), "ceiling": CEILING.label, "gate": "on (default thresholds)"}
    started = time.perf_counter()
    service.warm()
    result["vector_load_s"] = round(time.perf_counter() - started, 2)
    held = service.vectors.copy
    result["vectors_in_memory_mb"] = round(held.nbytes / 2**20, 1) if held is not None else 0.0
    result["vector_strategy"] = "vec0 KNN" if held is None else held.strategy
    result["query_embed_ms"] = latency(embed_ms)
    statuses: dict[str, dict[str, int]] = {}
    for mode in ("keyword", "semantic", "hybrid"):
        seen: list[str] = []

        def one(text: str, mode: Any = mode, seen: list[str] = seen) -> None:
            seen.append(service.search(text, mode=mode).status)

        result[f"{mode}_ms"] = latency(time_each(one, texts))
        timed = seen[-len(texts) :]
        statuses[mode] = {s: timed.count(s) for s in sorted(set(timed))}
    result["status_counts"] = statuses

    # The same service (one copy of the vectors) with the real model embedding each query.
    stub.live = True
    result["hybrid_with_embedding_ms"] = latency(time_each(lambda t: service.search(t, mode="hybrid"), texts))
    stub.live = False

    # The keyword side: the product's ranking against FTS5 ranking the whole query.
    conn, _ = service.reader.connection()
    full: dict[str, list[int]] = {}

    def full_one(text: str) -> None:
        full[text] = sql.keyword_ranking(conn, CEILING, match_expression(query_tokens(conn, text)), CANDIDATES)

    result["fts_whole_query_ms"] = latency(time_each(full_one, texts))
    overlaps = []
    for text in texts:
        got = [c.fused.passage_id for c in service.rank(text, "keyword").candidates][:10]
        if full[text]:
            overlaps.append(len(set(got) & set(full[text][:10])) / len(full[text][:10]))
    result["keyword_overlap_at_10"] = round(float(np.mean(overlaps)), 4) if overlaps else None

    # The vector side alone (the in-memory copy, and vec0's KNN; ceiling filter in both), and the exact reference.
    blobs = {t: np.asarray(query_vectors[t], dtype=np.float32).tobytes() for t in texts}
    knn: dict[str, list[int]] = {}
    memory_knn: dict[str, list[int]] = {}

    def vec_one(text: str) -> None:
        knn[text] = [pid for pid, _ in sql.vector_ranking(conn, CEILING, blobs[text], CANDIDATES)]

    def memory_one(text: str) -> None:
        assert held is not None
        memory_knn[text] = [pid for pid, _ in held.knn(query_vectors[text], CANDIDATES)]

    if held is not None:
        result["memory_knn_ms"] = latency(time_each(memory_one, texts))
    result["vec0_knn_ms"] = latency(time_each(vec_one, texts))

    vectors, levels, searchable = load_reference(db)
    allowed = np.flatnonzero((levels <= int(CEILING)) & (searchable == 1))
    matrix = np.ascontiguousarray(vectors[allowed])
    ids = allowed + 1  # passage ids are assigned in insertion order from 1
    exact: dict[str, np.ndarray] = {}

    def numpy_one(text: str) -> None:
        scores = matrix @ query_vectors[text]
        top = np.argpartition(-scores, CANDIDATES)[:CANDIDATES]
        exact[text] = ids[top[np.argsort(-scores[top])]]

    result["numpy_ms"] = latency(time_each(numpy_one, texts))

    def recall(found: dict[str, list[int]]) -> float:
        return round(float(np.mean([len(set(found[t][:10]) & {int(i) for i in exact[t][:10]}) / 10 for t in texts])), 4)

    result["vec0_recall_at_10"] = recall(knn)
    # recall_at_10 is the product's vector side: the in-memory copy when it is held.
    result["recall_at_10"] = recall(memory_knn) if held is not None else result["vec0_recall_at_10"]
    result["searchable_passages_at_ceiling"] = len(allowed)
    result["peak_rss_mb"] = peak_rss_mb()
    return result
