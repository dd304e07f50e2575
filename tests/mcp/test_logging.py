"""What `serve` logs: JSON lines at INFO by default, and a caller's mistake is not an error.

An MCP client shows a server's stderr to the operator; an ordinary "not found" logged as
an error (fastmcp logs every tool error at the level the error carries) sends them looking
for a fault that is not there.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from governed_evidence import errors
from governed_evidence.errors import ErrorCode
from governed_evidence.mcp.errors import CALLER_FACING, error_text, to_tool_error
from governed_evidence.search.lookup import NOT_FOUND_HINT, NOT_FOUND_MESSAGE
from tests.mcp.test_stdio import run


def _serve_logging_to(db: Path, log: Path) -> StdioTransport:
    # No GOVERNED_EVIDENCE_LOG_LEVEL: serve's own default is under test.
    env = {"PATH": os.environ.get("PATH", ""), "GOVERNED_EVIDENCE_CEILING": "internal"}
    return StdioTransport(
        command=sys.executable, args=["-m", "governed_evidence", "serve", "--db", str(db)], env=env, log_file=log
    )


def test_serve_logs_json_at_info_and_a_not_found_is_not_an_error(built_index: Path, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"

    async def body(client: Client) -> tuple[Any, Any]:
        await client.call_tool("list_sources", {})
        missing = await client.call_tool("read_passage", {"citation_id": "nothing"}, raise_on_error=False)
        invalid = await client.call_tool("search_documents", {"query": "   "}, raise_on_error=False)
        return missing, invalid

    async def session() -> tuple[Any, Any]:
        async with Client(_serve_logging_to(built_index, log)) as client:
            return await body(client)

    missing, invalid = run(session())
    assert missing.is_error
    assert missing.content[0].text == error_text(ErrorCode.NOT_FOUND, NOT_FOUND_MESSAGE, NOT_FOUND_HINT)
    assert invalid.is_error
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    calls = [r for r in records if r.get("event") == "tool_call"]
    # INFO by default: the successful call is logged too.
    assert [r["level"] for r in calls if r["tool"] == "list_sources"] == ["info"]
    assert [(r["level"], r["error"]) for r in calls if r["tool"] == "read_passage"] == [("info", "NotFoundError")]
    assert [r for r in records if r["level"] in ("error", "critical")] == []
    # fastmcp's own "Error calling tool" line is not there for an expected answer.
    assert not [r for r in records if "Error calling tool" in r["event"]]
    assert any(r.get("logger", "").startswith("fastmcp") for r in records)  # its other lines still are


def test_serve_at_warning_writes_no_info_line_of_its_own_or_fastmcps(built_index: Path, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    transport = _serve_logging_to(built_index, log)
    transport.env = {**(transport.env or {}), "GOVERNED_EVIDENCE_LOG_LEVEL": "WARNING"}

    async def session() -> Any:
        async with Client(transport) as client:
            await client.call_tool("list_sources", {})
            return await client.call_tool("read_passage", {"citation_id": "nothing"}, raise_on_error=False)

    assert run(session()).is_error
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert [r for r in records if r["level"] in ("debug", "info")] == []


ERROR_CLASSES = [
    c for c in (getattr(errors, name) for name in errors.__all__) if isinstance(c, type) and issubclass(c, Exception)
]


@pytest.mark.parametrize("cls", ERROR_CLASSES)
def test_tool_errors_carry_the_level_fastmcp_logs_them_at(cls: type[Exception]) -> None:
    exc = cls("message")
    level = to_tool_error(exc).log_level
    if issubclass(cls, (errors.InvalidRequestError, errors.NotFoundError)):
        # Logged as a tool_call line at INFO by the call itself; fastmcp's line is detail.
        assert level == logging.DEBUG
    elif issubclass(cls, CALLER_FACING):
        assert level == logging.WARNING
    else:
        assert level == logging.ERROR


def test_a_fault_is_still_logged_as_an_error() -> None:
    assert to_tool_error(RuntimeError("boom")).log_level == logging.ERROR
