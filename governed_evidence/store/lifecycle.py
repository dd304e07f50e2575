"""What an index records about a document's lifecycle, and when a document is stale.

The vocabulary lives here, in the store, because three parts must agree on it: ingest
(which validates the governance file and front matter against it), the schema (whose CHECK
constraint refuses anything else) and search (which serves it). A document is searched only
while it is ``current``; ``draft`` (not policy yet) and ``deprecated`` (no longer policy)
stay readable by citation id and are flagged, as superseded documents always were.

Staleness is not stored: an index serves for months, so whether ``review_by`` has passed
is decided when a result is served, against a clock the caller can replace (tests do).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Literal

__all__ = ["STATUSES", "Clock", "Lifecycle", "Status", "is_stale", "utc_today"]

Status = Literal["draft", "current", "deprecated"]
#: Every status, in lifecycle order; a document nothing gives a status is ``current``.
STATUSES: tuple[Status, ...] = ("draft", "current", "deprecated")

#: Today's date, as whoever decides staleness sees it.
Clock = Callable[[], date]


def utc_today() -> date:
    """Today in UTC: one server's answer does not depend on the time zone it runs in."""
    return datetime.now(UTC).date()


def is_stale(review_by: date | None, today: date) -> bool:
    """True once the review date has passed (the review date itself is still in time)."""
    return review_by is not None and today > review_by


@dataclass(frozen=True)
class Lifecycle:
    """A document's lifecycle as decided at ingest (front matter over governance rules)."""

    status: Status = "current"
    #: Who answers for the document (one line, invisible characters removed).
    owner: str | None = None
    #: The date by which the document must be reviewed.
    review_by: date | None = None
    #: The date from which the document applies; carried and served, never used to filter.
    effective: date | None = None
    #: Where the document lives at its source (a SharePoint or Drive web link), served as ``source_link``.
    link: str | None = None

    @property
    def searchable(self) -> bool:
        return self.status == "current"
