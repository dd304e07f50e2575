"""The project's hybrid search against what a user would build or pick instead, in one process.

    make bench-peers                                    # 10k passages; docs/peers.json + docs/performance.md
    .cache/peers-venv/bin/python -m benchmarks.peers --sizes 10000,100000 --out /tmp/peers.json
    .cache/peers-venv/bin/python -m benchmarks.peers --systems tantivy_numpy,bm25s_numpy --passes 1 \
        --out /tmp/quick.json                           # what `make bench-quick` runs
    .cache/peers-venv/bin/python -m benchmarks.peers --alone --out /tmp/peers.json
                                                        # each system also timed in a loop of its own

Runs in its own venv (.cache/peers-venv: the product's runtime lock plus
benchmarks/peers-requirements.txt), never the product's. For each size it takes the generated
SciFact index of benchmarks/corpus.py (built when absent, as `make bench` does), reads the
passages visible at the caller's ceiling (text and float32 vectors) and builds over exactly
those:

- tantivy BM25 (``en_stem``) + numpy exact dot product, fused by plain RRF (k=60);
- bm25s BM25 (English stop words, Snowball stemmer) + numpy exact, plain RRF;
- LanceDB's hybrid query (native full-text index, RRFReranker) over exact vectors, and over an
  IVF_HNSW_SQ index.

Each SciFact test query is embedded once with the project's MiniLM model (timed apart) and the
vector shared. Quality (nDCG@10, recall@100 against the test qrels) comes from one untimed pass
at depth 100; latency from ``--passes`` round-robin passes over all systems in one process.

The pure parts (fusion, document mapping, quality, the interleaving) import no peer library;
tests/test_bench_peers.py covers them.
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # run as a program only: importing this module (the tests) changes nothing
    # numpy's exact product on one BLAS thread, as in benchmarks/run.py (set before numpy loads).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # LanceDB's Rust side warns on every hybrid query about a future change of its output columns.
    os.environ.setdefault("LANCEDB_LOG", "error")

import argparse
import contextlib
import importlib
import json
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from benchmarks.peers_report import PROJECT, load_peers, peers_section, ratio_to_best_peer, replace_section
from benchmarks.stats import latency, load_average, machine
from governed_evidence.config import Classification
from governed_evidence.evaluation.beir import load_qrels, ndcg_at_k, recall_at_k

__all__ = [
    "PEERS",
    "PEER_MODULES",
    "Corpus",
    "balanced_orders",
    "chosen_peers",
    "documents_in_order",
    "interleaved",
    "log_product_to",
    "main",
    "missing_peers",
    "paired_bootstrap",
    "per_query_ndcg",
    "quality",
    "ratio_alone",
    "rrf",
    "scifact_id",
    "visible_qrels",
]

ROOT = Path(__file__).resolve().parent.parent
PEERS_DIR = ROOT / ".cache" / "peers"
RRF_K = 60
#: Candidates each side hands to the fusion, as the project's ranking does (ranking.CANDIDATES).
CANDIDATES = 50
LIMIT = 10
#: Depth of the quality pass (recall@100).
QUALITY_DEPTH = 100
WARMUP = 20
#: The caller's ceiling, as in benchmarks/search.py: restricted passages are not ranked.
CEILING = Classification.INTERNAL
#: Above this many passages LanceDB's IVF_HNSW_SQ index is not built unless asked for.
HNSW_MAX = 100_000
#: Import names of the peers (their packages are in benchmarks/peers-requirements.txt).
PEER_MODULES = ("tantivy", "bm25s", "Stemmer", "lancedb", "pyarrow")
#: Every peer `make bench-peers` builds, in table order (``--systems`` chooses among them).
PEERS = ("tantivy_numpy", "bm25s_numpy", "lancedb_exact", "lancedb_ivf_hnsw_sq")
_PATH_ID = re.compile(r"scifact/r\d+/(.+)\.md$")
#: Characters tantivy's query parser treats as syntax; the glue sends plain words.
_QUERY_SYNTAX = re.compile(r"[^\w\s]")


# -- pure parts -----------------------------------------------------------------------------


def rrf(rankings: Iterable[Sequence[int]], *, k: int = RRF_K, depth: int = LIMIT) -> list[int]:
    """Plain reciprocal rank fusion: sum of 1 / (k + rank), rank from 1; ties keep first appearance."""
    score: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            score[item] = score.get(item, 0.0) + 1.0 / (k + rank)
    order = {item: i for i, item in enumerate(score)}
    return sorted(score, key=lambda item: (-score[item], order[item]))[:depth]


def scifact_id(path: str) -> str:
    """The SciFact abstract a generated document copies (any replica), or the path itself."""
    found = _PATH_ID.search(path)
    return found.group(1) if found else path


def documents_in_order(passages: Iterable[int], document_of: dict[int, str]) -> list[str]:
    """Each passage's document in ranking order, a document counted at its first passage only."""
    seen: set[str] = set()
    out: list[str] = []
    for pid in passages:
        doc = document_of[pid]
        if doc not in seen:
            seen.add(doc)
            out.append(doc)
    return out


