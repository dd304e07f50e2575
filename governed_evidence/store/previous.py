"""What a new build reads from the index it replaces: stored vectors to reuse, whether the
old index can simply be kept, which of its documents an incremental build may copy, and
which corpus it was built from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import apsw

from governed_evidence.config import Classification
from governed_evidence.errors import GovernedEvidenceError
from governed_evidence.store.connection import connect, meta_rows, read_meta
from governed_evidence.store.meta import IndexMeta

__all__ = [
    "BuiltFrom",
    "KeptIndex",
    "PreviousDocument",
    "PreviousIndex",
    "built_from",
    "kept_index",
    "previous_index",
    "reusable_vectors",
]


def _open(db: Path) -> apsw.Connection | None:
    """A read-only connection to the index at ``db``; None when there is none or it cannot be opened."""
    if not db.is_file():
        return None
    try:
        return connect(db, readonly=True)
    except (apsw.Error, GovernedEvidenceError, OSError):
        return None


@dataclass(frozen=True)
class KeptIndex:
    meta: IndexMeta
    superseded_documents: int
    #: Documents per (classification value, superseded, lifecycle status), for the report's
    #: per-level counts (what an ingest that parses nothing can still say).
    by_state: dict[tuple[int, bool, str], int] = field(default_factory=dict)
    #: Documents whose review date had passed on the day asked about (0 when not asked).
    stale_documents: int = 0


@dataclass(frozen=True)
class BuiltFrom:
    """The corpus an existing index records it was built from."""

    corpus_path: str
    built_at: str


def built_from(db: Path) -> BuiltFrom | None:
    """The corpus folder the index at ``db`` was built from, when it records one.

    None for no file, a file that is not an index, and indexes written before the folder
    was recorded: those are replaced as any untrusted or anonymous index is. Raw rows, not
    read_meta: an index of an older schema still belongs to its corpus.
    """
    conn = _open(db)
    if conn is None:
        return None
    try:
        rows = meta_rows(conn)
    except (apsw.Error, GovernedEvidenceError):
        return None
    finally:
        conn.close()
    path = rows.get("corpus_path", "")
    return BuiltFrom(path, rows.get("built_at", "")) if path else None


def reusable_vectors(db: Path, model_id: str, dimension: int, keys: set[str]) -> dict[str, bytes]:
    """Vectors of the index at ``db`` for passages whose embedder input (``text_hash``) is in ``keys``."""
    if not db.is_file() or not keys:
        return {}
    try:
        conn = connect(db, readonly=True)
    except Exception:  # noqa: BLE001 - an unreadable old index just means nothing to reuse
        return {}
    try:
        # Not read_meta: an index of an older schema still holds good vectors, and a schema
        # upgrade should not re-embed the corpus. The query below fails on anything else.
        meta = meta_rows(conn)
        if meta.get("embedding_model") != model_id or meta.get("embedding_dimension") != str(dimension):
            return {}
        found: dict[str, bytes] = {}
        wanted = sorted(keys)
        for i in range(0, len(wanted), 500):
            batch = wanted[i : i + 500]
            marks = ",".join("?" * len(batch))
            for text_hash, blob in conn.execute(
                "SELECT p.text_hash, v.embedding FROM passages p "
                f"JOIN passage_vectors v ON v.passage_id = p.id WHERE p.text_hash IN ({marks})",
                batch,
            ):
                found[str(text_hash)] = bytes(blob)
        return found
    except Exception:  # noqa: BLE001
        return {}
    finally:
        conn.close()


def _sound(conn: apsw.Connection, meta: IndexMeta) -> bool:
    """The checks a reader of the file would make, and that its parts agree with its meta."""
    if [str(r[0]) for r in conn.execute("PRAGMA quick_check")] != ["ok"]:
        return False
    (documents,) = conn.execute("SELECT count(*) FROM documents").fetchone() or (-1,)
    (passages,) = conn.execute("SELECT count(*) FROM passages").fetchone() or (-1,)
    (vectors,) = conn.execute("SELECT count(*) FROM passage_vectors").fetchone() or (-1,)
    return bool(documents == meta.documents and passages == vectors == meta.passages)


@dataclass(frozen=True)
class PreviousDocument:
    """One document of the index being replaced, as far as deciding to copy it needs."""

    id: int
    content_hash: str
    classification: Classification
    superseded_by: str | None
    #: Lifecycle status (current, draft, deprecated).
    lifecycle: str
    review_by: str | None
    #: The rule that decided its level, and what parsing it reported (see DocumentRow).
    decided_by: str
    warnings: tuple[str, ...]
    passages_refused: int
    #: Other names (hard links) took part in deciding its level.
    hard_linked: bool


@dataclass(frozen=True)
class PreviousIndex:
    """The index being replaced, when its documents may be copied into the new build."""

    meta: IndexMeta
    documents: Mapping[str, PreviousDocument]


def previous_index(db: Path, settings_digest: str) -> PreviousIndex | None:
    """The documents of the index at ``db`` by path, when it was built with the same settings
    (``settings_digest``: ingest logic, schema, ceiling, model, governance rules...) and is
    sound; None otherwise, and then every file is parsed again.

    A document is only a candidate: the build copies it when its file's bytes and level
    are unchanged, and checks again inside its own transaction that the row it copies is
    the one described here.
    """
    conn = _open(db)
    if conn is None:
        return None
    try:
        meta = read_meta(conn)  # refuses another schema version
        if meta.settings_digest != settings_digest or not _sound(conn, meta):
            return None
        documents = {}
        rows = conn.execute(
            "SELECT id, path, content_hash, classification, superseded_by, lifecycle, review_by, decided_by, "
            "warnings, passages_refused, hard_linked FROM documents"
        )
        for doc_id, path, content_hash, level, superseded_by, lifecycle, review_by, decided_by, *rest in rows:
            warnings, refused, linked = rest
            notes = json.loads(str(warnings))
            if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
                return None
            documents[str(path)] = PreviousDocument(
                int(doc_id),
                str(content_hash),
                Classification(int(level)),
                None if superseded_by is None else str(superseded_by),
                str(lifecycle),
                None if review_by is None else str(review_by),
                str(decided_by),
                tuple(notes),
                int(refused),
                bool(linked),
            )
        return PreviousIndex(meta, documents)
    except (apsw.Error, GovernedEvidenceError, ValueError):
        return None
    finally:
        conn.close()


def kept_index(db: Path, fingerprint: str, *, today: date | None = None) -> KeptIndex | None:
    """The description of the index at ``db`` if it was built from this very fingerprint and
    is sound, else None (then it is rebuilt, as any index that cannot be trusted is).

    With ``today``, it also counts the documents overdue for review on that day: an index
    kept for months grows stale without changing.
    """
    conn = _open(db)
    if conn is None:
        return None
    try:
        meta = read_meta(conn)  # refuses another schema version
        # A damaged file is rebuilt, not kept because its sources happen to be unchanged.
        if meta.corpus_fingerprint != fingerprint or not _sound(conn, meta):
            return None
        (superseded,) = conn.execute("SELECT count(*) FROM documents WHERE status = 'superseded'").fetchone() or (0,)
        by_state = {
            (int(level), bool(old), str(lifecycle)): int(count)
            for level, old, lifecycle, count in conn.execute(
                "SELECT classification, status = 'superseded', lifecycle, count(*) FROM documents GROUP BY 1, 2, 3"
            )
        }
        stale = 0
        if today is not None:
            # ISO dates order as text; a date is stale once it has passed (not on the day).
            (stale,) = conn.execute(
                "SELECT count(*) FROM documents WHERE review_by < ?", (today.isoformat(),)
            ).fetchone() or (0,)
        return KeptIndex(meta, int(superseded), by_state, int(stale))
    except (apsw.Error, GovernedEvidenceError):
        return None
    finally:
        conn.close()
