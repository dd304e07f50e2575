"""Both models' meaning sides at once: does combining them pay? (docs/evaluation.md, "Both models
at once").

Each corpus of a suite is read twice, from an index built with the default in-process model
(the first) and from one built with the model the environment's ``GOVERNED_EVIDENCE_*`` settings
name (the second), over the same passages. Every retrieval question (answerable, English
paraphrase, French and German) is embedded once by each model, one question at a time as a search
embeds it, and ranked four ways on the meaning side alone, without the gate, over the searchable
passages at or below the corpus's ceiling:

* each model alone, by cosine;
* RRF of the two full rankings (``1 / (k + rank)`` summed, k = 60 by default);
* the calibrated sum: each cosine rescaled by its model's calibration at the ceiling
  (``(cosine - floor) / (ceiling - floor)``, ``calibration_for`` with the index's measured
  span, so a tuned model keeps its tuned one), then added.

A question is found at k when one of its expected documents is among the first k distinct
documents of the ranking (k = 3 and 10); page-level questions are scored by document here.

    governed-evidence eval --suite tuning --cache-dir DIR_A     # the default model
    GOVERNED_EVIDENCE_EMBEDDER=openai ... governed-evidence eval --suite tuning --cache-dir DIR_B
    GOVERNED_EVIDENCE_EMBEDDER=openai ... python -m benchmarks.two_models --first-dir DIR_A \\
        --second-dir DIR_B [--suite tuning] [--rrf-k 60] [--cache FILE] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from governed_evidence.config import Classification
from governed_evidence.embeddings.base import Embedder, ModelIdentity, embed_queries
from governed_evidence.evaluation.questions import Question

ROOT = Path(__file__).resolve().parents[1]
RRF_K = 60
DEPTHS = (3, 10)
#: The slices scored, with the table's row labels.
SLICES = {"answerable": "answerable", "paraphrase": "English paraphrases", "crosslingual": "French and German"}
METHODS = ("first", "second", "rrf", "sum")


class ModelMismatchError(ValueError):
    """An index whose recorded model is not its query embedder's."""


@dataclass(frozen=True)
class Side:
    """One model's view of a corpus at a level: unit vectors by row, and the calibration span."""

    model_id: str
    matrix: np.ndarray
    floor: float
    ceiling: float


@dataclass(frozen=True)
class Corpus:
    name: str
    #: Each row's document path; row i of both sides is the same passage.
    documents: tuple[str, ...]
    first: Side
    second: Side


@dataclass(frozen=True)
class Found:
    corpus: str
    id: str
    slice: str
    method: str
    top3: bool
    top10: bool


def check_model(db: Path, recorded: str, dimension: int, identity: ModelIdentity) -> None:
    """Refuses an index whose vectors the embedder's cannot be compared with (the product's test)."""
    mismatch = identity.describe_mismatch(recorded, dimension)
    if mismatch:
        raise ModelMismatchError(f"{db}: {mismatch}")


def load_side(db: Path, level: Classification, identity: ModelIdentity) -> tuple[Side, list[tuple[str, str]]]:
    """The searchable vectors at or below ``level`` (as the server holds them: unit rows in
    passage-id order), and each row's (document path, passage text)."""
    from governed_evidence.embeddings.calibration import calibration_for
    from governed_evidence.search.vectors import load_matrix
    from governed_evidence.store.connection import connect, read_meta

    conn = connect(db, readonly=True)
    try:
        meta = read_meta(conn)
        check_model(db, meta.embedding_model, meta.embedding_dimension, identity)
        held = load_matrix(conn, level, meta.embedding_dimension)
        assert held is not None  # only a cancelled copy is None
        text = {
            int(pid): (str(path), str(body))
            for pid, path, body in conn.execute(
                "SELECT p.id, d.path, p.text FROM passages p JOIN documents d ON d.id = p.document_id"
                " WHERE p.searchable = 1 AND p.classification <= ?",
                (int(level),),
            )
        }
    finally:
        conn.close()
    calibration = calibration_for(meta.embedding_model, meta.similarity_calibration(level))
    side = Side(meta.embedding_model, held.matrix, calibration.floor, calibration.ceiling)
    return side, [text[int(pid)] for pid in held.ids]


def aligned(first: Sequence[tuple[str, str]], second: Sequence[tuple[str, str]]) -> list[int]:
    """For each of ``first``'s passages, the row of ``second`` holding the same passage (same
    document, same text): two builds of one corpus, whatever ids each gave its passages."""
    if list(first) == list(second):
        return list(range(len(first)))
    rows = {key: row for row, key in enumerate(second)}
    if len(first) != len(second) or len(rows) != len(second) or any(key not in rows for key in first):
        raise ValueError("the two indexes do not hold the same passages (build both from the same corpus)")
    return [rows[key] for key in first]


