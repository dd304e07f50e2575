"""BEIR-format benchmarks (SciFact): one passage per document, nDCG@10 and recall@100.

Documents are stored through the same store code as a policy corpus (one per abstract,
title as the passage title), so what is measured is the product's ranking, not a copy of
it. The gate is off: a benchmark ranks every query. Embeddings are reused across runs when
the index file is kept (``--db``), so a fusion change can be re-measured in seconds.
"""

from __future__ import annotations

import csv
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from governed_evidence.config import Classification
from governed_evidence.embeddings.base import Embedder
from governed_evidence.ingest.calibrate import level_calibrations
from governed_evidence.ingest.embed import embed_with_reuse, embedding_key
from governed_evidence.search.models import SearchMode
from governed_evidence.search.service import SearchService
from governed_evidence.store.build import IndexBuilder
from governed_evidence.store.build_rows import DocumentRow, PassageRow
from governed_evidence.store.meta import IndexMeta
from governed_evidence.store.text import search_text

__all__ = [
    "QUERY_CHARS",
    "RANK_DEPTH",
    "BeirResult",
    "build_beir_index",
    "load_qrels",
    "ndcg_at_k",
    "queries_of",
    "recall_at_k",
    "run_beir",
]


@dataclass
class BeirResult:
    mode: str
    queries: int
    ndcg_at_10: float
    recall_at_100: float
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "queries": self.queries,
            "ndcg@10": round(self.ndcg_at_10, 4),
            "recall@100": round(self.recall_at_100, 4),
            "seconds": round(self.seconds, 1),
        }


def ndcg_at_k(ranked: list[str], relevant: dict[str, int], k: int = 10) -> float:
    dcg = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at_k(ranked: list[str], relevant: dict[str, int], k: int = 100) -> float:
    wanted = {d for d, g in relevant.items() if g > 0}
    return len(wanted & set(ranked[:k])) / len(wanted) if wanted else 0.0


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    return qrels


def build_beir_index(dataset: Path, db: Path, embedder: Embedder) -> dict[str, float]:
    """Index ``corpus.jsonl`` (one passage per document); returns timings."""
    identity = embedder.identity
    started = time.perf_counter()
    docs = [json.loads(line) for line in (dataset / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line]
    inputs = [f"{d.get('title', '')}\n{d.get('text', '')}".strip() for d in docs]
    keys = [embedding_key(identity.model_id, t) for t in inputs]
    t0 = time.perf_counter()
    embedded = embed_with_reuse(db, embedder, list(zip(keys, inputs, strict=True)))
    embed_s = time.perf_counter() - t0
    with IndexBuilder(db, dimension=identity.dimension, ceiling=Classification.PUBLIC) as builder:
        for doc, text_hash in zip(docs, keys, strict=True):
            body = str(doc.get("text", ""))
            doc_id = builder.add_document(
                DocumentRow(
                    str(doc["_id"]),
                    str(doc.get("title", "")),
                    "text",
                    Classification.PUBLIC,
                    text_hash,
                    None,
                    0.0,
                    1,
                    0,
                )
            )
            builder.add_passage(
                doc_id,
                PassageRow(
                    0,
                    str(doc["_id"]),
                    str(doc.get("title", "")),
                    "",
                    1,
                    1,
                    None,
                    None,
                    Classification.PUBLIC,
                    False,
                    body,
                    search_text(body),
                    text_hash,
                ),
                embedded.vectors[text_hash],
            )
        builder.commit(
            IndexMeta(
                embedding_model=identity.model_id,
                embedding_model_checksum=identity.checksum,
                embedding_dimension=identity.dimension,
                ceiling=Classification.PUBLIC,
                built_at="benchmark",
                corpus_name=dataset.name,
                documents=len(docs),
                passages=len(docs),
                similarity=level_calibrations(builder.conn, Classification.PUBLIC, embedder),
            )
        )
    return {
        "documents": float(len(docs)),
        "embedded": float(embedded.computed),
        "embed_s": embed_s,
        "total_s": time.perf_counter() - started,
    }


#: Candidates ranked a side per query (nDCG@10 and recall@100 read the first 100).
RANK_DEPTH = 100
#: A query is cut to this many characters before it is ranked.
QUERY_CHARS = 500


def queries_of(dataset: Path, qrels: dict[str, dict[str, int]]) -> dict[str, str]:
    """The judged queries of ``qrels`` (id -> text as ranked, cut to :data:`QUERY_CHARS`)."""
    lines = (dataset / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    rows = (json.loads(line) for line in lines if line)
    return {q["_id"]: str(q["text"])[:QUERY_CHARS] for q in rows if q["_id"] in qrels}


def run_beir(
    dataset: Path,
    db: Path,
    embedder: Embedder,
    *,
    split: str = "test",
    modes: tuple[SearchMode, ...] = ("keyword", "semantic", "hybrid"),
) -> list[BeirResult]:
    qrels = load_qrels(dataset / "qrels" / f"{split}.tsv")
    queries = queries_of(dataset, qrels)
    service = SearchService(db, ceiling=Classification.PUBLIC, embedder_factory=lambda: embedder, gate_enabled=False)
    results: list[BeirResult] = []
    for mode in modes:
        started = time.perf_counter()
        ndcg = recall = 0.0
        for qid, text in queries.items():
            ranking = service.rank(text, mode, depth=RANK_DEPTH)
            ranked = ranking.document_paths()
            ndcg += ndcg_at_k(ranked, qrels[qid])
            recall += recall_at_k(ranked, qrels[qid])
        n = max(len(queries), 1)
        results.append(BeirResult(mode, len(queries), ndcg / n, recall / n, time.perf_counter() - started))
    return results
