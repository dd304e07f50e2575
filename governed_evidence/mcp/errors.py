"""The one place package errors become MCP tool errors.

Caller mistakes and governed refusals become ``ToolError`` with their own message (written
for a model to act on, free of paths, SQL and passage text). Anything else is an internal
fault: the client sees a fixed message and the details go to the stderr log only as the
exception type.
"""

from __future__ import annotations

from fastmcp.exceptions import ToolError

from governed_evidence.errors import (
    GovernedEvidenceError,
    IndexUnavailableError,
    InvalidRequestError,
    NotFoundError,
)

__all__ = ["INTERNAL_ERROR_MESSAGE", "to_tool_error"]

INTERNAL_ERROR_MESSAGE = "The server could not complete this request because of an internal error."


def to_tool_error(exc: BaseException) -> ToolError:
    if isinstance(exc, InvalidRequestError | NotFoundError | IndexUnavailableError):
        return ToolError(str(exc))
    if isinstance(exc, GovernedEvidenceError):
        return ToolError(str(exc))
    return ToolError(INTERNAL_ERROR_MESSAGE)
