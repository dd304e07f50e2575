"""The ceiling check's covering index: the same answer as the rows themselves, at every level.

Every search checks its fused candidates against the caller's ceiling a second time in SQL
(beside the per-level rankings). Files built now answer that from the covering index
``passages_visible``; files built before it answer from the rows, and are still served.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import apsw

from governed_evidence.config import Classification
from governed_evidence.search import sql
from governed_evidence.search.service import SearchService
from governed_evidence.store.connection import connect
from tests.helpers import HashEmbedder

QUERIES = ["travel expenses", "Quillmoor acquisition", "vendor dispute invoices", "password rotation", "holiday"]


def _plan(conn: apsw.Connection, covering: bool) -> str:
    """SQLite's plan for the check's own statement (two ids, the lowest level)."""
    query = f"EXPLAIN QUERY PLAN {sql.visibility_sql(2, covering=covering)}"
    return " ".join(str(row[-1]) for row in conn.execute(query, (1, 2, int(Classification.PUBLIC))))


def test_a_new_build_has_the_index_and_the_check_reads_it(built_index: Path) -> None:
    conn = connect(built_index, readonly=True)
    assert sql.has_visibility_index(conn)
    assert f"COVERING INDEX {sql.VISIBILITY_INDEX}" in _plan(conn, covering=True)
    assert sql.VISIBILITY_INDEX not in _plan(conn, covering=False)
    conn.close()


def test_the_index_answers_exactly_as_the_rows_at_every_level(built_index: Path) -> None:
    conn = connect(built_index, readonly=True)
    rows = conn.execute("SELECT id, classification, searchable FROM passages").fetchall()
    ids = {int(r[0]) for r in rows} | {10_000, -1}  # and ids that do not exist
    for level in Classification:
        expected = {int(pid) for pid, cls, searchable in rows if cls <= level and searchable == 1}
        from_rows = sql.passage_documents(conn, level, ids, covering=False)
        from_index = sql.passage_documents(conn, level, ids, covering=True)
        assert from_index == from_rows
        assert set(from_index) == expected
    # The check is not vacuous: some passage is above the lowest level.
    assert any(int(cls) > Classification.PUBLIC for _, cls, _ in rows)
    conn.close()


def test_a_file_built_before_the_index_is_served_the_same(
    tmp_path: Path, built_index: Path, hash_embedder: HashEmbedder
) -> None:
    older = tmp_path / "older.sqlite"
    shutil.copyfile(built_index, older)
    conn = apsw.Connection(str(older))
    conn.execute(f"DROP INDEX {sql.VISIBILITY_INDEX}")
    conn.close()
    assert not sql.has_visibility_index(connect(older, readonly=True))
    for ceiling in (Classification.PUBLIC, Classification.INTERNAL, Classification.RESTRICTED):
        new = SearchService(built_index, ceiling=ceiling, embedder_factory=lambda: hash_embedder, gate_enabled=False)
        old = SearchService(older, ceiling=ceiling, embedder_factory=lambda: hash_embedder, gate_enabled=False)
        for query in QUERIES:
            got = old.search(query, limit=20, confidence_level="normal").model_dump()
            assert got == new.search(query, limit=20, confidence_level="normal").model_dump()
        new.reader.close()
        old.reader.close()


def test_the_check_answers_the_same_for_every_count_around_its_padding(built_index: Path) -> None:
    """The id list is padded to a multiple of VISIBILITY_BATCH with a repeated id: for every
    count from one to past two batches the answer is exactly the ids visible at the level."""
    conn = connect(built_index, readonly=True)
    rows = conn.execute("SELECT id, document_id, classification, searchable FROM passages ORDER BY id").fetchall()
    level = Classification.INTERNAL
    visible = {int(pid): int(doc) for pid, doc, cls, searchable in rows if cls <= level and searchable == 1}
    # Every passage id, and ids that do not exist, so the larger counts cross two batches.
    pool = [int(r[0]) for r in rows] + [10_000 + i for i in range(3 * sql.VISIBILITY_BATCH)]
    assert len(visible) < len(rows)  # some passage is above the level: the check is not vacuous
    for count in range(1, 2 * sql.VISIBILITY_BATCH + 2):
        ids = set(pool[:count])
        expected = {pid: doc for pid, doc in visible.items() if pid in ids}
        assert sql.passage_documents(conn, level, ids, covering=True) == expected, count
        assert sql.passage_documents(conn, level, ids, covering=False) == expected, count
    conn.close()
