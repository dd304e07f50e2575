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
:data:`INTERNAL_ERROR_TEXT` and the stderr log records only the exception type.

What the client sees is the text of the tool error (``isError: true``), in one form::

    [NOT_FOUND] No passage with that citation_id is available.
    hint: Call search_documents to get current citation ids, then read_passage with one of them.

The first line is the stable code in brackets (:class:`~governed_evidence.errors.ErrorCode`)
and the message; the second is the recovery hint; a third, ``retry_after_s: N``, appears
when the error knows how long to wait. Arguments that fail the published schema (checked
by fastmcp before a tool runs) are given the same form with ``INVALID_ARGUMENT``
(:class:`ErrorForm`), naming each argument and what it broke without echoing its value.
Text only, so every client and every model reads it the same way; the text depends on
nothing but the error, which keeps a denied citation id byte for byte like a missing one.
Which error keeps its message, and its code, hint and wait, is decided by
:func:`~governed_evidence.errors.report_of`, which ``governed-evidence stats`` uses too, so
the command line and the tools report one error alike.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import mcp.types as mt
from fastmcp.exceptions import NotFoundError as UnknownComponentError
from fastmcp.exceptions import ToolError, ValidationError
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools import ToolResult
from pydantic import ValidationError as PydanticValidationError

from governed_evidence.errors import (
    CALLER_FACING,
    ERROR_CODES,
    INTERNAL_ERROR_MESSAGE,
    ErrorCode,
    InvalidRequestError,
    NotFoundError,
    report_of,
)
from governed_evidence.logging import get_logger

__all__ = [
    "ARGUMENTS_HINT",
    "CALLER_FACING",
    "CALLER_MISTAKES",
    "INTERNAL_ERROR_MESSAGE",
    "INTERNAL_ERROR_TEXT",
    "UNKNOWN_TOOL_HINT",
    "UNKNOWN_TOOL_MESSAGE",
    "CallRecorder",
    "ErrorForm",
    "error_text",
    "log_level_of",
    "run_tool",
    "to_tool_error",
]

T = TypeVar("T")
log = get_logger("mcp")

#: Most schema violations named in one INVALID_ARGUMENT error.
_MAX_VIOLATIONS = 5
#: The hint of arguments outside a tool's published schema.
ARGUMENTS_HINT = "Correct the arguments named and call again; tools/list gives each tool's input schema."
UNKNOWN_TOOL_MESSAGE = "No tool of that name."
UNKNOWN_TOOL_HINT = "Call tools/list for the tools this server offers."


def error_text(code: ErrorCode, message: str, hint: str, retry_after_s: float | None = None) -> str:
    """The text of a tool error as the client sees it: ``[CODE] message``, ``hint: ...``, maybe ``retry_after_s``."""
    lines = [f"[{code}] {message}", f"hint: {hint}"]
    if retry_after_s is not None:
        lines.append(f"retry_after_s: {max(1, math.ceil(retry_after_s))}")
    return "\n".join(lines)


#: What every masked error reads as.
INTERNAL_ERROR_TEXT = error_text(ErrorCode.INTERNAL, INTERNAL_ERROR_MESSAGE, ERROR_CODES[ErrorCode.INTERNAL].hint)


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
    """The tool error the client sees: a caller-facing error's code, message and hint; anything else masked.

    fastmcp logs the tool error it is handed at the error's ``log_level`` ("Error calling
    tool ..."). A caller's mistake (a citation id that is not there, an argument out of
    range) is an expected answer, already logged as a ``tool_call`` line at INFO: fastmcp's
    line for it is debug detail, not an error.
    """
    report = report_of(exc)
    level = log_level_of(exc)
    return ToolError(
        error_text(report.code, report.message, report.hint, report.retry_after_s),
        log_level=logging.DEBUG if level == logging.INFO else level,
    )


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


def _violations(exc: ValidationError) -> str:
    """Each argument that broke the schema and how, never the value sent (it may be anything)."""
    cause = exc.__cause__
    if not isinstance(cause, PydanticValidationError):
        return "the arguments do not match the tool's input schema"
    parts = []
    for problem in cause.errors(include_url=False, include_input=False, include_context=False)[:_MAX_VIOLATIONS]:
        where = ".".join(str(p) for p in problem["loc"]) or "arguments"
        parts.append(f"{where}: {problem['msg']}")
    more = len(cause.errors()) - _MAX_VIOLATIONS
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


class ErrorForm(Middleware):
    """Tool errors fastmcp raises itself (arguments outside the schema, an unknown tool) in the same form.

    Errors raised by a tool body reach the client through :func:`to_tool_error` already.
    """

    async def on_call_tool(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        try:
            return await call_next(context)
        except ValidationError as exc:
            raise ToolError(error_text(ErrorCode.INVALID_ARGUMENT, _violations(exc), ARGUMENTS_HINT)) from None
        except UnknownComponentError:
            raise ToolError(error_text(ErrorCode.NOT_FOUND, UNKNOWN_TOOL_MESSAGE, UNKNOWN_TOOL_HINT)) from None
