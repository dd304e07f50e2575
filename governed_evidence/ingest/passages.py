"""One document's passages: loaded, sanitised, guarded, chunked and cited.

Everything a passage serves (text, title, heading, citation id) is decided here, after the
document's classification is known and only for documents at or below the build ceiling.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.chunker import Chunk, chunk_blocks
from governed_evidence.ingest.classify import Classified, level_from_front_matter
from governed_evidence.ingest.document import LoadedDocument
from governed_evidence.ingest.embed import embedding_key
from governed_evidence.ingest.governance import GOVERNANCE_FILE, NO_GOVERNANCE, Governance, document_lifecycle
from governed_evidence.ingest.guards import find_credentials, key_block_spans
from governed_evidence.ingest.loaders import load_document
from governed_evidence.ingest.report import IngestReport
from governed_evidence.ingest.templates import strip_template_tags
from governed_evidence.invisible import strip_invisible
from governed_evidence.store.build_rows import DocumentRow, PassageRow
from governed_evidence.store.text import search_text

__all__ = ["MAX_PASSAGE_CHARS", "MAX_SUPERSEDED_BY_CHARS", "Prepared", "citation_id", "prepare_document"]

#: Longest passage stored. Prose passages are at most a few thousand characters (the
#: largest in the GSA handbook is about 8,300); the cap bounds what one citation can carry.
MAX_PASSAGE_CHARS = 20_000


@dataclass
class Prepared:
    row: DocumentRow
    passages: list[PassageRow]
    embed_inputs: list[str]


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:60].rstrip("-") or "top"


def citation_id(path: str, chunk: Chunk) -> str:
    """Stable, readable id: document path, section and position (lines or pages)."""
    section = _slug(chunk.headings[-1]) if chunk.headings else "top"
    if chunk.page_start is not None:
        pages = (
            f"p{chunk.page_start}" if chunk.page_start == chunk.page_end else f"p{chunk.page_start}-{chunk.page_end}"
        )
        return f"{path}#{section}:{pages}"
    return f"{path}#{section}:L{chunk.line_start}-{chunk.line_end}"


def _one_line(text: str) -> str:
    """``text`` with every run of whitespace, line breaks included, as one space."""
    return " ".join(text.split())


def _fallback_title(path: Path) -> str:
    return _one_line(re.sub(r"[_-]+", " ", path.stem)) or _one_line(path.name)


#: Longest ``superseded_by`` value accepted: a path, not a document.
MAX_SUPERSEDED_BY_CHARS = 1024


def _sanitise(doc: LoadedDocument, fallback_title: str) -> None:
    """Invisible characters out of every field a passage serves, whatever the loader did.

    Titles come from DOCX core properties, PDF metadata and YAML block scalars, headings
    from PDF outlines and multi-line Markdown headings: loaders see those strings in many
    places, so the guarantees are made here, once. Titles and headings are one line each
    (every listing and citation shows them on one), and hold no template tags (they name
    citation ids; ``ingest/templates.py``).
    """
    doc.title = _one_line(strip_template_tags(strip_invisible(doc.title))) or fallback_title
    for block in doc.blocks:
        block.text = strip_invisible(block.text)
        # A heading that was only a template (the site fills it in from the title) is the title.
        block.headings = tuple(_one_line(strip_template_tags(strip_invisible(h))) or doc.title for h in block.headings)
        block.table_header = [strip_invisible(h) for h in block.table_header]
        block.table_rows = [(strip_invisible(r), n) for r, n in block.table_rows]


def _superseded_by(value: object) -> str | None:
    """The path a document names as its replacement, or None; anything else fails the file."""
    if value is None or value is False or value == "":
        return None
    if not isinstance(value, str):
        # Only a string is a path; a structure could be anything, an alias bomb included.
        raise FileRejectedError("superseded_by must be the path of the replacing document (a string)")
    text = strip_invisible(value).strip()
    if len(text) > MAX_SUPERSEDED_BY_CHARS:
        raise FileRejectedError(f"superseded_by is longer than {MAX_SUPERSEDED_BY_CHARS} characters")
    kinds = find_credentials(text)
    if kinds:
        raise FileRejectedError(f"superseded_by is credential-shaped ({', '.join(kinds)})")
    return text or None


def prepare_document(
    path: Path,
    rel: PurePosixPath,
    decided: Classified,
    model_id: str,
    report: IngestReport,
    governance: Governance = NO_GOVERNANCE,
) -> Prepared:
    fallback = _fallback_title(path)
    doc = load_document(path, fallback)
    _sanitise(doc, fallback)
    for warning in doc.warnings:
        report.warnings.append((str(rel), warning))
    for doubt in decided.doubts:
        report.warnings.append((str(rel), f"{doubt}: classified restricted"))
    # The loader parsed the front matter again, from the whole sanitised text; should it
    # ever read a label the classification window did not, the stricter level holds.
    level = decided.level
    loaded_level = level_from_front_matter(doc.front_matter)
    if loaded_level is not None and loaded_level > level:
        level = loaded_level
        report.warnings.append((str(rel), "front matter read differently from its first 64 KiB: stricter level kept"))
    superseded_by = _superseded_by(
        doc.front_matter.values.get("superseded_by", decided.front.values.get("superseded_by"))
    )
    # Before any text is guarded or chunked: a document whose lifecycle cannot be read is
    # refused as a whole, and costs nothing more.
    lifecycle = document_lifecycle(rel, {**decided.front.values, **doc.front_matter.values}, governance)
    ruled = governance.deciding(rel, "classification")
    ruled_level = None if ruled is None else ruled.classification
    if decided.decided_by == "front matter" and ruled is not None and ruled_level is not None and level < ruled_level:
        # Front matter wins for one document, as documented; a reviewer should still see
        # every document that lowers what the operator's rule says.
        report.warnings.append(
            (
                str(rel),
                f"front matter classification {level.label} is below {ruled_level.label} "
                f"from {ruled.describe()} of {GOVERNANCE_FILE}: the front matter wins",
            )
        )
    # Refuse credential-shaped text at the block level (a paragraph, a table, a code
    # fence), before chunking, so one secret does not take its neighbours down with it.
    refused: dict[str, int] = {}

    def refuse(text: str) -> bool:
        """Count the credential shapes in ``text``; True when there are any."""
        kinds = find_credentials(text)
        for kind in kinds:
            refused[kind] = refused.get(kind, 0) + 1
        return bool(kinds)

    # A private key's armour can open and close in blocks of their own, with the key body
    # in paragraphs between them that no single-block shape matches: the whole run goes.
    in_key = set[int]()
    for first, last in key_block_spans([b.text for b in doc.blocks]):
        in_key.update(range(first, last + 1))
        refused["private key block"] = refused.get("private key block", 0) + 1
        report.passages_refused += 1
    doc.blocks = [b for i, b in enumerate(doc.blocks) if i not in in_key]

    kept = []
    for block in doc.blocks:
        if refuse(block.text):
            report.passages_refused += 1
            continue
        kept.append(block)
    # The title and the heading path are stored and served with every passage (and a
    # heading names its citation id), so a credential there is refused as well.
    if refuse(doc.title):
        doc.title = fallback
    for block in kept:
        block.headings = tuple(h for h in block.headings if not find_credentials(h))
    chunks = []
    oversized = 0
    for chunk in chunk_blocks(kept, separate_sections=doc.separate_sections):
        # Second guard: a credential split across two blocks only shows once they are joined.
        if refuse(chunk.text):
            report.passages_refused += 1
            continue
        if len(chunk.text) > MAX_PASSAGE_CHARS:
            # Words are counted, not characters: runs of markup (thousands of nested '>')
            # or an unbroken token would otherwise make one passage as large as the file,
            # and every answer citing it that large.
            oversized += 1
            continue
        chunks.append(chunk)
    passages: list[PassageRow] = []
    inputs: list[str] = []
    seen_ids: dict[str, int] = {}
    for chunk in chunks:
        cid = citation_id(str(rel), chunk)
        if cid in seen_ids:
            seen_ids[cid] += 1
            cid = f"{cid}~{seen_ids[cid]}"
        else:
            seen_ids[cid] = 1
        headings = chunk.headings
        if headings and headings[0].strip().lower() == doc.title.strip().lower():
            headings = headings[1:]  # the top heading repeats the title
        heading = " > ".join(headings)
        clean = search_text(chunk.text)
        embed_input = f"{doc.title}. {heading}\n{clean}" if heading else f"{doc.title}\n{clean}"
        text_hash = embedding_key(model_id, embed_input)
        passages.append(
            PassageRow(
                ordinal=len(passages),
                citation_id=cid,
                title=doc.title,
                heading=heading,
                line_start=chunk.line_start,
                line_end=chunk.line_end,
                page_start=chunk.page_start,
                page_end=chunk.page_end,
                classification=level,
                superseded=superseded_by is not None,
                text=chunk.text,
                search_text=clean,
                text_hash=text_hash,
            )
        )
        inputs.append(embed_input)
    if refused:
        names = ", ".join(sorted(refused))
        report.warnings.append(
            (str(rel), f"{sum(refused.values())} credential-shaped match(es) ({names}): text refused, not indexed")
        )
    if oversized:
        report.warnings.append(
            (str(rel), f"{oversized} passage(s) over {MAX_PASSAGE_CHARS} characters (not prose) refused, not indexed")
        )
    if not passages:
        if oversized and not refused:
            raise FileRejectedError(f"every passage is over {MAX_PASSAGE_CHARS} characters (markup or unbroken text)")
        raise FileRejectedError("all text was refused" if refused else "document has no text to index")
    data = path.read_bytes()
    row = DocumentRow(
        path=str(rel),
        title=doc.title,
        format=doc.format,
        classification=level,
        content_hash=hashlib.sha256(data).hexdigest(),
        superseded_by=superseded_by,
        source_mtime=path.stat().st_mtime,
        passage_count=len(passages),
        refused_count=sum(refused.values()),
        lifecycle=lifecycle,
    )
    return Prepared(row, passages, inputs)
