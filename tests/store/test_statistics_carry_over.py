"""An index rebuild keeps the SDMX cache and rate ledger of the file it replaces."""

from __future__ import annotations

from pathlib import Path

from governed_evidence.config import Classification
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.sdmx.schema import carry_over, schema_sql
from governed_evidence.store.connection import connect
from tests.helpers import HashEmbedder


def test_rebuild_carries_the_rate_ledger_over(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "index.sqlite"
    emb = HashEmbedder()
    ingest_corpus(corpus, db, emb, ceiling=Classification.RESTRICTED, progress=None, carry_over=carry_over)
    conn = connect(db, readonly=False)
    conn.execute(schema_sql())
    conn.executemany(
        "INSERT INTO sdmx_rate_ledger(provider, bucket, at) VALUES (?, ?, ?)",
        [("OECD", "data", 1000.0 + i) for i in range(7)],
    )
    conn.close()
    # Forced: an unchanged corpus would keep the file as it is, cache and all.
    ingest_corpus(corpus, db, emb, ceiling=Classification.RESTRICTED, progress=None, force=True, carry_over=carry_over)
    conn = connect(db, readonly=True)
    (count,) = conn.execute("SELECT count(*) FROM sdmx_rate_ledger WHERE provider = 'OECD'").fetchone()
    (passages,) = conn.execute("SELECT count(*) FROM passages").fetchone()
    conn.close()
    assert count == 7
    assert passages > 0


def test_rebuild_without_statistics_tables_adds_none(tmp_path: Path, corpus: Path) -> None:
    db = tmp_path / "index.sqlite"
    emb = HashEmbedder()
    ingest_corpus(corpus, db, emb, ceiling=Classification.RESTRICTED, progress=None, carry_over=carry_over)
    ingest_corpus(corpus, db, emb, ceiling=Classification.RESTRICTED, progress=None, force=True, carry_over=carry_over)
    conn = connect(db, readonly=True)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'sdmx%'")}
    conn.close()
    assert names == set()
