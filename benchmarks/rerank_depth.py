"""How many of hybrid's fused candidates to reorder by confidence, measured through the product.

Hybrid search fuses its two rankings by RRF, then orders the first ``RERANK_DEPTH`` fused
candidates by the gate's calibrated confidence (``search/candidates.py``). With the depth at 20
that reordering gained policy paraphrases and cost SciFact about 0.01 nDCG@10
(docs/evaluation.md). This measures the depth itself: each question is ranked once with no
reordering (the fused order, each candidate with its confidence, through
``SearchService.rank`` and the in-memory copies, as the server ranks), then reordered at every
depth of :data:`DEPTHS` exactly as ``assemble`` does (a stable sort by confidence). The gate's
withholding and abstention do not depend on the order, so the shipped thresholds hold at every
depth; only what is served first moves.

One rule, fixed before any figure was seen, chooses the depth on the tuning sets: the sum of
answerable hit@1, strict paraphrase hit@3, paraphrase hit@3 at ``normal`` and page@10 at
``normal``, each the mean over the policy tuning corpora, plus SciFact *train* nDCG@10 (each
metric counts once); only depths that keep the release gate's sample-corpus bounds
(evals/gate.toml, and page@10 >= 0.90) qualify; ties go to the depth nearest the one shipped
when the rule was run (:data:`BEFORE`), then to the shallower. Leave-one-out repeats the
choice without each tuning set. The validation sets (the GSA handbook, SciFact *test*) are
measured at :data:`BEFORE` and at the pooled choice only. The rule chose 100, shipped since.

    governed-evidence eval --suite tuning --cache-dir DIR       # builds the suite indexes once
    governed-evidence eval --suite validation --cache-dir DIR
    make bench-scifact                                          # .cache/beir-scifact.sqlite
    python -m benchmarks.rerank_depth --cache-dir DIR [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from benchmarks.ranked import documented
from benchmarks.sentence_similarity import (
    SAMPLE_MIN_PAGE_AT_10,
    Ranked,
    Scored,
    figures,
    keeps_release_gate,
    ranked_questions,
    suite_services,
)

ROOT = Path(__file__).resolve().parents[1]
#: Depths tried: 0 is plain fusion order, 20 was shipped before this measurement, 100 reorders
#: every candidate a search fuses.
DEPTHS = (0, 3, 5, 10, 15, 20, 30, 100)
#: The depth shipped when the rule was run (ties go to the depth nearest it); the comparisons
#: printed are against it, so a run reproduces the figures that chose today's depth.
BEFORE = 20
SCIFACT = "scifact"
#: The figures the rule sums (each a mean over the policy tuning corpora, SciFact's nDCG@10 beside).
POLICY_KEYS = ("answerable_hit@1", "paraphrase_hit@3", "paraphrase_normal_hit@3", "page@10")
#: What a ranked SciFact candidate is kept as (rank_scifact's ``record``).
T = TypeVar("T")


def reordered(candidates: Sequence[Scored], depth: int) -> tuple[Scored, ...]:
    """``candidates`` (in fused order) reordered at ``depth`` by the product's own function (by
    confidence alone: the fused scores are not read)."""
    from governed_evidence.search.candidates import confident_order

    order = confident_order([c.confidence for c in candidates], [], depth, 0.0)
    return tuple(candidates[i] for i in order)


def at_depth(questions: Sequence[Ranked], depth: int) -> list[Ranked]:
    return [Ranked(q.slice, q.expected, reordered(q.candidates, depth)) for q in questions]


@contextlib.contextmanager
def fused_order() -> Iterator[None]:
    """Rank without the confidence reordering (the depth is read when each ranking is assembled)."""
    from governed_evidence.search import candidates as ranking

    shipped = ranking.RERANK_DEPTH
    ranking.RERANK_DEPTH = 0
    try:
        yield
    finally:
        ranking.RERANK_DEPTH = shipped


def scifact_ndcg(queries: Sequence[tuple[Sequence[Scored], dict[str, int]]], depth: int) -> float:
    """Mean nDCG@10 of the documents in candidate order, as ``governed-evidence eval beir`` scores."""
    from governed_evidence.evaluation.beir import ndcg_at_k

    scores = [ndcg_at_k([c.document for c in reordered(cands, depth)], rel) for cands, rel in queries]
    return sum(scores) / max(len(scores), 1)


def score(
    policy: Mapping[str, Mapping[int, dict[str, float]]], scifact: Mapping[int, float] | None, depth: int
) -> float:
    """The rule's sum at ``depth``: the policy metrics averaged over ``policy``'s corpora, plus SciFact's."""
    total = 0.0
    if policy:
        total += sum(sum(f[depth][k] for k in POLICY_KEYS) for f in policy.values()) / len(policy)
    if scifact is not None:
        total += scifact[depth]
    return total


