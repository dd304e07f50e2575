"""The one exception tree of the package.

``*`` marks the errors whose message reaches a caller (:data:`CALLER_FACING`, subclasses
included); every other one is masked for an MCP client with a fixed message
(:func:`report_of` says what a caller is told, for the MCP tools and the command line alike).

::

    GovernedEvidenceError
    ├── ConfigError                 operator configuration is invalid
    ├── IndexUnavailableError     * the evidence index cannot serve
    │   ├── IndexMissingError     * no index file at the configured path
    │   └── IndexCorruptError     * the file is not a valid index (or fails integrity)
    ├── IngestError                 a whole ingest run failed (nothing was replaced)
    ├── ConnectorError              a sync failed (the last good mirror is kept)
    ├── FileRejectedError           one file was refused; the rest of the corpus continues
    ├── EmbedderError             * the embedder cannot produce vectors
    │   └── ModelMismatchError    * query embedder differs from the index's model
    ├── InvalidRequestError       * a caller's argument is unusable (the message says how to fix it)
    ├── NotFoundError             * the requested item does not exist *or is not visible*
    ├── NotClearedError           * the caller is identified but holds no clearance for documents
    ├── RerankerError               the optional reranker gave no decision (search falls back, never raises it)
    └── StatisticsError           * official statistics (SDMX) could not be served
        ├── ProviderUnavailableError  * the provider failed (network, 5xx, timeout) and nothing is cached
        ├── RateLimitedError          * this server's request budget for the provider is spent (retry_after_s)
        │   └── RateLedgerError       * the persisted budget ledger is unreadable: no request is sent (fail closed)
        ├── ResponseTooLargeError     * the answer exceeds the byte, row or code bounds (narrow the request)
        └── UnusableResponseError     * the response is malformed, hostile (DTD, entities) or in an unsupported format

Every error class carries a stable :class:`ErrorCode` (``code``) and every instance a
recovery ``hint``: the next useful call or argument, given where it is raised or else the
code's default (:data:`ERROR_CODES`). The codes are a contract: they are listed in the
capabilities resource and frozen by tests/mcp/surface.json. A code names what a caller can
do about an error, so several classes may share one; ``INTERNAL`` is the code of every
error whose message is masked. :class:`WarningCode` holds the codes of successful results
that carry a caveat (``STALE_SERVED``).

``StatisticsError`` messages never quote a provider's response body: upstream text is
untrusted, so only status codes, SDMX error codes and this package's own guidance appear.

Messages of the marked errors are written for the caller (often a language model) and never
contain passage text, query text, filesystem paths of the server, or SQL
(tests/mcp/test_errors.py raises each as the package does and checks). `NotFoundError`
deliberately says the same thing whether an item is missing or above the caller's ceiling.
The unmarked ones are for the operator, who reads them on the command line: they may name
settings and files, so they never reach a client.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

__all__ = [
    "CALLER_FACING",
    "ERROR_CODES",
    "INTERNAL_ERROR_MESSAGE",
    "WARNING_CODES",
    "CodeInfo",
    "ConfigError",
    "ConnectorError",
    "EmbedderError",
    "ErrorCode",
    "ErrorReport",
    "FileRejectedError",
    "GovernedEvidenceError",
    "IndexCorruptError",
    "IndexMissingError",
    "IndexUnavailableError",
    "IngestError",
    "InvalidRequestError",
    "ModelMismatchError",
    "NotClearedError",
    "NotFoundError",
    "ProviderUnavailableError",
    "RateLedgerError",
    "RateLimitedError",
    "RerankerError",
    "ResponseTooLargeError",
    "StatisticsError",
    "UnusableResponseError",
    "WarningCode",
    "report_of",
]


class ErrorCode(StrEnum):
    """Stable codes of tool errors: what a caller can do about an error (:data:`ERROR_CODES`)."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    NOT_CLEARED = "NOT_CLEARED"
    INDEX_UNAVAILABLE = "INDEX_UNAVAILABLE"
    SEMANTIC_UNAVAILABLE = "SEMANTIC_UNAVAILABLE"
    UPSTREAM_UNAVAILABLE = "UPSTREAM_UNAVAILABLE"
    UPSTREAM_UNUSABLE = "UPSTREAM_UNUSABLE"
    RATE_LIMITED = "RATE_LIMITED"
    STATISTICS_UNAVAILABLE = "STATISTICS_UNAVAILABLE"
    TOO_LARGE = "TOO_LARGE"
    INTERNAL = "INTERNAL"


