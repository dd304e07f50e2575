"""What a new build reads from the index it replaces: stored vectors to reuse, and whether
the old index can simply be kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import apsw

from governed_evidence.errors import GovernedEvidenceError
from governed_evidence.store.connection import connect, meta_rows, read_meta
from governed_evidence.store.meta import IndexMeta

__all__ = ["KeptIndex", "kept_index", "reusable_vectors"]


@dataclass(frozen=True)
class KeptIndex:
    meta: IndexMeta
    superseded_documents: int


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


def kept_index(db: Path, fingerprint: str) -> KeptIndex | None:
    """The description of the index at ``db`` if it was built from this very fingerprint and
    is sound, else None (then it is rebuilt, as any index that cannot be trusted is)."""
    if not db.is_file():
        return None
    try:
        conn = connect(db, readonly=True)
    except (apsw.Error, GovernedEvidenceError, OSError):
        return None
    try:
        meta = read_meta(conn)  # refuses another schema version
        if meta.corpus_fingerprint != fingerprint:
            return None
        # The checks a reader of the file would make: a damaged file is rebuilt, not kept
        # because its sources happen to be unchanged.
        if [str(r[0]) for r in conn.execute("PRAGMA quick_check")] != ["ok"]:
            return None
        (documents,) = conn.execute("SELECT count(*) FROM documents").fetchone() or (-1,)
        (passages,) = conn.execute("SELECT count(*) FROM passages").fetchone() or (-1,)
        (vectors,) = conn.execute("SELECT count(*) FROM passage_vectors").fetchone() or (-1,)
        if documents != meta.documents or not passages == vectors == meta.passages:
            return None
        (superseded,) = conn.execute("SELECT count(*) FROM documents WHERE status = 'superseded'").fetchone() or (0,)
        return KeptIndex(meta, int(superseded))
    except (apsw.Error, GovernedEvidenceError):
        return None
    finally:
        conn.close()