def visible_qrels(qrels: dict[str, dict[str, int]], documents: set[str]) -> dict[str, dict[str, int]]:
    """The judgements of documents in the corpus, for the queries that keep a relevant one."""
    out = {}
    for qid, judged in qrels.items():
        kept = {doc: grade for doc, grade in judged.items() if doc in documents}
        if any(grade > 0 for grade in kept.values()):
            out[qid] = kept
    return out


def per_query_ndcg(rankings: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> list[float]:
    """nDCG@10 of each query, in the order of ``rankings``."""
    return [ndcg_at_k(ranked, qrels.get(qid, {}), 10) for qid, ranked in rankings.items()]


def quality(rankings: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> tuple[float, float]:
    """Mean nDCG@10 and recall@100 of document rankings by query id (every query in ``rankings``)."""
    if not rankings:
        return 0.0, 0.0
    ndcg = sum(per_query_ndcg(rankings, qrels))
    recall = sum(recall_at_k(ranked, qrels.get(qid, {}), 100) for qid, ranked in rankings.items())
    return round(ndcg / len(rankings), 4), round(recall / len(rankings), 4)


def paired_bootstrap(
    base: Sequence[float], other: Sequence[float], *, rounds: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of ``other - base`` over paired queries and its 95% percentile bootstrap interval."""
    diff = np.asarray(other, dtype=np.float64) - np.asarray(base, dtype=np.float64)
    if diff.size == 0:
        return 0.0, 0.0, 0.0
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, diff.size, size=(rounds, diff.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return round(float(diff.mean()), 4), round(float(low), 4), round(float(high), 4)


def balanced_orders(count: int) -> list[list[int]]:
    """Orders of ``count`` systems in which each runs first equally often and right after each
    other system equally often (a Williams design: ``count`` orders, twice that when odd).

    Rotating one order keeps its neighbours: each system would always follow the same one, and
    whatever that one leaves behind (threads still spinning, caches filled) would always land on it.
    """
    if count <= 0:
        return []
    first = [0]
    low, high = 1, count - 1
    while len(first) < count:
        first.append(low)
        low += 1
        if len(first) < count:
            first.append(high)
            high -= 1
    orders = [[(s + shift) % count for s in first] for shift in range(count)]
    if count % 2:
        orders += [order[::-1] for order in orders]
    return orders


def interleaved(
    systems: Mapping[str, Callable[[int], object]],
    items: int,
    *,
    passes: int,
    warmup: int = WARMUP,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Milliseconds per call of every system on items 0..items-1, ``passes`` times.

    Each item runs on every system before the next item, in the orders of
    :func:`balanced_orders` taken in turn, so no system always runs first (cold caches) or
    always right after a given other.
    """
    names = list(systems)
    for i in range(min(warmup, items)):
        for name in names:
            systems[name](i)
    out: dict[str, list[float]] = {name: [] for name in names}
    orders = balanced_orders(len(names))
    turn = 0
    for _ in range(passes):
        for i in range(items):
            for position in orders[turn % len(orders)]:
                name = names[position]
                t0 = clock()
                systems[name](i)
                out[name].append((clock() - t0) * 1000)
            turn += 1
    return out


def ratio_alone(systems: Mapping[str, Mapping[str, Any]]) -> float | None:
    """The project's p95 over the best peer's, each timed in a loop of its own (``alone_ms``)."""
    timed = {name: {**row, "ms": row["alone_ms"]} for name, row in systems.items() if "alone_ms" in row}
    if PROJECT not in timed:
        return None
    return ratio_to_best_peer(timed[PROJECT]["ms"]["p95"], timed)


def chosen_peers(spec: str) -> tuple[str, ...]:
    """The peers a comma-separated ``--systems`` names, in table order (empty or "all": every one)."""
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names or names == ["all"]:
        return PEERS
    unknown = sorted(set(names) - set(PEERS))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown peer {', '.join(unknown)}: choose among {', '.join(PEERS)}")
    return tuple(n for n in PEERS if n in names)


def missing_peers() -> list[str]:
    """The peer modules this interpreter cannot import."""
    missing = []
    for name in PEER_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


# -- the corpus the systems share ----------------------------------------------------------


@dataclass
class Corpus:
    """The passages visible at the ceiling, in passage-id order."""

    ids: np.ndarray
    texts: list[str]
    vectors: np.ndarray
    document_of: dict[int, str]


def log_product_to(path: Path) -> None:
    """The product logs every search (a JSON line, as when it serves): into ``path``, not the terminal."""
    from governed_evidence.logging import configure_logging

    path.parent.mkdir(parents=True, exist_ok=True)
    # Open for the whole run (the loggers keep the stream); closed when the process exits.
    log = path.open("w", encoding="utf-8")
    with contextlib.redirect_stderr(log):
        configure_logging("INFO")


def load_corpus(db: Path, ceiling: int) -> Corpus:
    from governed_evidence.store.connection import connect

    conn = connect(db, readonly=True)
    try:
        rows: list[tuple[Any, ...]] = conn.execute(
            "SELECT p.id, p.title, p.heading, COALESCE(p.search_text, p.text), d.path "
            "FROM passages p JOIN documents d ON d.id = p.document_id "
            "WHERE p.classification <= ? AND p.searchable = 1 ORDER BY p.id",
            (ceiling,),
        ).fetchall()
        blobs: dict[int, bytes] = {
            int(pid): bytes(blob) for pid, blob in conn.execute("SELECT passage_id, embedding FROM passage_vectors")
        }
    finally:
        conn.close()
    ids = np.array([int(r[0]) for r in rows], dtype=np.int64)
    texts = [" \n".join(part for part in (str(r[1]), str(r[2]), str(r[3])) if part) for r in rows]
    vectors = np.ascontiguousarray(np.stack([np.frombuffer(blobs[int(r[0])], dtype=np.float32) for r in rows]))
    return Corpus(ids, texts, vectors, {int(r[0]): scifact_id(str(r[4])) for r in rows})


def _disk_bytes(*paths: Path) -> int:
    total = 0
    for path in paths:
        if path.is_file():
            total += path.stat().st_size
        elif path.is_dir():
            total += sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return total


# -- the systems ----------------------------------------------------------------------------


class System(Protocol):
    label: str
    build_s: float | None
    size_bytes: int | None

    def rank(self, text: str, vector: np.ndarray, depth: int, candidates: int) -> list[int]: ...


class ExactVectors:
    """numpy's exact dot product over the shared unit vectors (cosine order)."""

    def __init__(self, corpus: Corpus, folder: Path) -> None:
        self.ids = corpus.ids
        self.matrix = corpus.vectors
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "vectors.npy"
        np.save(self.path, self.matrix)

    def top(self, vector: np.ndarray, k: int) -> list[int]:
        scores = self.matrix @ vector
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        return [int(i) for i in self.ids[top[np.argsort(-scores[top])]]]


class TantivyNumpy:
    label = "tantivy BM25 + numpy exact, plain RRF"

    def __init__(self, corpus: Corpus, folder: Path) -> None:
        import tantivy  # type: ignore[import-not-found,unused-ignore]

        started = time.perf_counter()
        schema = (
            tantivy.SchemaBuilder()
            .add_integer_field("pid", stored=True, indexed=False)
            .add_text_field("body", stored=False, tokenizer_name="en_stem")
            .build()
        )
        path = folder / "tantivy"
        path.mkdir(parents=True)
        self.index = tantivy.Index(schema, path=str(path))
        writer = self.index.writer(heap_size=128 * 2**20, num_threads=1)
        for pid, text in zip(corpus.ids, corpus.texts, strict=True):
            writer.add_document(tantivy.Document(pid=int(pid), body=text))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()
        self.vectors = ExactVectors(corpus, folder)
        self.build_s: float | None = round(time.perf_counter() - started, 2)
        self.size_bytes: int | None = _disk_bytes(path, self.vectors.path)

    def keyword(self, text: str, k: int) -> list[int]:
        words = _QUERY_SYNTAX.sub(" ", text).strip()
        if not words:
            return []
        query = self.index.parse_query(words, ["body"])
        return [int(self.searcher.doc(address)["pid"][0]) for _, address in self.searcher.search(query, k).hits]

    def rank(self, text: str, vector: np.ndarray, depth: int, candidates: int) -> list[int]:
        return rrf([self.keyword(text, candidates), self.vectors.top(vector, candidates)], depth=depth)


class Bm25sNumpy:
    label = "bm25s BM25 + numpy exact, plain RRF"

    def __init__(self, corpus: Corpus, folder: Path) -> None:
        import bm25s  # type: ignore[import-not-found,unused-ignore]
        import Stemmer  # type: ignore[import-not-found,unused-ignore]

        started = time.perf_counter()
        self._bm25s = bm25s
        self.stemmer = Stemmer.Stemmer("english")
        tokens = bm25s.tokenize(corpus.texts, stopwords="en", stemmer=self.stemmer, show_progress=False)
        self.retriever = bm25s.BM25()
        self.retriever.index(tokens, show_progress=False)
        path = folder / "bm25s"
        self.retriever.save(str(path))
        self.ids = corpus.ids
        self.vectors = ExactVectors(corpus, folder)
        self.build_s: float | None = round(time.perf_counter() - started, 2)
        self.size_bytes: int | None = _disk_bytes(path, self.vectors.path)

    def keyword(self, text: str, k: int) -> list[int]:
        tokens = self._bm25s.tokenize([text], stopwords="en", stemmer=self.stemmer, show_progress=False)
        if not any(len(t) for t in tokens.ids):
            return []
        k = min(k, len(self.ids))
        docs, scores = self.retriever.retrieve(tokens, k=k, show_progress=False, n_threads=0)
        # Rows holding no query word score 0: they are not keyword matches.
        return [int(self.ids[d]) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]

    def rank(self, text: str, vector: np.ndarray, depth: int, candidates: int) -> list[int]:
        return rrf([self.keyword(text, candidates), self.vectors.top(vector, candidates)], depth=depth)


class LanceHybrid:
    def __init__(self, corpus: Corpus, folder: Path, *, ann: bool) -> None:
        import lancedb  # type: ignore[import-not-found,unused-ignore]
        import pyarrow as pa  # type: ignore[import-not-found,unused-ignore]
        from lancedb.rerankers import RRFReranker  # type: ignore[import-not-found,unused-ignore]

        self.label = "LanceDB hybrid RRF, " + ("IVF_HNSW_SQ index" if ann else "exact vectors")
        started = time.perf_counter()
        path = folder / ("lancedb-hnsw" if ann else "lancedb-exact")
        db = lancedb.connect(str(path))
        dim = corpus.vectors.shape[1]
        data = pa.table(
            {
                "pid": pa.array(corpus.ids, pa.int64()),
                "text": pa.array(corpus.texts, pa.string()),
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(corpus.vectors.ravel(), pa.float32()), dim),
            }
        )
        self.table = db.create_table("passages", data=data, mode="overwrite")
        self.table.create_fts_index("text", use_tantivy=False, language="English", stem=True, remove_stop_words=True)
        if ann:
            from lancedb.index import IvfHnswSq  # type: ignore[import-not-found,unused-ignore]

            self.table.create_index("vector", config=IvfHnswSq(distance_type="cosine"))
        self.reranker = RRFReranker(K=RRF_K)
        self.build_s: float | None = round(time.perf_counter() - started, 2)
        self.size_bytes: int | None = _disk_bytes(path)

    def rank(self, text: str, vector: np.ndarray, depth: int, candidates: int) -> list[int]:
        words = _QUERY_SYNTAX.sub(" ", text).strip() or text
        found = (
            self.table.search(query_type="hybrid")
            .vector(vector)
            .text(words)
            .distance_type("cosine")
            .rerank(self.reranker)
            .select(["pid"])
            .limit(candidates)
            .to_arrow()
        )
        return [int(p) for p in found.column("pid").to_pylist()[:depth]]


class Project:
    """The project's SearchService, gate off, over the index the corpus came from."""

    label = "project hybrid (search alone)"

    def __init__(self, db: Path, info: dict[str, Any], model: Any, vectors: dict[str, np.ndarray]) -> None:
        from benchmarks.search import gate_off_service

        self.service, self.stub = gate_off_service(db, model, vectors)
        self.build_s: float | None = info.get("build_s")
        self.size_bytes: int | None = int(info["db_bytes"]) if "db_bytes" in info else _disk_bytes(db)

    def rank(self, text: str, vector: np.ndarray, depth: int, candidates: int) -> list[int]:
        """The fused ranking, ``depth`` candidates a side (the quality pass)."""
        ranking = self.service.rank(text, "hybrid", depth=depth)
        return [c.fused.passage_id for c in ranking.candidates][:depth]

    def search(self, text: str, *, live: bool = False) -> object:
        """What a caller gets (the timed path): ``live`` embeds the query with the real model."""
        self.stub.live = live
        try:
            return self.service.search(text, mode="hybrid", limit=LIMIT)
        finally:
            self.stub.live = False


def _test_queries(dataset: Path, count: int) -> tuple[list[str], list[str], dict[str, dict[str, int]]]:
    qrels = load_qrels(dataset / "qrels" / "test.tsv")
    rows = [json.loads(line) for line in (dataset / "queries.jsonl").read_text(encoding="utf-8").splitlines() if line]
    chosen = [r for r in rows if r["_id"] in qrels][:count]
    return [str(r["_id"]) for r in chosen], [str(r["text"])[:500] for r in chosen], qrels


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    out = {}
    for dist in ("tantivy", "bm25s", "pystemmer", "lancedb", "pylance", "pyarrow", "numpy"):
        with contextlib.suppress(Exception):
            out[dist] = version(dist)
    return out


def run_size(size: int, ns: argparse.Namespace, dataset: Path, bench_dir: Path, vector_cache: Path) -> dict[str, Any]:
    from benchmarks.run import _index_for
    from governed_evidence.embeddings.minilm import MiniLMEmbedder

    db, info = _index_for(size, ns.rebuild, bench_dir=bench_dir, vector_cache=vector_cache)
    print(f"[peers] {size} passages: project index ready ({info.get('build_s')} s build)", file=sys.stderr)
    corpus = load_corpus(db, int(CEILING))
    qids, texts, all_qrels = _test_queries(dataset, ns.queries)
    # Quality over the abstracts the corpus holds at the ceiling (a smaller size holds only some).
    qrels = visible_qrels(all_qrels, set(corpus.document_of.values()))
    judged = [i for i, qid in enumerate(qids) if qid in qrels]

    model = MiniLMEmbedder()
    model.embed(["warm up"])
    query_vectors: dict[str, np.ndarray] = {}
    embed_ms = []
    for text in texts:
        t0 = time.perf_counter()
        query_vectors[text] = np.asarray(model.embed([text])[0], dtype=np.float32)
        embed_ms.append((time.perf_counter() - t0) * 1000)
    vectors = [query_vectors[t] for t in texts]

    folder = Path(ns.peers_dir) / f"scifact-{size}"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    project = Project(db, info, model, query_vectors)
    systems: dict[str, System] = {PROJECT: project}
    builders: list[tuple[str, Callable[[], System]]] = [
        ("tantivy_numpy", lambda: TantivyNumpy(corpus, folder / "tantivy-numpy")),
        ("bm25s_numpy", lambda: Bm25sNumpy(corpus, folder / "bm25s-numpy")),
        ("lancedb_exact", lambda: LanceHybrid(corpus, folder, ann=False)),
    ]
    notes: list[str] = []
    if size <= ns.hnsw_max:
        builders.append(("lancedb_ivf_hnsw_sq", lambda: LanceHybrid(corpus, folder, ann=True)))
    elif "lancedb_ivf_hnsw_sq" in ns.systems:
        notes.append(f"LanceDB IVF_HNSW_SQ not built above {ns.hnsw_max:,} passages (--hnsw-max).")
    for name, build in builders:
        if name not in ns.systems:
            continue
        systems[name] = build()
        print(f"[peers] {size}: {name} built in {systems[name].build_s} s", file=sys.stderr)

    # Quality: one untimed pass at depth 100 a side.
    result_systems: dict[str, dict[str, Any]] = {}
    ndcg_by_query: dict[str, list[float]] = {}
    for name, system in systems.items():
        rankings = {
            qids[i]: documents_in_order(
                system.rank(texts[i], vectors[i], QUALITY_DEPTH, QUALITY_DEPTH), corpus.document_of
            )
            for i in judged
        }
        ndcg, recall = quality(rankings, qrels)
        ndcg_by_query[name] = per_query_ndcg(rankings, qrels)
        result_systems[name] = {
            "label": system.label,
            "ndcg_at_10": ndcg,
            "recall_at_100": recall,
            "build_s": system.build_s,
            "size_bytes": system.size_bytes,
        }
        print(f"[peers] {size}: {name} nDCG@10 {ndcg} recall@100 {recall}", file=sys.stderr)
    for name, row in result_systems.items():
        if name != PROJECT:
            # Paired over the same queries: the peer's nDCG@10 minus the project's.
            row["ndcg_delta"] = list(paired_bootstrap(ndcg_by_query[PROJECT], ndcg_by_query[name]))

    # Latency: every system, the same query in turn, round-robin.
    def timed(system: System) -> Callable[[int], object]:
        return lambda i: system.rank(texts[i], vectors[i], LIMIT, CANDIDATES)

    calls = {name: timed(system) for name, system in systems.items() if name != PROJECT}
    calls[PROJECT] = lambda i: project.search(texts[i])
    timings = interleaved(calls, len(texts), passes=ns.passes)
    # The search that embeds its own query runs in a rotation of its own, beside the search
    # alone: in the systems' rotation the model's inference (about 6 ms over both cores) left
    # whatever ran next on cold caches, and slowed the peers more than the project (10k
    # passages, p50: tantivy + numpy 1.02 to 1.53 ms, the project 1.82 to 2.07), which made
    # the ratio read better than the searches compare.
    embedding = interleaved(
        {"project_alone": calls[PROJECT], "project_with_embedding": lambda i: project.search(texts[i], live=True)},
        len(texts),
        passes=ns.passes,
    )
    timings["project_with_embedding"] = embedding["project_with_embedding"]
    alone: dict[str, list[float]] = {}
    if ns.alone:
        # Each system in a loop of its own, after the rotations: warm, nothing run in between.
        # The rotation puts every other system's memory between two calls of one (docs/
        # performance.md's findings measure what that costs each).
        for name, call in calls.items():
            alone.update(interleaved({name: call}, len(texts), passes=ns.passes))
    for name, samples in timings.items():
        result_systems.setdefault(
            name,
            {
                "label": "project hybrid, embedding the query itself",
                "ndcg_at_10": result_systems[PROJECT]["ndcg_at_10"],
                "recall_at_100": result_systems[PROJECT]["recall_at_100"],
                "build_s": None,
                "size_bytes": None,
            },
        )
        result_systems[name]["ms"] = latency(samples)
        if name in alone:
            result_systems[name]["alone_ms"] = latency(alone[name])
    # Rows in table order: the project's first.
    ordered = {k: result_systems[k] for k in (PROJECT, "project_with_embedding")}
    ordered.update({k: v for k, v in result_systems.items() if k not in ordered})
    project_p95 = ordered[PROJECT]["ms"]["p95"]
    return {
        "passages": size,
        "passages_ranked": len(corpus.ids),
        "abstracts": len(set(corpus.document_of.values())),
        "queries_judged": len(judged),
        "vectors": info.get("vectors"),
        "query_embed_ms": latency(embed_ms),
        "systems": ordered,
        "ratio_to_best_peer_p95": ratio_to_best_peer(project_p95, ordered),
        **({"ratio_to_best_peer_p95_alone": ratio_alone(ordered)} if alone else {}),
        "notes": notes,
    }


def main(argv: list[str] | None = None) -> None:
    from benchmarks.run import BENCH_DIR, DATASET, VECTOR_CACHE

    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000", help="comma-separated passage counts (generated corpora)")
    parser.add_argument("--queries", type=int, default=300, help="SciFact test queries (300 in all)")
    parser.add_argument("--passes", type=int, default=3, help="round-robin passes over the queries")
    parser.add_argument("--hnsw-max", type=int, default=HNSW_MAX, help="largest size for LanceDB's IVF_HNSW_SQ")
    parser.add_argument(
        "--systems",
        type=chosen_peers,
        default=PEERS,
        help=f"comma-separated peers to build and time beside the project (default all: {','.join(PEERS)})",
    )
    parser.add_argument(
        "--alone",
        action="store_true",
        help="also time each system in a loop of its own after the rotations (alone_ms in the JSON)",
    )
    parser.add_argument("--rebuild", action="store_true", help="rebuild the generated project indexes")
    parser.add_argument("--bench-dir", default=str(BENCH_DIR), help="where the generated project indexes are")
    parser.add_argument("--vector-cache", default=str(VECTOR_CACHE), help="SciFact index with the real vectors")
    parser.add_argument("--peers-dir", default=str(PEERS_DIR), help="scratch folder for the peers' indexes")
    parser.add_argument("--out", default=str(ROOT / "docs" / "peers.json"), help="the JSON result")
    parser.add_argument("--md", help="also write the markdown section alone to this file")
    parser.add_argument("--doc", help="replace the peers section of this file (docs/performance.md) in place")
    ns = parser.parse_args(argv)

    peers_dir = Path(ns.peers_dir)
    log_product_to(peers_dir / "product-log.jsonl")
    missing = missing_peers()
    if missing:
        raise SystemExit(
            f"peer libraries not importable: {', '.join(missing)}; `make bench-peers` installs them into "
            ".cache/peers-venv (benchmarks/peers-requirements.txt)"
        )
    started = time.time()
    results: dict[str, Any] = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "machine": machine(),
        "versions": _versions(),
        "load_average_before": load_average(),
        "protocol": {
            "ceiling": CEILING.label,
            "queries": ns.queries,
            "passes": ns.passes,
            "warmup": WARMUP,
            "order": "balanced",
            "limit": LIMIT,
            "candidates": CANDIDATES,
            "quality_depth": QUALITY_DEPTH,
            "rrf_k": RRF_K,
            "gate": "off",
            "peers": list(ns.systems),
        },
        "sizes": {},
    }
    for size in [int(s) for s in ns.sizes.split(",") if s]:
        entry = run_size(size, ns, DATASET, Path(ns.bench_dir), Path(ns.vector_cache))
        results["sizes"][str(size)] = entry
        print(f"[peers] {size}: ratio to best peer p95 {entry['ratio_to_best_peer_p95']}", file=sys.stderr)
    results["load_average_after"] = load_average()
    results["wall_s"] = round(time.time() - started, 1)

    out = Path(ns.out)
    previous = load_peers(out)
    if previous:
        # A run of some sizes keeps the other sizes of the stored result.
        for size, entry in previous["sizes"].items():
            first = entry.get("from_run_started_at") or previous.get("started_at")
            results["sizes"].setdefault(size, {**entry, "from_run_started_at": first})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    section = peers_section(results)
    if ns.md:
        Path(ns.md).write_text("\n".join(section) + "\n", encoding="utf-8")
    if ns.doc:
        doc = Path(ns.doc)
        doc.write_text(replace_section(doc.read_text(encoding="utf-8"), section), encoding="utf-8")
    print(json.dumps({"written": str(out), **{s: e["ratio_to_best_peer_p95"] for s, e in results["sizes"].items()}}))


if __name__ == "__main__":
    main()