class WarningCode(StrEnum):
    """Stable codes of a caveat on a successful result."""

    STALE_SERVED = "STALE_SERVED"


@dataclass(frozen=True)
class CodeInfo:
    """What a code means, and the hint given when the place that raised it gave none."""

    meaning: str
    hint: str


#: Every error code, what it means and its default hint. The capabilities resource lists them.
ERROR_CODES: dict[ErrorCode, CodeInfo] = {
    ErrorCode.INVALID_ARGUMENT: CodeInfo(
        "An argument cannot be used; the message says what is accepted.",
        "Correct the argument the message names and call again; the tool's input schema gives every limit.",
    ),
    ErrorCode.NOT_FOUND: CodeInfo(
        "Nothing the caller may see has that identifier (a document above the caller's clearance reads "
        "exactly like a missing one).",
        "Look the identifier up again instead of guessing: search_documents gives citation ids, "
        "search_datasets gives dataset references.",
    ),
    ErrorCode.NOT_CLEARED: CodeInfo(
        "The caller's credential is valid but grants no clearance for the documents.",
        "Do not retry the document tools with this credential; the statistics tools still work.",
    ),
    ErrorCode.INDEX_UNAVAILABLE: CodeInfo(
        "The documents index is missing or damaged, so the document tools cannot answer.",
        "Call index_status for the problem and tell the user the operator must build or rebuild the index; "
        "the statistics tools still work.",
    ),
    ErrorCode.SEMANTIC_UNAVAILABLE: CodeInfo(
        "Meaning (semantic) search is unavailable; keyword search still works.",
        'Search again with mode="keyword".',
    ),
    ErrorCode.UPSTREAM_UNAVAILABLE: CodeInfo(
        "The statistics provider could not be used (network, timeout, HTTP error) and nothing is cached.",
        "Retry later or try another provider; answers this server has already cached are still served.",
    ),
    ErrorCode.UPSTREAM_UNUSABLE: CodeInfo(
        "The statistics provider's answer was malformed, hostile or in a format this server does not read.",
        "Do not repeat the same call at once: choose another dataset (search_datasets) or provider, or retry later.",
    ),
    ErrorCode.RATE_LIMITED: CodeInfo(
        "This server's hourly request budget for the provider is spent.",
        "Wait, then make the same call again; answers this server has already cached are still served.",
    ),
    ErrorCode.STATISTICS_UNAVAILABLE: CodeInfo(
        "The server's statistics cache or request ledger cannot be trusted, so no request is sent.",
        "Do not retry: tell the user the operator must repair the statistics cache (index_status shows the "
        "problem); the document tools still work.",
    ),
    ErrorCode.TOO_LARGE: CodeInfo(
        "The answer would exceed this server's byte, row or code bounds.",
        "Narrow the key (fewer codes per position) or set start_period/end_period, then call get_data again.",
    ),
    ErrorCode.INTERNAL: CodeInfo(
        "The server failed; the details are in its log, never in the answer.",
        "Retry once; if it fails again, tell the user the server reported an internal error.",
    ),
}

#: Every warning code and what it means.
WARNING_CODES: dict[WarningCode, str] = {
    WarningCode.STALE_SERVED: (
        "The answer is a cached copy past its expiry, served because the provider could not be used; "
        "stale_age_seconds gives its age and the first hint why. Say that figures may have been revised."
    ),
}


def _wait_hint(seconds: float) -> str:
    return f"Wait {max(1, math.ceil(seconds))} s, then make the same call again."


class GovernedEvidenceError(Exception):
    """Base of every error this package raises on purpose.

    ``hint`` (keyword) is the recovery hint where the raiser knows the next useful call;
    otherwise the code's default applies.
    """

    #: The stable code a caller is told (masked errors: INTERNAL).
    code: ClassVar[ErrorCode] = ErrorCode.INTERNAL

    def __init__(self, *args: object, hint: str | None = None) -> None:
        super().__init__(*args)
        #: The hint given where the error was raised, if any.
        self.given_hint = hint

    @property
    def hint(self) -> str:
        """What to do next: the hint given where it was raised, else the code's default."""
        return self.given_hint or ERROR_CODES[self.code].hint


class ConfigError(GovernedEvidenceError):
    """The operator's configuration is invalid."""


class IndexUnavailableError(GovernedEvidenceError):
    """The evidence index cannot serve requests."""

    code = ErrorCode.INDEX_UNAVAILABLE


