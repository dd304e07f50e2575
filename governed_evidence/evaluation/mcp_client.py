"""A synchronous search client that goes through the real MCP surface over stdio.

The governance slices are run this way so the tools themselves are tested, not only the
service behind them: a leak introduced in the MCP layer would show up here.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from governed_evidence.config import Classification
from governed_evidence.search.limits import ConfidenceLevel, SearchMode
from governed_evidence.search.models import SearchResponse

__all__ = ["McpSearcher"]

T = TypeVar("T")


class McpSearcher:
    """Runs ``governed-evidence serve`` as a subprocess and calls ``search_documents``."""

    def __init__(self, db: Path, *, ceiling: Classification, gate_enabled: bool) -> None:
        self.ceiling = ceiling
        env = {
            "PATH": os.environ.get("PATH", ""),
            "GOVERNED_EVIDENCE_CEILING": ceiling.label,
            "GOVERNED_EVIDENCE_GATE": "on" if gate_enabled else "off",
            "GOVERNED_EVIDENCE_LOG_LEVEL": "WARNING",
        }
        transport = StdioTransport(
            command=sys.executable, args=["-m", "governed_evidence", "serve", "--db", str(db)], env=env
        )
        self._transport = transport
        self._client = Client(transport)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-eval-client", daemon=True)
        self._thread.start()
        self._run(self._client.__aenter__())  # type: ignore[no-untyped-call]

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=300)

    def search(
        self, query: str, *, limit: int = 8, mode: SearchMode = "hybrid", confidence_level: ConfidenceLevel = "strict"
    ) -> SearchResponse:
        result = self._run(
            self._client.call_tool(
                "search_documents",
                {"query": query, "limit": limit, "mode": mode, "confidence": confidence_level},
            )
        )
        return SearchResponse.model_validate(result.structured_content)

    def close(self) -> None:
        try:
            self._run(self._client.__aexit__(None, None, None))  # type: ignore[no-untyped-call]
            # Close the transport on its own loop; left to the garbage collector it would
            # try to signal a loop that is already closed.
            self._run(self._transport.close())  # type: ignore[no-untyped-call]
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()

    def __enter__(self) -> McpSearcher:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
