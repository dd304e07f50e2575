"""The passages a search touches: checked against the ceiling as heads, paths read on demand."""

from __future__ import annotations

import gc
import random
from pathlib import Path

import apsw
import pytest

from governed_evidence.config import Classification
from governed_evidence.search import sql
from governed_evidence.search.candidates import Pool
from governed_evidence.search.gate import documents_first
from governed_evidence.search.records import label, served_status
from governed_evidence.search.service import SearchService
from governed_evidence.store.connection import connect
from tests.helpers import HashEmbedder


def _all_passages(conn: apsw.Connection) -> list[tuple[int, int, int, int]]:
    """(id, document id, classification, searchable) of every passage in the file."""
    rows = conn.execute("SELECT id, document_id, classification, searchable FROM passages")
    return [(int(a), int(b), int(c), int(d)) for a, b, c, d in rows]


def test_the_second_ceiling_check_answers_as_the_rows_at_every_level(built_index: Path) -> None:
    conn = connect(built_index, readonly=True)
    passages = _all_passages(conn)
    assert any(cls > Classification.PUBLIC for _, _, cls, _ in passages)  # not vacuous
    for level in Classification:
        got = sql.passage_documents(conn, level, {pid for pid, *_ in passages} | {10_000_000})
        visible = {pid: doc for pid, doc, cls, searchable in passages if cls <= level and searchable == 1}
        assert got == visible
        assert list(got) == sorted(visible)  # ascending
    conn.close()


def test_a_ranking_that_returns_a_restricted_id_still_has_it_dropped(
    built_index: Path, hash_embedder: HashEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second ceiling check reads the passages table by its own statement: a keyword
    ranking broken to return every passage still ranks and serves nothing above the ceiling."""
    from governed_evidence.search import service as service_module

    svc = SearchService(built_index, ceiling=Classification.PUBLIC, embedder_factory=lambda: hash_embedder)
    conn, _ = svc.reader.connection()
    passages = _all_passages(conn)
    above = {pid for pid, _, cls, _ in passages if cls > Classification.PUBLIC}
    assert above  # not vacuous
    every = [pid for pid, *_ in passages]
    monkeypatch.setattr(service_module, "rank_keywords", lambda *args, **kwargs: list(every))
    for query in ("travel expenses", "password rotation", "Quillmoor acquisition"):
        ranking = svc.rank(query, "keyword")
        ranked = {c.passage_id for c in ranking.candidates}
        assert ranked and not ranked & above
        served = svc.search(query, limit=20, mode="keyword", confidence_level="normal")
        assert all(r.classification == "public" for r in served.results)
    svc.reader.close()


def test_documents_first_by_document_id_is_documents_first_by_path(built_index: Path) -> None:
    """The gate groups by document id (no read); the order is the one grouping by path gives."""
    conn = connect(built_index, readonly=True)
    rows = list(sql.passages_by_id(conn, Classification.RESTRICTED, {pid for pid, *_ in _all_passages(conn)}).values())
    assert len({r.document for r in rows}) > 1
    rng = random.Random(7)
    for _ in range(200):
        sample = rng.sample(rows, rng.randint(0, len(rows)))
        by_id = documents_first(sample, [r.document_id for r in sample])
        assert [r.id for r in by_id] == [r.id for r in documents_first(sample, [r.document for r in sample])]
    conn.close()


def test_a_stored_level_or_status_nobody_knows_reads_as_the_most_restrictive() -> None:
    assert [label(level) for level in (0, 1, 2)] == ["public", "internal", "restricted"]
    assert [label(level) for level in (3, -1)] == ["restricted", "restricted"]
    assert [served_status(s) for s in ("draft", "current", "deprecated")] == ["draft", "current", "deprecated"]
    for unknown in ("Current", "superseded", "", None, 1, b"current"):
        assert served_status(unknown) == "deprecated"


def test_a_search_leaves_no_reference_cycle_behind(built_index: Path, hash_embedder: HashEmbedder) -> None:
    """What a search made is freed when it returns, not left to the cyclic collector."""
    service = SearchService(built_index, ceiling=Classification.RESTRICTED, embedder_factory=lambda: hash_embedder)
    queries = ["travel expenses", "password rotation", "Quillmoor acquisition", "holiday"]
    for query in queries:
        service.search(query, confidence_level="normal")
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        answered = 0
        for query in queries * 3:
            response = service.search(query, confidence_level="normal")
            answered += len(response.results)
            service.rank(query)
        gc.collect()
        ours = [type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("governed_evidence")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
        service.reader.close()
    assert answered > 0  # the searches found passages (heads, rows and candidates were made)
    assert ours == []


def test_a_pool_holds_each_visible_passage_once_with_where_each_ranking_put_it() -> None:
    visible = {pid: pid // 10 for pid in (3, 5, 8, 13, 21)}
    pool = Pool.of([21, 4, 5, 3], [(5, 0.25), (13, 0.5), (99, 0.75), (8, 0.125)], visible)
    assert pool.ids.tolist() == [3, 5, 8, 13, 21]
    assert pool.documents.tolist() == [0, 0, 0, 1, 2]
    # Each ranking's visible passages, best first; 4 and 99 are above the ceiling.
    assert pool.ids[pool.keyword].tolist() == [21, 5, 3]
    assert pool.ids[pool.semantic].tolist() == [5, 13, 8]
    assert dict(zip(pool.ids[pool.semantic].tolist(), pool.distance[pool.semantic].tolist(), strict=True)) == {
        5: 0.25,
        13: 0.5,
        8: 0.125,
    }
    assert pool.unmeasured() == [3, 21]
    pool.measured({21: 0.875, 3: 0.0625})
    assert pool.unmeasured() == []
    assert pool.distance.tolist() == [0.0625, 0.25, 0.125, 0.5, 0.875]


def test_a_pool_of_nothing_visible_is_empty() -> None:
    for keyword, nearest in (([], []), ([7], [(9, 0.5)])):
        pool = Pool.of(keyword, nearest, {})
        assert len(pool) == 0
        assert (pool.keyword.shape, pool.semantic.shape, pool.distance.shape) == ((0,), (0,), (0,))
        assert pool.unmeasured() == []
