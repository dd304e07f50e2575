"""The start-up heap left out of garbage collection once the server is ready to answer.

A served process imports about 130,000 container objects (fastmcp, the MCP SDK, pydantic's
schemas, the project's models) that live until it exits. Python's cyclic collector walks all
of them on every full (oldest-generation) collection, and the allocations of requests
trigger those now and then: a search leaves no reference cycle (tests/search/
test_candidates.py), but each MCP tool call leaves about 16 cyclic objects in the MCP SDK's
session machinery, so collections still run. One full collection over that heap took
87-152 ms in the 10k-passage search benchmark, 30 searches' time (docs/performance.md, "The
start-up heap frozen"). ``gc.freeze`` moves every object tracked so far to a permanent
generation that collections skip; what requests allocate afterwards is collected as before.

No ``gc.collect`` first: it would cost start-up a full collection (tens of milliseconds)
to reclaim the little garbage the imports leave, which then stays, once, for the process's
life.

For the same reason the collector is paused while the server starts (:func:`pause_collection`):
the imports allocate those objects by the hundred thousand, and every 700 allocations start
a collection that walks the young ones, every tenth of those the middle generation, and now
and then all of them, to free almost nothing. Importing fastmcp, the MCP SDK and pydantic's
schemas took 0.75 s with the collector running and 0.66 s without it (docs/performance.md).
The freeze turns the collector back on.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_startup_heap", "pause_collection", "resume_collection"]


def pause_collection() -> None:
    """No cyclic collection until :func:`freeze_startup_heap` (or :func:`resume_collection`)."""
    gc.disable()


def resume_collection() -> None:
    """Collect again (a start-up that fails before the freeze)."""
    gc.enable()


def freeze_startup_heap() -> int:
    """Leave every object tracked so far out of future collections, and collect again from now
    on; returns how many are frozen."""
    gc.freeze()
    gc.enable()
    return gc.get_freeze_count()
