"""benchmarks.gap: its retrieval-only part ranks what the search's own two rankings return, and its
served part serves those passages as a search serves what it keeps."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog.testing

from benchmarks.gap import retrieval_rrf, served_rrf
from benchmarks.peers import rrf
from governed_evidence.config import Classification
from governed_evidence.errors import IndexUnavailableError
from governed_evidence.search import sql
from governed_evidence.search.plan import searched_level
from governed_evidence.search.service import SearchService
from tests.helpers import SMALL_CORPUS_QUERIES, HashEmbedder, ungated_service


@pytest.fixture(params=[Classification.PUBLIC, Classification.RESTRICTED], ids=lambda c: c.label)
def held(built_index: Path, hash_embedder: HashEmbedder, request: pytest.FixtureRequest) -> Iterator[SearchService]:
    """The gate-off service at each ceiling, its copies held (as the benchmark runs it)."""
    service = ungated_service(built_index, hash_embedder, request.param)
    service.warm()
    yield service
    service.close()


def test_the_retrieval_part_fuses_the_searchs_own_two_rankings(held: SearchService) -> None:
    service = held
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


def test_the_retrieval_part_needs_the_copies_held(built_index: Path, hash_embedder: HashEmbedder) -> None:
    service = ungated_service(built_index, hash_embedder, Classification.PUBLIC)
    with pytest.raises(IndexUnavailableError, match="held in memory"):
        retrieval_rrf(service, SMALL_CORPUS_QUERIES[0])
    service.close()


def test_the_served_part_serves_the_retrieval_parts_passages_as_a_search_does(held: SearchService) -> None:
    service, ceiling = held, held.ceiling
    _, conn, meta = service.reader.snapshot()
    level = searched_level(ceiling, meta)
    for query in SMALL_CORPUS_QUERIES:
        fused = retrieval_rrf(service, query, depth=50, limit=10)
        rows = sql.passages_by_id(conn, level, set(fused))
        with structlog.testing.capture_logs() as events:
            response = served_rrf(service, query, depth=50, limit=10)
        # The same passages in the same order, each cited as a search cites it, within the ceiling.
        assert [r.citation_id for r in response.results] == [rows[pid].citation_id for pid in fused]
        assert [r.text for r in response.results] == [rows[pid].text for pid in fused]
        assert all(Classification[r.classification.upper()] <= ceiling for r in response.results)
        assert response.status == ("OK" if fused else "NO_RELEVANT_CONTEXT")
        assert response.ceiling == ceiling.label and response.gate == "off"
        # And the search's log line, with what it served.
        lines = [e for e in events if e["event"] == "search"]
        assert len(lines) == 1 and lines[0]["results"] == len(fused)
