"""PowerPoint decks via python-pptx: one section per slide, its title as the heading.

Positions are slide numbers, reported as ``pages``, so a citation reads
``induction.pptx#expenses:p4``. A slide's text is read in the order PowerPoint's own
reading order uses (the shapes' order in the slide, which screen readers follow), group
shapes included; a table's rows carry their header names (``rows``); the slide number,
date and footer placeholders are left out, like a PDF's running lines. The speaker notes
are what a presenter says about the slide, often the rule itself ("claims over 30 days
need a director's approval"), so they are part of the slide's section, after a
"Speaker notes:" lead-in that tells them from the slide's own text. Pictures, charts,
SmartArt and media are not read.

The archive is judged and copied before python-pptx sees it (``ooxml``): python-pptx reads
every member into memory, so media and embedded files reach it as empty parts. The parse
runs in a child process under the per-file memory and processor budgets (``bounded``),
paced by the XML size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.document import Block, LoadedDocument
from governed_evidence.ingest.guards import sanitize
from governed_evidence.ingest.loaders.bounded import limit_cpu, run_bounded
from governed_evidence.ingest.loaders.labelled_rows import cell_text, labelled_row
from governed_evidence.ingest.loaders.ooxml import PackageLimits, read_package

__all__ = ["CPU_BASE_SECONDS", "CPU_SECONDS_PER_MIB", "LIMITS", "MAX_SLIDES", "NOTES_LEAD", "load_pptx"]

#: A deck writes about four members a slide (slide, notes, their relationships) besides its
#: media: 10,000 members is a deck of some 2,000 slides. python-pptx parses every XML part
#: into a tree (a 500-slide deck with notes: 2 MB of XML, 0.45 s): 32 MiB of XML stays well
#: inside the per-file memory budget.
LIMITS = PackageLimits(
    label="PPTX", max_members=10_000, max_uncompressed_bytes=200 * 1024 * 1024, max_xml_bytes=32 * 1024 * 1024
)
MAX_SLIDES = 2_000
#: Processor time paced by the XML size: an allowance for opening the deck, then about ten
#: times the measured cost of a MiB.
CPU_BASE_SECONDS = 10.0
CPU_SECONDS_PER_MIB = 2.0
#: What starts a slide's speaker notes in its section.
NOTES_LEAD = "Speaker notes: "
#: Titles PowerPoint writes into a new deck's properties: not the deck's title.
_PLACEHOLDER_TITLES = frozenset({"powerpoint presentation", "presentation"})
#: Placeholders that repeat on every slide (PP_PLACEHOLDER: date 16, footer 15, slide number 13).
_RUNNING_PLACEHOLDERS = frozenset({13, 15, 16})


@dataclass
class _Slide:
    """One slide as the parser process returns it: plain strings, so it pickles small."""

    number: int
    title: str
    #: The slide's text in reading order: (kind, text); a table as ("table", rows joined by lines).
    items: list[tuple[str, str]] = field(default_factory=list)
    notes: str = ""


def _paragraphs(frame: Any) -> list[str]:
    """A text frame's paragraphs, soft line breaks (``\\v`` in python-pptx) as line breaks."""
    texts = [sanitize(p.text.replace("\v", "\n")).strip() for p in frame.paragraphs]
    return [t for t in texts if t]


def _table_rows(table: Any) -> list[str]:
    grid = [[cell_text(sanitize(cell.text)) for cell in row.cells] for row in table.rows]
    grid = [cells for cells in grid if any(cells)]
    if len(grid) < 2:
        return [" | ".join(c for c in cells if c) for cells in grid]
    header, body = grid[0], grid[1:]
    return [labelled_row(header, cells) for cells in body]


def _shape_items(shape: Any, title_id: int | None, items: list[tuple[str, str]]) -> None:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    if shape.shape_id == title_id:
        return
    if shape.is_placeholder:
        kind = shape.placeholder_format.type
        if kind is not None and int(kind) in _RUNNING_PLACEHOLDERS:
            return
    if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
        for inner in shape.shapes:
            _shape_items(inner, title_id, items)
        return
    if getattr(shape, "has_table", False) and shape.has_table:
        rows = _table_rows(shape.table)
        if rows:
            items.append(("table", "\n".join(rows)))
        return
    if getattr(shape, "has_text_frame", False) and shape.has_text_frame:
        for paragraph in _paragraphs(shape.text_frame):
            items.append(("paragraph", paragraph))


def _extract(path: Path) -> tuple[list[_Slide], str | None]:
    """Run in the bounded child: the archive checks, then python-pptx."""
    from pptx import Presentation

    package, xml_bytes = read_package(path, LIMITS)
    xml_mib = xml_bytes / (1024 * 1024)
    limit_cpu(
        CPU_BASE_SECONDS + CPU_SECONDS_PER_MIB * xml_mib,
        f"for {xml_mib:.1f} MiB of XML, with {CPU_BASE_SECONDS:g} s plus {CPU_SECONDS_PER_MIB:g} s a MiB allowed",
    )
    slides: list[_Slide] = []
    try:
        deck = Presentation(package)
        count = len(deck.slides)
        if count > MAX_SLIDES:
            raise FileRejectedError(f"PPTX has {count} slides, over the {MAX_SLIDES}-slide limit")
        for number, slide in enumerate(deck.slides, start=1):
            title_shape = slide.shapes.title
            title = ""
            if title_shape is not None and title_shape.has_text_frame:
                title = " ".join(_paragraphs(title_shape.text_frame))
            found = _Slide(number, cell_text(title))
            for shape in slide.shapes:
                _shape_items(shape, None if title_shape is None else title_shape.shape_id, found.items)
            if slide.has_notes_slide:
                frame = slide.notes_slide.notes_text_frame
                if frame is not None:
                    found.notes = "\n".join(_paragraphs(frame))
            slides.append(found)
        core_title = deck.core_properties.title
    except (FileRejectedError, MemoryError):
        raise
    except Exception as exc:  # noqa: BLE001 - the parser raises many unrelated types
        raise FileRejectedError(f"PPTX cannot be parsed ({type(exc).__name__})") from None
    return slides, core_title if isinstance(core_title, str) else None


def load_pptx(path: Path, fallback_title: str) -> LoadedDocument:
    # Imported here so the parser process starts with it loaded rather than importing it.
    import pptx  # noqa: F401

    slides, core_title = run_bounded("PPTX", _extract, path)
    return _build(slides, core_title, fallback_title)


def _build(slides: list[_Slide], core_title: str | None, fallback_title: str) -> LoadedDocument:
    blocks: list[Block] = []
    for slide in slides:
        heading = slide.title or f"Slide {slide.number}"
        headings = (heading,)
        blocks.append(Block("heading", heading, headings, page=slide.number))
        for kind, text in slide.items:
            if kind == "table":
                rows = text.split("\n")
                blocks.append(Block("table", text, headings, page=slide.number, table_rows=[(r, None) for r in rows]))
            else:
                blocks.append(Block("paragraph", text, headings, page=slide.number))
        if slide.notes:
            blocks.append(Block("paragraph", NOTES_LEAD + slide.notes, headings, page=slide.number))
    if not any(b.kind != "heading" for b in blocks):
        raise FileRejectedError("PPTX has no text (no slide has text beyond its title)")
    title = (core_title or "").strip()
    if not title or title.casefold() in _PLACEHOLDER_TITLES:
        title = next((s.title for s in slides if s.title), "") or fallback_title
    return LoadedDocument(title=sanitize(title), format="pptx", blocks=blocks, separate_sections=True)
