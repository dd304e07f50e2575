"""One search service per classification level served, their in-memory copies under one budget.

Over stdio one process serves one ceiling. A team server answers callers of different
clearances in one process: each request is served by the service *at the caller's level*
(the lower of the server's ceiling and the caller's clearance), so the ceiling is applied
exactly as it is over stdio, inside both rankings, and the in-memory vectors of one level
never hold a passage above it. The services share the query embedder (one model in memory)
and one :class:`~governed_evidence.search.copies.MemoryBudget` for their in-memory copies.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from governed_evidence.config import Classification

if TYPE_CHECKING:
    from governed_evidence.search.service import SearchService

__all__ = ["LevelServices"]


class LevelServices:
    """The services of one index file, one per level up to ``ceiling``."""

    def __init__(
        self,
        make: Callable[[Classification], SearchService],
        ceiling: Classification,
    ) -> None:
        self._make = make
        self.ceiling = ceiling
        self._services: dict[Classification, SearchService] = {}
        self._lock = threading.Lock()
        self._warming: list[threading.Thread] = []

    @classmethod
    def single(cls, service: SearchService) -> LevelServices:
        """The services of a process serving one ceiling (stdio): that service, and no other."""
        services = cls(lambda _level: service, service.ceiling)
        services._services[service.ceiling] = service
        return services

    def at(self, level: Classification) -> SearchService:
        """The service for callers cleared to ``level`` (never above the server's ceiling)."""
        level = min(level, self.ceiling)
        service = self._services.get(level)
        if service is not None:
            return service
        with self._lock:
            service = self._services.get(level)
            if service is None:
                # Its copies (vectors, impact lists) are made on first need (MemoryCopy), or at
                # start by warm_all.
                service = self._make(level)
                self._services[level] = service
        return service

    def warm_in_background(self, service: SearchService) -> None:
        """Load ``service``'s query embedder, vectors and impact lists in a thread :meth:`close`
        waits for."""
        thread = threading.Thread(target=service.warm, name=f"vector-warmup-{service.ceiling.label}", daemon=True)
        thread.start()
        self._warming.append(thread)

    def warm_all(self) -> None:
        """Make every level up to the ceiling now and copy their vectors and impact lists, in a
        fixed order.

        From public upward, one level after another in one thread: which levels' copies fit
        the shared budget is then decided at start-up by the index alone, the same on every
        replica, never by which caller happened to come first (a level left out answers
        from the vec0 KNN and FTS5: the same ranking, slower).
        """
        services = [self.at(level) for level in Classification if level <= self.ceiling]

        def warm() -> None:
            for service in services:
                service.warm()

        thread = threading.Thread(target=warm, name="vector-warmup", daemon=True)
        thread.start()
        self._warming.append(thread)

    @property
    def top(self) -> SearchService:
        """The service at the server's ceiling."""
        return self.at(self.ceiling)

    def made(self) -> list[SearchService]:
        with self._lock:
            return list(self._services.values())

    def wait(self) -> None:
        """Wait until the copies started so far are done."""
        for thread in list(self._warming):
            thread.join()

    def close(self) -> None:
        """Stop copies in progress and wait for them (the process is shutting down)."""
        for service in self.made():
            service.close()
        self.wait()
