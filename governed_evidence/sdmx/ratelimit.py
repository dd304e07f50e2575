"""The rate limit: requests per provider and budget over the last hour, in a persisted ledger.

Each provider has two budgets (``data`` downloads and ``structure`` requests, the
catalogue included) set in ``providers.toml``. A request is recorded in the ledger table
before it is sent, so a restart, or a second process sharing the file, sees every request
already made; the budget therefore holds across both. The ledger fails closed: a row of
the wrong type or from the future, or a file that cannot be read, refuses the request
rather than resetting the budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

import apsw

from governed_evidence.errors import RateLedgerError, RateLimitedError
from governed_evidence.logging import get_logger
from governed_evidence.sdmx.providers import Provider
from governed_evidence.sdmx.store import CacheStore

__all__ = ["CLOCK_SKEW_S", "WINDOW_S", "Bucket", "RateLedger", "hourly_limit"]

log = get_logger("sdmx.cache")

Bucket = Literal["data", "structure"]
#: Budgets are per rolling hour.
WINDOW_S = 3600.0
#: A ledger entry further in the future than this means a tampered file or a clock jump.
CLOCK_SKEW_S = 300.0


def hourly_limit(provider: Provider, bucket: Bucket) -> int:
    """Requests per hour this server allows itself against ``provider`` in ``bucket``."""
    return provider.data_per_hour if bucket == "data" else provider.structure_per_hour


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

    def acquire(self, provider: str, bucket: Bucket, limit: int) -> None:
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
