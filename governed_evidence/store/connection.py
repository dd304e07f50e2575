"""Connections to the index (see :mod:`governed_evidence.sqlite`) and a thread-aware reader
for serving that follows atomic rebuilds."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

import apsw

from governed_evidence.errors import IndexCorruptError, IndexMissingError
from governed_evidence.sqlite import open_database
from governed_evidence.store.meta import IndexMeta

__all__ = ["IndexReader", "connect", "meta_rows", "read_meta"]


def connect(path: Path, *, readonly: bool) -> apsw.Connection:
    """Open the index at ``path`` with sqlite-vec loaded. Read-only opens never create the file."""
    if readonly and not path.is_file():
        raise IndexMissingError("no evidence index found; build one with `governed-evidence ingest --corpus DIR`")
    return open_database(path, readonly=readonly)


def meta_rows(conn: apsw.Connection) -> dict[str, str]:
    """The raw ``meta`` table, whatever schema wrote it; a file without it is not an index."""
    try:
        rows = conn.execute("SELECT key, value FROM meta").fetchall()
    except apsw.Error as exc:
        raise IndexCorruptError("the index file is not a governed-evidence index or is damaged; rebuild it") from exc
    return {str(k): str(v) for k, v in rows}


def read_meta(conn: apsw.Connection) -> IndexMeta:
    """The index's description; refuses a file of another schema version."""
    return IndexMeta.from_rows(meta_rows(conn))


@dataclass(frozen=True)
class _Generation:
    # Only the file's identity: a rebuild renames a new file (a new inode) into place,
    # while the SDMX cache writing into the same file must not look like a rebuild.
    device: int
    inode: int


class IndexReader:
    """Per-thread read-only connections that follow atomic rebuilds.

    A rebuild renames a new file over the old one; each call re-checks the file identity
    (one ``stat``: device and inode) and reopens when it changed, so a reader never sees a half-built index
    and picks up a finished one without a restart.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()

    def _generation(self) -> _Generation:
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            # NotADirectoryError: a path component is a file, so no index can be there either.
            raise IndexMissingError(
                "no evidence index found; build one with `governed-evidence ingest --corpus DIR`"
            ) from None
        return _Generation(st.st_dev, st.st_ino)

    def generation(self) -> tuple[int, int]:
        """Identity of the file currently served (changes when a rebuild is published)."""
        g = self._generation()
        return g.device, g.inode

    def connection(self) -> tuple[apsw.Connection, IndexMeta]:
        """This thread's connection and the index metadata it serves."""
        _, conn, meta = self.snapshot()
        return conn, meta

    def snapshot(self) -> tuple[tuple[int, int], apsw.Connection, IndexMeta]:
        """Like :meth:`connection`, with the identity of the file that connection reads."""
        generation = self._generation()
        cached = getattr(self._local, "state", None)
        if cached is not None and cached[0] == generation:
            return (generation.device, generation.inode), cached[1], cached[2]
        if cached is not None:
            cached[1].close()
            self._local.state = None
        conn = connect(self.path, readonly=True)
        try:
            meta = read_meta(conn)
        except Exception:
            conn.close()
            raise
        self._local.state = (generation, conn, meta)
        return (generation.device, generation.inode), conn, meta

    def close(self) -> None:
        cached = getattr(self._local, "state", None)
        if cached is not None:
            cached[1].close()
            self._local.state = None
