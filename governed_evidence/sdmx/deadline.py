"""One overall deadline per tool call, shared by every provider request the call makes.

A tool call may ask a provider several times (the catalogue to resolve a bare id, the
structure, the data), and each request may be retried. Bounding each attempt alone let a
silent provider hold a call for three attempts of twice the read timeout, longer than MCP
clients wait for an answer. The service opens :func:`call_deadline` around each tool call;
the client starts no attempt and no wait that cannot end before it, and the transport cuts
every socket operation at it.

Monotonic time, as the transport's per-attempt bound uses.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Deadline", "call_deadline"]


@dataclass(frozen=True)
class Deadline:
    """When the current call must be done (``at``, monotonic) and how long it was given."""

    seconds: float
    at: float

    def left(self) -> float:
        """Seconds until the deadline (negative once it has passed)."""
        return self.at - time.monotonic()


_CURRENT: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("sdmx_call_deadline", default=None)


@contextlib.contextmanager
def call_deadline(seconds: float) -> Iterator[Deadline]:
    """Within this block, provider requests end by ``seconds`` from now.

    An enclosing block's deadline holds: the service opens one per tool call and the client
    one per request, so a request made outside a tool call is bounded too.
    """
    current = _CURRENT.get()
    if current is not None:
        yield current
        return
    deadline = Deadline(seconds, time.monotonic() + seconds)
    token = _CURRENT.set(deadline)
    try:
        yield deadline
    finally:
        _CURRENT.reset(token)
