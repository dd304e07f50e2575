"""Passages and documents as the search side reads them: named, frozen, built in one place.

Every query that returns passages selects :data:`PASSAGE_COLUMNS` and turns each row into a
:class:`Passage` with :meth:`Passage.from_row`, so a column added or moved changes one file.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from governed_evidence.config import Classification
from governed_evidence.store.lifecycle import STATUSES, Status

__all__ = [
    "DOCUMENT_COLUMNS",
    "PASSAGE_COLUMNS",
    "PASSAGE_FROM",
    "DocumentEntry",
    "Passage",
    "label",
    "served_date",
    "served_status",
]

#: The columns :meth:`Passage.from_row` reads, in its field order (``search_text`` falls back
#: to ``text``: it is stored only where the two differ). The document's lifecycle comes last;
#: a superseded document is served as ``deprecated`` whatever status it declares (it is no
#: longer policy, and is kept out of search as one).
PASSAGE_COLUMNS = (
    "p.id, p.citation_id, d.path, p.title, p.heading, p.line_start, p.line_end, "
    "p.page_start, p.page_end, p.classification, p.text, p.ordinal, p.document_id, d.superseded_by, "
    "coalesce(p.search_text, p.text), "
    "CASE WHEN d.status = 'superseded' THEN 'deprecated' ELSE d.lifecycle END, d.owner, d.review_by, d.effective, "
    "d.source_link"
)
PASSAGE_FROM = "FROM passages p JOIN documents d ON d.id = p.document_id"

DOCUMENT_COLUMNS = (
    "path, title, format, classification, passage_count, superseded_by, "
    "CASE WHEN status = 'superseded' THEN 'deprecated' ELSE lifecycle END, owner, review_by, effective, source_link"
)


#: Every stored level's label; anything else reads as the most restrictive (:func:`label`).
_LABELS = {int(level): level.label for level in Classification}
_STATUSES: dict[object, Status] = {status: status for status in STATUSES}


def label(level: int) -> str:
    """A stored level as its label; anything unknown reads as the most restrictive."""
    return _LABELS.get(level, Classification.RESTRICTED.label)


def served_status(value: object) -> Status:
    """A stored status; anything unknown reads as ``deprecated`` (never as current policy)."""
    return _STATUSES.get(value, "deprecated") if isinstance(value, str) else "deprecated"


def served_date(value: object) -> date | None:
    """A stored ISO date; anything unreadable reads as no date (the index CHECKs nothing here)."""
    if not isinstance(value, str):
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Passage:
    id: int
    citation_id: str
    document: str
    title: str
    heading: str
    line_start: int | None
    line_end: int | None
    page_start: int | None
    page_end: int | None
    classification: int
    text: str
    ordinal: int
    document_id: int
    superseded_by: str | None
    #: What the full-text index holds for the body (links and tags removed).
    search_text: str
    #: The document's lifecycle (see :data:`PASSAGE_COLUMNS`); the defaults are a document nothing describes.
    status: Status = "current"
    owner: str | None = None
    review_by: date | None = None
    effective: date | None = None
    source_link: str | None = None

    @classmethod
    def from_row(cls, row: tuple[Any, ...] | Any) -> Passage:
        # In field order, as PASSAGE_COLUMNS selects them.
        return cls(
            int(row[0]),  # id
            str(row[1]),  # citation_id
            str(row[2]),  # document
            str(row[3]),  # title
            str(row[4]),  # heading
            row[5],  # line_start
            row[6],  # line_end
            row[7],  # page_start
            row[8],  # page_end
            int(row[9]),  # classification
            str(row[10]),  # text
            int(row[11]),  # ordinal
            int(row[12]),  # document_id
            row[13],  # superseded_by
            str(row[14]),  # search_text
            served_status(row[15]),
            row[16],  # owner
            served_date(row[17]),  # review_by
            served_date(row[18]),  # effective
            row[19],  # source_link
        )

    @property
    def label(self) -> str:
        return label(self.classification)


@dataclass(frozen=True, slots=True)
class DocumentEntry:
    path: str
    title: str
    format: str
    classification: int
    passages: int
    superseded_by: str | None
    status: Status = "current"
    owner: str | None = None
    review_by: date | None = None
    effective: date | None = None
    source_link: str | None = None

    @classmethod
    def from_row(cls, row: tuple[Any, ...] | Any) -> DocumentEntry:
        return cls(
            str(row[0]),
            str(row[1]),
            str(row[2]),
            int(row[3]),
            int(row[4]),
            row[5],
            served_status(row[6]),
            row[7],
            served_date(row[8]),
            served_date(row[9]),
            row[10],
        )
