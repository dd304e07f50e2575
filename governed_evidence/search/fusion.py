"""Reciprocal rank fusion, with the keyword list weighted by how much of the query it covers.

Plain RRF lets a weak OR-query list (a passage that matched one incidental word) drag
good semantic hits down. Each keyword contribution is scaled by the passage's IDF-weighted
query coverage (to :data:`COVERAGE_EXPONENT`), so keyword evidence counts by how much of the
question it actually matches; a full-coverage keyword hit still counts fully.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["COVERAGE_EXPONENT", "RRF_K", "Fused", "fuse"]

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


def fuse(
    keyword: list[int],
    semantic: list[int],
    coverage: dict[int, float],
    *,
    k: int = RRF_K,
    keyword_weight: float = 1.0,
    semantic_weight: float = 1.0,
) -> list[Fused]:
    """Fuse two ranked id lists (best first); ties break on semantic, then keyword rank."""
    fused: dict[int, Fused] = {}
    for rank, pid in enumerate(keyword, start=1):
        item = fused.get(pid)
        if item is None:
            item = fused[pid] = Fused(pid, 0.0, None, None)
        item.keyword_rank = rank
        item.score += keyword_weight * coverage.get(pid, 0.0) ** COVERAGE_EXPONENT / (k + rank)
    for rank, pid in enumerate(semantic, start=1):
        item = fused.get(pid)
        if item is None:
            # Built only when new (setdefault would build one for every rank of both lists).
            item = fused[pid] = Fused(pid, 0.0, None, None)
        item.semantic_rank = rank
        item.score += semantic_weight / (k + rank)
    big = len(keyword) + len(semantic) + 1
    return sorted(
        fused.values(),
        key=lambda f: (-f.score, f.semantic_rank or big, f.keyword_rank or big, f.passage_id),
    )
