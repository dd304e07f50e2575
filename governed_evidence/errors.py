"""The one exception tree of the package.

``*`` marks the errors whose message reaches an MCP client (``mcp.errors.CALLER_FACING``,
subclasses included); every other one is masked there with a fixed message.

::

    GovernedEvidenceError
    ├── ConfigError                 operator configuration is invalid
    ├── IndexUnavailableError     * the evidence index cannot serve
    │   ├── IndexMissingError     * no index file at the configured path
    │   └── IndexCorruptError     * the file is not a valid index (or fails integrity)
    ├── IngestError                 a whole ingest run failed (nothing was replaced)
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

__all__ = [
    "ConfigError",
    "EmbedderError",
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
]


class GovernedEvidenceError(Exception):
    """Base of every error this package raises on purpose."""


class ConfigError(GovernedEvidenceError):
    """The operator's configuration is invalid."""


class IndexUnavailableError(GovernedEvidenceError):
    """The evidence index cannot serve requests."""


class IndexMissingError(IndexUnavailableError):
    """No index exists at the configured location."""


class IndexCorruptError(IndexUnavailableError):
    """The index file exists but is unreadable or inconsistent."""


class IngestError(GovernedEvidenceError):
    """An ingest run failed as a whole; the previous index keeps serving."""


class FileRejectedError(GovernedEvidenceError):
    """One source file was refused at ingest (reason in the message)."""


class EmbedderError(GovernedEvidenceError):
    """The embedder is unavailable or returned unusable vectors."""


class ModelMismatchError(EmbedderError):
    """The query embedder is not the model the index was built with."""


class InvalidRequestError(GovernedEvidenceError):
    """A request argument cannot be used; the message says what is accepted."""


class NotFoundError(GovernedEvidenceError):
    """Nothing visible to the caller has that identifier."""


class NotClearedError(GovernedEvidenceError):
    """The caller's credential is valid but maps to no clearance: documents are refused.

    The message names no level and no count: it says only what the caller lacks.
    """


class RerankerError(GovernedEvidenceError):
    """The reranker failed or gave no decision; the message is this package's own, never upstream text."""


class StatisticsError(GovernedEvidenceError):
    """Official statistics could not be served (the subclass says why)."""


class ProviderUnavailableError(StatisticsError):
    """The statistics provider failed or timed out, and no cached copy could stand in."""

    def __init__(self, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        #: Seconds the provider asked us to wait, when it said so (``Retry-After``).
        self.retry_after_s = retry_after_s


class RateLimitedError(StatisticsError):
    """This server's request budget for a provider is spent; the message says when to retry."""

    def __init__(self, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        #: Seconds until the budget has room again, when known.
        self.retry_after_s = retry_after_s


class RateLedgerError(RateLimitedError):
    """The persisted request ledger cannot be trusted, so no request is sent (fail closed)."""


class ResponseTooLargeError(StatisticsError):
    """A response exceeded the configured byte, row or code bounds."""


class UnusableResponseError(StatisticsError):
    """A response was malformed, hostile (DTD, entities) or in a format this server does not read."""
