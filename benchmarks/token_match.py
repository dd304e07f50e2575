"""Token-level matching of question and passage with the shipped model: measured as a stand-in reranker.

The gate needs evidence that reads the question and the passage together; no cross-encoder ships
on these machines. The closest thing the shipped MiniLM can give is its contextual token vectors
(the ``last_hidden_state`` it mean-pools into a sentence vector), matched token by token as
BERTScore does: each content token of the question takes its best cosine among the passage's
tokens, and the question's score is their IDF-weighted mean (recall side)::

    token_score(q, p) = sum_i idf(q_i) * max_j cos(q_i, p_j) / sum_i idf(q_i)

IDF is over the corpus's own word pieces; the product's stopwords weigh nothing. Unlike a
passage vector, this keeps which question word found which passage word, so a paraphrase that
restates one clause of a long passage is not diluted by the rest of it.

What is measured, through the product's own ranking (``SearchService.rank``, the in-memory
copies, as the server ranks) and gate (``gate``):

* **separation**: area under the ROC curve of the best token score among the first ``--top``
  candidates, paraphrase against unanswerable and answerable against unanswerable, beside the
  gate's own confidence (0.5 is chance). A signal the gate could use has to separate the first;
* **as a reranker**: the first ``--top`` candidates ordered by token score (``token``) or by the
  sum of token score and confidence, each scaled to its best (``mix``), the rest as ranked.
  Confidences are untouched, so withholding and abstention are the gate's; the thresholds are
  chosen again for each variant by the shipped rules (sentence_similarity.choose), and one rule
  picks the variant on the tuning corpora, leave-one-corpus-out too. The validation corpus (the
  GSA handbook) is measured as shipped and at the choice only.

    governed-evidence eval --suite tuning --cache-dir DIR       # builds the indexes once
    governed-evidence eval --suite validation --cache-dir DIR
    python -m benchmarks.token_match --cache-dir DIR [--top 20] [--json FILE]

Each passage costs one model run of up to 256 tokens at query time: 20 handbook passages took
0.50 s on 2 cores one by one (1.0-1.3 s in one padded batch), which a reranker would have to earn.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks.ranked import documented
from benchmarks.sentence_similarity import Ranked, Scored, choose, figures, suite_services, thresholds_for

if TYPE_CHECKING:
    from governed_evidence.evaluation.questions import Question
    from governed_evidence.search.service import SearchService

VARIANTS = ("as shipped", "token", "mix")


@dataclass(frozen=True)
class TokenVectors:
    #: Word-piece ids of the text, without [CLS] and [SEP].
    ids: tuple[int, ...]
    #: One unit vector a piece, in the same order.
    vectors: np.ndarray


def token_score(question: TokenVectors, weights: np.ndarray, passage: TokenVectors) -> float:
    """IDF-weighted mean over the question's pieces of their best cosine in the passage."""
    if not question.ids or not passage.ids or float(weights.sum()) <= 0.0:
        return 0.0
    best = (question.vectors @ passage.vectors.T).max(axis=1)
    return float((best * weights).sum() / weights.sum())


def piece_weights(
    ids: Sequence[int], pieces: Sequence[str], df: Counter[int], rows: int, stop: frozenset[str]
) -> np.ndarray:
    """``log((N + 1) / (df + 1)) + 1`` per word piece; a stopword or punctuation weighs nothing."""
    return np.asarray(
        [
            0.0 if piece in stop or not any(ch.isalnum() for ch in piece) else math.log((rows + 1) / (df[i] + 1)) + 1.0
            for i, piece in zip(ids, pieces, strict=True)
        ],
        dtype=np.float64,
    )


def auc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """Probability that a positive scores above a negative (ties count half)."""
    if not positive or not negative:
        return float("nan")
    pos = np.asarray(positive)[:, None]
    neg = np.asarray(negative)[None, :]
    return float(((pos > neg).sum() + 0.5 * (pos == neg).sum()) / (pos.size * neg.size))