class IndexMissingError(IndexUnavailableError):
    """No index exists at the configured location."""


class IndexCorruptError(IndexUnavailableError):
    """The index file exists but is unreadable or inconsistent."""


class IngestError(GovernedEvidenceError):
    """An ingest run failed as a whole; the previous index keeps serving."""


class ConnectorError(GovernedEvidenceError):
    """A sync could not complete; the last good mirror is kept (the message never holds a secret)."""


class FileRejectedError(GovernedEvidenceError):
    """One source file was refused at ingest (reason in the message)."""


class EmbedderError(GovernedEvidenceError):
    """The embedder is unavailable or returned unusable vectors."""

    code = ErrorCode.SEMANTIC_UNAVAILABLE


class ModelMismatchError(EmbedderError):
    """The query embedder is not the model the index was built with."""


class InvalidRequestError(GovernedEvidenceError):
    """A request argument cannot be used; the message says what is accepted."""

    code = ErrorCode.INVALID_ARGUMENT


class NotFoundError(GovernedEvidenceError):
    """Nothing visible to the caller has that identifier."""

    code = ErrorCode.NOT_FOUND


class NotClearedError(GovernedEvidenceError):
    """The caller's credential is valid but maps to no clearance: documents are refused.

    The message names no level and no count: it says only what the caller lacks.
    """

    code = ErrorCode.NOT_CLEARED


class RerankerError(GovernedEvidenceError):
    """The reranker failed or gave no decision; the message is this package's own, never upstream text."""


class StatisticsError(GovernedEvidenceError):
    """Official statistics could not be served (the subclass says why)."""

    code = ErrorCode.UPSTREAM_UNAVAILABLE


class ProviderUnavailableError(StatisticsError):
    """The statistics provider failed or timed out, and no cached copy could stand in."""

    def __init__(self, message: str, *, retry_after_s: float | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        #: Seconds the provider asked us to wait, when it said so (``Retry-After``).
        self.retry_after_s = retry_after_s

    @property
    def hint(self) -> str:
        if self.given_hint is None and self.retry_after_s is not None:
            return _wait_hint(self.retry_after_s) + " Or try another provider."
        return super().hint


class RateLimitedError(StatisticsError):
    """This server's request budget for a provider is spent; the message says when to retry."""

    code = ErrorCode.RATE_LIMITED

    def __init__(self, message: str, *, retry_after_s: float | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        #: Seconds until the budget has room again, when known.
        self.retry_after_s = retry_after_s

    @property
    def hint(self) -> str:
        if self.given_hint is None and self.retry_after_s is not None:
            return _wait_hint(self.retry_after_s) + " Answers this server has already cached are still served."
        return super().hint


class RateLedgerError(RateLimitedError):
    """The persisted request ledger cannot be trusted, so no request is sent (fail closed)."""

    code = ErrorCode.STATISTICS_UNAVAILABLE


class ResponseTooLargeError(StatisticsError):
    """A response exceeded the configured byte, row or code bounds."""

    code = ErrorCode.TOO_LARGE


class UnusableResponseError(StatisticsError):
    """A response was malformed, hostile (DTD, entities) or in a format this server does not read."""

    code = ErrorCode.UPSTREAM_UNUSABLE


#: Errors whose message is written for the caller to act on (subclasses included).
CALLER_FACING: tuple[type[GovernedEvidenceError], ...] = (
    InvalidRequestError,
    NotFoundError,
    NotClearedError,
    IndexUnavailableError,
    EmbedderError,
    StatisticsError,
)

#: What every masked error says in place of its own message.
INTERNAL_ERROR_MESSAGE = "The server could not complete this request because of an internal error."


@dataclass(frozen=True)
class ErrorReport:
    """An error as a caller is told it: code, message, hint and, when known, the seconds to wait."""

    code: ErrorCode
    message: str
    hint: str
    retry_after_s: float | None = None


def report_of(exc: BaseException) -> ErrorReport:
    """What a caller is told of ``exc``: a caller-facing error's own code, message, hint and wait;
    for anything else ``INTERNAL`` with the fixed message, since its text may name what a caller
    must not see."""
    if isinstance(exc, CALLER_FACING):
        retry = getattr(exc, "retry_after_s", None)
        return ErrorReport(exc.code, str(exc), exc.hint, retry)
    return ErrorReport(ErrorCode.INTERNAL, INTERNAL_ERROR_MESSAGE, ERROR_CODES[ErrorCode.INTERNAL].hint)
