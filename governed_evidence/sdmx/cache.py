"""The response cache: provider answers keyed by provider and normalised request.

Entries are kept past their expiry, so that an answer the provider cannot give just now
can be served from a stale copy (flagged as such by the fetch path,
:mod:`~governed_evidence.sdmx.fetch`). Bodies are stored compressed with their SHA-256,
and an entry whose body no longer matches is dropped. The cache is bounded by its stored
bytes: expired entries are evicted first, then the oldest, never the newest. Parsed
catalogues are persisted beside the responses they came from, so a later process
searches a catalogue without parsing it again.

A cache that cannot be read or written degrades to a miss (logged); only the rate ledger
(:mod:`~governed_evidence.sdmx.ratelimit`) must fail closed.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import apsw

from governed_evidence.errors import RateLimitedError
from governed_evidence.logging import get_logger
from governed_evidence.sdmx.catalogue import CatalogueRow
from governed_evidence.sdmx.store import CacheStore
from governed_evidence.sdmx.urls import Kind, SdmxRequest

__all__ = ["CacheEntry", "ResponseCache"]

log = get_logger("sdmx.cache")


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
                    # Made as they are written, not listed first: 50,000 rows' tuples held at
                    # once were 7 MB beside the rows and the body, the peak of reading a catalogue.
                    (
                        (provider, body_sha256, i, r.agency, r.dataset_id, r.version, r.name, r.description)
                        for i, r in enumerate(rows)
                    ),
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
        # Agencies and versions repeat over the rows: held once each, as when parsed.
        return [
            CatalogueRow(sys.intern(str(a)), str(i), sys.intern(str(v)), str(n), str(d)) for a, i, v, n, d in rows
        ] or None

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


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float) else 0