def reorder(candidates: Sequence[Scored], scores: Sequence[float], variant: str) -> tuple[Scored, ...]:
    """The first ``len(scores)`` candidates ordered by ``variant``; the rest as ranked (stable)."""
    top = list(candidates[: len(scores)])
    if variant == "as shipped" or not top:
        return tuple(candidates)
    token = np.asarray(scores, dtype=np.float64)
    if variant == "token":
        key = token
    elif variant == "mix":
        conf = np.asarray([c.confidence for c in top], dtype=np.float64)
        key = token / max(float(token.max()), 1e-9) + conf / max(float(conf.max()), 1e-9)
    else:
        raise ValueError(f"unknown variant {variant!r}")
    order = sorted(range(len(top)), key=lambda i: -key[i])
    return tuple(top[i] for i in order) + tuple(candidates[len(scores) :])


class _Encoder:
    """MiniLM's contextual token vectors (the model the product ships, run as it runs it)."""

    def __init__(self) -> None:
        from governed_evidence.embeddings.minilm import MiniLMEmbedder

        model = MiniLMEmbedder()
        self._tokenizer: Any = model._tokenizer  # a measurement reads the model as the product runs it
        self._session: Any = model._session

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return [str(self._tokenizer.id_to_token(i)) for i in ids]

    def encode_ids(self, texts: Sequence[str]) -> list[list[int]]:
        return [list(e.ids[1:-1]) for e in self._tokenizer.encode_batch(list(texts))]

    def vectors(self, texts: Sequence[str]) -> list[TokenVectors]:
        if not texts:
            return []
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        (hidden,) = self._session.run(
            ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        )
        out: list[TokenVectors] = []
        for k in range(len(texts)):
            n = int(mask[k].sum())
            v = hidden[k, 1 : n - 1]
            out.append(
                TokenVectors(tuple(int(i) for i in ids[k, 1 : n - 1]), v / np.linalg.norm(v, axis=1, keepdims=True))
            )
        return out


@dataclass(frozen=True)
class Measured:
    ranked: Ranked
    #: Token score of each of the first ``top`` candidates, in ranking order.
    scores: tuple[float, ...]


def measure_corpus(
    service: SearchService, questions: Iterable[Question], encoder: _Encoder, db: Path, top: int
) -> list[Measured]:
    from governed_evidence.search.query import STOPWORDS
    from governed_evidence.store.connection import connect

    conn = connect(db, readonly=True)
    try:
        texts = [
            str(t)
            for (t,) in conn.execute("SELECT title || ' ' || heading || ' ' || text FROM passages WHERE searchable = 1")
        ]
    finally:
        conn.close()
    df: Counter[int] = Counter()
    for ids in encoder.encode_ids(texts):
        df.update(set(ids))
    out: list[Measured] = []
    for q in questions:
        if q.slice not in ("answerable", "paraphrase", "unanswerable"):
            continue
        ranking = service.rank(q.question)
        candidates = documented(ranking)
        (query,) = encoder.vectors([q.question])
        weights = piece_weights(query.ids, encoder.pieces(query.ids), df, len(texts), STOPWORDS)
        # Embedded as the passage itself is: title, heading, then the text.
        rows = ranking.rows([c.candidate.passage_id for c in candidates[:top]])
        heads = [rows[c.candidate.passage_id] for c in candidates[:top]]
        passages = encoder.vectors(
            [f"{r.title}. {r.heading}\n{r.text}" if r.heading else f"{r.title}\n{r.text}" for r in heads]
        )
        out.append(
            Measured(
                Ranked(q.slice, frozenset(q.expected), tuple(Scored(c.document, c.confidence) for c in candidates)),
                tuple(token_score(query, weights, p) for p in passages),
            )
        )
    return out


