"""An unchanged corpus keeps its index untouched; any change that could alter it rebuilds.

"Rebuilt" is observed on the file: a rebuild publishes a new file by rename (a new inode),
while a kept index stays byte for byte the same file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from governed_evidence.cli import build_parser
from governed_evidence.config import Classification, Settings
from governed_evidence.embeddings.base import ModelIdentity
from governed_evidence.ingest.loaders import load_document
from governed_evidence.ingest.pipeline import IngestReport, corpus_fingerprint, ingest_corpus
from governed_evidence.sdmx.schema import carry_over
from governed_evidence.sdmx.schema import schema_sql as sdmx_schema_sql
from governed_evidence.store.connection import connect
from tests.helpers import HashEmbedder, meta_of, write

PUBLIC, INTERNAL, RESTRICTED = Classification.PUBLIC, Classification.INTERNAL, Classification.RESTRICTED


@dataclass(frozen=True)
class FileState:
    inode: int
    mtime_ns: int
    sha256: str


def state(db: Path) -> FileState:
    st = db.stat()
    return FileState(st.st_ino, st.st_mtime_ns, hashlib.sha256(db.read_bytes()).hexdigest())


def ingest(
    corpus: Path,
    db: Path,
    embedder: HashEmbedder | None = None,
    *,
    ceiling: Classification = RESTRICTED,
    **kwargs: object,
) -> IngestReport:
    return ingest_corpus(corpus, db, embedder or HashEmbedder(), ceiling=ceiling, progress=None, **kwargs)  # type: ignore[arg-type]


class ChecksumEmbedder(HashEmbedder):
    """The same model name and dimension with other weights (another checksum)."""

    def __init__(self, checksum: str) -> None:
        super().__init__()
        self._identity = ModelIdentity(self._identity.model_id, self._identity.dimension, checksum)


def test_unchanged_corpus_keeps_the_index_file_untouched(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "index.sqlite"
    first = ingest(corpus, db)
    assert not first.unchanged
    before = state(db)
    embedder = HashEmbedder()

    again = ingest(corpus, db, embedder)

    assert state(db) == before  # same file (inode), not rewritten, same bytes
    assert again.unchanged and again.as_dict()["unchanged"] is True
    assert embedder.calls == 0
    assert again.built_at == first.built_at == meta_of(db)["built_at"]
    assert (again.documents_indexed, again.passages) == (first.documents_indexed, first.passages) == (7, 8)
    assert again.superseded_documents == first.superseded_documents == 1
    assert again.files_seen == first.files_seen
    assert again.excluded_above_ceiling == first.excluded_above_ceiling
    assert again.embeddings_computed == 0
    assert set(again.seconds) == {"fingerprint", "check", "total"}
    assert meta_of(db)["corpus_fingerprint"] == corpus_fingerprint(corpus, embedder.identity, ceiling=RESTRICTED)


def test_touching_a_file_without_changing_its_bytes_keeps_the_index(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "index.sqlite"
    ingest(corpus, db)
    before = state(db)
    leave = corpus / "public" / "leave.md"
    os.utime(leave, ns=(leave.stat().st_atime_ns, leave.stat().st_mtime_ns + 10**10))
    assert ingest(corpus, db).unchanged
    assert state(db) == before


def test_hidden_files_are_outside_the_fingerprint_as_they_are_outside_the_build(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "index.sqlite"
    ingest(corpus, db)
    before = state(db)
    write(corpus, ".drafts/new.md", "# Draft\n\nNot part of the corpus.\n")
    write(corpus, "public/.wip.md", "# Work in progress\n\nNot part of the corpus either.\n")
    assert ingest(corpus, db).unchanged
    assert state(db) == before


def _one_byte(corpus: Path) -> None:
    leave = corpus / "public" / "leave.md"
    data = bytearray(leave.read_bytes())
    at = data.index(b"five")
    data[at] = ord("F")
    leave.write_bytes(bytes(data))


def _add(corpus: Path) -> None:
    write(corpus, "public/canteen.md", "# Canteen\n\nThe canteen opens at eight and closes at three.\n")


def _remove(corpus: Path) -> None:
    (corpus / "public" / "leave.md").unlink()


def _rename(corpus: Path) -> None:
    (corpus / "public" / "leave.md").rename(corpus / "public" / "leave-policy.md")


def _relabel_a_file_above_the_ceiling(corpus: Path) -> None:
    path = corpus / "restricted" / "zephyr.md"
    path.write_text(path.read_text().replace("codename Zephyr", "codename Zephyr (draft)"))


CORPUS_CHANGES: dict[str, Callable[[Path], None]] = {
    "one byte of one file": _one_byte,
    "a file added": _add,
    "a file removed": _remove,
    "a file renamed": _rename,
    "a restricted file edited": _relabel_a_file_above_the_ceiling,
}


@pytest.mark.parametrize("change", list(CORPUS_CHANGES), ids=list(CORPUS_CHANGES))
def test_any_change_to_the_corpus_rebuilds(tmp_path: Path, corpus: Path, change: str) -> None:
    db = tmp_path / "index.sqlite"
    ingest(corpus, db)
    before = state(db)
    CORPUS_CHANGES[change](corpus)

    report = ingest(corpus, db)

    assert not report.unchanged and report.as_dict()["unchanged"] is False
    after = state(db)
    assert after.inode != before.inode and after.sha256 != before.sha256
    assert meta_of(db)["corpus_fingerprint"] == corpus_fingerprint(corpus, HashEmbedder().identity, ceiling=RESTRICTED)
    # The rebuild is the usual one: unchanged passages keep their stored vectors.
    assert report.embeddings_reused > 0
    # And once rebuilt, the same corpus is unchanged again.
    assert ingest(corpus, db).unchanged
    assert state(db) == after


SETTING_CHANGES: dict[str, dict[str, object]] = {
    "ceiling": {"ceiling": INTERNAL},
    "default classification": {"default_classification": PUBLIC},
    "file size limit": {"max_file_bytes": 10_000},
    "embedding model": {"embedder": HashEmbedder(model_id="test/another-model")},
    "embedding dimension": {"embedder": HashEmbedder(dimension=32)},
    "embedding model checksum": {"embedder": ChecksumEmbedder("sha256:other-weights")},
}


@pytest.mark.parametrize("change", list(SETTING_CHANGES), ids=list(SETTING_CHANGES))
def test_any_change_to_the_settings_rebuilds(tmp_path: Path, corpus: Path, change: str) -> None:
    db = tmp_path / "index.sqlite"
    ingest(corpus, db)
    before = state(db)

    report = ingest(corpus, db, **SETTING_CHANGES[change])  # type: ignore[arg-type]

    assert not report.unchanged
    assert state(db).inode != before.inode
    # Going back to the first settings is a change again, not a return to a kept index.
    back = ingest(corpus, db)
    assert not back.unchanged


def test_a_corpus_moved_elsewhere_rebuilds(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "index.sqlite"
    ingest(corpus, db)
    before = state(db)
    moved = corpus.rename(tmp_path / "moved")
    assert not ingest(moved, db).unchanged
    assert state(db).inode != before.inode


def test_force_rebuilds_an_unchanged_corpus(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "index.sqlite"
    first = ingest(corpus, db)
    before, fingerprint = state(db), meta_of(db)["corpus_fingerprint"]
    embedder = HashEmbedder()

    report = ingest(corpus, db, embedder, force=True)

    assert not report.unchanged
    assert state(db).inode != before.inode
    assert report.embeddings_reused == report.passages == first.passages
    assert embedder.texts_embedded == 0
    assert meta_of(db)["corpus_fingerprint"] == fingerprint
    assert ingest(corpus, db).unchanged


def test_a_change_above_the_ceiling_rebuilds_and_names_nothing(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "index.sqlite"
    first = ingest(corpus, db, ceiling=PUBLIC)
    assert first.excluded_above_ceiling == 5
    before = state(db)
    zephyr = corpus / "restricted" / "zephyr.md"
    zephyr.write_text(zephyr.read_text() + "\nThe kestrelwing clause was added in review.\n")

    report = ingest(corpus, db, ceiling=PUBLIC)

    assert not report.unchanged
    assert state(db).inode != before.inode
    assert report.excluded_above_ceiling == 5
    data = db.read_bytes().lower()
    for needle in ("restricted/zephyr.md", "zephyr", "kestrelwing", "quillmoor", "restricted/", "labelled-secret"):
        assert needle.encode() not in data, needle
    # The index holds one digest for the whole corpus, nothing per file.
    meta = meta_of(db)
    assert re.fullmatch(r"[0-9a-f]{64}", meta["corpus_fingerprint"])
    assert not any(len(re.findall(r"[0-9a-f]{64}", value)) > 1 for value in meta.values())
    assert hashlib.sha256(zephyr.read_bytes()).hexdigest().encode() not in data
    assert json.dumps(report.as_dict()).lower().count("zephyr") == 0


def test_an_oversized_file_changes_the_fingerprint_by_its_size(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, "public/ok.md", "# Ok\n\nA public page about the canteen opening hours.\n")
    big = write(corpus, "public/big.md", "# Big\n\n" + "word " * 400)
    identity = HashEmbedder().identity

    def fingerprint() -> str:
        return corpus_fingerprint(corpus, identity, ceiling=PUBLIC, max_file_bytes=1000)

    first = fingerprint()
    big.write_text("# Big\n\n" + "word " * 401)
    assert fingerprint() != first


def test_a_damaged_or_foreign_index_is_rebuilt_even_with_a_matching_fingerprint(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "index.sqlite"
    ingest(corpus, db)
    for sql in (
        "UPDATE meta SET value = '999' WHERE key = 'passages'",  # counts that disagree with the rows
        "UPDATE meta SET value = '0' WHERE key = 'schema_version'",  # another schema
    ):
        conn = connect(db, readonly=False)
        conn.execute(sql)
        conn.close()
        inode = db.stat().st_ino
        assert not ingest(corpus, db).unchanged
        assert db.stat().st_ino != inode
        assert ingest(corpus, db).unchanged


def test_an_unreadable_old_file_is_replaced(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "index.sqlite"
    db.write_bytes(os.urandom(4096))
    report = ingest(corpus, db)
    assert not report.unchanged and report.documents_indexed == 7


def test_a_read_failure_during_the_build_stores_no_fingerprint(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read that fails while building but not while fingerprinting may be transient:
    the next ingest must try again rather than keep the rejection."""
    db = tmp_path / "index.sqlite"

    def flaky(path: Path, fallback_title: str) -> object:
        if path.name == "leave.md":
            raise PermissionError(13, "Permission denied")
        return load_document(path, fallback_title)

    with monkeypatch.context() as patched:
        patched.setattr("governed_evidence.ingest.passages.load_document", flaky)
        report = ingest(corpus, db)
    assert "cannot be read" in dict(report.rejected)["public/leave.md"]
    assert "corpus_fingerprint" not in meta_of(db)

    again = ingest(corpus, db)
    assert not again.unchanged and again.rejected == []
    assert ingest(corpus, db).unchanged


