"""The one place a search picks how it runs: where each ranking comes from, and where the query is embedded.

A search has few choices to make, and they are all made here, once per search, from what is
held in memory and from one frozen :class:`~governed_evidence.search.tuning.SearchTuning`:

* the keyword ranking comes from the level's impact lists in memory (:mod:`impacts`), pruned
  by MaxScore on large indexes (:mod:`maxscore`), or from FTS5 while the lists are not held;
* the query is embedded on the caller's thread when the keyword side is short (the impact
  lists of a small index), else on a worker while the keyword side runs;
* the semantic ranking comes from the level's vectors in memory (:mod:`vectors`), ranked by
  an exact matrix product, or by a sign-code prefilter and exact rescoring on large indexes
  where the prefilter was checked to keep the exact neighbours when the copy loaded; or from
  sqlite-vec's KNN while the vectors are not held.

Every way gives the same ranking (the prefilter to a recall checked at load); they differ only
in time and memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from governed_evidence.search.impacts import ImpactIndex
from governed_evidence.search.tuning import SearchTuning
from governed_evidence.search.vectors import VectorMatrix

__all__ = ["KeywordSource", "SemanticSource", "Strategy", "pick_strategy"]

KeywordSource = Literal["impact lists", "impact lists, MaxScore", "FTS5"]
SemanticSource = Literal["exact product", "sign-code prefilter", "vec0 KNN", "none"]


@dataclass(frozen=True)
class Strategy:
    """Which source each ranking of one search comes from (logged with the search)."""

    keyword: KeywordSource
    semantic: SemanticSource
    #: Whether the query is embedded on a worker while the keyword side runs (else first, here).
    embed_on_worker: bool

    def describe(self) -> dict[str, str]:
        return {"keyword": self.keyword, "semantic": self.semantic, "embedding": self.embedding}

    @property
    def embedding(self) -> str:
        return "worker, beside the keyword side" if self.embed_on_worker else "caller, before the keyword side"


def pick_strategy(
    impacts: ImpactIndex | None,
    matrix: VectorMatrix | None,
    *,
    semantic: bool,
    tuning: SearchTuning,
) -> Strategy:
    """The strategy of one search from the copies held for its level (None: not held) and
    whether it ranks by meaning at all (a keyword search still embeds the query, for the
    candidates' similarity)."""
    keyword: KeywordSource = "FTS5"
    if impacts is not None:
        keyword = "impact lists, MaxScore" if impacts.rows >= tuning.pruned_rows else "impact lists"
    source: SemanticSource = "none"
    if semantic:
        source = "vec0 KNN" if matrix is None else matrix.strategy
    worker = impacts is None or impacts.rows > tuning.caller_thread_rows
    return Strategy(keyword, source, worker)
