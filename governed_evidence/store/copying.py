"""Copying unchanged documents from the index being replaced into a new build (ADR 0014).

One run of consecutive documents is copied with one ``INSERT ... SELECT`` per table, from the
previous index attached to the build's connection. Rows get the ids, and each table its rows
in the order, a build adding the same documents one by one would give, so the file is the
one a full build writes. A previous row is copied only where its path, content hash and
classification are the planned ones, and a passage only at its document's level.
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from governed_evidence.config import Classification
from governed_evidence.errors import IngestError
from governed_evidence.store.build_rows import CopiedDocument
from governed_evidence.store.schema import fts_table

__all__ = ["COPY_PLAN_SQL", "copy_run"]

#: The plan of one run, in the build's temp schema: which previous row becomes which new one.
COPY_PLAN_SQL = (
    "CREATE TEMP TABLE copy_plan (seq INTEGER PRIMARY KEY, previous_id INTEGER NOT NULL, "
    "new_id INTEGER NOT NULL, path TEXT NOT NULL, content_hash TEXT NOT NULL, "
    "classification INTEGER NOT NULL, source_mtime REAL NOT NULL)"
)

#: Columns copied as they are; ``id`` and ``source_mtime`` are the new build's own.
_DOCUMENT_COPY = (
    "path, title, format, classification, content_hash, status, superseded_by, "
    "passage_count, refused_count, lifecycle, owner, review_by, effective, decided_by, warnings, passages_refused, "
    "hard_linked, source_link"
)
_PASSAGE_COPY = (
    "ordinal, citation_id, title, heading, line_start, line_end, page_start, page_end, "
    "classification, searchable, text, search_text, text_hash"
)


def copy_run(conn: apsw.Connection, source: str, ceiling: Classification, run: Sequence[CopiedDocument]) -> int:
    """Copy ``run`` from the index attached as ``source``; returns the passages copied.

    Raises :class:`IngestError` when a planned row is not in ``source`` as planned (another
    build renamed a new file into place meanwhile, or the file is damaged).
    """
    conn.execute("DELETE FROM temp.copy_plan")
    (first,) = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM documents").fetchone() or (1,)
    conn.executemany(
        "INSERT INTO temp.copy_plan(seq, previous_id, new_id, path, content_hash, classification, source_mtime) "
        "VALUES (?,?,?,?,?,?,?)",
        [
            (i, d.previous_id, int(first) + i, d.path, d.content_hash, int(d.classification), d.source_mtime)
            for i, d in enumerate(run)
        ],
    )
    conn.execute(
        f"INSERT INTO documents(id, source_mtime, {_DOCUMENT_COPY}) "
        f"SELECT m.new_id, m.source_mtime, {', '.join('d.' + c.strip() for c in _DOCUMENT_COPY.split(','))} "
        f"FROM temp.copy_plan m JOIN {source}.documents d ON d.id = m.previous_id AND d.path = m.path "
        "AND d.content_hash = m.content_hash AND d.classification = m.classification ORDER BY m.seq"
    )
    if conn.changes() != len(run):
        raise IngestError(
            "the previous index changed while this build read it; nothing was replaced: run the ingest again"
        )
    # A passage is copied only at its document's level; one that is not would leave the
    # document's declared count unmet, and verify() refuses the file.
    conn.execute(
        f"INSERT INTO passages(document_id, {_PASSAGE_COPY}) "
        f"SELECT m.new_id, {', '.join('p.' + c.strip() for c in _PASSAGE_COPY.split(','))} "
        f"FROM temp.copy_plan m JOIN {source}.passages p ON p.document_id = m.previous_id "
        "AND p.classification = m.classification ORDER BY m.seq, p.ordinal"
    )
    copied = int(conn.changes())
    conn.execute(
        "INSERT INTO passage_vectors(passage_id, embedding, classification, searchable) "
        "SELECT n.id, v.embedding, n.classification, n.searchable FROM temp.copy_plan m "
        "JOIN passages n ON n.document_id = m.new_id "
        f"JOIN {source}.passages p ON p.document_id = m.previous_id AND p.ordinal = n.ordinal "
        f"JOIN {source}.passage_vectors v ON v.passage_id = p.id ORDER BY n.id"
    )
    for level in Classification:
        if level > ceiling:
            break
        # The indexed body, as add_passage indexes it: search_text where it was stored.
        conn.execute(
            f"INSERT INTO {fts_table(level)}(rowid, title, heading, body) "
            "SELECT n.id, n.title, n.heading, coalesce(n.search_text, n.text) FROM temp.copy_plan m "
            "JOIN passages n ON n.document_id = m.new_id WHERE n.searchable = 1 AND n.classification <= ? "
            "ORDER BY n.id",
            (int(level),),
        )
    return copied
