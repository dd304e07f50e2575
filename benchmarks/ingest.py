"""Ingestion end to end (the real model) and re-ingest of unchanged and slightly changed corpora."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.stats import peak_rss_mb
from governed_evidence.config import Classification
from governed_evidence.embeddings.base import Embedder, ModelIdentity, Vectors
from governed_evidence.embeddings.minilm import MiniLMEmbedder
from governed_evidence.ingest.pipeline import IngestReport, ingest_corpus

__all__ = ["run_ingest", "run_reingest_scale"]


class HashEmbedder:
    """Deterministic pseudo-vectors at almost no cost: isolates everything but the model."""

    def __init__(self) -> None:
        self._identity = ModelIdentity("benchmark-hash-embedder", 384, "none")

    @property
    def identity(self) -> ModelIdentity:
        return self._identity

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(384)
            out[i] = v / np.linalg.norm(v)
        return out


def _summary(report: IngestReport, db: Path, wall: float) -> dict[str, Any]:
    seconds = {k: round(v, 3) for k, v in report.seconds.items()}
    total = report.seconds.get("total", wall)
    embed = report.seconds.get("embed", 0.0)
    return {
        "unchanged": report.unchanged,
        "documents": report.documents_indexed,
        "passages": report.passages,
        "embeddings_computed": report.embeddings_computed,
        "embeddings_reused": report.embeddings_reused,
        "seconds": seconds,
        # A kept index processed no passages: a rate would be meaningless.
        "passages_per_s": round(report.passages / total, 1) if total and not report.unchanged else None,
        "non_embedding_share": round((total - embed) / total, 3) if total else None,
        "db_bytes": db.stat().st_size,
        "db_bytes_per_passage": round(db.stat().st_size / max(report.passages, 1), 1),
    }


def _timed_ingest(corpus: Path, db: Path, embedder: Embedder, *, force: bool = False) -> dict[str, Any]:
    """One ingest at ceiling restricted, summarised with its wall time."""
    t0 = time.perf_counter()
    report = ingest_corpus(corpus, db, embedder, ceiling=Classification.RESTRICTED, progress=None, force=force)
    summary = _summary(report, db, time.perf_counter() - t0)
    summary.update(build=report.build, files_copied=report.files_copied, files_reparsed=report.files_reparsed)
    return summary


def run_ingest(corpus: Path) -> dict[str, Any]:
    """The GSA handbook with the real model, then again unchanged (every vector reused)."""
    embedder = MiniLMEmbedder()
    with tempfile.TemporaryDirectory(prefix="ge-bench-") as tmp:
        db = Path(tmp) / "handbook.sqlite"
        first_summary = _timed_ingest(corpus, db, embedder)
        again_summary = _timed_ingest(corpus, db, embedder)
    return {"corpus": corpus.name, "first": first_summary, "reingest": again_summary, "peak_rss_mb": peak_rss_mb()}


def _write_scifact_files(dataset: Path, folder: Path, documents: int) -> None:
    rows = [json.loads(line) for line in (dataset / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line]
    for i in range(documents):
        row = rows[i % len(rows)]
        replica = i // len(rows)
        path = folder / f"r{replica}" / f"{row['_id']}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        body = str(row.get("text", ""))
        path.write_text(
            f"---\nclassification: public\n---\n# {row.get('title', '') or row['_id']}\n\n"
            f"{body}\n\nReplica {replica}.\n",
            encoding="utf-8",
        )


def _change_one_file(corpus: Path) -> None:
    """Append a sentence to one file: the smallest change that still rebuilds the index."""
    path = min(corpus.rglob("*.md"))
    with path.open("a", encoding="utf-8") as fh:
        fh.write("\nRevised once after the first build.\n")


def run_reingest_scale(dataset: Path, documents: int) -> dict[str, Any]:
    """SciFact abstracts as ``documents`` Markdown files: ingest with a near-free embedder,
    re-ingest unchanged (the index is kept by its corpus fingerprint), re-ingest after one
    file changed (incremental: every other document copied from the previous index), then
    the same corpus with ``--force`` (every file parsed again; stored vectors still reused),
    which is what the incremental build is compared with."""
    embedder = HashEmbedder()
    tmp = Path(tempfile.mkdtemp(prefix="ge-bench-"))
    try:
        corpus = tmp / "corpus"
        _write_scifact_files(dataset, corpus, documents)
        db = tmp / "scale.sqlite"
        first_summary = _timed_ingest(corpus, db, embedder)
        again_summary = _timed_ingest(corpus, db, embedder)
        _change_one_file(corpus)
        changed_summary = _timed_ingest(corpus, db, embedder)
        force_summary = _timed_ingest(corpus, db, embedder, force=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "corpus": f"SciFact abstracts as {documents} Markdown files",
        "embedder": "hash pseudo-vectors (isolates parse, chunk and write)",
        "first": first_summary,
        "reingest": again_summary,
        "one_file_changed": changed_summary,
        "force": force_summary,
        "files": documents,
        "peak_rss_mb": peak_rss_mb(),
    }
