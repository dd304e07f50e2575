"""benchmarks.gap: its retrieval-only part ranks what the search's own two rankings return."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.gap import retrieval_rrf
from benchmarks.peers import rrf
from governed_evidence.config import Classification
from governed_evidence.errors import IndexUnavailableError
from tests.helpers import SMALL_CORPUS_QUERIES, HashEmbedder, ungated_service


@pytest.mark.parametrize("ceiling", [Classification.PUBLIC, Classification.RESTRICTED])
def test_the_retrieval_part_fuses_the_searchs_own_two_rankings(
    built_index: Path, hash_embedder: HashEmbedder, ceiling: Classification
) -> None:
    service = ungated_service(built_index, hash_embedder, ceiling)
    service.warm()
    compared = 0
    for query in [*SMALL_CORPUS_QUERIES, "zzznotaword"]:
        candidates = service.rank(query, "hybrid", depth=50).candidates
        keyword = sorted(
            (c for c in candidates if c.fused.keyword_rank is not None), key=lambda c: c.fused.keyword_rank or 0
        )
        semantic = sorted(
            (c for c in candidates if c.fused.semantic_rank is not None), key=lambda c: c.fused.semantic_rank or 0
        )
        expected = rrf([[c.fused.passage_id for c in keyword], [c.fused.passage_id for c in semantic]], depth=10)
        assert retrieval_rrf(service, query, depth=50, limit=10) == expected
        compared += bool(keyword)
    assert compared >= 2  # queries with a keyword side to compare, not only semantic ones
    service.close()


def test_the_retrieval_part_needs_the_copies_held(built_index: Path, hash_embedder: HashEmbedder) -> None:
    service = ungated_service(built_index, hash_embedder, Classification.PUBLIC)
    with pytest.raises(IndexUnavailableError, match="held in memory"):
        retrieval_rrf(service, SMALL_CORPUS_QUERIES[0])
    service.close()
