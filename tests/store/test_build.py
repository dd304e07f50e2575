"""Atomic index builds: a failed build leaves the served file untouched; a good one replaces it."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import apsw
import numpy as np
import pytest

from governed_evidence.config import Classification
from governed_evidence.errors import EmbedderError, IngestError
from governed_evidence.ingest.pipeline import IngestReport, ingest_corpus
from governed_evidence.store.build import IndexBuilder
from governed_evidence.store.build_rows import DocumentRow, PassageRow
from governed_evidence.store.connection import IndexReader, connect, read_meta
from governed_evidence.store.meta import IndexMeta
from governed_evidence.store.schema import SCHEMA_VERSION, fts_table
from tests.helpers import HashEmbedder, meta_of, write

RESTRICTED = Classification.RESTRICTED


def ingest(corpus: Path, db: Path, embedder: object | None = None, *, force: bool = False) -> IngestReport:
    return ingest_corpus(corpus, db, embedder or HashEmbedder(), ceiling=RESTRICTED, progress=None, force=force)  # type: ignore[arg-type]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def leftovers(db: Path) -> list[str]:
    """Shadow builds and journals next to the index."""
    return sorted(p.name for p in db.parent.iterdir() if p.name != db.name and db.name in p.name)


def serves(db: Path, word: str) -> int:
    """How many passages the index's public full-text table finds for ``word``."""
    reader = IndexReader(db)
    try:
        conn, meta = reader.connection()
        assert meta.schema_version == SCHEMA_VERSION
        table = fts_table(Classification.PUBLIC)
        ((count,),) = conn.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (word,)).fetchall()
        return int(count)
    finally:
        reader.close()


def add_public_page(corpus: Path, name: str, sentence: str) -> None:
    write(corpus, f"public/{name}.md", f"# {name.title()}\n\n{sentence}\n")


