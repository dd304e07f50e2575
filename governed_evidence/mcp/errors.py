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

from fastmcp.exceptions import ToolError

from governed_evidence.errors import (
    GovernedEvidenceError,
    IndexUnavailableError,
    InvalidRequestError,
    NotFoundError,
    StatisticsError,
)

__all__ = ["CALLER_FACING", "INTERNAL_ERROR_MESSAGE", "to_tool_error"]

INTERNAL_ERROR_MESSAGE = "The server could not complete this request because of an internal error."


#: Errors whose message is written for the caller to act on.
CALLER_FACING = (InvalidRequestError, NotFoundError, IndexUnavailableError, StatisticsError)


def to_tool_error(exc: BaseException) -> ToolError:
    if isinstance(exc, CALLER_FACING):
        return ToolError(str(exc))
    if isinstance(exc, GovernedEvidenceError):
        return ToolError(str(exc))
    return ToolError(INTERNAL_ERROR_MESSAGE)
