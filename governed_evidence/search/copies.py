"""Read-only copies of one index file in memory: copied in the background, under one budget.

Two derived structures are served from memory: the vector matrix (:mod:`vectors`) and the
keyword impact lists (:mod:`impacts`). Both are copies of what the index file stores, keyed by
the file's identity (its generation), dropped when a rebuild replaces the file, never larger
than what the shared :class:`MemoryBudget` has left, and stopped at shutdown. While a copy is
not held the caller answers from the index file itself: the same ranking, only slower.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

import apsw

from governed_evidence.config import Classification
from governed_evidence.errors import IndexUnavailableError
from governed_evidence.logging import get_logger
from governed_evidence.store.connection import IndexReader

__all__ = ["Copier", "MemoryBudget", "MemoryCopy"]

log = get_logger("search")


class _Sized(Protocol):
    @property
    def rows(self) -> int: ...

    @property
    def nbytes(self) -> int: ...


T = TypeVar("T", bound=_Sized)
T_co = TypeVar("T_co", bound=_Sized, covariant=True)


class Copier(Protocol[T_co]):
    """How one kind of copy is sized and taken from an open index file."""

    #: Names the copy in log events (``<kind>_in_memory``, ``<kind>_not_held_in_memory``).
    kind: str

    def needed_bytes(self, conn: apsw.Connection, level: Classification) -> int: ...

    def copy(self, conn: apsw.Connection, level: Classification, cancelled: Callable[[], bool]) -> T_co | None: ...


class MemoryBudget:
    """Bytes of in-memory copies one process may hold, shared by every ceiling it serves.

    A server answering callers of several clearances holds one copy per level (a copy
    never mixes levels: a public caller's scan never touches an internal passage). The
    levels and both kinds of copy draw on this one budget, so they never cost more than it:
    a copy that does not fit is not taken, and its level is answered from the index file.
    """

    def __init__(self, total_bytes: int) -> None:
        self.total_bytes = total_bytes
        self._reserved: dict[int, int] = {}
        self._lock = threading.Lock()

    def reserve(self, owner: object, nbytes: int) -> bool:
        """Hold ``nbytes`` for ``owner`` (replacing what it held) if they fit beside the others'."""
        with self._lock:
            others = sum(n for key, n in self._reserved.items() if key != id(owner))
            if others + nbytes > self.total_bytes:
                return False
            self._reserved[id(owner)] = nbytes
            return True

    def release(self, owner: object) -> None:
        with self._lock:
            self._reserved.pop(id(owner), None)


class MemoryCopy(Generic[T]):
    """One in-memory copy of one index file, for one ceiling, reloaded per file generation."""

    def __init__(self, reader: IndexReader, memory: int | MemoryBudget, ceiling: Classification) -> None:
        self._reader = reader
        #: A budget of 0: never held; the index file answers every query.
        self._budget = memory if isinstance(memory, MemoryBudget) else MemoryBudget(memory)
        self.memory_bytes = self._budget.total_bytes
        self._ceiling = ceiling
        self._copy: tuple[tuple[int, int], T] | None = None
        self._attempted: set[tuple[int, int]] = set()
        # Two locks: a search only ever takes the short one, so it never waits for a copy.
        self._attempt_lock = threading.Lock()
        self._load_lock = threading.Lock()
        self._closing = threading.Event()

    @property
    def copy(self) -> T | None:
        """The copy held now, whichever file generation it belongs to."""
        current = self._copy
        return current[1] if current is not None else None

    @property
    def generation(self) -> tuple[int, int] | None:
        """The file generation of the copy held now (None without one)."""
        current = self._copy
        return current[0] if current is not None else None

    def get(self, generation: tuple[int, int], level: Classification, copier: Copier[T]) -> T | None:
        """The copy of this file generation, or None (and a background copy is started)."""
        current = self._copy
        if current is not None and current[0] == generation:
            return current[1]
        if self.memory_bytes <= 0 or self._closing.is_set():
            return None
        with self._attempt_lock:
            if generation in self._attempted:
                return None
            self._attempted.add(generation)
        threading.Thread(
            target=self._background, args=(generation, level, copier), name=f"{copier.kind}-load", daemon=True
        ).start()
        return None

    def close(self) -> None:
        """Stop any copy in progress (the process is shutting down)."""
        self._closing.set()

    def _background(self, generation: tuple[int, int], level: Classification, copier: Copier[T]) -> None:
        try:
            current, conn, _ = self._reader.snapshot()
            # A rebuild landed since the request: the next query asks for the new file.
            if current == generation:
                self.load(generation, conn, level, copier)
        except IndexUnavailableError:
            pass
        finally:
            # This thread's connection is not needed again.
            self._reader.close()

    def load(
        self, generation: tuple[int, int], conn: apsw.Connection, level: Classification, copier: Copier[T]
    ) -> None:
        """Take the copy of ``generation`` now, unless held already or over the budget."""
        with self._load_lock:
            current = self._copy
            if current is not None and current[0] == generation:
                return
            with self._attempt_lock:
                self._attempted.add(generation)
            if self.memory_bytes <= 0 or self._closing.is_set():
                return
            needed = copier.needed_bytes(conn, level)
            # Drop the previous file's copy first, so a rebuild never holds two.
            self._copy = None
            self._budget.release(self)
            if needed == 0:
                # An empty level: the index file answers it as fast.
                return
            if needed < 0 or not self._budget.reserve(self, needed):
                log.warning(
                    f"{copier.kind}_not_held_in_memory",
                    reason="cannot be held"
                    if needed < 0
                    else "larger than the memory budget"
                    if needed > self.memory_bytes
                    else "the memory budget is held by the other copies",
                    needed_mb=round(needed / 2**20, 1),
                    budget_mb=round(self.memory_bytes / 2**20, 1),
                    ceiling=self._ceiling.label,
                )
                return
            started = time.perf_counter()
            try:
                copy = copier.copy(conn, level, self._closing.is_set)
            except (apsw.Error, ValueError) as exc:
                self._budget.release(self)
                log.warning(f"{copier.kind}_not_held_in_memory", reason=type(exc).__name__)
                return
            if copy is None:
                self._budget.release(self)
                return
            # What the copy turned out to need (an estimate was reserved before it existed).
            self._budget.reserve(self, copy.nbytes)
            self._copy = (generation, copy)
        log.info(
            f"{copier.kind}_in_memory",
            rows=copy.rows,
            mb=round(copy.nbytes / 2**20, 1),
            ceiling=self._ceiling.label,
            ms=round((time.perf_counter() - started) * 1000, 1),
        )
