"""FastMCP's per-session state, held in a dict instead of py-key-value's store.

FastMCP reads each session's tool visibility rules from its state store on every
``tools/list`` and ``tools/call``. Its own store is py-key-value's in-memory store behind
that package's pydantic adapter, and importing py-key-value imports beartype and runs its
import hook over the whole package: about 0.11 s of every server start, before the first
answer (docs/performance.md, "Start-up"). This server keeps no session state: it sets no
visibility rules and no tool reads or writes a context's state. So the app holds what
FastMCP would put there in this dict, with the adapter's behaviour where FastMCP relies on
it: values are copied in and out (a caller never aliases a stored value), ``collection``
separates keys, and an entry past its ``ttl`` is gone. Like FastMCP's default store it has no
size limit; nothing in this server writes to it.

FastMCP asks for the store through its ``_state_store`` property (not a public hook: the
constructor's ``session_state_store`` only replaces the store under the adapter, whose import
is the cost). ``tests/mcp/test_startup.py`` checks that a search served by a fresh ``serve``
process imports neither package, so an upgrade of FastMCP that stops reading this property
fails a test instead of silently bringing the import back; ``tests/mcp/test_state.py`` checks
that a client observes the same session state through this store as through FastMCP's own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Generic, SupportsFloat, TypeVar

from pydantic import BaseModel

__all__ = ["SessionState"]

M = TypeVar("M", bound=BaseModel)

#: The adapter's default collection for FastMCP's state (``fastmcp_state``).
_DEFAULT_COLLECTION = "fastmcp_state"


class SessionState(Generic[M]):
    """Pydantic values by (collection, key), with an optional lifetime in seconds."""

    def __init__(self, model: type[M], clock: Callable[[], float] = time.monotonic) -> None:
        self._model = model
        self._clock = clock
        #: (collection, key) -> (the value as JSON, its expiry or None). Held as text, not as
        #: the model: a reader then gets its own copy, nested lists and dicts included.
        self._entries: dict[tuple[str, str], tuple[str, float | None]] = {}

    def _live(self, key: str, collection: str | None) -> str | None:
        slot = (collection or _DEFAULT_COLLECTION, key)
        entry = self._entries.get(slot)
        if entry is None:
            return None
        data, expires = entry
        if expires is not None and self._clock() >= expires:
            del self._entries[slot]
            return None
        return data

    async def get(self, key: str, *, collection: str | None = None, default: M | None = None) -> M | None:
        data = self._live(key, collection)
        return default if data is None else self._model.model_validate_json(data)

    async def put(self, key: str, value: M, *, collection: str | None = None, ttl: SupportsFloat | None = None) -> None:
        expires = None if ttl is None else self._clock() + float(ttl)
        self._entries[(collection or _DEFAULT_COLLECTION, key)] = (value.model_dump_json(), expires)

    async def delete(self, key: str, *, collection: str | None = None) -> bool:
        found = self._live(key, collection) is not None
        self._entries.pop((collection or _DEFAULT_COLLECTION, key), None)
        return found
