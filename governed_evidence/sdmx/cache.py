"""Response cache and persisted rate ledger, in the index file or a writable fallback.

Where the tables live (see docs/adr/0006-sdmx-cache-location.md):

- ``index``: the index file itself, when it exists and can be written.
- ``file``: the operator's ``GOVERNED_EVIDENCE_SDMX_CACHE_PATH``, when the index file is
  read-only (an immutable container image) or absent.
- ``memory``: neither is writable; the cache and the ledger last as long as the process,
  which :meth:`CacheStore.location` reports so ``index_status`` can say so.

A damaged file is not a read-only one: if the chosen file is corrupt the store does not
fall back (that would reset the budget), and every request is refused until an operator
repairs or removes it. The ledger fails closed the same way when its rows are implausible.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import apsw

from governed_evidence.errors import RateLedgerError, RateLimitedError
from governed_evidence.logging import get_logger
from governed_evidence.sdmx.catalogue import CatalogueRow
from governed_evidence.sdmx.schema import SDMX_SCHEMA_VERSION, schema_sql
from governed_evidence.sdmx.urls import Kind, SdmxRequest
from governed_evidence.store.connection import connect

__all__ = ["CacheEntry", "CacheLocation", "CacheStore", "RateLedger", "ResponseCache"]

log = get_logger("sdmx.cache")

CacheMode = Literal["index", "file", "memory"]
#: Budgets are per rolling hour.
WINDOW_S = 3600.0
#: A ledger entry further in the future than this means a tampered file or a clock jump.
CLOCK_SKEW_S = 300.0
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
    conn = connect(path, readonly=False)
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
        probe = connect(path, readonly=True)
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


@dataclass(frozen=True)
class CacheEntry:
    """A stored response (body decompressed)."""

    provider: str
    request: str
    kind: Kind
    status: int
    content_type: str
    body: bytes
    body_sha256: str
    size: int
    fetched_at: float
    expires_at: float
    source_url: str

    def fresh(self, now: float) -> bool:
        return now < self.expires_at

    def age(self, now: float) -> float:
        return max(0.0, now - self.fetched_at)


class ResponseCache:
    """Responses keyed by provider + normalised request, kept past expiry for stale service.

    A cache that cannot be read or written degrades to a miss (logged); only the ledger
    must fail closed.
    """

    def __init__(self, store: CacheStore, *, max_bytes: int, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.max_bytes = max_bytes
        self.clock = clock

    def get(self, request: SdmxRequest) -> CacheEntry | None:
        try:
            with self.store.connection() as conn:
                row = conn.execute(
                    "SELECT kind, status, content_type, body, body_sha256, size, fetched_at, expires_at, source_url "
                    "FROM sdmx_cache WHERE provider = ? AND request = ?",
                    (request.provider, request.cache_key),
                ).fetchone()
        except (apsw.Error, RateLimitedError) as exc:
            log.warning("sdmx_cache_read_failed", error=type(exc).__name__)
            return None
        if row is None:
            return None
        kind, status, content_type, stored, sha, size, fetched_at, expires_at, source_url = row
        try:
            body = zlib.decompress(stored)
        except zlib.error:
            body = b""
        if hashlib.sha256(body).hexdigest() != sha:
            log.warning("sdmx_cache_entry_damaged", provider=request.provider)
            self.delete(request)
            return None
        return CacheEntry(
            request.provider, request.cache_key, kind, int(status), str(content_type), body, str(sha),
            int(size), float(fetched_at), float(expires_at), str(source_url),
        )  # fmt: skip

    def put(
        self, request: SdmxRequest, *, status: int, content_type: str, body: bytes, source_url: str, ttl_s: float
    ) -> CacheEntry:
        now = self.clock()
        sha = hashlib.sha256(body).hexdigest()
        stored = zlib.compress(body, 6)
        entry = CacheEntry(
            request.provider, request.cache_key, request.kind, status, content_type, body, sha, len(body),
            now, now + ttl_s, source_url,
        )  # fmt: skip
        try:
            with self.store.connection() as conn, conn:
                conn.execute(
                    "INSERT OR REPLACE INTO sdmx_cache(provider, request, kind, status, content_type, body, "
                    "body_sha256, size, stored_size, fetched_at, expires_at, source_url) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        request.provider, request.cache_key, request.kind, status, content_type, stored, sha,
                        len(body), len(stored), now, now + ttl_s, source_url,
                    ),
                )  # fmt: skip
                self._evict(conn, now)
        except (apsw.Error, RateLimitedError) as exc:
            log.warning("sdmx_cache_write_failed", error=type(exc).__name__)
        return entry

    def delete(self, request: SdmxRequest) -> None:
        with contextlib.suppress(apsw.Error, RateLimitedError), self.store.connection() as conn:
            conn.execute(
                "DELETE FROM sdmx_cache WHERE provider = ? AND request = ?", (request.provider, request.cache_key)
            )

    def _evict(self, conn: apsw.Connection, now: float) -> None:
        (total_value,) = conn.execute("SELECT coalesce(sum(stored_size), 0) FROM sdmx_cache").fetchone() or (0,)
        total = _int(total_value)
        if total <= self.max_bytes:
            return
        # Expired entries go first, then the oldest; the newest entry is never evicted.
        victims = conn.execute(
            "SELECT provider, request, stored_size FROM sdmx_cache "
            "ORDER BY (expires_at <= ?) DESC, fetched_at ASC LIMIT (SELECT count(*) - 1 FROM sdmx_cache)",
            (now,),
        ).fetchall()
        for provider, request, stored_size in victims:
            if total <= self.max_bytes:
                break
            conn.execute("DELETE FROM sdmx_cache WHERE provider = ? AND request = ?", (provider, request))
            total -= _int(stored_size)
        conn.execute(
            "DELETE FROM sdmx_catalogue WHERE NOT EXISTS (SELECT 1 FROM sdmx_cache c "
            "WHERE c.provider = sdmx_catalogue.provider AND c.body_sha256 = sdmx_catalogue.body_sha256)"
        )

    def save_catalogue(self, provider: str, body_sha256: str, rows: list[CatalogueRow]) -> None:
        """Persist a parsed catalogue so later processes search it without re-parsing."""
        try:
            with self.store.connection() as conn, conn:
                conn.execute("DELETE FROM sdmx_catalogue WHERE provider = ?", (provider,))
                conn.executemany(
                    "INSERT INTO sdmx_catalogue(provider, body_sha256, position, agency, dataset_id, version, "
                    "name, description) VALUES (?,?,?,?,?,?,?,?)",
                    [
                        (provider, body_sha256, i, r.agency, r.dataset_id, r.version, r.name, r.description)
                        for i, r in enumerate(rows)
                    ],
                )
        except (apsw.Error, RateLimitedError) as exc:
            log.warning("sdmx_cache_write_failed", error=type(exc).__name__)

    def load_catalogue(self, provider: str, body_sha256: str) -> list[CatalogueRow] | None:
        try:
            with self.store.connection() as conn:
                rows = conn.execute(
                    "SELECT agency, dataset_id, version, name, description FROM sdmx_catalogue "
                    "WHERE provider = ? AND body_sha256 = ? ORDER BY position",
                    (provider, body_sha256),
                ).fetchall()
        except (apsw.Error, RateLimitedError) as exc:
            log.warning("sdmx_cache_read_failed", error=type(exc).__name__)
            return None
        return [CatalogueRow(*map(str, r)) for r in rows] or None

    def stats(self) -> dict[str, int]:
        """Entry counts per kind, stale entries and bytes; empty when the cache is unreadable."""
        try:
            with self.store.connection() as conn:
                rows = conn.execute(
                    "SELECT kind, count(*), coalesce(sum(size), 0), coalesce(sum(stored_size), 0), "
                    "coalesce(sum(expires_at <= ?), 0) FROM sdmx_cache GROUP BY kind",
                    (self.clock(),),
                ).fetchall()
        except (apsw.Error, RateLimitedError):
            return {}
        out = {"entries": 0, "bytes": 0, "stored_bytes": 0, "expired": 0}
        for kind, count, size, stored, expired in rows:
            out[f"{kind}_entries"] = _int(count)
            out["entries"] += _int(count)
            out["bytes"] += _int(size)
            out["stored_bytes"] += _int(stored)
            out["expired"] += _int(expired)
        return out


class RateLedger:
    """Requests per provider and budget over the last hour, persisted before each request.

    The check and the insert are one ``BEGIN IMMEDIATE`` transaction, so two processes
    sharing the file cannot both take the last slot, and a restart sees every request
    already made. Anything unexpected when reading it refuses the request.
    """

    def __init__(self, store: CacheStore, *, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock

    def _window(self, conn: apsw.Connection, provider: str, bucket: str, now: float) -> list[float]:
        rows = conn.execute(
            "SELECT typeof(at), at FROM sdmx_rate_ledger WHERE provider = ? AND bucket = ? AND at > ? ORDER BY at",
            (provider, bucket, now - WINDOW_S),
        ).fetchall()
        times: list[float] = []
        for kind, at in rows:
            if kind != "real" or not isinstance(at, float) or at > now + CLOCK_SKEW_S:
                raise _ImplausibleLedgerError
            times.append(at)
        return times

    def acquire(self, provider: str, bucket: Literal["data", "structure"], limit: int) -> None:
        """Record one request, or raise if the budget is spent or the ledger cannot be trusted."""
        now = self.clock()
        with self.store.connection() as conn:
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    times = self._window(conn, provider, bucket, now)
                    if len(times) >= limit:
                        conn.execute("ROLLBACK")
                        wait = max(1.0, times[len(times) - limit] + WINDOW_S - now)
                        raise RateLimitedError(
                            f"this server's budget of {limit} {bucket} requests per hour to {provider} is spent; "
                            f"retry in about {int(wait) + 1} s",
                            retry_after_s=wait,
                        )
                    conn.execute(
                        "INSERT INTO sdmx_rate_ledger(provider, bucket, at) VALUES (?, ?, ?)", (provider, bucket, now)
                    )
                    conn.execute("DELETE FROM sdmx_rate_ledger WHERE at <= ?", (now - WINDOW_S,))
                    conn.execute("COMMIT")
                except BaseException:
                    if not conn.getautocommit():
                        conn.execute("ROLLBACK")
                    raise
            except (apsw.Error, _ImplausibleLedgerError) as exc:
                log.error("sdmx_ledger_unusable", provider=provider, error=type(exc).__name__)
                raise RateLedgerError(
                    "the request budget ledger cannot be read or is inconsistent; no request was sent "
                    "(an operator must repair or remove the statistics cache)"
                ) from None

    def usage(self, provider: str, bucket: str) -> int | None:
        """Requests in the current window, or None when the ledger cannot be trusted."""
        now = self.clock()
        try:
            with self.store.connection() as conn:
                return len(self._window(conn, provider, bucket, now))
        except (apsw.Error, _ImplausibleLedgerError, RateLimitedError):
            return None


class _ImplausibleLedgerError(Exception):
    """A ledger row of the wrong type or from the future."""


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float) else 0
