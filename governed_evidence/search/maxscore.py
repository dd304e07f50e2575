"""The keyword top k without scoring every row: MaxScore over the impact lists.

An OR query over common words holds most rows of a large index; scoring them all
(:meth:`~governed_evidence.search.impacts.ImpactIndex.rank` without ``essential_share``)
costs time in proportion to every posting of every word. But a row's bm25 is a sum, over the query's phrases, of
``idf × impact``, and no phrase can add more than its largest impact times its idf (its
*bound*). Given a lower bound ``θ`` on the k-th best score (the real scores of a few rows that
hold the rarest words), the phrases whose bounds together stay under ``θ`` are *non-essential*:
a row holding only those cannot reach the top k. So only rows holding an essential phrase are
candidates; their essential part is summed, and only those whose essential part plus every
non-essential bound still reaches ``θ`` are scored whole, by looking each up in every phrase's
postings (Turtle and Flood's MaxScore, without blocks: whole arrays at a time).

The answer is exact, not approximate: the same rows in the same order as scoring every row.
Each whole score adds the phrases' contributions in query order from 0.0, as the ``bincount``
of the full scoring adds them, so the scores are equal to the bit; and both ways take the k
best by score, then by passage id, so a tie at the cut is settled the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["SEED_FACTOR", "Phrase", "best_positions", "pruned_top", "whole_scores"]

#: The seed rows that set the first lower bound: the rarest phrases' rows, until there are at
#: least this many times k of them (or every phrase is in).
SEED_FACTOR = 4
#: Relative slack on every comparison against the lower bound: the bounds are summed in
#: another order than a score is, so each may round differently in its last bits.
_SLACK = 1e-9


@dataclass(frozen=True, slots=True)
class Phrase:
    """One phrase of the query as the impact lists hold it."""

    #: Row positions holding it, ascending (int32).
    positions: np.ndarray
    #: Its impact in each of those rows (float32).
    impacts: np.ndarray
    idf: float
    #: The most it adds to any row: ``idf × max impact`` (float32, as each contribution is).
    bound: float

    def weights(self) -> np.ndarray:
        """Each row's contribution, ``idf × impact`` (float32, as the full scoring computes it)."""
        weights: np.ndarray = self.idf * self.impacts
        return weights


def whole_scores(phrases: Sequence[Phrase], rows: np.ndarray) -> np.ndarray:
    """The bm25 of each row position of ``rows`` (ascending, int), every phrase's contribution
    added in query order from 0.0: the sums the full scoring's ``bincount`` makes, bit for bit."""
    total = np.zeros(rows.shape[0], dtype=np.float64)
    for phrase in phrases:
        # A phrase a row does not hold adds 0.0, which leaves its sum unchanged.
        total += _looked_up(phrase, rows)
    return total


def best_positions(positions: np.ndarray, scores: np.ndarray, depth: int) -> np.ndarray:
    """The ``depth`` best of ``positions`` (ascending), by score and then by position (a row's
    position orders it as its passage id does), best first."""
    count = scores.shape[0]
    if count > depth > 0:
        kth = np.partition(scores, count - depth)[count - depth]
        above = np.flatnonzero(scores > kth)
        at = np.flatnonzero(scores == kth)[: depth - above.shape[0]]
        keep = np.sort(np.concatenate((above, at)))
        positions, scores = positions[keep], scores[keep]
    elif depth <= 0:
        return positions[:0]
    order: np.ndarray = positions[np.lexsort((positions, -scores))]
    return order


def pruned_top(phrases: Sequence[Phrase], depth: int, essential_share: float) -> np.ndarray | None:
    """Row positions of the ``depth`` best rows, best first (ties by position), or None when
    pruning would not skip enough of the postings to pay for itself (the caller then scores
    every row)."""
    if depth <= 0 or not phrases:
        return None
    total_postings = sum(p.positions.shape[0] for p in phrases)
    # A first lower bound on the k-th best score: the whole scores of SEED_FACTOR x k rows that
    # hold the rarest phrases (of the last list taken, the rows of its largest impacts).
    wanted = SEED_FACTOR * depth
    seed_parts: list[np.ndarray] = []
    for phrase in sorted(phrases, key=lambda p: p.positions.shape[0]):
        held = phrase.positions
        if held.shape[0] > wanted:
            held = held[np.argpartition(phrase.impacts, held.shape[0] - wanted)[held.shape[0] - wanted :]]
        seed_parts.append(held)
        wanted -= held.shape[0]
        if wanted <= 0:
            break
    seed = np.unique(np.concatenate(seed_parts))
    if seed.shape[0] < depth:
        return None
    theta = float(np.partition(whole_scores(phrases, seed), seed.shape[0] - depth)[seed.shape[0] - depth])
    # Non-essential: the phrases of smallest bound whose bounds together stay under theta.
    order = sorted(range(len(phrases)), key=lambda i: phrases[i].bound)
    rest = 0.0
    cut = 0
    while cut < len(order) and (rest + phrases[order[cut]].bound) * (1.0 + _SLACK) < theta:
        rest += phrases[order[cut]].bound
        cut += 1
    kept = [phrases[i] for i in sorted(order[cut:])]
    if sum(p.positions.shape[0] for p in kept) > essential_share * total_postings:
        # Most postings are essential: no cheaper than scoring every row.
        return None
    candidates, inverse = np.unique(np.concatenate([p.positions for p in kept]), return_inverse=True)
    partial = np.bincount(inverse, weights=np.concatenate([p.weights() for p in kept]), minlength=candidates.shape[0])
    if candidates.shape[0] > depth:
        # A tighter bound: the whole scores of the k best essential parts (real rows, so their
        # k-th score is still at most the k-th best of all).
        likely = candidates[np.argpartition(partial, candidates.shape[0] - depth)[candidates.shape[0] - depth :]]
        theta = max(theta, float(whole_scores(phrases, np.sort(likely)).min()))
    floor = theta * (1.0 - _SLACK)
    # Every row that is not a candidate scores at most `rest`, under theta. A candidate stays
    # while its sum so far plus the bounds of the phrases not yet added still reaches theta:
    # the non-essential phrases are added largest bound first, each looked up for the rows
    # still standing only.
    rows, known = candidates, partial
    pending = [phrases[i] for i in reversed(order[:cut])]
    for j in range(len(pending) + 1):
        remaining = sum(p.bound for p in pending[j:])
        standing = known + remaining * (1.0 + _SLACK) >= floor
        rows, known = rows[standing], known[standing]
        if j < len(pending):
            known = known + _looked_up(pending[j], rows)
    return best_positions(rows, whole_scores(phrases, rows), depth)


def _looked_up(phrase: Phrase, rows: np.ndarray) -> np.ndarray:
    """The phrase's contribution to each of ``rows`` (ascending positions; 0 where a row does
    not hold it): the same float32 product as :meth:`Phrase.weights`, for those rows only."""
    held = phrase.positions
    if rows.shape[0] == 0:
        return np.zeros(0, dtype=np.float64)
    at = np.minimum(np.searchsorted(held, rows), held.shape[0] - 1)
    contribution = phrase.idf * phrase.impacts[at]
    return np.where(held[at] == rows, contribution, np.float32(0.0)).astype(np.float64)
