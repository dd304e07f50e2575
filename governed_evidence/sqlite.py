"""Opening the one SQLite file, as every part that keeps data in it does.

apsw, not the standard ``sqlite3`` module: many Python builds cannot load SQLite
extensions, and apsw bundles a current SQLite with FTS5 everywhere. sqlite-vec is loaded
on every connection, because the index's vector table must be readable whichever part
opened the file (the statistics cache shares the index file).
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path

import apsw
import sqlite_vec

__all__ = ["BUSY_TIMEOUT_MS", "open_database"]

#: How long a writer waits for another process's lock before failing.
BUSY_TIMEOUT_MS = 5000


def open_database(path: Path, *, readonly: bool) -> apsw.Connection:
    """Open ``path`` with sqlite-vec loaded. A read-only open never creates the file (the
    caller checks that it exists; SQLite then refuses a missing one)."""
    if readonly:
        uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
        conn = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    else:
        conn = apsw.Connection(str(path))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    return conn
