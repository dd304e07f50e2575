"""Sentence-level similarity beside passage similarity, measured through the product's own pipeline.

Each passage's sentences are embedded as the passage itself is (``title. heading`` then the
sentence), and a passage's similarity to the query becomes::

    alpha * passage + (1 - alpha) * max(best sentence, passage)

While a corpus's questions are scored (:func:`score_corpus`, as ``governed-evidence eval
--suite`` scores them), the in-memory vector copy ranks and scores by that similarity instead;
fusion, the gate's confidence (which reads the similarity) and documents first run unchanged,
with the thresholds as shipped. Nothing here is part of the product: docs/evaluation.md says
what it measured and what shipping it would cost.

Alpha is chosen on the tuning corpora only, by one rule (strict paraphrase hit@3 + page@10 at
``normal`` + strict abstention - strict false abstention, summed over the corpora), with
leave-one-corpus-out figures; the validation corpora are measured with the pooled choice.

    governed-evidence eval --suite tuning --cache-dir DIR       # builds the indexes once
    governed-evidence eval --suite validation --cache-dir DIR
    python -m benchmarks.sentence_similarity --cache-dir DIR [--alphas 0.25,0.5,0.75]

Sentence vectors are kept beside each index (``DIR/NAME.sentences.npz``) and recomputed when
the index is newer.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
#: Sentence ends, clause-ending colons and semicolons, and line breaks (list items, table rows).
_SPLIT = re.compile(r"(?<=[.!?;:])\s+|\n+")
#: Shorter pieces (list markers, lone headings) say too little to be matched alone.
MIN_WORDS = 4


def sentences(text: str) -> list[str]:
    """The pieces of a passage that are embedded one by one."""
    return [s for s in (p.strip() for p in _SPLIT.split(text)) if len(s.split()) >= MIN_WORDS]


def mixed_similarity(passage: np.ndarray, sentence: np.ndarray, owner: np.ndarray, alpha: float) -> np.ndarray:
    """Per passage: ``alpha * passage + (1 - alpha) * max(best sentence, passage)``.

    ``passage``: each passage's similarity; ``sentence``: each sentence's; ``owner``: the row of
    ``passage`` each sentence belongs to. A passage without sentences keeps its own similarity.
    """
    best = passage.astype(np.float32, copy=True)
    np.maximum.at(best, owner, sentence.astype(np.float32))
    return np.asarray(alpha * passage + (1.0 - alpha) * best, dtype=np.float32)


@dataclass
class SentenceVectors:
    #: Passage id of each sentence, and its unit vector.
    passage_ids: np.ndarray
    vectors: np.ndarray


def sentence_vectors(db: Path, embed: Callable[[list[str]], np.ndarray]) -> SentenceVectors:
    """Every searchable passage's sentences, embedded (cached beside the index)."""
    from governed_evidence.store.connection import connect

    cache = db.with_suffix(".sentences.npz")
    if cache.exists() and cache.stat().st_mtime >= db.stat().st_mtime:
        with np.load(cache) as saved:
            return SentenceVectors(saved["passage_ids"], saved["vectors"])
    conn = connect(db, readonly=True)
    try:
        rows = list(conn.execute("SELECT id, title, heading, text FROM passages WHERE searchable = 1 ORDER BY id"))
    finally:
        conn.close()
    texts: list[str] = []
    owners: list[int] = []
    for pid, title, heading, text in rows:
        prefix = f"{title}. {heading}\n" if heading else f"{title}\n"
        for sentence in sentences(str(text)):
            texts.append(prefix + sentence)
            owners.append(int(pid))
    print(f"[sentences] {db.stem}: embedding {len(texts)} sentences of {len(rows)} passages", file=sys.stderr)
    vectors = np.asarray(embed(texts), dtype=np.float32)
    found = SentenceVectors(np.asarray(owners, dtype=np.int64), vectors)
    np.savez(cache, passage_ids=found.passage_ids, vectors=found.vectors)
    return found


@contextlib.contextmanager
def sentence_similarity(found: SentenceVectors, alpha: float) -> Iterator[None]:
    """While open, the in-memory vector copy ranks and scores passages by the mixed similarity."""
    from governed_evidence.search import vectors as held

    original = held.VectorMatrix.knn, held.VectorMatrix.distances
    positions: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    #: The last query's scores: a search ranks (knn) and then scores the candidates only the
    #: keyword side found (distances) with the same query vector.
    last: dict[tuple[int, bytes], np.ndarray] = {}

    def scores(matrix: held.VectorMatrix, query: np.ndarray) -> np.ndarray:
        key = (id(matrix), query.tobytes())
        if key in last:
            return last[key]
        if id(matrix) not in positions:
            pos = np.minimum(np.searchsorted(matrix.ids, found.passage_ids), max(matrix.rows - 1, 0))
            held_here = matrix.ids[pos] == found.passage_ids  # sentences of passages this copy holds
            positions[id(matrix)] = (pos[held_here], found.vectors[held_here])
        pos, vecs = positions[id(matrix)]
        unit = held._unit(query)
        last.clear()
        last[key] = mixed_similarity(matrix.matrix @ unit, vecs @ unit, pos, alpha)
        return last[key]

    def knn(self: held.VectorMatrix, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        if self.rows == 0 or k <= 0:
            return []
        s = scores(self, query)
        top = np.argpartition(-s, k - 1)[:k] if k < self.rows else np.arange(self.rows)
        order = top[np.lexsort((self.ids[top], -s[top]))]
        return [(int(self.ids[i]), float(1.0 - s[i])) for i in order]

    def distances(self: held.VectorMatrix, query: np.ndarray, passage_ids: list[int]) -> dict[int, float]:
        if not passage_ids or self.rows == 0:
            return {}
        s = scores(self, query)
        wanted = np.asarray(passage_ids, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.ids, wanted), self.rows - 1)
        found_here = self.ids[pos] == wanted
        return {int(p): float(1.0 - s[i]) for p, i in zip(wanted[found_here], pos[found_here], strict=True)}

    held.VectorMatrix.knn, held.VectorMatrix.distances = knn, distances  # type: ignore[method-assign]
    try:
        yield
    finally:
        held.VectorMatrix.knn, held.VectorMatrix.distances = original  # type: ignore[method-assign]