def rrf(orders: Sequence[np.ndarray], k: int = RRF_K) -> np.ndarray:
    """Reciprocal-rank fusion of full rankings (row indices, best first): ``1 / (k + rank)`` summed."""
    fused = np.zeros(len(orders[0]) if orders else 0)
    steps = 1.0 / (k + np.arange(1, len(fused) + 1))
    for order in orders:
        fused[order] += steps
    return fused


def calibrated_sum(scores: Sequence[tuple[np.ndarray, float, float]]) -> np.ndarray:
    """Each model's cosines rescaled by its calibration (``floor`` to 0, ``ceiling`` to 1), added."""
    total: np.ndarray = sum((s - floor) / (ceiling - floor) for s, floor, ceiling in scores)  # type: ignore[assignment]
    return total


def best_first(scores: np.ndarray) -> np.ndarray:
    """Rows by descending score; ties keep row (passage-id) order."""
    return np.argsort(-scores, kind="stable")


def orders(
    first: Side, second: Side, q_first: np.ndarray, q_second: np.ndarray, k: int = RRF_K
) -> dict[str, np.ndarray]:
    """The four rankings of one question: each model alone, their RRF and their calibrated sum."""
    s1, s2 = first.matrix @ q_first, second.matrix @ q_second
    o1, o2 = best_first(s1), best_first(s2)
    return {
        "first": o1,
        "second": o2,
        "rrf": best_first(rrf([o1, o2], k)),
        "sum": best_first(calibrated_sum([(s1, first.floor, first.ceiling), (s2, second.floor, second.ceiling)])),
    }


def distinct_documents(order: np.ndarray, documents: Sequence[str], n: int) -> list[str]:
    """The first ``n`` distinct documents of a passage ranking: a document's later passages add nothing."""
    seen: dict[str, None] = {}
    for row in order:
        seen.setdefault(documents[int(row)])
        if len(seen) == n:
            break
    return list(seen)


def score(
    corpus: Corpus, questions: Sequence[Question], vectors: Mapping[str, tuple[np.ndarray, np.ndarray]], k: int = RRF_K
) -> list[Found]:
    """Every question's finding at each depth under each ranking. ``vectors``: question text ->
    (first model's vector, second model's)."""
    out: list[Found] = []
    for q in questions:
        q_first, q_second = vectors[q.question.strip()]
        for method, order in orders(corpus.first, corpus.second, q_first, q_second, k).items():
            docs = distinct_documents(order, corpus.documents, max(DEPTHS))
            top3, top10 = (any(d in q.expected for d in docs[:depth]) for depth in DEPTHS)
            out.append(Found(corpus.name, q.id, q.slice, method, top3, top10))
    return out


def table(found: Sequence[Found], names: tuple[str, str]) -> list[str]:
    """The pooled markdown table: per slice, found in the top 3 / top 10 under each ranking."""
    lines = [f"| questions | {names[0]} | {names[1]} | RRF of both | sum of both |", "|---|---|---|---|---|"]
    for slice_, label in SLICES.items():
        cells = [_counts([f for f in found if f.slice == slice_ and f.method == m]) for m in METHODS]
        n = sum(f.slice == slice_ and f.method == METHODS[0] for f in found)
        if n:
            lines.append(f"| {label} ({n}) | " + " | ".join(cells) + " |")
    return lines


def per_corpus(found: Sequence[Found], corpora: Sequence[str]) -> list[str]:
    """Each slice's top-3 counts per corpus, the four rankings in the table's order."""
    lines = []
    for slice_ in SLICES:
        parts = []
        for c in corpora:
            mine = [f for f in found if f.corpus == c and f.slice == slice_]
            if mine:
                n = sum(f.method == METHODS[0] for f in mine)
                counts = " / ".join(str(sum(f.top3 for f in mine if f.method == m)) for m in METHODS)
                parts.append(f"{c} ({n}) {counts}")
        if parts:
            lines.append(f"  {slice_}: " + ", ".join(parts))
    return lines


def _counts(found: Sequence[Found]) -> str:
    return f"{sum(f.top3 for f in found)} / {sum(f.top10 for f in found)}"


def short_name(model_id: str) -> str:
    """``sentence-transformers/all-MiniLM-L6-v2@int8-onnx`` -> ``all-MiniLM-L6-v2``; an endpoint's
    ``openai-compatible:NAME [prompts]`` -> ``NAME``."""
    name = model_id.split(" [", 1)[0].removeprefix("openai-compatible:")
    return name.rsplit("/", 1)[-1].split("@", 1)[0]