def test_the_statistics_cache_survives_both_paths(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "index.sqlite"
    ingest(corpus, db, carry_over=carry_over)
    conn = connect(db, readonly=False)
    conn.execute(sdmx_schema_sql())
    conn.executemany(
        "INSERT INTO sdmx_rate_ledger(provider, bucket, at) VALUES (?, ?, ?)",
        [("OECD", "data", 1000.0 + i) for i in range(5)],
    )
    conn.close()

    def ledger() -> int:
        conn = connect(db, readonly=True)
        try:
            return sum(1 for _ in conn.execute("SELECT 1 FROM sdmx_rate_ledger"))
        finally:
            conn.close()

    before = state(db)
    assert ingest(corpus, db, carry_over=carry_over).unchanged  # the cache writes did not make the index look changed
    assert state(db) == before and ledger() == 5
    _add(corpus)
    assert not ingest(corpus, db, carry_over=carry_over).unchanged
    assert ledger() == 5  # carried over by the rebuild


# --- the command line -------------------------------------------------------------------


def run_ingest_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str]:
    def make_embedder(settings: Settings, name: str | None = None) -> HashEmbedder:
        return HashEmbedder()

    # Wherever the command looks the factory up: its own module or the factory's.
    monkeypatch.setattr("governed_evidence.embeddings.factory.make_embedder", make_embedder)
    # The ingest's own embedder (made on the first text to embed).
    monkeypatch.setattr("governed_evidence.embeddings.factory.make_ingest_embedder", make_embedder)
    monkeypatch.setattr("governed_evidence.cli.make_embedder", make_embedder, raising=False)
    args = build_parser().parse_args(["ingest", *argv])
    code = int(args.func(args, Settings()))
    return code, capsys.readouterr().out


