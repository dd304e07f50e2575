"""The passages a search touches: checked against the ceiling as heads, paths read on demand."""

from __future__ import annotations

import gc
import random
from pathlib import Path

import apsw
import numpy as np

from governed_evidence.config import Classification
from governed_evidence.search import sql
from governed_evidence.search.candidates import PassageHead, Pool, RowCache
from governed_evidence.search.diversity import documents_first
from governed_evidence.search.rows import label, served_status
from governed_evidence.search.service import SearchService
from governed_evidence.store.connection import connect
from tests.helpers import HashEmbedder, statements_run


def _all_passages(conn: apsw.Connection) -> list[tuple[int, int, int, int]]:
    """(id, document id, classification, searchable) of every passage in the file."""
    rows = conn.execute("SELECT id, document_id, classification, searchable FROM passages")
    return [(int(a), int(b), int(c), int(d)) for a, b, c, d in rows]


def _heads(cache: RowCache) -> dict[int, PassageHead]:
    """A head for every passage ``cache`` found visible, as a search's candidates hold them."""
    return {pid: PassageHead(pid, document_id, cache) for pid, document_id in cache.visible.items()}


def test_heads_are_the_visible_passages_with_their_document(built_index: Path) -> None:
    conn = connect(built_index, readonly=True)
    passages = _all_passages(conn)
    assert any(cls > Classification.PUBLIC for _, _, cls, _ in passages)  # not vacuous
    for level in Classification:
        cache = RowCache(conn, level, covering=True)
        cache.fetch([pid for pid, *_ in passages] + [10_000_000])
        visible = {pid: doc for pid, doc, cls, searchable in passages if cls <= level and searchable == 1}
        assert {pid: head.document_id for pid, head in _heads(cache).items()} == visible
        # The path each head gives is its row's, read with the ceiling in the statement.
        rows = sql.passages_by_id(conn, level, set(visible))
        assert {pid: head.document for pid, head in _heads(cache).items()} == {p: r.document for p, r in rows.items()}
    conn.close()


def test_every_head_s_path_is_read_in_one_statement_on_first_need(built_index: Path) -> None:
    conn = connect(built_index, readonly=True)
    cache = RowCache(conn, Classification.RESTRICTED, covering=True)
    cache.fetch(pid for pid, *_ in _all_passages(conn))
    with statements_run(conn) as statements:
        heads = list(_heads(cache).values())
        assert len({h.document_id for h in heads}) > 1
        paths = [h.document for h in heads]
    assert len(statements) == 1 and "FROM documents" in statements[0]
    assert len(set(paths)) == len({h.document_id for h in heads})  # one path a document
    conn.close()


def test_documents_first_by_document_id_is_documents_first_by_path(built_index: Path) -> None:
    """A search groups by document id (no read); the order is the one grouping by path gives."""
    conn = connect(built_index, readonly=True)
    cache = RowCache(conn, Classification.RESTRICTED, covering=True)
    cache.fetch(pid for pid, *_ in _all_passages(conn))
    heads = list(_heads(cache).values())
    rng = random.Random(7)
    for _ in range(200):
        sample = rng.sample(heads, rng.randint(0, len(heads)))
        by_id = documents_first(sample, key=lambda h: h.document_id)
        assert [h.id for h in by_id] == [h.id for h in documents_first(sample)]
    conn.close()


def test_a_stored_level_or_status_nobody_knows_reads_as_the_most_restrictive() -> None:
    assert [label(level) for level in (0, 1, 2)] == ["public", "internal", "restricted"]
    assert [label(level) for level in (3, -1)] == ["restricted", "restricted"]
    assert [served_status(s) for s in ("draft", "current", "deprecated")] == ["draft", "current", "deprecated"]
    for unknown in ("Current", "superseded", "", None, 1, b"current"):
        assert served_status(unknown) == "deprecated"


def test_a_search_leaves_no_reference_cycle_behind(built_index: Path, hash_embedder: HashEmbedder) -> None:
    """What a search made is freed when it returns, not left to the cyclic collector (a cache
    holding heads that point back at it once left about 100 objects a search)."""
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


class _Ceiling:
    """What a pool asks of its cache: each id's document (its id // 10) when visible, else -1."""

    def __init__(self, visible: set[int]) -> None:
        self.visible_ids = visible
        self.asked: list[list[int]] = []

    def documents_of(self, ids: np.ndarray) -> np.ndarray:
        self.asked.append(ids.tolist())
        return np.asarray([pid // 10 if pid in self.visible_ids else -1 for pid in ids.tolist()], dtype=np.int64)


def test_a_pool_holds_each_visible_passage_once_with_where_each_ranking_put_it() -> None:
    cache = _Ceiling({3, 5, 8, 13, 21})
    pool = Pool.of([21, 4, 5, 3], [(5, 0.25), (13, 0.5), (99, 0.75), (8, 0.125)], cache)  # type: ignore[arg-type]
    # Every listed id asked once, ascending: the order the cache remembers visible passages in.
    assert cache.asked == [[3, 4, 5, 8, 13, 21, 99]]
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
        pool = Pool.of(keyword, nearest, _Ceiling(set()))  # type: ignore[arg-type]
        assert len(pool) == 0
        assert (pool.keyword.shape, pool.semantic.shape, pool.distance.shape) == ((0,), (0,), (0,))
        assert pool.unmeasured() == []
