"""Opening the index: missing and corrupt files, and readers that follow rebuilds."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import apsw
import pytest

from governed_evidence.config import Classification
from governed_evidence.errors import IndexCorruptError, IndexMissingError
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.store.connection import IndexReader, connect, read_meta
from tests.helpers import HashEmbedder, write


def rebuild(corpus: Path, db: Path) -> None:
    ingest_corpus(corpus, db, HashEmbedder(), ceiling=Classification.RESTRICTED, progress=None)


def test_missing_index_raises_missing_and_is_not_created(tmp_path: Path) -> None:
    db = tmp_path / "nothing.sqlite"
    with pytest.raises(IndexMissingError, match="no evidence index found"):
        connect(db, readonly=True)
    reader = IndexReader(db)
    with pytest.raises(IndexMissingError):
        reader.connection()
    assert not db.exists()


@pytest.mark.parametrize(
    "content",
    [
        os.urandom(8192),
        b"SQLite format 3\x00" + os.urandom(4096),
        b"\x00" * 4096,
        b"this is a text file that someone named like the index\n" * 50,
    ],
    ids=["random", "sqlite-header-then-garbage", "zeros", "text"],
)
def test_corrupt_index_raises_corrupt(tmp_path: Path, content: bytes) -> None:
    db = tmp_path / "index.sqlite"
    db.write_bytes(content)
    with pytest.raises(IndexCorruptError, match="rebuild"):
        IndexReader(db).connection()


def test_empty_file_is_not_an_index(tmp_path: Path) -> None:
    db = tmp_path / "index.sqlite"
    db.write_bytes(b"")
    with pytest.raises(IndexCorruptError, match="not a governed-evidence index"):
        IndexReader(db).connection()


def test_other_sqlite_database_is_not_an_index(tmp_path: Path) -> None:
    db = tmp_path / "other.sqlite"
    conn = apsw.Connection(str(db))
    conn.execute("CREATE TABLE notes(body TEXT); INSERT INTO notes VALUES ('hello')")
    conn.close()
    conn = connect(db, readonly=True)
    try:
        with pytest.raises(IndexCorruptError, match="not a governed-evidence index"):
            read_meta(conn)
    finally:
        conn.close()


def test_index_from_another_schema_version_is_refused(built_index: Path) -> None:
    conn = connect(built_index, readonly=False)
    conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    conn.close()
    with pytest.raises(IndexCorruptError, match="incompatible version"):
        IndexReader(built_index).connection()


def test_readonly_connection_has_sqlite_vec_and_fts5(built_index: Path) -> None:
    conn = connect(built_index, readonly=True)
    try:
        ((version,),) = conn.execute("SELECT vec_version()").fetchall()
        assert str(version).startswith("v")
        ((hits,),) = conn.execute(
            "SELECT count(*) FROM passages_fts_public WHERE passages_fts_public MATCH 'bereavement'"
        ).fetchall()
        assert hits == 1
    finally:
        conn.close()


def test_reader_reuses_its_connection_until_the_file_changes(built_index: Path, corpus: Path) -> None:
    reader = IndexReader(built_index)
    try:
        conn, meta = reader.connection()
        again, _ = reader.connection()
        assert again is conn
        assert meta.documents == 7

        write(corpus, "public/canteen.md", "# Canteen\n\nThe canteen opens at eight and closes at three.\n")
        rebuild(corpus, built_index)

        new_conn, new_meta = reader.connection()
        assert new_conn is not conn
        assert new_meta.documents == 8
        ((count,),) = new_conn.execute("SELECT count(*) FROM documents").fetchall()
        assert count == 8
        ((hits,),) = new_conn.execute(
            "SELECT count(*) FROM passages_fts_public WHERE passages_fts_public MATCH 'canteen'"
        ).fetchall()
        assert hits == 1
        # The previous connection was closed when the reader moved on.
        with pytest.raises(apsw.ConnectionClosedError):
            conn.execute("SELECT 1")
    finally:
        reader.close()


def test_reader_reports_missing_and_corrupt_files_and_recovers(built_index: Path, corpus: Path) -> None:
    reader = IndexReader(built_index)
    try:
        assert reader.connection()[1].documents == 7
        built_index.unlink()
        with pytest.raises(IndexMissingError):
            reader.connection()
        built_index.write_bytes(os.urandom(4096))
        with pytest.raises(IndexCorruptError):
            reader.connection()
        rebuild(corpus, built_index)
        assert reader.connection()[1].documents == 7
    finally:
        reader.close()


def test_each_thread_gets_its_own_connection(built_index: Path) -> None:
    reader = IndexReader(built_index)
    seen: dict[str, object] = {}

    def worker() -> None:
        try:
            conn, meta = reader.connection()
            seen["conn"] = conn
            seen["documents"] = meta.documents
            ((seen["count"],),) = conn.execute("SELECT count(*) FROM passages").fetchall()
        finally:
            reader.close()

    try:
        main_conn, _ = reader.connection()
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        assert seen["documents"] == 7
        assert seen["conn"] is not main_conn
        ((count,),) = main_conn.execute("SELECT count(*) FROM passages").fetchall()
        assert seen["count"] == count
    finally:
        reader.close()