def test_command_says_unchanged_and_force_rebuilds(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "index.sqlite"
    common = ("--corpus", str(corpus), "--db", str(db), "--ceiling", "restricted")
    code, out = run_ingest_command(monkeypatch, capsys, *common)
    assert code == 0 and out.startswith("Indexed 7 documents")
    before = state(db)
    built_at = meta_of(db)["built_at"]

    code, out = run_ingest_command(monkeypatch, capsys, *common)
    assert code == 0
    assert out.splitlines()[0] == (
        f"Index unchanged since {built_at}: 7 documents, 8 passages in {db} "
        "(corpus fingerprint matches); use --force to rebuild"
    )
    code, out = run_ingest_command(monkeypatch, capsys, *common, "--json")
    report = json.loads(out)
    assert code == 0 and report["unchanged"] is True and report["built_at"] == built_at
    assert (report["documents_indexed"], report["passages"]) == (7, 8)
    assert state(db) == before

    code, out = run_ingest_command(monkeypatch, capsys, *common, "--force", "--json")
    report = json.loads(out)
    assert code == 0 and report["unchanged"] is False
    assert report["embeddings_reused"] == report["passages"] == 8
    assert state(db).inode != before.inode
    code, out = run_ingest_command(monkeypatch, capsys, *common, "--force")
    assert code == 0 and out.startswith("Indexed 7 documents")


def test_an_unchanged_corpus_reports_the_counts_its_build_reported(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Per level and outcome, above the ceiling included, and the rules that decided them."""
    db = tmp_path / "index.sqlite"
    common = ("--corpus", str(corpus), "--db", str(db), "--ceiling", "internal")
    code, out = run_ingest_command(monkeypatch, capsys, *common, "--json")
    built = json.loads(out)
    assert code == 0 and built["unchanged"] is False
    assert any("above_ceiling" in counts for counts in built["by_classification"].values())
    code, out = run_ingest_command(monkeypatch, capsys, *common, "--json")
    kept = json.loads(out)
    assert code == 0 and kept["unchanged"] is True
    assert kept["by_classification"] == built["by_classification"]
    assert kept["decided_by"] == built["decided_by"]

    def levels(text: str) -> list[str]:
        lines = text.splitlines()
        start = lines.index("  documents by classification:")
        return lines[start : start + 5]

    code, out = run_ingest_command(monkeypatch, capsys, *common, "--force")
    rebuilt = levels(out)
    code, out = run_ingest_command(monkeypatch, capsys, *common)
    assert out.startswith("Index unchanged since ")
    assert levels(out) == rebuilt
