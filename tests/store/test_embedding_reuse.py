"""Rebuilds reuse stored vectors for unchanged passages, and only from the same model."""

from __future__ import annotations

import os
from pathlib import Path

import apsw

from governed_evidence.config import Classification
from governed_evidence.ingest.pipeline import IngestReport, ingest_corpus
from governed_evidence.store.connection import connect
from governed_evidence.store.schema import SCHEMA_VERSION
from tests.helpers import HashEmbedder, meta_of, write

PUBLIC, RESTRICTED = Classification.PUBLIC, Classification.RESTRICTED


def ingest(
    corpus: Path, db: Path, embedder: HashEmbedder, ceiling: Classification = RESTRICTED, *, force: bool = False
) -> IngestReport:
    return ingest_corpus(corpus, db, embedder, ceiling=ceiling, progress=None, force=force)


def stored(db: Path) -> dict[str, tuple[str, str, bytes]]:
    """citation id -> (document path, text hash, vector bytes)."""
    conn = connect(db, readonly=True)
    try:
        return {
            str(cid): (str(path), str(text_hash), bytes(vector))
            for cid, path, text_hash, vector in conn.execute(
                "SELECT p.citation_id, d.path, p.text_hash, v.embedding FROM passages p "
                "JOIN documents d ON d.id = p.document_id JOIN passage_vectors v ON v.passage_id = p.id"
            )
        }
    finally:
        conn.close()


def test_forced_rebuild_of_an_unchanged_corpus_computes_no_new_embeddings(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "index.sqlite"
    embedder = HashEmbedder()
    first = ingest(corpus, db, embedder)
    assert first.embeddings_computed == first.passages == embedder.texts_embedded > 0
    before = stored(db)

    # Without force the index would simply be kept (tests/ingest/test_unchanged.py).
    second = ingest(corpus, db, embedder, force=True)
    assert not second.unchanged
    assert embedder.texts_embedded == first.passages
    assert second.embeddings_computed == 0
    assert second.embeddings_reused == second.passages == first.passages
    assert stored(db) == before


def test_changing_one_document_re_embeds_only_its_passages(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "index.sqlite"
    embedder = HashEmbedder()
    ingest(corpus, db, embedder)
    before = stored(db)
    old_hashes = {h for _, h, _ in before.values()}
    leave = corpus / "public" / "leave.md"
    leave.write_text(leave.read_text().replace("five days", "ten days"))
    count_before = embedder.texts_embedded

    report = ingest(corpus, db, embedder)
    after = stored(db)
    new_rows = {cid: row for cid, row in after.items() if row[1] not in old_hashes}
    assert new_rows
    assert {path for path, _, _ in new_rows.values()} == {"public/leave.md"}
    assert embedder.texts_embedded - count_before == len(new_rows) == report.embeddings_computed
    assert report.embeddings_reused == report.passages - len(new_rows)
    # Passages of other documents keep their exact vectors.
    for cid, (path, text_hash, vector) in after.items():
        if path != "public/leave.md":
            assert before[cid] == (path, text_hash, vector)


def test_a_different_model_reuses_nothing(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "index.sqlite"
    ingest(corpus, db, HashEmbedder())
    other = HashEmbedder(model_id="test/another-model")
    report = ingest(corpus, db, other)
    assert report.embeddings_reused == 0
    assert report.embeddings_computed == report.passages == other.texts_embedded
    assert meta_of(db)["embedding_model"] == "test/another-model"


def test_same_model_name_with_another_dimension_reuses_nothing(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "index.sqlite"
    ingest(corpus, db, HashEmbedder(dimension=64))
    smaller = HashEmbedder(dimension=32)
    report = ingest(corpus, db, smaller)
    assert report.embeddings_reused == 0
    assert smaller.texts_embedded == report.passages
    assert meta_of(db)["embedding_dimension"] == "32"
    assert {len(v) for _, _, v in stored(db).values()} == {32 * 4}


def test_reuse_from_a_wider_index_brings_nothing_above_the_new_ceiling(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "index.sqlite"
    embedder = HashEmbedder()
    ingest(corpus, db, embedder, ceiling=RESTRICTED)
    assert b"Quillmoor" in db.read_bytes()
    count = embedder.texts_embedded

    report = ingest(corpus, db, embedder, ceiling=PUBLIC)
    assert embedder.texts_embedded == count  # every public passage was reused
    assert report.embeddings_reused == report.passages > 0
    assert {path for path, _, _ in stored(db).values()} == {"public/expenses.md", "public/leave.md"}
    data = db.read_bytes().lower()
    for word in (b"quillmoor", b"zephyr", b"brackenfield", b"runbook"):
        assert word not in data


def test_unreadable_old_index_is_replaced_and_everything_embedded(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "index.sqlite"
    db.write_bytes(os.urandom(4096))
    embedder = HashEmbedder()
    report = ingest(corpus, db, embedder)
    assert report.embeddings_reused == 0
    assert embedder.texts_embedded == report.passages
    assert meta_of(db)["documents"] == "7"


def test_new_document_is_the_only_one_embedded(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "index.sqlite"
    embedder = HashEmbedder()
    ingest(corpus, db, embedder)
    count = embedder.texts_embedded
    write(corpus, "public/canteen.md", "# Canteen\n\nThe canteen opens at eight and closes at three.\n")
    report = ingest(corpus, db, embedder)
    assert report.embeddings_computed == embedder.texts_embedded - count == 1
    assert {path for path, _, _ in stored(db).values()} >= {"public/canteen.md"}


def test_an_index_of_an_older_schema_still_lends_its_vectors(tmp_path: Path, corpus: Path) -> None:
    """A schema upgrade rebuilds the index but does not re-embed the corpus."""
    db = tmp_path / "index.sqlite"
    ingest(corpus, db, HashEmbedder())
    conn = apsw.Connection(str(db))
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.close()
    again = HashEmbedder()
    report = ingest(corpus, db, again)
    assert again.texts_embedded == 0
    assert report.embeddings_reused == report.passages > 0
    assert meta_of(db)["schema_version"] == str(SCHEMA_VERSION)
