"""The gate's similarity calibration for a model without a tuned one: how its parameters were
chosen, measured through the product.

An ingest measures (``ingest/calibrate.py``) each level's ``floor`` as a quantile of the fixed
unrelated questions' cosine to their nearest passage, and its ``ceiling`` as the floor plus a
share of the way to the median cosine between sampled passages' headings, asked as questions,
and their own passages. This script measures those statistics once per tuning corpus (each
question and heading embedded once, by the model the environment configures), then scores every
parameter set of the grid through ``SearchService`` on a copy of the index whose calibration is
replaced (strict gate, hybrid, each corpus at its ceiling).

The rule, fixed before the grid was run, is the one that chose the strict threshold
(``search/gate.py``): the largest pooled abstention minus pooled false abstention among the sets
that falsely withhold at most 12% of the answerable and paraphrase questions and abstain on all
four plainly off-topic sample questions; ties to the larger pooled paraphrase hit@3, then the
smaller quantile and share. Leave-one-corpus-out repeats the choice without each corpus and
reports the figures on it. Nothing is chosen on the validation corpora.

    # the model's settings in the environment (docs/evaluation.md, "A second model")
    governed-evidence eval --suite tuning --cache-dir DIR       # builds the indexes once
    python -m benchmarks.calibration_rule --cache-dir DIR [--json FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from governed_evidence.embeddings.base import Embedder, ModelIdentity, Vectors, embed_queries

ROOT = Path(__file__).resolve().parents[1]
#: The four plainly off-topic questions the strict gate must abstain on (never calibrated on).
OFF_TOPIC = (
    "What is the capital city of Australia?",
    "How do I make pancakes?",
    "Who won the football World Cup in 1998?",
    "How do I fix a puncture on my bicycle tyre?",
)
FLOOR_QUANTILES = (0.5, 0.75, 0.9)
#: The heading asked alone, or after its document's title (as the passage is embedded).
HEADINGS = ("heading", "title and heading")
SHARES = tuple(round(0.4 + 0.1 * i, 1) for i in range(13))
MAX_FALSE_ABSTENTION = 0.12


class Remembered:
    """The configured embedder, each query text embedded once for the whole run."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self._known: dict[str, np.ndarray] = {}

    @property
    def identity(self) -> ModelIdentity:
        return self._inner.identity

    def embed(self, texts: Sequence[str]) -> Vectors:
        return self._inner.embed(texts)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        todo = [t for t in dict.fromkeys(texts) if t not in self._known]
        if todo:
            for text, vector in zip(todo, embed_queries(self._inner, todo), strict=True):
                self._known[text] = np.asarray(vector, dtype=np.float32)
        out: Vectors = np.vstack([self._known[t] for t in texts])
        return out


@dataclass(frozen=True)
class Statistics:
    nearest_unrelated: np.ndarray
    #: Sampled headings' cosine to their own passage, by :data:`HEADINGS`.
    own: dict[str, np.ndarray]


def statistics(db: Path, level: int, embedder: Remembered) -> Statistics:
    """What an ingest reads at ``level``: every passage at or below it, sampled headings."""
    from governed_evidence.embeddings.calibration import UNRELATED_QUESTIONS, pseudo_query_rows
    from governed_evidence.store.connection import connect

    conn = connect(db, readonly=True)
    try:
        rows = conn.execute(
            "SELECT p.title, p.heading, v.embedding FROM passages p JOIN passage_vectors v ON v.passage_id = p.id"
            " WHERE p.searchable = 1 AND p.classification <= ? ORDER BY p.id",
            (level,),
        ).fetchall()
    finally:
        conn.close()
    blobs: list[bytes] = [blob for _, _, blob in rows]  # type: ignore[misc]
    matrix = np.vstack([np.frombuffer(blob, dtype=np.float32) for blob in blobs]).astype(np.float64)
    asked = embed_queries(embedder, list(UNRELATED_QUESTIONS)).astype(np.float64)
    nearest = (asked @ matrix.T).max(axis=1)
    chosen = pseudo_query_rows(len(rows))
    own: dict[str, np.ndarray] = {}
    for kind in HEADINGS:
        texts = [
            str(rows[i][1] or rows[i][0]) if kind == "heading" or not rows[i][1] else f"{rows[i][0]}. {rows[i][1]}"
            for i in chosen
        ]
        vectors = embed_queries(embedder, texts).astype(np.float64)
        own[kind] = np.einsum("ij,ij->i", vectors, matrix[chosen])
    return Statistics(nearest, own)


def calibration(stats: Statistics, quantile: float, heading: str, share: float) -> tuple[float, float]:
    floor = float(np.quantile(stats.nearest_unrelated, quantile))
    return round(floor, 4), round(floor + share * (float(np.median(stats.own[heading])) - floor), 4)


