"""The index's identity as one level sees it.

The fingerprint digests every passage at or below the level, in citation order: its
citation id, its level, whether it is searchable, and the SHA-256 of its text. Nothing
above the level enters it, so it does not move when only documents above the caller's
clearance change, and two indexes that serve a level the same passages give that level
the same fingerprint, whenever and however they were built (the build time is left out).

It is computed once per index file and level (a rebuild is a new file) and kept: reading
every visible passage's text costs about as much as one ingest's hashing (tens of
milliseconds at ten thousand passages), paid by the first receipt of a level.
"""

from __future__ import annotations

import hashlib
import threading
from typing import TYPE_CHECKING

import apsw

from governed_evidence.config import Classification
from governed_evidence.receipts.canonical import b64url
from governed_evidence.receipts.model import IndexIdentity

if TYPE_CHECKING:
    from governed_evidence.store.connection import IndexReader

__all__ = ["Fingerprints", "level_fingerprint"]


def level_fingerprint(conn: apsw.Connection, level: Classification) -> str:
    """SHA-256 (base64url) over the passages visible at ``level``."""
    digest = hashlib.sha256()
    rows = conn.execute(
        "SELECT citation_id, classification, searchable, text FROM passages "
        "WHERE classification <= ? ORDER BY citation_id",
        (int(level),),
    )
    for citation_id, classification, searchable, text in rows:
        digest.update(f"{citation_id}\x00{int(classification)}\x00{int(bool(searchable))}\x00".encode())
        digest.update(hashlib.sha256(str(text).encode("utf-8")).digest())
    return b64url(digest.digest())


class Fingerprints:
    """Each level's index identity, per index file generation."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, Classification], tuple[tuple[int, int], IndexIdentity]] = {}
        self._lock = threading.Lock()

    def identity(self, reader: IndexReader, level: Classification) -> IndexIdentity:
        generation, conn, meta = reader.snapshot()
        key = (str(reader.path), level)
        known = self._known.get(key)
        if known is not None and known[0] == generation:
            return known[1]
        with self._lock:
            known = self._known.get(key)
            if known is not None and known[0] == generation:
                return known[1]
            identity = IndexIdentity(fp=level_fingerprint(conn, level), model=meta.embedding_model)
            self._known[key] = (generation, identity)
        return identity
