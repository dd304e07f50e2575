"""An index records the corpus folder it was built from, and is not silently swapped for
another corpus's index: the CLI's default (``refuse_other_corpus``) refuses, ``--force``
replaces, and an index written before the folder was recorded is replaced as before.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from governed_evidence.config import Classification
from governed_evidence.errors import IngestError
from governed_evidence.ingest.pipeline import IngestReport, ingest_corpus
from governed_evidence.store.connection import connect
from tests.helpers import HashEmbedder, meta_of, write

REPO = Path(__file__).resolve().parents[2]


def build(corpus: Path, db: Path, **kwargs: bool) -> IngestReport:
    return ingest_corpus(corpus, db, HashEmbedder(), ceiling=Classification.RESTRICTED, progress=None, **kwargs)


def two_corpora(tmp_path: Path) -> tuple[Path, Path]:
    a = write(tmp_path / "policies", "public/leave.md", "# Leave\n\nStaff get twenty days of leave.\n").parents[1]
    b = write(tmp_path / "minutes", "public/board.md", "# Board\n\nThe board met in March.\n").parents[1]
    return a, b


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_index_records_the_resolved_corpus_folder(tmp_path: Path) -> None:
    a, _ = two_corpora(tmp_path)
    db = tmp_path / "evidence.sqlite"
    # Through a relative, dotted spelling of the folder: what is recorded is where it is.
    build(a / ".." / a.name, db)
    assert meta_of(db)["corpus_path"] == str(a.resolve())
    assert meta_of(db)["corpus_name"] == a.name


def test_another_corpus_is_refused_naming_it_and_nothing_changes(tmp_path: Path) -> None:
    a, b = two_corpora(tmp_path)
    db = tmp_path / "evidence.sqlite"
    build(a, db)
    before = sha256(db)
    built_at = meta_of(db)["built_at"]
    with pytest.raises(IngestError) as refused:
        build(b, db, refuse_other_corpus=True)
    message = str(refused.value)
    assert str(a.resolve()) in message and built_at in message
    assert str(b.resolve()) in message
    assert "--force" in message and "--db" in message
    assert sha256(db) == before
    assert [p.name for p in tmp_path.iterdir() if ".build-" in p.name] == []


def test_a_moved_corpus_is_refused_and_the_message_says_the_folder_is_gone(tmp_path: Path) -> None:
    a, _ = two_corpora(tmp_path)
    db = tmp_path / "evidence.sqlite"
    build(a, db)
    moved = a.rename(tmp_path / "policies-2025")
    with pytest.raises(IngestError, match="no longer exists"):
        build(moved, db, refuse_other_corpus=True)


def test_the_same_corpus_changed_is_rebuilt_without_refusal(tmp_path: Path) -> None:
    a, _ = two_corpora(tmp_path)
    db = tmp_path / "evidence.sqlite"
    build(a, db)
    write(a, "public/travel.md", "# Travel\n\nBook trains, not planes.\n")
    report = build(a, db, refuse_other_corpus=True)
    assert not report.unchanged and report.documents_indexed == 2


def test_without_the_refusal_another_corpus_replaces_the_index(tmp_path: Path) -> None:
    """What library callers that own their index files get (evaluation suites, tests)."""
    a, b = two_corpora(tmp_path)
    db = tmp_path / "evidence.sqlite"
    build(a, db)
    build(b, db)
    assert meta_of(db)["corpus_path"] == str(b.resolve())


def test_an_index_without_a_recorded_folder_is_replaced_as_before(tmp_path: Path) -> None:
    a, b = two_corpora(tmp_path)
    db = tmp_path / "evidence.sqlite"
    build(a, db)
    conn = connect(db, readonly=False)
    try:
        conn.execute("DELETE FROM meta WHERE key = 'corpus_path'")
    finally:
        conn.close()
    report = build(b, db, refuse_other_corpus=True)
    assert report.documents_indexed == 1
    assert meta_of(db)["corpus_path"] == str(b.resolve())


@pytest.mark.model
def test_the_cli_refuses_another_corpus_and_force_replaces_it(tmp_path: Path) -> None:
    """Through the command, with the real default model."""
    a, b = two_corpora(tmp_path)
    db = tmp_path / "evidence.sqlite"
    build(a, db)
    before = sha256(db)
    env = {k: v for k, v in os.environ.items() if k != "GOVERNED_EVIDENCE_LOG_LEVEL"}
    command = [sys.executable, "-m", "governed_evidence", "ingest", "--corpus", str(b), "--db", str(db)]

    refused = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: ") and "another corpus" in refused.stderr
    assert str(a.resolve()) in refused.stderr and "--force" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert sha256(db) == before

    forced = subprocess.run(
        [*command, "--force"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert forced.returncode == 0, forced.stderr
    assert meta_of(db)["corpus_path"] == str(b.resolve())
