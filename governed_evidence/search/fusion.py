"""Reciprocal rank fusion, with the keyword list weighted by how much of the query it covers.

Plain RRF lets a weak OR-query list (a passage that matched one incidental word) drag
good semantic hits down. Each keyword contribution is scaled by the passage's IDF-weighted
query coverage (to :data:`COVERAGE_EXPONENT`), so keyword evidence counts by how much of the
question it actually matches; a full-coverage keyword hit still counts fully.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

__all__ = [
    "COVERAGE_EXPONENT",
    "RRF_K",
    "Fused",
    "FusedColumns",
    "Fusion",
    "fuse",
    "fuse_union",
]

RRF_K = 60
#: Chosen on BEIR SciFact *train* (809 queries, nDCG@10 of the fused list): exponent 0.5
#: 0.723, plain RRF 0.718, 1.0 0.718, 2.0 0.712; neutral on the policy tuning slices.
COVERAGE_EXPONENT = 0.5


# Slots: a search makes one per fused candidate (about 90) and reads each several times.
@dataclass(slots=True)
class Fused:
    passage_id: int
    score: float
    keyword_rank: int | None
    semantic_rank: int | None

    @property
    def matched_by(self) -> str:
        if self.keyword_rank is not None and self.semantic_rank is not None:
            return "both"
        return "keyword" if self.keyword_rank is not None else "semantic"


@dataclass(slots=True)
class FusedColumns:
    """:meth:`Fusion.columns`' result: one entry per fused passage, best first, column by column
    (a search builds a :class:`Fused` only for what it serves)."""

    ids: list[int]
    scores: list[float]
    keyword_ranks: list[int | None]
    semantic_ranks: list[int | None]

    def item(self, i: int) -> Fused:
        return Fused(self.ids[i], self.scores[i], self.keyword_ranks[i], self.semantic_ranks[i])


class Fusion(NamedTuple):
    """:func:`fuse_union`'s result, one entry per fused passage, best first."""

    #: Each passage's position in the fused set.
    at: np.ndarray
    scores: np.ndarray
    #: Each passage's rank in either ranking; one more than the passages where it is absent.
    keyword_ranks: np.ndarray
    semantic_ranks: np.ndarray

    def columns(self, ids: np.ndarray) -> FusedColumns:
        """As columns of Python values, with the passage ids of ``ids`` (by position) and the
        ranks of absent passages as ``None``."""
        absent = self.at.shape[0] + 1
        return FusedColumns(
            ids[self.at].tolist(),
            self.scores.tolist(),
            [None if rank == absent else rank for rank in self.keyword_ranks.tolist()],
            [None if rank == absent else rank for rank in self.semantic_ranks.tolist()],
        )


def fuse_union(
    size: int,
    keyword: np.ndarray,
    semantic: np.ndarray,
    coverage: np.ndarray,
    *,
    k: int = RRF_K,
    keyword_weight: float = 1.0,
    semantic_weight: float = 1.0,
) -> Fusion:
    """RRF over ``size`` passages, each held once: ``keyword`` and ``semantic`` are the two
    rankings as positions (best first, a position at most once in each), ``coverage`` each
    position's keyword coverage.

    Ties break on the semantic rank, then the keyword rank, then the position: with positions
    in ascending passage id, the order of :func:`fuse`. A search fuses its ~90 candidates as
    arrays, in about half the time of the per-passage dictionaries this replaced (22 against
    47 µs at 10k), with the same scores bit for bit.
    """
    absent = size + 1
    keyword_ranks = np.full(size, absent, dtype=np.int64)
    keyword_ranks[keyword] = np.arange(1, keyword.shape[0] + 1)
    semantic_ranks = np.full(size, absent, dtype=np.int64)
    semantic_ranks[semantic] = np.arange(1, semantic.shape[0] + 1)
    scores = np.zeros(size, dtype=np.float64)
    # Python's power (C's pow), not numpy's: numpy's square root differs from it in the last
    # bit for about 1 value in 1,000, and the fused order would then differ on exact ties.
    scores[keyword] = [
        keyword_weight * share**COVERAGE_EXPONENT / (k + rank)
        for rank, share in enumerate(coverage[keyword].tolist(), start=1)
    ]
    # 0.0 + the keyword share + the semantic share: the sum the dictionaries added, in that order.
    scores[semantic] += semantic_weight / (k + np.arange(1, semantic.shape[0] + 1))
    # lexsort's last key leads, and it is stable: equal keys stay in position order.
    at = np.lexsort((keyword_ranks, semantic_ranks, -scores))
    return Fusion(at, scores[at], keyword_ranks[at], semantic_ranks[at])


def fuse(
    keyword: list[int],
    semantic: list[int],
    coverage: Mapping[int, float],
    *,
    k: int = RRF_K,
    keyword_weight: float = 1.0,
    semantic_weight: float = 1.0,
) -> list[Fused]:
    """Fuse two ranked id lists (best first, each listing a passage at most once, as a ranking
    does); ties break on semantic, then keyword rank, then id (:func:`fuse_union`)."""
    if len(set(keyword)) != len(keyword) or len(set(semantic)) != len(semantic):
        raise ValueError("a ranking lists a passage more than once")
    ids, where = np.unique(np.asarray([*keyword, *semantic], dtype=np.int64), return_inverse=True)
    shares = np.asarray([coverage.get(pid, 0.0) for pid in ids.tolist()], dtype=np.float64)
    fusion = fuse_union(
        ids.shape[0],
        where[: len(keyword)],
        where[len(keyword) :],
        shares,
        k=k,
        keyword_weight=keyword_weight,
        semantic_weight=semantic_weight,
    )
    columns = fusion.columns(ids)
    return [columns.item(i) for i in range(len(columns.ids))]
