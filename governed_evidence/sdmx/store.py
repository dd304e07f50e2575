"""Where the SDMX tables live: the index file, a writable fallback file, or memory.

The response cache (:mod:`~governed_evidence.sdmx.cache`) and the rate ledger
(:mod:`~governed_evidence.sdmx.ratelimit`) share one connection, opened here; the tables
themselves are :mod:`~governed_evidence.sdmx.schema`. Where they go (see
docs/adr/0006-sdmx-cache-location.md):

- ``index``: the index file itself, when it exists and can be written.
- ``file``: the operator's ``GOVERNED_EVIDENCE_SDMX_CACHE_PATH``, when the index file is
  read-only (an immutable container image) or absent.
- ``memory``: neither is writable; the cache and the ledger last as long as the process,
  which :attr:`CacheStore.location` reports so ``index_status`` can say so.

A damaged file is not a read-only one: if the chosen file is corrupt the store does not
fall back (that would reset the budget), and every request is refused until an operator
repairs or removes it.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import apsw

from governed_evidence.errors import RateLedgerError
from governed_evidence.logging import get_logger
from governed_evidence.sdmx.schema import SDMX_SCHEMA_VERSION, schema_sql
from governed_evidence.sqlite import open_database

__all__ = ["CacheLocation", "CacheMode", "CacheStore"]

log = get_logger("sdmx.cache")

CacheMode = Literal["index", "file", "memory"]
#: Errors that mean "cannot write here" (fall back) rather than "this file is damaged".
_NOT_WRITABLE = (apsw.ReadOnlyError, apsw.CantOpenError, apsw.PermissionsError, apsw.IOError, apsw.AuthError)
_DAMAGED = (apsw.CorruptError, apsw.NotADBError)


@dataclass(frozen=True)
class CacheLocation:
    """Where the SDMX tables are, and whether the rate ledger survives a restart."""

    mode: CacheMode
    #: Why the index file is not used, when it is not.
    reason: str | None
    #: None when usable; otherwise why every request is refused.
    failure: str | None = None

    @property
    def persistent(self) -> bool:
        return self.mode != "memory"


def _open_writable(path: Path) -> apsw.Connection:
    """Open ``path`` for writing and create the SDMX tables; a seam for read-only tests."""
    conn = open_database(path, readonly=False)
    try:
        if conn.readonly("main"):
            raise apsw.ReadOnlyError("file is read-only")
        with conn:
            conn.execute(schema_sql())
            conn.execute(
                "INSERT OR IGNORE INTO sdmx_meta(key, value) VALUES ('schema_version', ?)", (str(SDMX_SCHEMA_VERSION),)
            )
    except BaseException:
        conn.close()
        raise
    return conn


def _open_memory() -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    conn.execute(schema_sql())
    return conn


class CacheStore:
    """The connection holding the SDMX tables, shared by the cache and the ledger.

    An index rebuild renames a new file over the old one; in ``index`` mode every use
    re-checks the file's inode and reopens (recreating the tables) when it changed.
    """

    def __init__(self, index_path: Path | None, fallback_path: Path | None) -> None:
        self.index_path = index_path
        self.fallback_path = fallback_path
        self._lock = threading.RLock()
        self._conn: apsw.Connection | None = None
        self._inode: int | None = None
        self.location = self._open()

    def _open(self) -> CacheLocation:
        reason: str | None = None
        if self.index_path is not None and self.index_path.is_file():
            try:
                self._conn = self._open_index(self.index_path)
                self._inode = os.stat(self.index_path).st_ino
                return CacheLocation("index", None)
            except _DAMAGED:
                log.error("sdmx_cache_unusable", mode="index", reason="damaged")
                return CacheLocation("index", None, failure="the index file is damaged")
            except _NOT_WRITABLE as exc:
                reason = "the index file is read-only"
                log.info("sdmx_cache_fallback", reason="read_only", error=type(exc).__name__)
            except _IndexRefusedError as exc:
                reason = str(exc)
            except apsw.Error as exc:
                # Anything else SQLite refuses (e.g. a table replaced by a view) is damage too:
                # fail closed here rather than take the whole server down at start-up.
                log.error("sdmx_cache_unusable", mode="index", reason="damaged", error=type(exc).__name__)
                return CacheLocation("index", None, failure="the index file is damaged")
        else:
            reason = "there is no index file"
        if self.fallback_path is not None:
            try:
                self.fallback_path.parent.mkdir(parents=True, exist_ok=True)
                self._conn = _open_writable(self.fallback_path)
                return CacheLocation("file", reason)
            except _DAMAGED:
                log.error("sdmx_cache_unusable", mode="file", reason="damaged")
                return CacheLocation("file", reason, failure="the SDMX cache file is damaged")
            except (*_NOT_WRITABLE, OSError) as exc:
                log.warning("sdmx_cache_fallback", reason="cache_path_unwritable", error=type(exc).__name__)
                reason = f"{reason}, and the configured cache path is not writable"
            except apsw.Error as exc:
                log.error("sdmx_cache_unusable", mode="file", reason="damaged", error=type(exc).__name__)
                return CacheLocation("file", reason, failure="the SDMX cache file is damaged")
        self._conn = _open_memory()
        return CacheLocation("memory", reason)

    @staticmethod
    def _open_index(path: Path) -> apsw.Connection:
        if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
            # The rollback journal is created beside the file, so the folder must be writable too.
            raise apsw.ReadOnlyError("not writable")
        probe = open_database(path, readonly=True)
        try:
            (is_index,) = probe.execute("SELECT count(*) FROM sqlite_master WHERE name = 'meta'").fetchone() or (0,)
        finally:
            probe.close()
        if not is_index:
            # Never add tables to a file that is not an evidence index.
            raise _IndexRefusedError("the index file is not an evidence index")
        return _open_writable(path)

    @contextlib.contextmanager
    def connection(self) -> Iterator[apsw.Connection]:
        """This store's connection under its lock; raises :class:`RateLedgerError` when unusable."""
        with self._lock:
            if self.location.mode == "index" and self.location.failure is None and self.index_path is not None:
                try:
                    inode: int | None = os.stat(self.index_path).st_ino
                except FileNotFoundError:
                    inode = None
                if inode != self._inode:
                    if self._conn is not None:
                        self._conn.close()
                    self._conn = None
                    self.location = self._open()
            if self.location.failure is not None or self._conn is None:
                raise RateLedgerError(
                    f"the statistics cache is unusable ({self.location.failure}); no request was sent. "
                    "An operator must repair or remove the file."
                )
            yield self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class _IndexRefusedError(Exception):
    """The index path holds something that is not an evidence index."""
