"""The rows a build writes: a document and its passages as ingest made them, and a document
copied unchanged from the index being replaced.

Typed values that cross from ingest (and the BEIR runner and benchmarks) into the builder;
:mod:`build` owns how they are stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from governed_evidence.config import Classification
from governed_evidence.store.lifecycle import Lifecycle

__all__ = ["CopiedDocument", "DocumentRow", "PassageRow"]


@dataclass
class DocumentRow:
    path: str
    title: str
    format: str
    classification: Classification
    content_hash: str
    superseded_by: str | None
    source_mtime: float
    passage_count: int
    refused_count: int
    #: Status, owner and dates; a document other than ``current`` is kept out of search.
    lifecycle: Lifecycle = field(default_factory=Lifecycle)
    #: The rule that decided its level (front matter, rule, folder, default).
    decided_by: str = ""
    #: What parsing it reported (warnings, and passages refused as credential-shaped), kept
    #: so a build that copies the document instead of parsing it reports the same.
    warnings: tuple[str, ...] = ()
    passages_refused: int = 0
    #: Whether the file has other names (hard links), which took part in deciding its level.
    hard_linked: bool = False


@dataclass
class PassageRow:
    ordinal: int
    citation_id: str
    title: str
    heading: str
    line_start: int | None
    line_end: int | None
    page_start: int | None
    page_end: int | None
    classification: Classification
    superseded: bool
    #: What is stored and shown.
    text: str
    #: What the full-text index sees: the text without markup and link targets.
    search_text: str
    #: Identity of the embedder input, for reuse across rebuilds.
    text_hash: str


@dataclass(frozen=True)
class CopiedDocument:
    """A document of the index being replaced that the new build keeps as it was: its file's
    bytes and level are unchanged, so its rows, passages and vectors are copied, not rebuilt.

    ``path``, ``content_hash`` and ``classification`` are what the build decided from the
    file now; the copy takes the previous row only where all three agree with it.
    """

    previous_id: int
    path: str
    content_hash: str
    classification: Classification
    #: The file's modification time now (a touched file keeps its bytes and its rows).
    source_mtime: float