def figures(reports: Sequence[Any], questions: Sequence[Any]) -> dict[str, float]:
    """The figures the rule reads (and the table shows) from one corpus's slice reports."""
    by = {r.slice.split(":")[1]: r.metrics for r in reports}
    answered = [q for q in questions if q.slice in ("answerable", "paraphrase")]
    n = {s: sum(q.slice == s for q in questions) for s in ("answerable", "paraphrase")}
    false_abstention = sum(by[s]["false_abstention"] * n[s] for s in n) / max(len(answered), 1)
    return {
        "answerable_hit@1": by["answerable"]["hit@1"],
        "paraphrase_hit@3": by["paraphrase"]["hit@3"],
        "paraphrase_normal_hit@3": by["paraphrase"]["normal_hit@3"],
        "page@10": by["paraphrase"]["page@10"],
        "recall@10": by["paraphrase"]["recall@10"],
        "abstention": by["unanswerable"]["abstention_rate"],
        "false_abstention": false_abstention,
    }


def rule(f: dict[str, float]) -> float:
    return f["paraphrase_hit@3"] + f["page@10"] + f["abstention"] - f["false_abstention"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache-dir", type=Path, required=True, help="where `eval --cache-dir` built the indexes")
    parser.add_argument("--alphas", default="0.25,0.5,0.75")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    ns = parser.parse_args(argv)
    alphas = [float(a) for a in ns.alphas.split(",")]

    from governed_evidence.composition import search_service
    from governed_evidence.config import Settings
    from governed_evidence.embeddings.factory import make_embedder
    from governed_evidence.evaluation.questions import load_questions
    from governed_evidence.evaluation.suites import load_suite, score_corpus

    settings = Settings()
    embedder = make_embedder(settings)
    results: dict[str, dict[str, dict[str, float]]] = {}
    suites = {s: load_suite(ROOT / "evals" / "suites.toml", s, ROOT) for s in ("tuning", "validation")}

    def label(alpha: float | None) -> str:
        return "as shipped" if alpha is None else f"alpha {alpha}"

    def measure(suite: str, variants: list[float | None]) -> None:
        for spec in suites[suite]:
            db = ns.cache_dir / f"{spec.name}.sqlite"
            if not db.exists():
                hint = f"run `governed-evidence eval --suite {suite} --cache-dir {ns.cache_dir}`"
                print(f"[sentences] {spec.name}: no index at {db}; {hint}", file=sys.stderr)
                continue
            found = sentence_vectors(db, embedder.embed)
            questions = load_questions(spec.questions if spec.questions.is_absolute() else ROOT / spec.questions)
            service = search_service(settings, db=db, ceiling=spec.ceiling, serving=True)
            try:
                service.warm()
                for alpha in variants:
                    scope = contextlib.nullcontext() if alpha is None else sentence_similarity(found, alpha)
                    with scope:
                        reports = score_corpus(spec.name, questions, service, "hybrid")
                    results.setdefault(spec.name, {})[label(alpha)] = figures(reports, questions)
                    print(
                        f"[sentences] {spec.name} {label(alpha)}: {results[spec.name][label(alpha)]}", file=sys.stderr
                    )
            finally:
                service.close()

    measure("tuning", [None, *alphas])
    tuning = [s.name for s in suites["tuning"] if s.name in results]
    labels = [label(None), *(label(a) for a in alphas)]
    if not tuning:
        print("no tuning corpus was scored", file=sys.stderr)
        return 1

    def choose(corpora: list[str]) -> str:
        return max(labels[1:], key=lambda name: sum(rule(results[c][name]) for c in corpora))

    pooled = choose(tuning)
    # Validation corpora are measured only as shipped and with the pooled choice.
    measure("validation", [None, alphas[labels[1:].index(pooled)]])
    print(
        "| corpus | variant | answerable hit@1 | paraphrase hit@3 (strict) | hit@3 (normal) | page@10 "
        "| recall@10 | abstention | false abst. |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, by_label in results.items():
        shown = labels if name in tuning else ["as shipped", pooled]
        for variant in shown:
            f = by_label[variant]
            print(
                f"| {name} | {variant} | {f['answerable_hit@1']:.2f} | {f['paraphrase_hit@3']:.2f} | "
                f"{f['paraphrase_normal_hit@3']:.2f} | {f['page@10']:.2f} | {f['recall@10']:.2f} | "
                f"{f['abstention']:.2f} | {f['false_abstention']:.2f} |"
            )
    print(f"\nchosen on all tuning corpora: {pooled}")
    for left_out in tuning:
        chosen = choose([c for c in tuning if c != left_out])
        before, after = results[left_out]["as shipped"], results[left_out][chosen]
        keys = ("paraphrase_hit@3", "page@10", "abstention", "false_abstention")
        moved = ", ".join(f"{k} {before[k]:.2f} -> {after[k]:.2f}" for k in keys)
        print(f"left out {left_out}: chosen {chosen}; on {left_out}: {moved}")
    if ns.json:
        ns.json.write_text(json.dumps({"results": results, "chosen": pooled}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
