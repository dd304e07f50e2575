"""Hybrid search: FTS5 + sqlite-vec rankings, fusion, the confidence gate, the ceiling."""

from governed_evidence.search.service import SearchService

__all__ = ["SearchService"]
