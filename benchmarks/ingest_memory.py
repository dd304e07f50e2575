"""Peak RSS of an ingest as the corpus grows (docs/performance.md, "Ingest memory").

SciFact abstracts are written as Markdown files (as by :mod:`benchmarks.ingest`) until the
corpus holds about the passages asked for; each corpus is ingested in a child process of its
own, whose peak resident set size (``ru_maxrss``) is the figure. The hash embedder isolates
what grows with the corpus (texts, vectors, the build's SQLite work) from the model, whose
memory depends on the batch shape only; ``--model`` uses the real model instead.

    python -m benchmarks.ingest_memory --passages 2000,20000,100000
    python -m benchmarks.ingest_memory --corpus PATH --model     # one folder, the real model
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.stats import load_average

DATASET = (Path(__file__).resolve().parents[1] / "../shared/data/beir-scifact").resolve()
CACHE = Path(__file__).resolve().parents[1] / ".cache" / "bench" / "ingest-memory"
#: Passages a SciFact abstract gives on average (measured on 1,600 files: 2,369 passages): to size a corpus.
PASSAGES_PER_FILE = 1.48


def _child(corpus: Path, model: bool) -> dict[str, Any]:
    from benchmarks.ingest import HashEmbedder
    from governed_evidence.config import Classification
    from governed_evidence.embeddings.base import Embedder
    from governed_evidence.ingest.pipeline import ingest_corpus

    embedder: Embedder
    if model:
        from governed_evidence.embeddings.minilm import MiniLMEmbedder

        embedder = MiniLMEmbedder()
    else:
        embedder = HashEmbedder()
    with tempfile.TemporaryDirectory(prefix="ge-bench-") as tmp:
        db = Path(tmp) / "index.sqlite"
        report = ingest_corpus(corpus, db, embedder, ceiling=Classification.RESTRICTED, progress=None)
        size = db.stat().st_size
    return {
        "passages": report.passages,
        "seconds": {k: round(v, 2) for k, v in report.seconds.items()},
        "db_mb": round(size / 2**20, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def measure(corpus: Path, *, model: bool = False) -> dict[str, Any]:
    """One ingest of ``corpus`` in a child process: its passages, seconds and peak RSS."""
    command = [sys.executable, "-m", "benchmarks.ingest_memory", "--child", str(corpus)]
    if model:
        command.append("--model")
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def generated_corpus(passages: int) -> Path:
    """SciFact abstracts as Markdown, about ``passages`` passages, cached under .cache/bench."""
    from benchmarks.ingest import _write_scifact_files

    files = round(passages / PASSAGES_PER_FILE)
    folder = CACHE / f"scifact-{files}"
    if not (folder / ".complete").is_file():
        _write_scifact_files(DATASET, folder, files)
        (folder / ".complete").write_text("", encoding="utf-8")
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", default="2000,20000", help="comma-separated corpus sizes to generate")
    parser.add_argument("--corpus", type=Path, help="ingest this folder instead of generated corpora")
    parser.add_argument("--model", action="store_true", help="the real model instead of the hash embedder")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.child is not None:
        print(json.dumps(_child(ns.child, ns.model)))
        return 0
    corpora = [ns.corpus] if ns.corpus else [generated_corpus(int(n)) for n in ns.passages.split(",")]
    for corpus in corpora:
        t0 = time.perf_counter()
        result = measure(corpus, model=ns.model)
        result.update(corpus=corpus.name, wall_s=round(time.perf_counter() - t0, 1), load=load_average())
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