def choose_depth(
    policy: Mapping[str, Mapping[int, dict[str, float]]],
    scifact: Mapping[int, float] | None,
    depths: Sequence[int] = DEPTHS,
) -> int:
    """The depth the rule picks on the given tuning sets (the sample corpus, when among them,
    must keep the release gate's bounds)."""

    def allowed(depth: int) -> bool:
        sample = policy.get("sample")
        if sample is None:
            return True
        return keeps_release_gate(sample[depth]) and sample[depth]["page@10"] >= SAMPLE_MIN_PAGE_AT_10 - 1e-9

    qualified = [d for d in depths if allowed(d)]
    if not qualified:
        raise ValueError("no depth keeps the release gate's sample-corpus bounds")
    return max(qualified, key=lambda d: (round(score(policy, scifact, d), 9), -abs(d - BEFORE), -d))


def _rank_suite(suite: str, cache_dir: Path, embedder: Any) -> dict[str, list[Ranked]]:
    out: dict[str, list[Ranked]] = {}
    for spec, _, questions, service in suite_services(suite, cache_dir, embedder, "depth"):
        with fused_order():
            out[spec.name] = ranked_questions(service, questions)
        print(f"[depth] {spec.name}: ranked {len(out[spec.name])} questions", file=sys.stderr)
    return out


def scored(candidate: Any) -> Scored:
    return Scored(candidate.document, candidate.confidence)


def rank_scifact(
    dataset: Path, db: Path, split: str, embedder: Any, record: Callable[[Any], T]
) -> list[tuple[tuple[T, ...], dict[str, int]]]:
    """Each query of ``split`` ranked as ``eval beir`` ranks it (gate off, its depth), in fused
    order, each candidate kept as ``record`` makes it (:func:`scored`: its document and confidence)."""
    from governed_evidence.config import Classification
    from governed_evidence.evaluation.beir import RANK_DEPTH, load_qrels, queries_of
    from governed_evidence.search.service import SearchService

    qrels = load_qrels(dataset / "qrels" / f"{split}.tsv")
    service = SearchService(db, ceiling=Classification.PUBLIC, embedder_factory=lambda: embedder, gate_enabled=False)
    try:
        with fused_order():
            return [
                (
                    tuple(record(c) for c in documented(service.rank(text, "hybrid", depth=RANK_DEPTH))),
                    qrels[qid],
                )
                for qid, text in queries_of(dataset, qrels).items()
            ]
    finally:
        service.close()


