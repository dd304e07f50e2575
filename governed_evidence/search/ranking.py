"""From two rankings to one list of candidates, each with the signals the gate reads.

Reciprocal rank fusion picks the candidates; each gets its similarity, keyword coverage
and the query's background similarity, combined into the calibrated confidence the gate
thresholds. Nothing is withheld here: the gate decides that (:mod:`gate`).

What the gate keeps is then served documents first (:mod:`diversity`).

The candidates are held as columns (:class:`Columns`), one list per field, because a search
serves about 10 of the 90 it fuses: building an object per candidate, then gating those
objects, cost more than fusing them (docs/performance.md). A :class:`Candidate` is built for
what the gate keeps, or for every position when something reads the whole ranking.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol, TypeVar

import numpy as np

from governed_evidence.search.candidates import PassageHead, Pool, RowCache
from governed_evidence.search.fusion import Fused, FusedColumns, fuse_union
from governed_evidence.search.gate import (
    GateOutcome,
    Signals,
    background_similarity,
    calibration_for,
    confidence_array,
    gate_positions,
)
from governed_evidence.search.limits import SearchMode
from governed_evidence.search.rows import Passage
from governed_evidence.search.stages import Stopwatch

__all__ = [
    "CANDIDATES",
    "FUSION_WEIGHT",
    "RERANK_DEPTH",
    "Candidate",
    "Columns",
    "Ranking",
    "assemble",
    "confident_first",
    "confident_order",
    "gate_ranking",
    "prefetch_rows",
]

#: How many candidates each ranking contributes before fusion and gating.
CANDIDATES = 50
#: How many of the fused candidates are reordered in hybrid mode (by confidence, with the
#: fused score beside it: :data:`FUSION_WEIGHT`): with :data:`CANDIDATES` a side, every one a
#: search fuses (``eval beir`` ranks 100 a side and reorders its first 100). Chosen, with
#: confidence alone as the key, by benchmarks/rerank_depth.py over depths 0-100 on the
#: tuning sets (the four policy corpora and SciFact train, one rule fixed beforehand): the
#: policy figures are the same at 20, 30 and 100 and lower below 20; SciFact train nDCG@10
#: is 0.7141 at 100 against 0.7113 at the former 20. Validation moved by as little: GSA
#: handbook unchanged, SciFact test 0.7095 to 0.7116 (docs/evaluation.md).
RERANK_DEPTH = 100
#: Weight of the fused (RRF) score, scaled to the query's best, beside the confidence in that
#: order: ``confidence + FUSION_WEIGHT * score / best score``. Confidence alone (0) lets a
#: passage only one side found, with a high similarity, pass one that both sides rank near the
#: top; the fused score keeps the agreement of the two rankings in the order. Chosen by one
#: rule over a grid of 0-2 on the tuning sets (the rule that chose the depth: the policy
#: figures served through the gate at the shipped thresholds, plus SciFact train nDCG@10):
#: 0.625 scores 3.876 against 3.841 for confidence alone (SciFact train 0.7141 to 0.7294, the
#: GDS Way's paraphrase hit@3 0.68 to 0.72 strict and 0.76 to 0.80 normal, nothing lower).
#: Leave-one-out, every set left out is as good or better at the weight chosen without it.
#: Validation, measured at 0 and at the choice only: SciFact test 0.7116 to 0.7229, the GSA
#: handbook's paraphrase hit@3 0.50 to 0.53 (docs/evaluation.md).
FUSION_WEIGHT = 0.625


class _Confident(Protocol):
    @property
    def confidence(self) -> float: ...


@dataclass(slots=True)
class Candidate:
    """One fused candidate with the signals the gate saw."""

    fused: Fused
    signals: Signals
    confidence: float
    #: The passage, or its head until its row is read (only what is served is read whole).
    head: Passage | PassageHead

    @property
    def document(self) -> str:
        return self.head.document

    @property
    def row(self) -> Passage:
        return self.head if isinstance(self.head, Passage) else self.head.resolve()


@dataclass(slots=True)
class Columns:
    """A query's fused candidates and their signals, column by column, with the order they are
    served in. A search builds a :class:`Candidate` only for what the gate keeps (about 10 of
    90); :meth:`candidates` builds every one, for whatever reads the whole ranking."""

    fused: FusedColumns
    similarity: list[float | None]
    coverage: list[float]
    confidence: list[float]
    background: float | None
    #: Each candidate's document id (what documents first groups by).
    documents: list[int]
    #: Positions into the columns, in ranking order.
    order: list[int]
    cache: RowCache

    def __len__(self) -> int:
        return len(self.order)

    def candidate(self, rank: int) -> Candidate:
        """The candidate at ``rank`` (0-based) of the ranking."""
        i = self.order[rank]
        item = self.fused.item(i)
        both = item.keyword_rank is not None and item.semantic_rank is not None
        signals = Signals(self.similarity[i], self.coverage[i], both, self.background)
        return Candidate(item, signals, self.confidence[i], PassageHead(item.passage_id, self.documents[i], self.cache))

    def candidates(self) -> list[Candidate]:
        return [self.candidate(rank) for rank in range(len(self.order))]

    def ranked_confidence(self) -> list[float]:
        return [self.confidence[i] for i in self.order]

    def ranked_document(self, rank: int) -> int:
        return self.documents[self.order[rank]]


@dataclass
class Ranking:
    requested_mode: SearchMode
    search_mode: SearchMode
    mode_reason: str | None
    columns: Columns
    #: Where the ranking's time went, stage by stage (the search goes on marking it).
    watch: Stopwatch = field(default_factory=Stopwatch)

    @cached_property
    def candidates(self) -> list[Candidate]:
        """Every candidate, in ranking order (built on first use)."""
        return self.columns.candidates()


def gate_ranking(ranking: Ranking, *, threshold: float, enabled: bool, limit: int) -> GateOutcome[Candidate]:
    """:func:`~governed_evidence.search.gate.apply_gate` over a ranking's columns, grouping by
    document id: the same outcome, with a candidate built only for what is kept."""
    columns = ranking.columns
    kept, withheld, best = gate_positions(
        columns.ranked_confidence(), columns.ranked_document, threshold=threshold, enabled=enabled, limit=limit
    )
    return GateOutcome([columns.candidate(rank) for rank in kept], withheld, best)


def prefetch_rows(candidates: Iterable[Candidate]) -> None:
    """Read the whole rows of ``candidates`` still held as heads, one query per cache."""
    by_cache: dict[int, tuple[RowCache, list[int]]] = {}
    for candidate in candidates:
        head = candidate.head
        if isinstance(head, PassageHead):
            by_cache.setdefault(id(head.cache), (head.cache, []))[1].append(head.id)
    for cache, ids in by_cache.values():
        cache.prefetch(ids)


def assemble(
    search_mode: SearchMode,
    pool: Pool,
    *,
    coverage: np.ndarray,
    cache: RowCache,
    model_id: str | None,
    measured: tuple[float, float] | None = None,
) -> Columns:
    """``pool``'s passages fused, best first, each with its confidence (``coverage``: each
    pooled passage's keyword coverage); ``cache`` gives a passage's row when it is served."""
    size = len(pool)
    if search_mode == "keyword":
        fusion = fuse_union(size, pool.keyword, _NONE, np.ones(size))
    elif search_mode == "semantic":
        fusion = fuse_union(size, _NONE, pool.semantic, coverage)
    else:
        fusion = fuse_union(size, pool.keyword, pool.semantic, coverage)
    at = fusion.at
    background = background_similarity((1.0 - pool.distance[pool.semantic]).tolist())
    similarity = 1.0 - pool.distance[at]
    missing = np.isnan(similarity)
    covered = coverage[at]
    scores = confidence_array(similarity, covered, background, calibration_for(model_id, measured), missing)
    order = list(range(size))
    if search_mode == "hybrid":
        # RRF picks the candidates; they are ordered mostly by the same calibrated confidence
        # the gate uses (paraphrase hit@3 0.76 -> 0.81 on the tuning slices against fused
        # order), with the fused score beside it (FUSION_WEIGHT).
        order = confident_order(scores, fusion.scores, RERANK_DEPTH, FUSION_WEIGHT)
    similarities: list[float | None] = similarity.tolist()
    for i in np.flatnonzero(missing).tolist():
        similarities[i] = None
    return Columns(
        fusion.columns(pool.ids),
        similarities,
        covered.tolist(),
        scores,
        background,
        pool.documents[at].tolist(),
        order,
        cache,
    )


#: No positions: the ranking a mode does not fuse.
_NONE = np.zeros(0, dtype=np.int64)


class _FusedScore(Protocol):
    @property
    def score(self) -> float: ...


class _Blended(_Confident, Protocol):
    """A candidate as :func:`confident_first` orders it: its confidence and its fused score."""

    @property
    def fused(self) -> _FusedScore: ...


B = TypeVar("B", bound=_Blended)


def confident_order(
    confidence: Sequence[float] | np.ndarray, fused: Sequence[float] | np.ndarray, depth: int, fusion_weight: float
) -> list[int]:
    """Positions of candidates given in fused order (their confidences and fused scores), the
    first ``depth`` ordered by confidence plus ``fusion_weight`` times their fused score over the
    best fused score, best first; the sort is stable, so an equal key keeps the fused order.
    With weight 0, by confidence alone (``fused`` is then not read, and may be empty)."""
    count = len(confidence)
    head = min(depth, count)
    confident = np.asarray(confidence[:head], dtype=np.float64)
    keys = -confident
    # Each key as Python computed it one candidate at a time (the same operations in the same
    # order, so the same floats), sorted by a stable sort as sorted() sorts: the same order.
    if fusion_weight and head:
        scored = np.asarray(fused[:head], dtype=np.float64)
        best = float(scored.max())
        if best > 0.0:
            keys = -(confident + (fusion_weight / best) * scored)
    ordered: list[int] = np.argsort(keys, kind="stable").tolist()
    return [*ordered, *range(head, count)]


def confident_first(candidates: Sequence[B], depth: int, fusion_weight: float = 0.0) -> list[B]:
    """``candidates`` (in fused order) in the order of :func:`confident_order` (a fused score is
    read only when it is weighted)."""
    fused = [c.fused.score for c in candidates[:depth]] if fusion_weight else []
    order = confident_order([c.confidence for c in candidates], fused, depth, fusion_weight)
    return [candidates[i] for i in order]
