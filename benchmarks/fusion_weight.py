"""How much of the fused (RRF) score to keep beside the confidence in hybrid's order, measured
through the product.

Hybrid search fuses its two rankings by RRF, then orders the fused candidates by
``confidence + w * fused score / best fused score`` (``search/candidates.py``, ``FUSION_WEIGHT``);
at ``w = 0`` that is the confidence alone, as shipped before this measurement. Each question is
ranked once in fused order (``SearchService.rank`` with the reordering off, the in-memory
copies, as the server ranks), then ordered at every weight of :data:`WEIGHTS` by the product's
own ``confident_order`` and served through its gate (``gate``) at the shipped thresholds.
The order moves nothing the gate withholds, so abstention and false abstention are the same at
every weight.

The rule is the one that chose the reordering's depth (benchmarks/rerank_depth.py): answerable
hit@1 + strict paraphrase hit@3 + normal paraphrase hit@3 + page@10, each the mean over the
policy tuning corpora, plus SciFact *train* nDCG@10; only weights that keep the release gate's
sample-corpus bounds qualify; ties go to the smaller weight. Leave-one-out repeats the choice
without each tuning set. The validation sets (the GSA handbook, SciFact *test*) are measured at
0 and at the pooled choice only.

    governed-evidence eval --suite tuning --cache-dir DIR       # builds the suite indexes once
    governed-evidence eval --suite validation --cache-dir DIR
    make bench-scifact                                          # .cache/beir-scifact.sqlite
    python -m benchmarks.fusion_weight --cache-dir DIR [--json FILE]
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.ranked import documented
from benchmarks.rerank_depth import POLICY_KEYS, fused_order, rank_scifact, tuning_sets_parser
from benchmarks.sentence_similarity import (
    SAMPLE_MIN_PAGE_AT_10,
    Ranked,
    Scored,
    figures,
    keeps_release_gate,
    suite_services,
)

#: Weights tried; 0 is the confidence alone (the order shipped before this measurement).
WEIGHTS = (0.0, 0.1, 0.25, 0.375, 0.5, 0.625, 0.75, 1.0, 1.25, 1.5, 2.0)
SCIFACT = "scifact"


@dataclass(frozen=True)
class _Score:
    score: float


@dataclass(frozen=True)
class Item:
    """One fused candidate: its document, its confidence and its fused score."""

    document: str
    confidence: float
    fused: _Score


def ordered(items: Sequence[Item], weight: float) -> list[Item]:
    """``items`` (in fused order) as the product orders them at ``weight``."""
    from governed_evidence.search.candidates import RERANK_DEPTH, confident_order

    order = confident_order([i.confidence for i in items], [i.fused.score for i in items], RERANK_DEPTH, weight)
    return [items[i] for i in order]


def as_ranked(slice_: str, expected: frozenset[str], items: Sequence[Item], weight: float) -> Ranked:
    return Ranked(slice_, expected, tuple(Scored(i.document, i.confidence) for i in ordered(items, weight)))


def policy_sum(f: Mapping[str, float]) -> float:
    return sum(f[k] for k in POLICY_KEYS)


def rule(policy: Mapping[str, Mapping[str, float]], scifact: float | None) -> float:
    """The policy figures' sum averaged over ``policy``'s corpora, plus SciFact train nDCG@10."""
    total = sum(policy_sum(f) for f in policy.values()) / len(policy) if policy else 0.0
    return total + (scifact or 0.0)


def choose(
    policy: Mapping[str, Mapping[float, dict[str, float]]],
    scifact: Mapping[float, float] | None,
    weights: Sequence[float] = WEIGHTS,
) -> float:
    """The weight the rule picks on the given tuning sets (the sample corpus, when among them,
    must keep the release gate's bounds); ties go to the smaller weight."""

    def allowed(w: float) -> bool:
        sample = policy.get("sample")
        return sample is None or (
            keeps_release_gate(sample[w]) and sample[w]["page@10"] >= SAMPLE_MIN_PAGE_AT_10 - 1e-9
        )

    qualified = [w for w in weights if allowed(w)]
    if not qualified:
        raise ValueError("no weight keeps the release gate's sample-corpus bounds")

    def total(w: float) -> float:
        return rule({c: by[w] for c, by in policy.items()}, None if scifact is None else scifact[w])

    return max(qualified, key=lambda w: (round(total(w), 9), -w))


def _item(candidate: Any) -> Item:
    return Item(candidate.document, candidate.confidence, _Score(candidate.fused.score))


def _rank_suite(suite: str, cache_dir: Path, embedder: Any) -> dict[str, list[tuple[str, frozenset[str], list[Item]]]]:
    out: dict[str, list[tuple[str, frozenset[str], list[Item]]]] = {}
    for spec, _, questions, service in suite_services(suite, cache_dir, embedder, "fusion"):
        with fused_order():
            out[spec.name] = [
                (q.slice, frozenset(q.expected), [_item(c) for c in documented(service.rank(q.question))])
                for q in questions
                if q.slice in ("answerable", "paraphrase", "unanswerable")
            ]
        print(f"[fusion] {spec.name}: ranked {len(out[spec.name])} questions", file=sys.stderr)
    return out


def scifact_ndcg(queries: Sequence[tuple[Sequence[Item], dict[str, int]]], weight: float) -> float:
    """Mean nDCG@10 of the documents in the product's order, as ``eval beir`` scores it."""
    from governed_evidence.evaluation.beir import ndcg_at_k

    scores = [ndcg_at_k([i.document for i in ordered(items, weight)], rel) for items, rel in queries]
    return sum(scores) / max(len(scores), 1)


def main(argv: list[str] | None = None) -> int:
    ns = tuning_sets_parser(__doc__).parse_args(argv)

    from governed_evidence.config import Settings
    from governed_evidence.embeddings.factory import make_embedder
    from governed_evidence.search.candidates import FUSION_WEIGHT
    from governed_evidence.search.gate import GateThresholds

    embedder = make_embedder(Settings())
    shipped = GateThresholds()
    tuning = _rank_suite("tuning", ns.cache_dir, embedder)
    if not tuning:
        print("no tuning corpus was scored", file=sys.stderr)
        return 1
    policy = {
        c: {w: figures([as_ranked(s, e, i, w) for s, e, i in qs], shipped.strict, shipped.normal) for w in WEIGHTS}
        for c, qs in tuning.items()
    }
    scifact: dict[float, float] | None = None
    test: list[tuple[tuple[Item, ...], dict[str, int]]] = []
    if ns.scifact_db.exists() and ns.scifact.is_dir():
        train = rank_scifact(ns.scifact, ns.scifact_db, "train", embedder, _item)
        scifact = {w: scifact_ndcg(train, w) for w in WEIGHTS}
        test = rank_scifact(ns.scifact, ns.scifact_db, "test", embedder, _item)
    else:
        print(f"[fusion] SciFact not scored: no {ns.scifact_db} (make bench-scifact)", file=sys.stderr)

    print("| weight | rule | SciFact train | " + " | ".join(f"{c}: {k}" for c in policy for k in POLICY_KEYS) + " |")
    for w in WEIGHTS:
        total = rule({c: by[w] for c, by in policy.items()}, None if scifact is None else scifact[w])
        sci = "" if scifact is None else f"{scifact[w]:.4f}"
        cells = " | ".join(f"{policy[c][w][k]:.2f}" for c in policy for k in POLICY_KEYS)
        print(f"| {w:g} | {total:.4f} | {sci} | {cells} |")
    chosen = choose(policy, scifact)
    print(f"\nchosen on every tuning set: {chosen:g} (shipped: {FUSION_WEIGHT:g})")
    loo: dict[str, Any] = {}
    for left_out in [*policy, *([SCIFACT] if scifact else [])]:
        others = {c: by for c, by in policy.items() if c != left_out}
        w = choose(others, None if left_out == SCIFACT else scifact)
        if left_out == SCIFACT and scifact is not None:
            moved = f"nDCG@10 {scifact[0.0]:.4f} -> {scifact[w]:.4f}"
        else:
            was, now = policy[left_out][0.0], policy[left_out][w]
            moved = ", ".join(f"{k} {was[k]:.2f} -> {now[k]:.2f}" for k in POLICY_KEYS)
        print(f"left out {left_out}: chosen {w:g}; {moved}")
        loo[left_out] = {"chosen": w}

    validation = _rank_suite("validation", ns.cache_dir, embedder)
    checked: dict[str, Any] = {}
    for corpus, qs in validation.items():
        for w in (0.0, chosen):
            f = figures([as_ranked(s, e, i, w) for s, e, i in qs], shipped.strict, shipped.normal)
            checked.setdefault(corpus, {})[w] = f
            print(f"validation {corpus} at {w:g}: " + ", ".join(f"{k} {f[k]:.2f}" for k in POLICY_KEYS))
    if test:
        for w in (0.0, chosen):
            checked.setdefault("scifact test", {})[w] = scifact_ndcg(test, w)
            print(f"validation SciFact test at {w:g}: nDCG@10 {checked['scifact test'][w]:.4f}")
    if ns.json:
        ns.json.write_text(
            json.dumps(
                {
                    "policy": {c: {str(w): f for w, f in by.items()} for c, by in policy.items()},
                    "scifact_train": None if scifact is None else {str(w): v for w, v in scifact.items()},
                    "chosen": chosen,
                    "leave_one_out": loo,
                    "validation": {c: {str(w): v for w, v in by.items()} for c, by in checked.items()},
                },
                indent=1,
            ),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
