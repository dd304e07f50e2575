"""The candidates stage: both rankings' passages pooled, fused, each with the signals the gate reads.

Every passage either ranking returned is checked against the caller's ceiling a second time,
beside the per-level rankings (ADR 0002), by its own statement (:func:`sql.passage_documents`),
so an id a ranking returned by mistake is still dropped. The visible ones are pooled once each
(:class:`Pool`), fused by coverage-weighted reciprocal rank fusion (:mod:`fusion`), and given
their calibrated confidence (:mod:`confidence`). Nothing is withheld here: the gate decides
that (:mod:`gate`). In hybrid mode the fused candidates are then ordered mostly by that same
confidence, with the fused score beside it (:func:`confident_order`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from governed_evidence.embeddings.calibration import ModelCalibration
from governed_evidence.errors import IndexUnavailableError
from governed_evidence.search import sql
from governed_evidence.search.confidence import Signals, background_similarity, confidences
from governed_evidence.search.fusion import Fused, fuse
from governed_evidence.search.limits import SearchMode
from governed_evidence.search.plan import Snapshot
from governed_evidence.search.records import Passage
from governed_evidence.search.stages import Stopwatch
from governed_evidence.search.strategy import Strategy

__all__ = [
    "CANDIDATES",
    "FUSION_WEIGHT",
    "RERANK_DEPTH",
    "Candidate",
    "Pool",
    "Ranking",
    "assemble",
    "confident_order",
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

#: No positions: the ranking a mode does not fuse.
_NONE = np.zeros(0, dtype=np.int64)


# Not frozen: a search makes one per fused candidate (about 90), and nothing assigns to one.
@dataclass(slots=True)
class Candidate:
    """One fused candidate with the signals the gate saw; its row once it is served."""

    fused: Fused
    document_id: int
    signals: Signals
    confidence: float
    #: The whole passage, read only for what is served (:meth:`Ranking.with_rows`).
    row: Passage | None = None

    @property
    def passage_id(self) -> int:
        return self.fused.passage_id


@dataclass(frozen=True)
class Ranking:
    """One query's candidates, best first, with what the search did to get them."""

    requested_mode: SearchMode
    search_mode: SearchMode
    mode_reason: str | None
    candidates: list[Candidate]
    #: The index file and level the candidates were found in (their rows are read from it).
    snapshot: Snapshot
    strategy: Strategy
    #: Where the ranking's time went, stage by stage (the search goes on marking it).
    watch: Stopwatch = field(default_factory=Stopwatch)

    def rows(self, ids: Sequence[int]) -> dict[int, Passage]:
        """The whole rows of candidates ``ids``, read in one statement under the ceiling."""
        rows = sql.passages_by_id(self.snapshot.conn, self.snapshot.level, set(ids))
        if len(rows) < len(set(ids)):
            # Checked visible on this connection a moment ago: only a damaged file gets here.
            raise IndexUnavailableError("the index changed while the search read it")
        return rows

    def document_paths(self) -> list[str]:
        """Each candidate's document path, in ranking order (read in one statement)."""
        paths = sql.document_paths(self.snapshot.conn, {c.document_id for c in self.candidates})
        return [paths[c.document_id] for c in self.candidates]

    def with_rows(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """``candidates`` with their rows read (what is served, or what the reranker reads)."""
        rows = self.rows([c.passage_id for c in candidates])
        return [replace(c, row=rows[c.passage_id]) for c in candidates]


@dataclass(frozen=True)
class Pool:
    """The visible passages of a query's two rankings, each once, in ascending id order."""

    ids: np.ndarray
    #: Each passage's document id.
    documents: np.ndarray
    #: Positions of the keyword ranking's visible passages, best first.
    keyword: np.ndarray
    #: Positions of the semantic ranking's visible passages, best first.
    semantic: np.ndarray
    #: Each passage's cosine distance to the query; NaN until measured (:meth:`measured`).
    distance: np.ndarray

    @classmethod
    def of(cls, keyword_ids: Sequence[int], nearest: Sequence[tuple[int, float]], visible: Mapping[int, int]) -> Pool:
        """Both rankings' passages that ``visible`` (passage id -> document id, from the second
        ceiling check) holds; ``nearest`` gives the semantic ranking with each passage's distance."""
        keyword = [pid for pid in keyword_ids if pid in visible]
        semantic = [(pid, d) for pid, d in nearest if pid in visible]
        ids = np.unique(np.asarray([*keyword, *(pid for pid, _ in semantic)], dtype=np.int64))
        documents = np.asarray([visible[pid] for pid in ids.tolist()], dtype=np.int64)
        at_semantic = np.searchsorted(ids, np.asarray([pid for pid, _ in semantic], dtype=np.int64))
        distance = np.full(ids.shape[0], np.nan)
        distance[at_semantic] = [d for _, d in semantic]
        return cls(ids, documents, np.searchsorted(ids, np.asarray(keyword, dtype=np.int64)), at_semantic, distance)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def unmeasured(self) -> list[int]:
        """The passages without a distance yet, ascending."""
        ids: list[int] = self.ids[np.isnan(self.distance)].tolist()
        return ids

    def measured(self, distances: Mapping[int, float]) -> None:
        """Record ``distances`` of pooled passages."""
        if distances:
            at = np.searchsorted(self.ids, np.fromiter(distances, dtype=np.int64, count=len(distances)))
            self.distance[at] = np.fromiter(distances.values(), dtype=np.float64, count=len(distances))


def assemble(
    search_mode: SearchMode, pool: Pool, *, coverage: np.ndarray, calibration: ModelCalibration
) -> list[Candidate]:
    """``pool``'s passages fused, best first, each with its confidence (``coverage``: each
    pooled passage's keyword coverage, in pool order)."""
    size = len(pool)
    if search_mode == "keyword":
        # Keyword mode ranks by keywords alone, unweighted by coverage (it is the whole evidence).
        fusion = fuse(size, pool.keyword, _NONE, np.ones(size))
    elif search_mode == "semantic":
        fusion = fuse(size, _NONE, pool.semantic, coverage)
    else:
        fusion = fuse(size, pool.keyword, pool.semantic, coverage)
    at = fusion.at
    background = background_similarity((1.0 - pool.distance[pool.semantic]).tolist())
    similarity = 1.0 - pool.distance[at]
    missing = np.isnan(similarity)
    covered = coverage[at]
    scores = confidences(similarity, covered, background, calibration, missing)
    order: Sequence[int] = range(size)
    if search_mode == "hybrid":
        # RRF picks the candidates; they are ordered mostly by the same calibrated confidence
        # the gate uses (paraphrase hit@3 0.76 -> 0.81 on the tuning slices against fused
        # order), with the fused score beside it (FUSION_WEIGHT).
        order = confident_order(scores, fusion.scores, RERANK_DEPTH, FUSION_WEIGHT)
    # Read as Python values once: one object per candidate is then a few plain calls.
    ids, documents = pool.ids[at].tolist(), pool.documents[at].tolist()
    fused, keyword_ranks, semantic_ranks = (
        fusion.scores.tolist(),
        fusion.keyword_ranks.tolist(),
        fusion.semantic_ranks.tolist(),
    )
    similarities, covered_shares, unmeasured = similarity.tolist(), covered.tolist(), missing.tolist()
    candidates = []
    for i in order:
        keyword_rank, semantic_rank = keyword_ranks[i] or None, semantic_ranks[i] or None
        signals = Signals(
            None if unmeasured[i] else similarities[i],
            covered_shares[i],
            keyword_rank is not None and semantic_rank is not None,
            background,
        )
        item = Fused(ids[i], fused[i], keyword_rank, semantic_rank)
        candidates.append(Candidate(item, documents[i], signals, scores[i]))
    return candidates


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
    if fusion_weight and head:
        scored = np.asarray(fused[:head], dtype=np.float64)
        best = float(scored.max())
        if best > 0.0:
            keys = -(confident + (fusion_weight / best) * scored)
    ordered: list[int] = np.argsort(keys, kind="stable").tolist()
    return [*ordered, *range(head, count)]
