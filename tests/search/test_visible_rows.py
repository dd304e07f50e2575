"""The ceiling check answered from the level's visible rows held in memory: the same answer as SQL,
and still a check of its own (an id a ranking returns by mistake is dropped)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import apsw
import numpy as np
import pytest

from governed_evidence.config import Classification
from governed_evidence.search import sql, visible_rows
from governed_evidence.search.candidates import RowCache
from governed_evidence.search.plan import searched_level
from governed_evidence.search.service import SearchService
from governed_evidence.search.visible_rows import ROW_BYTES, VisibleRowsCopier, load_visible_rows
from governed_evidence.store.connection import connect
from tests.helpers import HashEmbedder, statements_run

QUERIES = ["travel expenses", "Quillmoor acquisition", "vendor dispute invoices", "password rotation", "holiday"]


def _passages(conn: apsw.Connection) -> list[tuple[int, int, int, int]]:
    """(id, document id, classification, searchable) of every passage in the file."""
    rows = conn.execute("SELECT id, document_id, classification, searchable FROM passages ORDER BY id")
    return [(int(a), int(b), int(c), int(d)) for a, b, c, d in rows]


@pytest.mark.parametrize("covering", [True, False], ids=["covering-index", "file-without-it"])
def test_the_held_rows_answer_exactly_as_the_sql_check(tmp_path: Path, built_index: Path, covering: bool) -> None:
    db = built_index
    if not covering:
        db = tmp_path / "older.sqlite"
        shutil.copyfile(built_index, db)
        writer = apsw.Connection(str(db))
        writer.execute(f"DROP INDEX {sql.VISIBILITY_INDEX}")
        writer.close()
    conn = connect(db, readonly=True)
    passages = _passages(conn)
    assert any(cls > Classification.PUBLIC for _, _, cls, _ in passages)  # not vacuous
    pool = [pid for pid, *_ in passages] + [-1, 0, 10_000, 2**40]  # and ids that do not exist
    rng = random.Random(11)
    for level in Classification:
        held = load_visible_rows(conn, level)
        assert held is not None and held.level == level
        expected = {pid: doc for pid, doc, cls, searchable in passages if cls <= level and searchable == 1}
        assert held.documents(pool) == expected
        assert held.nbytes == ROW_BYTES * held.rows == ROW_BYTES * len(expected)
        for _ in range(100):
            ids = rng.sample(pool, rng.randint(0, len(pool)))
            got = held.documents(ids)
            from_sql = sql.passage_documents(conn, level, set(ids), covering=covering)
            # The same ids, documents and order (candidates are kept in the order found).
            assert list(got.items()) == list(from_sql.items())
    conn.close()


def test_a_ranking_that_returns_a_restricted_id_still_has_it_dropped(
    built_index: Path, hash_embedder: HashEmbedder
) -> None:
    """The held rows are read by their own statement, not from a ranking's copy: a keyword
    ranking broken to return every passage still serves nothing above the ceiling, and the
    search asks SQL no per-query ceiling check."""
    svc = SearchService(
        built_index,
        ceiling=Classification.PUBLIC,
        embedder_factory=lambda: hash_embedder,
        gate_enabled=False,
        vector_memory_bytes=1 << 26,
    )
    svc.warm()
    assert svc.visible_rows.copy is not None and svc.visible_rows.copy.level == Classification.PUBLIC
    conn, _ = svc.reader.connection()
    passages = _passages(conn)
    above = {pid for pid, _, cls, _ in passages if cls > Classification.PUBLIC}
    assert above  # not vacuous
    every = [pid for pid, *_ in passages]
    svc._keyword.rank = lambda *args, **kwargs: list(every)  # type: ignore[method-assign]
    with statements_run(conn) as statements:
        for query in QUERIES:
            ranking = svc.rank(query, "keyword")
            ranked = {c.fused.passage_id for c in ranking.candidates}
            assert ranked and not ranked & above
            served = svc.search(query, limit=20, mode="keyword", confidence_level="normal")
            assert all(r.classification == "public" for r in served.results)
    assert not any(sql.VISIBILITY_INDEX in s or "p.document_id FROM passages" in s for s in statements)
    svc.close()
    svc.reader.close()


def test_without_the_held_rows_the_check_is_asked_of_sql(built_index: Path) -> None:
    conn = connect(built_index, readonly=True)
    held = load_visible_rows(conn, Classification.PUBLIC)
    ids = [pid for pid, *_ in _passages(conn)]
    with statements_run(conn) as statements:
        # A copy of another level is not used: the cache asks SQL.
        RowCache(conn, Classification.INTERNAL, covering=True, held=held).fetch(ids)
        assert len(statements) == 1 and sql.VISIBILITY_INDEX in statements[0]
        RowCache(conn, Classification.PUBLIC, covering=True, held=held).fetch(ids)
        assert len(statements) == 1
    conn.close()


def test_searches_answer_the_same_with_or_without_the_held_rows(built_index: Path, hash_embedder: HashEmbedder) -> None:
    for ceiling in Classification:
        plain = SearchService(built_index, ceiling=ceiling, embedder_factory=lambda: hash_embedder)
        conn, meta = plain.reader.connection()
        level = searched_level(ceiling, meta)
        # A budget of the visible rows alone: the vectors and impact lists are never held beside them.
        held = SearchService(
            built_index,
            ceiling=ceiling,
            embedder_factory=lambda: hash_embedder,
            vector_memory_bytes=ROW_BYTES * sql.count_searchable(conn, level),
        )
        conn, _ = held.reader.connection()
        held.visible_rows.load(held.reader.generation(), conn, level, VisibleRowsCopier())
        assert held.visible_rows.copy is not None
        for query in QUERIES:
            for mode in ("hybrid", "keyword", "semantic"):
                got = held.search(query, limit=20, mode=mode, confidence_level="normal")  # type: ignore[arg-type]
                assert got == plain.search(query, limit=20, mode=mode, confidence_level="normal")  # type: ignore[arg-type]
        assert held.vectors.copy is None and held.impacts.copy is None
        plain.reader.close()
        held.close()
        held.reader.close()


def test_a_load_stops_when_cancelled(built_index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(visible_rows, "_POLL_ROWS", 1)
    conn = connect(built_index, readonly=True)
    assert load_visible_rows(conn, Classification.RESTRICTED, cancelled=lambda: True) is None
    assert load_visible_rows(conn, Classification.RESTRICTED, cancelled=lambda: False) is not None
    conn.close()


@pytest.mark.parametrize("level", list(Classification))
def test_documents_of_answers_as_sql_with_or_without_the_held_rows(built_index: Path, level: Classification) -> None:
    conn = connect(built_index, readonly=True)
    held = load_visible_rows(conn, level)
    assert held is not None
    known = [pid for pid, *_ in _passages(conn)]
    expected = {
        pid: document
        for pid, document, classification, searchable in _passages(conn)
        if classification <= level and searchable
    }
    rng = random.Random(int(level))
    for _ in range(20):
        # Any order, repeats, ids that do not exist (0, beyond the last, negative).
        ids = np.asarray(rng.choices([*known, 0, -3, max(known) + 7], k=rng.randint(0, 40)), dtype=np.int64)
        answers = []
        for copy in (held, None):
            cache = RowCache(conn, level, covering=True, held=copy)
            documents = cache.documents_of(ids)
            assert documents.tolist() == [expected.get(pid, -1) for pid in ids.tolist()]
            answers.append(list(cache.visible.items()))
        # Both remember the same visible passages, in the same order.
        assert answers[0] == answers[1]
    conn.close()
