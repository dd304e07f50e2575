"""Every threshold that picks how a search runs, in one frozen settings object.

None of them changes what a search finds, only how fast it finds it and in how much memory:
:mod:`strategy` reads them to pick a strategy for each search, and the in-memory vectors read
them when they load. They were chosen by the measurements docs/performance.md reports; a test or
a benchmark passes its own :class:`SearchTuning` instead of patching a module.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_TUNING", "SearchTuning"]


@dataclass(frozen=True)
class SearchTuning:
    """The thresholds that choose how a search runs (none of them changes what it finds)."""

    #: Up to this many vectors in memory every query is one exact matrix product; above it a
    #: sign-code (one bit a dimension) Hamming scan picks rows for exact rescoring. The product
    #: grows with the rows (docs/performance.md, "Each side alone"): above this size it is most
    #: of a search, and at 1M rows it alone would miss the 30 ms goal.
    exact_rows: int = 50_000
    #: Rows the sign-code scan passes to exact rescoring: this many at least, and at least one
    #: row in ``rescore_fraction``. Measured on the generated SciFact corpora: recall@10 of the
    #: search's top 10 against the exact product 0.995 at 100k and 0.994 at 1M.
    rescore_min: int = 2_000
    rescore_fraction: int = 100
    #: The sign-code prefilter serves an index only if, with a sample of the index's own rows as
    #: queries, its top 10 keeps at least this share of the exact product's top 10 (checked when
    #: the copy loads); else the exact product serves it.
    prefilter_min_recall: float = 0.99
    #: Rows of the index taken as queries for that check.
    prefilter_probes: int = 64
    #: From this many rows in the impact lists MaxScore finds the keyword top k (the same ranking
    #: as scoring every row, with fewer postings read): measured faster from about half a million
    #: rows, slower below (docs/performance.md).
    pruned_rows: int = 500_000
    #: MaxScore gives up (every row is scored) when the postings it cannot skip are more than
    #: this share of the query's: it would look up nearly as much as it skips.
    essential_share: float = 0.5
    #: Up to this many rows in the impact lists the query is embedded on the caller's thread
    #: before the keyword ranking: ranking from the lists is shorter than handing the query to a
    #: worker and waking the caller again. Above it, or while the keyword side is FTS5's (C, the
    #: GIL released), the query is embedded on a worker while the keyword side runs, and the
    #: overlap pays (docs/performance.md, "Strategies").
    caller_thread_rows: int = 100_000

    def rescore_count(self, rows: int, k: int) -> int:
        """Rows the sign-code scan passes to exact rescoring for a top ``k``."""
        return min(rows, max(k, self.rescore_min, rows // self.rescore_fraction))


#: The shipped thresholds.
DEFAULT_TUNING = SearchTuning()