class FailingEmbedder(HashEmbedder):
    """Embeds the first ``ok_calls`` batches, then fails like an unreachable endpoint."""

    def __init__(self, ok_calls: int, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.ok_calls = ok_calls

    def embed(self, texts: Sequence[str]) -> np.ndarray:  # type: ignore[override]
        if self.calls >= self.ok_calls:
            self.calls += 1
            raise EmbedderError("the embedding endpoint stopped answering")
        return super().embed(texts)


def test_successful_build_publishes_one_verified_file(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "data" / "index.sqlite"
    report = ingest(corpus, db)
    assert db.is_file()
    assert leftovers(db) == []
    conn = connect(db, readonly=True)
    try:
        meta = read_meta(conn)
        assert meta.documents == report.documents_indexed == 7
        assert meta.passages == report.passages
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        # Published in rollback-journal mode: a read-only open needs no -wal/-shm files.
        assert conn.execute("PRAGMA journal_mode").fetchall() == [("delete",)]
        with pytest.raises(apsw.ReadOnlyError):
            conn.execute("INSERT INTO meta(key, value) VALUES ('x', 'y')")
    finally:
        conn.close()
    assert serves(db, "bereavement") == 1


def test_embedder_failing_after_the_first_batch_leaves_the_old_index(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "index.sqlite"
    ingest(corpus, db)
    before = digest(db)
    # Enough new passages for more than one embedding batch (batches hold 256).
    for i in range(300):
        add_public_page(corpus, f"notice-{i}", f"Notice {i} concerns the window cleaning rota for floor {i}.")
    failing = FailingEmbedder(ok_calls=1)
    with pytest.raises(EmbedderError):
        ingest(corpus, db, failing)
    assert failing.calls == 2  # it really failed midway, after a successful batch
    assert digest(db) == before
    assert leftovers(db) == []
    assert serves(db, "bereavement") == 1
    assert serves(db, "rota") == 0


@pytest.mark.parametrize("failure", [IngestError("index verification failed: forced"), KeyboardInterrupt()])
def test_build_failing_at_verification_leaves_the_old_index(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch, failure: BaseException
) -> None:
    db = tmp_path / "index.sqlite"
    ingest(corpus, db)
    before = digest(db)
    add_public_page(corpus, "canteen", "The canteen opens at eight and closes at three.")
    shadows: list[Path] = []
    real_verify = IndexBuilder.verify

    def failing_verify(self: IndexBuilder) -> None:
        real_verify(self)
        shadows.append(self.shadow)
        assert self.shadow.is_file()  # the new index was fully written beside the old one
        raise failure

    monkeypatch.setattr(IndexBuilder, "verify", failing_verify)
    with pytest.raises(type(failure)):
        ingest(corpus, db)
    assert shadows and shadows[0].parent == db.parent and shadows[0].name.startswith(f".{db.name}.build-")
    assert not shadows[0].exists()
    assert digest(db) == before
    assert leftovers(db) == []
    assert serves(db, "canteen") == 0
    assert serves(db, "bereavement") == 1


def test_build_failing_midway_through_writing_leaves_the_old_index(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "index.sqlite"
    ingest(corpus, db)
    before = digest(db)
    real_add = IndexBuilder.add_passage
    written: list[int] = []

    def add_then_fail(self: IndexBuilder, document_id: int, row: PassageRow, embedding: bytes) -> None:
        if len(written) == 3:
            raise OSError(28, "No space left on device")
        real_add(self, document_id, row, embedding)
        written.append(document_id)

    monkeypatch.setattr(IndexBuilder, "add_passage", add_then_fail)
    with pytest.raises(OSError, match="No space left"):
        ingest(corpus, db, force=True)  # the corpus is unchanged: only a forced build writes
    assert len(written) == 3
    assert digest(db) == before
    assert leftovers(db) == []


def test_successful_rebuild_after_a_failed_one_replaces_the_index(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "index.sqlite"
    ingest(corpus, db)
    old_inode = db.stat().st_ino
    add_public_page(corpus, "canteen", "The canteen opens at eight and closes at three.")

    def refuse(self: IndexBuilder) -> None:
        raise IngestError("index verification failed: forced")

    with monkeypatch.context() as patched:
        patched.setattr(IndexBuilder, "verify", refuse)
        with pytest.raises(IngestError):
            ingest(corpus, db)
    assert serves(db, "canteen") == 0

    report = ingest(corpus, db)
    assert report.documents_indexed == 8
    assert db.stat().st_ino != old_inode  # a new file was renamed into place
    assert serves(db, "canteen") == 1
    assert leftovers(db) == []


def _document(path: str, passages: int) -> DocumentRow:
    return DocumentRow(path, "Title", "markdown", Classification.PUBLIC, "0" * 64, None, 0.0, passages, 0)


def _passage(ordinal: int, text: str) -> PassageRow:
    return PassageRow(
        ordinal,
        f"doc.md#top:L{ordinal + 1}-{ordinal + 1}",
        "Title",
        "",
        ordinal + 1,
        ordinal + 1,
        None,
        None,
        Classification.PUBLIC,
        False,
        text,
        text,
        f"hash-{ordinal}",
    )


_META = IndexMeta(embedding_model="test/model", embedding_dimension=4)


def _vector(dimension: int = 4) -> bytes:
    return np.ones(dimension, dtype=np.float32).tobytes()


def test_verification_refuses_an_inconsistent_index(tmp_path: Path) -> None:
    db = tmp_path / "index.sqlite"
    with IndexBuilder(db, dimension=4, ceiling=Classification.PUBLIC) as builder:
        doc_id = builder.add_document(_document("doc.md", passages=2))  # declares two
        builder.add_passage(doc_id, _passage(0, "only one passage was written"), _vector())
        with pytest.raises(IngestError, match="documents declare 2 passages, found 1"):
            builder.commit(_META)
    assert not db.exists()
    assert leftovers(db) == []


def test_verification_refuses_a_passage_without_a_vector(tmp_path: Path) -> None:
    db = tmp_path / "index.sqlite"
    builder = IndexBuilder(db, dimension=4, ceiling=Classification.PUBLIC)
    with builder:
        doc_id = builder.add_document(_document("doc.md", passages=2))
        builder.add_passage(doc_id, _passage(0, "first"), _vector())
        builder.conn.execute(
            "INSERT INTO passages(document_id, ordinal, citation_id, title, heading, classification, searchable, "
            "text, text_hash) VALUES (?, 1, 'doc.md#top:L2-2', 'Title', '', 0, 0, 'second', 'h')",
            (doc_id,),
        )
        with pytest.raises(IngestError, match="2 passages but 1 vectors"):
            builder.commit(_META)
    assert not db.exists()
    assert not builder.shadow.exists()


def test_builder_commit_publishes_and_abort_cleans_up(tmp_path: Path) -> None:
    db = tmp_path / "index.sqlite"
    with IndexBuilder(db, dimension=4, ceiling=Classification.INTERNAL) as builder:
        doc_id = builder.add_document(_document("doc.md", passages=1))
        builder.add_passage(doc_id, _passage(0, "kestrel nesting season"), _vector())
        assert not db.exists()  # nothing is published before commit
        builder.commit(_META)
    meta = meta_of(db)
    # Row counts of each full-text table are recorded for the gate.
    assert meta["fts_rows_public"] == "1" and meta["fts_rows_internal"] == "1"
    assert "fts_rows_restricted" not in meta

    aborted = IndexBuilder(db, dimension=4, ceiling=Classification.PUBLIC)
    assert aborted.shadow.exists()
    aborted.abort()
    assert not aborted.shadow.exists()
    assert meta_of(db)["fts_rows_internal"] == "1"