def score(
    db: Path, spec: Any, questions: list[Any], embedder: Remembered, measured: tuple[float, float]
) -> dict[str, Any]:
    """The strict slices of one corpus with its index's calibration replaced by ``measured``."""
    from governed_evidence.evaluation.runner import answer_rank
    from governed_evidence.search.service import SearchService
    from governed_evidence.store.connection import connect

    with tempfile.TemporaryDirectory(prefix="ge-calibration-") as scratch:
        copy = Path(scratch) / db.name
        shutil.copy(db, copy)
        conn = connect(copy, readonly=False)
        conn.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
            (f"similarity_{spec.ceiling.label}", f"{measured[0]!r},{measured[1]!r}"),
        )
        conn.close()
        service = SearchService(copy, ceiling=spec.ceiling, embedder_factory=lambda: embedder)
        try:
            out: dict[str, Any] = {}
            for name in ("answerable", "paraphrase", "crosslingual"):
                chosen = [q for q in questions if q.slice == name]
                hits = withheld = 0
                for q in chosen:
                    response = service.search(q.question, limit=8, confidence_level="strict")
                    rank = answer_rank(q, response.results)
                    hits += rank is not None and rank <= 3
                    withheld += response.status == "NO_RELEVANT_CONTEXT"
                out[name] = {"n": len(chosen), "hit@3": hits, "withheld": withheld}
            unanswerable = [q for q in questions if q.slice == "unanswerable"]
            out["unanswerable"] = {
                "n": len(unanswerable),
                "abstained": sum(
                    service.search(q.question, limit=8).status == "NO_RELEVANT_CONTEXT" for q in unanswerable
                ),
            }
            if spec.name == "sample":
                out["off_topic_abstained"] = sum(
                    service.search(t, limit=8).status == "NO_RELEVANT_CONTEXT" for t in OFF_TOPIC
                )
            return out
        finally:
            service.close()


def pooled(figures: dict[str, dict[str, Any]], names: Sequence[str]) -> dict[str, float] | None:
    """Pooled false abstention, abstention and paraphrase hit@3; None when an off-topic question
    was answered."""
    parts = [figures[n] for n in names]
    if any(p.get("off_topic_abstained", len(OFF_TOPIC)) < len(OFF_TOPIC) for p in parts):
        return None
    retrieval = sum(p[s]["n"] for p in parts for s in ("answerable", "paraphrase"))
    return {
        "false_abstention": sum(p[s]["withheld"] for p in parts for s in ("answerable", "paraphrase")) / retrieval,
        "abstention": sum(p["unanswerable"]["abstained"] for p in parts) / sum(p["unanswerable"]["n"] for p in parts),
        "paraphrase_hit@3": sum(p["paraphrase"]["hit@3"] for p in parts) / sum(p["paraphrase"]["n"] for p in parts),
    }


def choose(grid: dict[tuple[float, str, float], dict[str, dict[str, Any]]], names: Sequence[str]) -> Any:
    best: Any = None
    for key, figures in grid.items():
        p = pooled(figures, names)
        if p is None or p["false_abstention"] > MAX_FALSE_ABSTENTION + 1e-9:
            continue
        rank = (round(p["abstention"] - p["false_abstention"], 6), round(p["paraphrase_hit@3"], 6), -key[0], -key[2])
        if best is None or rank > best[0]:
            best = (rank, key, p)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache-dir", type=Path, required=True, help="the tuning suite's indexes (NAME.sqlite)")
    parser.add_argument("--json", type=Path, help="write every figure here")
    ns = parser.parse_args(argv)

    from governed_evidence.config import Settings
    from governed_evidence.embeddings.calibration import CALIBRATIONS
    from governed_evidence.embeddings.factory import make_embedder
    from governed_evidence.evaluation.questions import load_questions
    from governed_evidence.evaluation.suites import load_suite

    embedder = Remembered(make_embedder(Settings()))
    if embedder.identity.model_id in CALIBRATIONS:
        # The gate reads that model's tuned calibration whatever the index records.
        print(f"{embedder.identity.model_id} has a tuned calibration; nothing to measure", file=sys.stderr)
        return 2
    specs = [
        s
        for s in load_suite(ROOT / "evals" / "suites.toml", "tuning", ROOT)
        if (ns.cache_dir / f"{s.name}.sqlite").exists()
    ]
    stats = {s.name: statistics(ns.cache_dir / f"{s.name}.sqlite", int(s.ceiling), embedder) for s in specs}
    questions = {s.name: load_questions(s.questions) for s in specs}
    grid: dict[tuple[float, str, float], dict[str, dict[str, Any]]] = {}
    for key in itertools.product(FLOOR_QUANTILES, HEADINGS, SHARES):
        figures: dict[str, dict[str, Any]] = {}
        for spec in specs:
            measured = calibration(stats[spec.name], *key)
            if measured[1] - measured[0] < 0.02:
                break
            figures[spec.name] = score(
                ns.cache_dir / f"{spec.name}.sqlite", spec, questions[spec.name], embedder, measured
            )
            figures[spec.name]["calibration"] = measured
        else:
            grid[key] = figures
            print(key, json.dumps(pooled(figures, list(figures))), file=sys.stderr, flush=True)
    names = [s.name for s in specs]
    chosen = choose(grid, names)
    if chosen is None:
        print("no parameter set keeps the bounds", file=sys.stderr)
        return 1
    report: dict[str, Any] = {"chosen": chosen[1], "pooled": chosen[2], "per_corpus": grid[chosen[1]], "left_out": {}}
    for out in names:
        without = choose(grid, [n for n in names if n != out])
        report["left_out"][out] = None if without is None else {"chosen": without[1], "figures": grid[without[1]][out]}
    print(json.dumps(report, indent=1, default=str))
    if ns.json:
        ns.json.write_text(json.dumps({"report": report, "grid": {str(k): v for k, v in grid.items()}}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