def separation(measured: Sequence[Measured]) -> dict[str, float]:
    by: dict[str, dict[str, list[float]]] = {"token": {}, "confidence": {}}
    for m in measured:
        by["token"].setdefault(m.ranked.slice, []).append(max(m.scores, default=0.0))
        by["confidence"].setdefault(m.ranked.slice, []).append(m.ranked.best)
    out: dict[str, float] = {}
    for signal, slices in by.items():
        unanswerable = slices.get("unanswerable", [])
        out[f"{signal} P/U"] = auc(slices.get("paraphrase", []), unanswerable)
        out[f"{signal} A/U"] = auc(slices.get("answerable", []), unanswerable)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache-dir", type=Path, required=True, help="where `eval --cache-dir` built the indexes")
    parser.add_argument("--top", type=int, default=20, help="candidates scored a question")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    ns = parser.parse_args(argv)

    from governed_evidence.config import Settings
    from governed_evidence.embeddings.factory import make_embedder
    from governed_evidence.search.gate import GateThresholds

    embedder = make_embedder(Settings())
    encoder = _Encoder()
    measured: dict[str, list[Measured]] = {}
    tuning: list[str] = []
    for suite in ("tuning", "validation"):
        for spec, db, questions, service in suite_services(suite, ns.cache_dir, embedder, "token"):
            measured[spec.name] = measure_corpus(service, questions, encoder, db, ns.top)
            if suite == "tuning":
                tuning.append(spec.name)
            print(f"[token] {spec.name}: {len(measured[spec.name])} questions", file=sys.stderr)
    if not tuning:
        print("no tuning corpus was scored", file=sys.stderr)
        return 1

    ranked = {
        v: {c: [Ranked(m.ranked.slice, m.ranked.expected, reorder(m.ranked.candidates, m.scores, v)) for m in ms]
            for c, ms in measured.items()}
        for v in VARIANTS
    }  # fmt: skip
    print("| corpus | " + " | ".join(separation(next(iter(measured.values()))).keys()) + " |")
    report: dict[str, Any] = {"separation": {}, "figures": {}, "leave_one_out": {}}
    for corpus, ms in measured.items():
        sep = separation(ms)
        report["separation"][corpus] = sep
        print(f"| {corpus} | " + " | ".join(f"{v:.2f}" for v in sep.values()) + " |")

    shipped = GateThresholds()
    keys = (
        "answerable_hit@1",
        "paraphrase_hit@3",
        "paraphrase_normal_hit@3",
        "page@10",
        "abstention",
        "false_abstention",
    )
    pooled = choose(ranked, tuning, VARIANTS)
    print(f"\nchosen on the tuning corpora pooled: {pooled}")
    print("| corpus | variant | " + " | ".join(keys) + " |")
    for corpus in measured:
        rows = {"as shipped": figures(ranked["as shipped"][corpus], shipped.strict, shipped.normal)}
        for variant in VARIANTS[1:]:
            rows[f"{variant}, thresholds as shipped"] = figures(ranked[variant][corpus], shipped.strict, shipped.normal)
            thresholds = thresholds_for(ranked[variant], tuning)
            if thresholds is None:  # no pair keeps the release gate's sample-corpus bounds
                rows[f"{variant}, no thresholds keep the release gate"] = {}
            else:
                rows[f"{variant}, {thresholds[0]}/{thresholds[1]}"] = figures(ranked[variant][corpus], *thresholds)
        report["figures"][corpus] = rows
        for variant, f in rows.items():
            print(f"| {corpus} | {variant} | " + " | ".join(f"{f[k]:.2f}" if f else "" for k in keys) + " |")
    for left_out in tuning:
        choice = choose(ranked, [c for c in tuning if c != left_out], VARIANTS)
        was = figures(ranked["as shipped"][left_out], shipped.strict, shipped.normal)
        now = figures(ranked[choice.variant][left_out], choice.strict, choice.normal)
        print(f"left out {left_out}: {choice}; " + ", ".join(f"{k} {was[k]:.2f} -> {now[k]:.2f}" for k in keys))
        report["leave_one_out"][left_out] = {"choice": choice.__dict__, "before": was, "after": now}
    if ns.json:
        ns.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