def query_vectors(
    embedder: Embedder, texts: Sequence[str], cache: dict[str, list[float]], progress: Callable[[int], None]
) -> dict[str, np.ndarray]:
    """Each text embedded as a query, one at a time as a search embeds it (a batch pads its texts
    to the longest, which moves an in-process model's vectors); ``cache`` is read and filled."""
    for done, text in enumerate(texts, start=1):
        if text not in cache:
            cache[text] = [float(x) for x in embed_queries(embedder, [text])[0]]
        if done % 50 == 0:
            progress(done)
    return {t: np.asarray(cache[t], dtype=np.float32) for t in texts}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n", 1)[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--first-dir", type=Path, required=True, help="indexes built with the default model")
    parser.add_argument("--second-dir", type=Path, required=True, help="indexes built with the configured model")
    parser.add_argument("--suite", default="tuning", help="the suite of evals/suites.toml (default: tuning)")
    parser.add_argument("--rrf-k", type=int, default=RRF_K, help=f"RRF's k (default {RRF_K})")
    parser.add_argument("--cache", type=Path, help="JSON file keeping the query vectors between runs, by model")
    parser.add_argument("--json", type=Path, help="write every question's findings and the pooled table here")
    return parser


def main(argv: list[str] | None = None) -> int:
    ns = _parser().parse_args(argv)

    from governed_evidence.commands.common import load_settings
    from governed_evidence.embeddings.factory import make_embedder
    from governed_evidence.embeddings.minilm import MiniLMEmbedder
    from governed_evidence.evaluation.questions import load_questions
    from governed_evidence.evaluation.suites import load_suite

    def say(line: str) -> None:
        print(line, file=sys.stderr)

    embedders: tuple[Embedder, Embedder] = (MiniLMEmbedder(), make_embedder(load_settings()))
    identities = (embedders[0].identity, embedders[1].identity)
    corpora: list[tuple[Corpus, list[Question]]] = []
    try:
        for spec in load_suite(ROOT / "evals" / "suites.toml", ns.suite, ROOT):
            dbs = (ns.first_dir / f"{spec.name}.sqlite", ns.second_dir / f"{spec.name}.sqlite")
            absent = [str(db) for db in dbs if not db.is_file()]
            if absent or not spec.questions.is_file():
                say(f"{spec.name}: skipped ({', '.join(absent) or spec.questions} absent)")
                continue
            (first, keys), (second, other) = (
                load_side(db, spec.ceiling, i) for db, i in zip(dbs, identities, strict=True)
            )
            rows = aligned(keys, other)
            second = Side(second.model_id, second.matrix[rows], second.floor, second.ceiling)
            corpus = Corpus(spec.name, tuple(path for path, _ in keys), first, second)
            questions = [q for q in load_questions(spec.questions) if q.slice in SLICES]
            corpora.append((corpus, questions))
            say(
                f"{spec.name}: ceiling {spec.ceiling.label}, {len(keys)} passages, {len(questions)} questions; "
                f"calibrations {(first.floor, first.ceiling)} and {(second.floor, second.ceiling)}"
            )
    except ValueError as exc:  # a model mismatch, or two indexes of different passages
        say(f"two_models: {exc}")
        return 2
    if not corpora:
        say("two_models: no corpus of the suite has an index in both folders")
        return 1

    cached: dict[str, dict[str, list[float]]] = {}
    if ns.cache and ns.cache.is_file():
        cached = json.loads(ns.cache.read_text(encoding="utf-8"))
    # Stripped, as a search strips its query before embedding it (search/plan.py).
    texts = list(dict.fromkeys(q.question.strip() for _, qs in corpora for q in qs))
    by_model: list[dict[str, np.ndarray]] = []
    for embedder, identity in zip(embedders, identities, strict=True):
        name = short_name(identity.model_id)
        say(f"embedding {len(texts)} questions with {name}")
        memo = cached.setdefault(identity.model_id, {})
        by_model.append(query_vectors(embedder, texts, memo, lambda n: say(f"  {n} embedded")))
    if ns.cache:
        ns.cache.write_text(json.dumps(cached), encoding="utf-8")
    vectors = {t: (by_model[0][t], by_model[1][t]) for t in texts}

    found = [f for corpus, qs in corpora for f in score(corpus, qs, vectors, ns.rrf_k)]
    names = (short_name(identities[0].model_id), short_name(identities[1].model_id))
    print("\n".join(table(found, names)))
    print(f"\nPer corpus, top 3 ({' / '.join(names)} / RRF / sum):")
    print("\n".join(per_corpus(found, [c.name for c, _ in corpora])))
    if ns.json:
        report: dict[str, Any] = {
            "models": {"first": identities[0].model_id, "second": identities[1].model_id},
            "rrf_k": ns.rrf_k,
            "table": table(found, names),
            "questions": [f.__dict__ for f in found],
        }
        ns.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
