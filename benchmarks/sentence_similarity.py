"""Sentence-level similarity beside passage similarity, measured through the product's own pipeline.

Each passage's sentences are embedded as the passage itself is (``title. heading`` then the
sentence), and a passage's similarity to the query becomes::

    alpha * passage + (1 - alpha) * max(best sentence, passage)

While a corpus's questions are ranked (``SearchService.rank``, the in-memory copies, as the
server ranks), the in-memory vector copy ranks and scores by that similarity instead; fusion,
the gate's confidence (which reads the similarity) and documents first run unchanged. Each
question is ranked once per alpha; the gate is then applied for any threshold with the
product's own :func:`gate`, which is what ``search`` does with that threshold. Nothing
here is part of the product: docs/evaluation.md says what it measured.

Two comparisons, both on the tuning corpora only:

* **at the thresholds as shipped**;
* **with the thresholds chosen again** for each alpha by the rules that chose the shipped ones,
  on the tuning corpora pooled: ``normal`` the highest at which at most 5% of the answerable and
  paraphrase questions get no answer; ``strict`` the one with the most abstention minus false
  abstention while at most 12% get none; both within the release gate's sample-corpus bounds
  (evals/gate.toml), a bound giving way only as far as the release gate needs.

Alpha (with its thresholds) is chosen by one rule, strict paraphrase hit@3 + page@10 at
``normal`` + strict abstention - strict false abstention, summed over the tuning corpora;
leave-one-corpus-out figures choose on the other corpora. The validation corpora are measured
as shipped, with the pooled choice, and with the choice the rule would make without the
release gate's bounds (to say what those bounds cost; nothing is chosen on validation).

    governed-evidence eval --suite tuning --cache-dir DIR       # builds the indexes once
    governed-evidence eval --suite validation --cache-dir DIR
    python -m benchmarks.sentence_similarity --cache-dir DIR [--alphas 0.25,0.5,0.75,1]

Sentence vectors are kept beside each index (``DIR/NAME.sentences.npz``) and recomputed when
the index is newer.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchmarks.ranked import documented

if TYPE_CHECKING:
    from governed_evidence.embeddings.base import Embedder
    from governed_evidence.evaluation.questions import Question
    from governed_evidence.evaluation.suites import CorpusSpec
    from governed_evidence.search.service import SearchService

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
def sentence_similarity(found: SentenceVectors, alpha: float, *, rescore: bool = False) -> Iterator[None]:
    """While open, the in-memory vector copy ranks and scores passages by the mixed similarity;
    ``rescore``: its candidates are still the passages nearest by their own similarity, and
    only their order and scores are the mixed similarity's (what a build storing sentence
    vectors could afford per query: the sentences of about 90 candidates, not of every passage)."""
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
        if rescore:
            nearest = original[0](self, query, k)
            top = np.searchsorted(self.ids, np.asarray([pid for pid, _ in nearest], dtype=np.int64))
        else:
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


#: Thresholds tried (the shipped ones are on this grid).
GRID = tuple(round(0.100 + 0.005 * i, 3) for i in range(121))
#: The rules' bounds on answerable and paraphrase questions left without an answer.
NORMAL_MAX_UNANSWERED = 0.05
STRICT_MAX_UNANSWERED = 0.12
#: The release gate's file: its sample-corpus bounds are what a chosen variant must keep.
RELEASE_GATE_FILE = ROOT / "evals" / "gate.toml"
#: Which of this module's figures each retrieval slice's gate metrics are.
_GATE_METRICS = {
    "answerable": {"hit@3": "answerable_hit@3", "false_abstention": "answerable_false_abstention"},
    "paraphrase": {"hit@3": "paraphrase_hit@3", "false_abstention": "paraphrase_false_abstention"},
    "unanswerable": {"abstention_rate": "abstention"},
}
#: tests/evaluation/test_suites.py's bound on the sample corpus at normal confidence.
SAMPLE_MIN_PAGE_AT_10 = 0.90
#: Results read at strict and at normal confidence, as the suites score them.
STRICT_LIMIT, NORMAL_LIMIT = 8, 10


@dataclass(frozen=True)
class Scored:
    """One candidate as the gate sees it."""

    document: str
    confidence: float

    @property
    def document_id(self) -> str:
        """What the gate groups by (documents first)."""
        return self.document


@dataclass(frozen=True)
class Ranked:
    """One question with its candidates in ranking order (nothing withheld)."""

    slice: str
    expected: frozenset[str]
    candidates: tuple[Scored, ...]

    @property
    def best(self) -> float:
        return max((c.confidence for c in self.candidates), default=0.0)


def document_level_questions(path: Path) -> list[Question] | None:
    """The questions of a suite corpus, or None for a page-level set (the PDFs'): :func:`figures`
    scores by document, so page-level questions are left to ``governed-evidence eval``."""
    from governed_evidence.evaluation.questions import load_questions

    questions = load_questions(path if path.is_absolute() else ROOT / path)
    return None if any(q.pages for q in questions) else questions


def suite_services(
    suite: str, cache_dir: Path, embedder: Embedder, label: str
) -> Iterator[tuple[CorpusSpec, Path, list[Question], SearchService]]:
    """Each corpus of ``suite`` with an index under ``cache_dir`` and document-level questions:
    its spec, index, questions and a warmed service at its ceiling, closed when the caller
    moves on. A corpus without an index is said on stderr under ``label`` and skipped."""
    from governed_evidence.evaluation.suites import load_suite
    from governed_evidence.search.service import SearchService

    for spec in load_suite(ROOT / "evals" / "suites.toml", suite, ROOT):
        db = cache_dir / f"{spec.name}.sqlite"
        if not db.exists():
            hint = f"run `governed-evidence eval --suite {suite} --cache-dir {cache_dir}`"
            print(f"[{label}] {spec.name}: no index at {db}; {hint}", file=sys.stderr)
            continue
        questions = document_level_questions(spec.questions)
        if questions is None:
            continue
        service = SearchService(
            db, ceiling=spec.ceiling, embedder_factory=lambda: embedder, vector_memory_bytes=1 << 30
        )
        try:
            service.warm()
            yield spec, db, questions, service
        finally:
            service.close()


def ranked_questions(service: SearchService, questions: Iterable[Question]) -> list[Ranked]:
    """The retrieval questions (answerable, paraphrase, unanswerable) as ``service`` ranks them."""
    return [
        Ranked(
            q.slice,
            frozenset(q.expected),
            tuple(Scored(c.document, c.confidence) for c in documented(service.rank(q.question))),
        )
        for q in questions
        if q.slice in ("answerable", "paraphrase", "unanswerable")
    ]


def _documents(candidates: Iterable[Scored]) -> list[str]:
    return list(dict.fromkeys(c.document for c in candidates))


def kept(question: Ranked, threshold: float, limit: int) -> list[Scored]:
    """What ``search`` serves at ``threshold``: the product's gate, documents first."""
    from governed_evidence.search.gate import gate

    return gate(question.candidates, threshold=threshold, enabled=True, limit=limit).kept


def figures(questions: Sequence[Ranked], strict: float, normal: float) -> dict[str, float]:
    """The slice figures of one corpus at the two thresholds."""
    out: dict[str, float] = {}
    answered = unanswered = 0
    for name in ("answerable", "paraphrase"):
        chosen = [q for q in questions if q.slice == name]
        n = max(len(chosen), 1)
        hit1 = hit3 = normal3 = page = recall = abstained = 0
        for q in chosen:
            served = kept(q, strict, STRICT_LIMIT)
            docs = _documents(served)
            abstained += not served
            hit1 += bool(docs[:1]) and docs[0] in q.expected
            hit3 += any(d in q.expected for d in docs[:3])
            loose = kept(q, normal, NORMAL_LIMIT)
            normal3 += any(d in q.expected for d in _documents(loose)[:3])
            page += any(c.document in q.expected for c in loose)
            recall += any(c.document in q.expected for c in q.candidates[:10])
        answered, unanswered = answered + len(chosen), unanswered + abstained
        out.update(
            {
                f"{name}_hit@1": hit1 / n,
                f"{name}_hit@3": hit3 / n,
                f"{name}_false_abstention": abstained / n,
            }
        )
        if name == "paraphrase":
            out.update({"paraphrase_normal_hit@3": normal3 / n, "page@10": page / n, "recall@10": recall / n})
    unanswerable = [q for q in questions if q.slice == "unanswerable"]
    out["abstention"] = sum(q.best < strict for q in unanswerable) / max(len(unanswerable), 1)
    out["normal_abstention"] = sum(q.best < normal for q in unanswerable) / max(len(unanswerable), 1)
    out["false_abstention"] = unanswered / max(answered, 1)
    return out


def rule(f: dict[str, float]) -> float:
    return f["paraphrase_hit@3"] + f["page@10"] + f["abstention"] - f["false_abstention"]


@functools.cache
def _release_bounds() -> dict[str, dict[str, float]]:
    """evals/gate.toml's bounds on the slices ranked here, read once."""
    from governed_evidence.evaluation.release_gate import load_gate

    return {name: bounds for name, bounds in load_gate(RELEASE_GATE_FILE).items() if name in _GATE_METRICS}


def keeps_release_gate(f: dict[str, float]) -> bool:
    """Whether the sample corpus's figures ``f`` pass evals/gate.toml's retrieval and abstention
    bounds, checked by the release gate's own code (its governance slices are not ranked here)."""
    from governed_evidence.evaluation.release_gate import evaluate_gate
    from governed_evidence.evaluation.runner import SliceReport

    spec = _release_bounds()
    reports = [
        SliceReport(name, "hybrid", metrics={metric: f[key] for metric, key in keys.items()})
        for name, keys in _GATE_METRICS.items()
    ]
    return all(check.passed for check in evaluate_gate(spec, reports))


def choose_thresholds(questions: Sequence[Ranked], bound: Sequence[Ranked] | None = None) -> tuple[float, float] | None:
    """``(strict, normal)`` by the shipped rules, over ``questions`` pooled; None when no pair
    keeps the release gate on ``bound`` (the sample corpus's questions, when it is among them).
    Where the gate allows no threshold inside a rule's bound on unanswered questions, the bound
    gives way as little as the gate needs.

    The release gate reads strict answers only; the suites' own test of the sample corpus also
    wants the right page among 10 normal answers for 90% of its paraphrases, which bounds normal.
    """
    answered = [q.best for q in questions if q.slice in ("answerable", "paraphrase")]
    refused = [q.best for q in questions if q.slice == "unanswerable"]
    if not answered:
        raise ValueError("no answerable or paraphrase question to choose thresholds on")

    def unanswered(t: float) -> float:
        return sum(b < t for b in answered) / len(answered)

    def abstention(t: float) -> float:
        return sum(b < t for b in refused) / max(len(refused), 1)

    def within(candidates: list[float], cap: float) -> list[float]:
        # The bound on unanswered questions, relaxed only as far as the release gate needs:
        # to the least share any threshold the gate allows leaves unanswered.
        if not candidates:
            return []
        cap = max(cap, min(unanswered(t) for t in candidates))
        return [t for t in candidates if unanswered(t) <= cap + 1e-12]

    loose = list(GRID)
    if bound is not None:
        loose = [t for t in loose if figures(bound, GRID[0], t)["page@10"] >= SAMPLE_MIN_PAGE_AT_10 - 1e-9]
    loose = within(loose, NORMAL_MAX_UNANSWERED)
    if not loose:
        return None
    normal = max(loose)
    allowed = list(GRID)
    if bound is not None:
        allowed = [t for t in allowed if keeps_release_gate(figures(bound, t, normal))]
    allowed = within(allowed, STRICT_MAX_UNANSWERED)
    if not allowed:
        return None
    # Most abstention net of false abstention; then the least false abstention; then the lowest.
    strict = max(allowed, key=lambda t: (round(abstention(t) - unanswered(t), 9), -unanswered(t), -t))
    return strict, normal


@dataclass(frozen=True)
class Choice:
    variant: str
    strict: float
    normal: float


def choose(
    ranked: dict[str, dict[str, list[Ranked]]], corpora: Sequence[str], variants: Sequence[str], *, bounded: bool = True
) -> Choice:
    """The variant (with its thresholds) the rule picks on ``corpora`` pooled."""
    best: tuple[float, Choice] | None = None
    for variant in variants:
        thresholds = thresholds_for(ranked[variant], corpora, bounded=bounded)
        if thresholds is None:
            continue
        strict, normal = thresholds
        score = sum(rule(figures(ranked[variant][c], strict, normal)) for c in corpora)
        if best is None or score > best[0] + 1e-9:
            best = (score, Choice(variant, strict, normal))
    if best is None:
        raise ValueError("no variant keeps the release gate's sample-corpus bounds")
    return best[1]


def thresholds_for(
    by_corpus: dict[str, list[Ranked]], corpora: Sequence[str], *, bounded: bool = True
) -> tuple[float, float] | None:
    """The thresholds chosen on ``corpora`` pooled, bound by the release gate where the sample corpus is one."""
    bound = by_corpus["sample"] if bounded and "sample" in corpora else None
    return choose_thresholds([q for c in corpora for q in by_corpus[c]], bound)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache-dir", type=Path, required=True, help="where `eval --cache-dir` built the indexes")
    parser.add_argument("--alphas", default="0.25,0.5,0.75,1", help="1 is the passage similarity alone")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    parser.add_argument(
        "--rescore",
        action="store_true",
        help="the meaning side's candidates chosen by passage similarity, only scored by the mixed one",
    )
    ns = parser.parse_args(argv)

    from governed_evidence.config import Settings
    from governed_evidence.embeddings.factory import make_embedder
    from governed_evidence.search.gate import GateThresholds

    settings = Settings()
    embedder = make_embedder(settings)
    alphas = {f"alpha {a:g}": a for a in sorted({float(x) for x in ns.alphas.split(",")} | {1.0})}
    before = "alpha 1"  # the passage similarity alone: the product as shipped
    shipped = GateThresholds()

    def rank_corpora(suite: str, labels: Iterable[str]) -> dict[str, dict[str, list[Ranked]]]:
        out: dict[str, dict[str, list[Ranked]]] = {label: {} for label in labels}
        for spec, db, questions, service in suite_services(suite, ns.cache_dir, embedder, "sentences"):
            found = sentence_vectors(db, embedder.embed)
            for label in out:
                alpha = alphas[label]
                scope = (
                    contextlib.nullcontext() if alpha == 1.0 else sentence_similarity(found, alpha, rescore=ns.rescore)
                )
                with scope:
                    out[label][spec.name] = ranked_questions(service, questions)
            print(f"[sentences] {spec.name}: ranked {len(questions)} questions", file=sys.stderr)
        return out

    tuning_ranked = rank_corpora("tuning", alphas)
    tuning = sorted({c for by in tuning_ranked.values() for c in by})
    if not tuning:
        print("no tuning corpus was scored", file=sys.stderr)
        return 1
    labels = list(alphas)
    table: dict[str, dict[str, dict[str, float]]] = {}
    for label in labels:
        for corpus in tuning:
            table.setdefault(corpus, {})[f"{label}, thresholds as shipped"] = figures(
                tuning_ranked[label][corpus], shipped.strict, shipped.normal
            )
        for bounded in (True, False):
            thresholds = thresholds_for(tuning_ranked[label], tuning, bounded=bounded)
            name = "within the release gate" if bounded else "without the release gate's bounds"
            if thresholds is None:
                print(f"[sentences] {label}: no thresholds {name}", file=sys.stderr)
                continue
            for corpus in tuning:
                table[corpus][f"{label}, chosen again {name}: {thresholds[0]}/{thresholds[1]}"] = figures(
                    tuning_ranked[label][corpus], *thresholds
                )
    pooled = choose(tuning_ranked, tuning, labels)
    unbounded = choose(tuning_ranked, tuning, labels, bounded=False)

    validation_ranked = rank_corpora("validation", dict.fromkeys([before, pooled.variant, unbounded.variant]))
    for corpus in sorted({c for by in validation_ranked.values() for c in by}):
        table.setdefault(corpus, {})["as shipped"] = figures(
            validation_ranked[before][corpus], shipped.strict, shipped.normal
        )
        for tag, choice in (("chosen", pooled), ("chosen without the release gate's bounds", unbounded)):
            table[corpus][f"{tag}: {choice.variant}, {choice.strict}/{choice.normal}"] = figures(
                validation_ranked[choice.variant][corpus], choice.strict, choice.normal
            )

    keys = (
        "answerable_hit@1",
        "paraphrase_hit@3",
        "paraphrase_normal_hit@3",
        "page@10",
        "recall@10",
        "abstention",
        "false_abstention",
    )
    print("| corpus | variant | " + " | ".join(keys) + " |")
    print("|---|---|" + "---|" * len(keys))
    for corpus, rows in table.items():
        for variant, f in rows.items():
            print(f"| {corpus} | {variant} | " + " | ".join(f"{f[k]:.2f}" for k in keys) + " |")
    print(f"\nchosen on all tuning corpora: {pooled}; without the release gate's bounds: {unbounded}")
    loo: dict[str, dict[str, object]] = {}
    for left_out in tuning:
        choice = choose(tuning_ranked, [c for c in tuning if c != left_out], labels)
        was = figures(tuning_ranked[before][left_out], shipped.strict, shipped.normal)
        now = figures(tuning_ranked[choice.variant][left_out], choice.strict, choice.normal)
        moved = ", ".join(f"{k} {was[k]:.2f} -> {now[k]:.2f}" for k in keys)
        print(f"left out {left_out}: chosen {choice}; on {left_out}: {moved}")
        loo[left_out] = {"choice": choice.__dict__, "before": was, "after": now}
    if ns.json:
        ns.json.write_text(
            json.dumps(
                {"figures": table, "chosen": pooled.__dict__, "unbounded": unbounded.__dict__, "leave_one_out": loo},
                indent=1,
            ),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
