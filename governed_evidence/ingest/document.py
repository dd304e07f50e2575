"""The shape every loader produces: ordered blocks with their position in the source."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from governed_evidence.ingest.frontmatter import FrontMatter

__all__ = ["Block", "BlockKind", "LoadedDocument"]

BlockKind = Literal["heading", "paragraph", "list", "table", "code", "quote"]


@dataclass
class Block:
    kind: BlockKind
    #: Text as it reads in the source (after sanitising).
    text: str
    #: Headings in effect, outermost first (for a heading block, including itself).
    headings: tuple[str, ...]
    #: 1-based inclusive line span in the source text (text formats, DOCX paragraphs).
    line_start: int | None = None
    line_end: int | None = None
    #: 1-based page (PDF).
    page: int | None = None
    #: For tables: the header rows, repeated in every piece when a table is split.
    table_header: list[str] = field(default_factory=list)
    #: For tables: body rows with their 1-based line numbers (or None).
    table_rows: list[tuple[str, int | None]] = field(default_factory=list)
    #: 1-based last page when the block runs on past ``page`` (a PDF sentence across a page break).
    page_end: int | None = None

    @property
    def words(self) -> int:
        return len(self.text.split())


@dataclass
class LoadedDocument:
    title: str
    format: Literal["markdown", "text", "pdf", "docx", "html", "xlsx", "pptx", "csv"]
    blocks: list[Block]
    front_matter: FrontMatter = field(default_factory=FrontMatter)
    #: Non-fatal notes for the operator (e.g. "XFA form: only static text extracted").
    warnings: list[str] = field(default_factory=list)
    #: True when passages never join two sections: a workbook's sheets (row numbers restart
    #: in each) and a deck's slides (each cited by its own title and number).
    separate_sections: bool = False
