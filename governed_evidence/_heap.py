"""The start-up heap left out of garbage collection once the server is ready to answer.

A served process imports about 130,000 container objects (fastmcp, the MCP SDK, pydantic's
schemas, the project's models) that live until it exits. Python's cyclic collector still
walks all of them on every full (oldest-generation) collection, which the allocations of
ordinary requests trigger now and then: measured on a 10k-passage index with the server's
imports loaded, one such collection in 900 searches, taking 144-152 ms (30 searches' time),
in each of three runs; none once frozen (docs/performance.md, "The start-up heap frozen").
``gc.freeze`` moves every object tracked so far to a permanent generation that collections
skip; what requests allocate afterwards is collected as before.

No ``gc.collect`` first: it would cost start-up a full collection (tens of milliseconds)
to reclaim the little garbage the imports leave, which then stays, once, for the process's
life.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_startup_heap"]


def freeze_startup_heap() -> int:
    """Leave every object tracked so far out of future collections; returns how many are frozen."""
    gc.freeze()
    return gc.get_freeze_count()
