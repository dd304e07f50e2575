"""The one place package errors become MCP tool errors.

Only errors written for the caller keep their message (:data:`CALLER_FACING`); it is
composed by this package, never quotes passage text, query text, SQL or upstream bodies,
and never names a server path:

* caller mistakes: ``InvalidRequestError`` (says what is accepted) and ``NotFoundError``
  (the same words whether an item is missing or above the caller's ceiling);
* ``NotClearedError``: the caller's credential grants no clearance for documents (it names
  no level and no count);
* conditions the caller must act on: ``IndexUnavailableError`` (there is nothing to search
  yet, or the index must be rebuilt; ``index_status`` reports the same text),
  ``EmbedderError`` (meaning search is unavailable, keyword search still works; search
  responses already carry the same text as ``search_mode_reason``) and ``StatisticsError`` (narrow
  the request, wait the seconds given, or try later; never a provider's response body).

Every other error is the operator's to fix or a fault, and its text may carry what a
caller must not see: ``ConfigError`` (settings and file names, an unreadable file's path),
``IngestError`` and ``FileRejectedError`` (ingest runs, never a tool call), the base
``GovernedEvidenceError`` and anything not raised by this package. The client sees
:data:`INTERNAL_ERROR_MESSAGE` and the stderr log records only the exception type.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from fastmcp.exceptions import ToolError

from governed_evidence.errors import (
    EmbedderError,
    IndexUnavailableError,
    InvalidRequestError,
    NotClearedError,
    NotFoundError,
    StatisticsError,
)
from governed_evidence.logging import get_logger

__all__ = [
    "CALLER_FACING",
    "CALLER_MISTAKES",
    "INTERNAL_ERROR_MESSAGE",
    "CallRecorder",
    "log_level_of",
    "run_tool",
    "to_tool_error",
]

T = TypeVar("T")
log = get_logger("mcp")

INTERNAL_ERROR_MESSAGE = "The server could not complete this request because of an internal error."


#: Errors whose message is written for the caller to act on (subclasses included).
CALLER_FACING: tuple[type[Exception], ...] = (
    InvalidRequestError,
    NotFoundError,
    NotClearedError,
    IndexUnavailableError,
    EmbedderError,
    StatisticsError,
)


#: Caller-facing errors that are the caller's own doing, answered as designed: nothing for
#: the operator to look at.
CALLER_MISTAKES: tuple[type[Exception], ...] = (InvalidRequestError, NotFoundError)


def log_level_of(exc: BaseException) -> int:
    """How loudly a failed call is logged: a caller's mistake is ordinary traffic (info), a
    condition the caller is told about may need the operator (warning), anything else is a
    fault (error)."""
    if isinstance(exc, CALLER_MISTAKES):
        return logging.INFO
    if isinstance(exc, CALLER_FACING):
        return logging.WARNING
    return logging.ERROR


def to_tool_error(exc: BaseException) -> ToolError:
    """The tool error the client sees: a caller-facing message as written, anything else masked.

    fastmcp logs the tool error it is handed at the error's ``log_level``.
    """
    if isinstance(exc, CALLER_FACING):
        return ToolError(str(exc), log_level=log_level_of(exc))
    return ToolError(INTERNAL_ERROR_MESSAGE, log_level=log_level_of(exc))


def run_tool(
    tool: str,
    fn: Callable[[], T],
    count: Callable[[T], int],
    *,
    record: CallRecorder | None = None,
    **context: Any,
) -> T:
    """Run one tool call: map errors here, log tool, status, count, duration and ``context``.

    ``context`` holds what identifies the call's governance (ceiling, provider), never its
    arguments: query text and passage text stay out of the logs. ``record`` (when given)
    receives the call's outcome for the audit trail and the trace.
    """
    started = time.perf_counter()
    try:
        result = fn()
    except Exception as exc:  # noqa: BLE001 - every failure is mapped (and masked) in one place
        ms = round((time.perf_counter() - started) * 1000, 2)
        log.log(log_level_of(exc), "tool_call", tool=tool, status="error", error=type(exc).__name__, ms=ms, **context)
        if record is not None:
            record(tool, "error", None, 0, ms, type(exc).__name__)
        raise to_tool_error(exc) from None
    cache = {k: getattr(result, k) for k in ("from_cache", "stale") if hasattr(result, k)}
    ms = round((time.perf_counter() - started) * 1000, 2)
    status = getattr(result, "status", "OK")
    results = count(result)
    log.info("tool_call", tool=tool, status=status, results=results, ms=ms, **context, **cache)
    if record is not None:
        record(tool, str(status), result, results, ms, None)
    return result


class CallRecorder(Protocol):
    """Receives each call's outcome: tool, status, result (None on error), result count, ms, error type."""

    def __call__(
        self, tool: str, status: str, result: object, results: int, ms: float, error: str | None, /
    ) -> None: ...
