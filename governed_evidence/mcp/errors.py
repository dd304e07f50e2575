"""The one place package errors become MCP tool errors.

Caller mistakes and governed refusals become ``ToolError`` with their own message (written
for a model to act on, free of paths, SQL and passage text). Anything else is an internal
fault: the client sees a fixed message and the details go to the stderr log only as the
exception type.

Statistics errors (``StatisticsError`` and below) are caller-facing: they say whether to
narrow the request, wait (a rate budget, with the seconds to wait) or try later, and by
construction never quote a provider's response body.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from fastmcp.exceptions import ToolError

from governed_evidence.errors import (
    GovernedEvidenceError,
    IndexUnavailableError,
    InvalidRequestError,
    NotFoundError,
    StatisticsError,
)
from governed_evidence.logging import get_logger

__all__ = ["CALLER_FACING", "INTERNAL_ERROR_MESSAGE", "to_tool_error"]

T = TypeVar("T")
log = get_logger("mcp")

INTERNAL_ERROR_MESSAGE = "The server could not complete this request because of an internal error."


#: Errors whose message is written for the caller to act on.
CALLER_FACING = (InvalidRequestError, NotFoundError, IndexUnavailableError, StatisticsError)


def to_tool_error(exc: BaseException) -> ToolError:
    if isinstance(exc, CALLER_FACING):
        return ToolError(str(exc))
    if isinstance(exc, GovernedEvidenceError):
        return ToolError(str(exc))
    return ToolError(INTERNAL_ERROR_MESSAGE)


def run_tool(tool: str, fn: Callable[[], T], count: Callable[[T], int], **context: Any) -> T:
    """Run one tool call: map errors here, log tool, status, count, duration and ``context``.

    ``context`` holds what identifies the call's governance (ceiling, provider), never its
    arguments: query text and passage text stay out of the logs.
    """
    started = time.perf_counter()
    try:
        result = fn()
    except Exception as exc:  # noqa: BLE001 - every failure is mapped (and masked) in one place
        ms = round((time.perf_counter() - started) * 1000, 2)
        log.warning("tool_call", tool=tool, status="error", error=type(exc).__name__, ms=ms, **context)
        raise to_tool_error(exc) from None
    cache = {k: getattr(result, k) for k in ("from_cache", "stale") if hasattr(result, k)}
    ms = round((time.perf_counter() - started) * 1000, 2)
    status = getattr(result, "status", "OK")
    log.info("tool_call", tool=tool, status=status, results=count(result), ms=ms, **context, **cache)
    return result
