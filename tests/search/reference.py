"""Reference implementations: the plain forms the search's array code is checked against,
and adapters that let hand-worked examples call the product's stages with plain values.

Nothing here is used by the product; tests/search compares the two.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import apsw
import numpy as np

from governed_evidence.embeddings.calibration import ModelCalibration
from governed_evidence.search import bm25
from governed_evidence.search.confidence import Signals, confidences
from governed_evidence.search.fusion import COVERAGE_EXPONENT, RRF_K, Fused, fuse


def fused(keyword: list[int], semantic: list[int], coverage: dict[int, float], *, k: int = RRF_K) -> list[Fused]:
    """The product's fusion of two ranked id lists (best first, each listing a passage at most
    once), called with ids: positions are the ids in ascending order, as a search pools them."""
    if len(set(keyword)) != len(keyword) or len(set(semantic)) != len(semantic):
        raise ValueError("a ranking lists a passage more than once")
    ids = sorted({*keyword, *semantic})
    where = {pid: i for i, pid in enumerate(ids)}
    shares = np.asarray([coverage.get(pid, 0.0) for pid in ids], dtype=np.float64)
    fusion = fuse(
        len(ids),
        np.asarray([where[p] for p in keyword], dtype=np.int64),
        np.asarray([where[p] for p in semantic], dtype=np.int64),
        shares,
        k=k,
    )
    return [fusion.item(i, ids[int(at)]) for i, at in enumerate(fusion.at.tolist())]


def fused_one_passage_at_a_time(
    keyword: list[int], semantic: list[int], coverage: dict[int, float], k: int
) -> list[tuple[int, float, int | None, int | None]]:
    """RRF in dictionaries, a passage at a time, sorted by the documented tie rule: the oracle
    the array fusion must equal (scores to rounding, order but among exact ties)."""
    scores: dict[int, float] = {}
    keyword_ranks: dict[int, int] = {}
    semantic_ranks: dict[int, int] = {}
    for rank, pid in enumerate(keyword, start=1):
        keyword_ranks[pid] = rank
        scores[pid] = scores.get(pid, 0.0) + coverage.get(pid, 0.0) ** COVERAGE_EXPONENT / (k + rank)
    for rank, pid in enumerate(semantic, start=1):
        semantic_ranks[pid] = rank
        scores[pid] = scores.get(pid, 0.0) + 1.0 / (k + rank)
    big = len(keyword) + len(semantic) + 1
    ids = sorted(scores, key=lambda p: (-scores[p], semantic_ranks.get(p, big), keyword_ranks.get(p, big), p))
    return [(p, scores[p], keyword_ranks.get(p), semantic_ranks.get(p)) for p in ids]


def confidence(signals: Signals, calibration: ModelCalibration) -> float:
    """The product's confidence of one candidate (a query of one)."""
    missing = np.asarray([signals.similarity is None])
    similarity = np.asarray([-1.0 if signals.similarity is None else signals.similarity])
    return confidences(similarity, np.asarray([signals.coverage]), signals.background, calibration, missing)[0]


def confidence_one_at_a_time(signals: Signals, cal: ModelCalibration) -> float:
    """The confidence formula in plain Python, one candidate at a time (the oracle)."""

    def clip(x: float) -> float:
        return min(max(x, 0.0), 1.0)

    cov = clip(signals.coverage)
    if signals.similarity is None:
        return round(clip(cov**1.5), 4)
    semantic = clip((signals.similarity - cal.floor) / (cal.ceiling - cal.floor))
    if signals.background is not None:
        distinct = clip((signals.similarity - signals.background) / cal.distinct_scale)
        semantic *= cal.distinct_base + (1.0 - cal.distinct_base) * distinct
    return round(clip(1.0 - (1.0 - semantic) * (1.0 - cal.coverage_weight * cov**2)), 4)


@dataclass(frozen=True, slots=True)
class RowTerms:
    """One row as FTS5 indexed it: term counts per column, its length in tokens, every term."""

    columns: tuple[Counter[str], ...]
    length: int
    terms: frozenset[str]


def row_terms(tokenizer: Any, columns: Sequence[str]) -> RowTerms:
    """Tokenise each column with the index's own tokenizer (``conn.fts5_tokenizer``)."""
    counts: list[Counter[str]] = []
    length = 0
    for text in columns:
        if not text:
            counts.append(Counter())
            continue
        tokens = tokenizer(
            text.encode("utf-8"), apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False, include_colocated=False
        )
        counts.append(Counter(tokens))
        length += len(tokens)
    return RowTerms(tuple(counts), length, frozenset().union(*counts))


def bm25_score(
    phrases: Sequence[str], idfs: Sequence[float], row: RowTerms, weights: Sequence[float], totals: bm25.TableTotals
) -> float:
    """FTS5's bm25 for one row (fts5_aux.c), as a positive number (bm25() returns its negation)."""
    k1, b = bm25.K1, bm25.B
    norm = k1 * (1.0 - b + b * row.length / totals.average_length) if totals.average_length > 0 else k1
    total = 0.0
    for phrase, weight_idf in zip(phrases, idfs, strict=True):
        freq = 0.0
        for column, weight in zip(row.columns, weights, strict=True):
            freq += weight * column.get(phrase, 0)
        total += weight_idf * ((freq * (k1 + 1.0)) / (freq + norm))
    return total


def every_row_scores(impacts: Any, phrases: Sequence[str]) -> np.ndarray:
    """bm25 of every row position of an impact index over ``phrases``, a phrase at a time."""
    scores = np.zeros(impacts.rows, dtype=np.float64)
    for phrase in impacts.phrases(phrases):
        np.add.at(scores, phrase.positions, phrase.weights())
    return scores


__all__ = [
    "RowTerms",
    "bm25_score",
    "confidence",
    "confidence_one_at_a_time",
    "every_row_scores",
    "fused",
    "fused_one_passage_at_a_time",
    "row_terms",
]