def tuning_sets_parser(description: str | None) -> argparse.ArgumentParser:
    """The arguments of a measurement over the suites' indexes and SciFact (this one's and
    benchmarks/fusion_weight.py's)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache-dir", type=Path, required=True, help="where `eval --cache-dir` built the indexes")
    parser.add_argument("--scifact", type=Path, default=ROOT / "../shared/data/beir-scifact", help="BEIR SciFact")
    parser.add_argument("--scifact-db", type=Path, default=ROOT / ".cache" / "beir-scifact.sqlite")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    return parser


def main(argv: list[str] | None = None) -> int:
    ns = tuning_sets_parser(__doc__).parse_args(argv)

    from governed_evidence.config import Settings
    from governed_evidence.embeddings.factory import make_embedder
    from governed_evidence.search import candidates as ranking
    from governed_evidence.search.gate import GateThresholds

    embedder = make_embedder(Settings())
    shipped = GateThresholds()
    tuning = _rank_suite("tuning", ns.cache_dir, embedder)
    validation = _rank_suite("validation", ns.cache_dir, embedder)
    if not tuning:
        print("no tuning corpus was scored", file=sys.stderr)
        return 1

    def by_depth(ranked: Mapping[str, list[Ranked]]) -> dict[str, dict[int, dict[str, float]]]:
        return {
            corpus: {d: figures(at_depth(qs, d), shipped.strict, shipped.normal) for d in DEPTHS}
            for corpus, qs in ranked.items()
        }

    policy, held_out = by_depth(tuning), by_depth(validation)
    scifact: dict[str, dict[int, float]] = {}
    if ns.scifact_db.is_file() and (ns.scifact / "queries.jsonl").is_file():
        for split in ("train", "test"):
            queries = rank_scifact(ns.scifact, ns.scifact_db, split, embedder, scored)
            scifact[split] = {d: scifact_ndcg(queries, d) for d in DEPTHS}
            print(f"[depth] SciFact {split}: ranked {len(queries)} queries", file=sys.stderr)
    else:
        print(f"[depth] SciFact not scored: {ns.scifact_db} or {ns.scifact} is absent", file=sys.stderr)
    train = scifact.get("train")

    print("| set | depth | " + " | ".join(POLICY_KEYS) + " | abstention | false abstention |")
    print("|---|---|" + "---|" * (len(POLICY_KEYS) + 2))
    for corpus, rows in {**policy, **held_out}.items():
        for d in DEPTHS:
            f = rows[d]
            cells = " | ".join(f"{f[k]:.2f}" for k in (*POLICY_KEYS, "abstention", "false_abstention"))
            print(f"| {corpus} | {d} | {cells} |")
    for split, rows_ in scifact.items():
        print(f"SciFact {split} nDCG@10 by depth: " + ", ".join(f"{d}: {v:.4f}" for d, v in rows_.items()))
    chosen = choose_depth(policy, train)
    print(
        f"\nchosen on every tuning set: depth {chosen} (before: {BEFORE}, shipped: {ranking.RERANK_DEPTH}); "
        "rule sums: " + ", ".join(f"{d}: {score(policy, train, d):.3f}" for d in DEPTHS)
    )
    loo: dict[str, dict[str, Any]] = {}
    sets = [*policy, *([SCIFACT] if train is not None else [])]
    for left_out in sets:
        rest = {c: f for c, f in policy.items() if c != left_out}
        depth = choose_depth(rest, None if left_out == SCIFACT else train)
        if left_out == SCIFACT:
            assert train is not None
            moved = f"nDCG@10 {train[BEFORE]:.4f} -> {train[depth]:.4f}"
        else:
            was, now = policy[left_out][BEFORE], policy[left_out][depth]
            moved = ", ".join(f"{k} {was[k]:.2f} -> {now[k]:.2f}" for k in POLICY_KEYS)
        print(f"left out {left_out}: chosen depth {depth}; on {left_out}: {moved}")
        loo[left_out] = {"depth": depth, "moved": moved}
    for corpus, rows in held_out.items():
        was, now = rows[BEFORE], rows[chosen]
        print(f"validation {corpus}: " + ", ".join(f"{k} {was[k]:.2f} -> {now[k]:.2f}" for k in POLICY_KEYS))
    if "test" in scifact:
        print(f"validation SciFact test: nDCG@10 {scifact['test'][BEFORE]:.4f} -> {scifact['test'][chosen]:.4f}")
    if ns.json:
        ns.json.write_text(
            json.dumps(
                {"policy": policy, "validation": held_out, "scifact": scifact, "chosen": chosen, "leave_one_out": loo},
                indent=1,
            ),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
