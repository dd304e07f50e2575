"""The one exception tree of the package.

::

    GovernedEvidenceError
    ├── ConfigError                 operator configuration is invalid
    ├── IndexUnavailableError       the evidence index cannot serve
    │   ├── IndexMissingError       no index file at the configured path
    │   └── IndexCorruptError       the file is not a valid index (or fails integrity)
    ├── IngestError                 a whole ingest run failed (nothing was replaced)
    │   └── FileRejectedError       one file was refused; the rest of the corpus continues
    ├── EmbedderError               the embedder cannot produce vectors
    │   └── ModelMismatchError      query embedder differs from the index's model
    ├── InvalidRequestError         a caller's argument is unusable (the message says how to fix it)
    └── NotFoundError               the requested item does not exist *or is not visible*

Messages are written for the caller (often a language model) and never contain passage
text, query text, filesystem paths of the server, or SQL. `NotFoundError` deliberately says
the same thing whether an item is missing or above the caller's ceiling.
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
    "NotFoundError",
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
