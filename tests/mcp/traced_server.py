"""A traced MCP server over stdio, for tests/mcp/test_tracing.py.

It does about tracing what ``serve`` does (configure from the environment, shut down on the
way out) around one of two apps, so each test gets a process of its own: the global tracer
provider can be set only once per process, and the test's own process stays without an SDK,
a caller that only passes its trace context on.

    python -m tests.mcp.traced_server toy
    python -m tests.mcp.traced_server documents DB CEILING

``toy``: one tool, ``lookup``, that annotates its span directly (the mechanism alone).
``documents``: the real app (``build_app``) over the index DB at CEILING, with the hash
embedder (no model to load).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

from fastmcp import FastMCP
from pydantic import Field

from governed_evidence.telemetry import annotate_call, configure_tracing, shutdown_tracing

#: What the toy tool puts on its span; the test expects exactly these back.
TOY_ATTRIBUTES: dict[str, str | int | bool | None] = {
    "governed_evidence.tool": "lookup",
    "governed_evidence.caller.clearance": "internal",
    "governed_evidence.ceiling": "restricted",
    "governed_evidence.clearance_applied": "internal",
    "governed_evidence.status": "OK",
    "governed_evidence.results": 2,
    "governed_evidence.search_mode": "hybrid",
    "governed_evidence.from_cache": False,
}
#: Handed to annotate_call too, and never exported: a None value (no passage returned), and
#: a name off the list.
TOY_LEFT_OUT: dict[str, str | int | bool | None] = {
    "governed_evidence.most_sensitive": None,
    "governed_evidence.query": "an argument must never become an attribute",
}
TOY_MAX_QUERY = 40


def toy_app() -> FastMCP:
    app = FastMCP("toy")

    @app.tool
    def lookup(query: Annotated[str, Field(max_length=TOY_MAX_QUERY)]) -> dict[str, int]:
        annotate_call({**TOY_ATTRIBUTES, **TOY_LEFT_OUT})
        return {"results": 2}

    return app


def documents_app(db: Path, ceiling: str) -> FastMCP:
    from governed_evidence.config import parse_level
    from governed_evidence.mcp.app import build_app
    from governed_evidence.search.service import SearchService
    from tests.helpers import HashEmbedder

    level = parse_level(ceiling)
    assert level is not None, ceiling
    return build_app(SearchService(db, ceiling=level, embedder_factory=HashEmbedder))


def main(argv: list[str]) -> int:
    app = toy_app() if argv[0] == "toy" else documents_app(Path(argv[1]), argv[2])
    if not configure_tracing():
        print("traced_server: tracing was not configured", file=sys.stderr)
        return 3
    try:
        app.run(transport="stdio", show_banner=False)
    finally:
        shutdown_tracing()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
