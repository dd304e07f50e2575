"""Ingest a corpus folder into a new index file, atomically.

Order matters for governance: a file's classification is decided from its path and front
matter *before* its content is parsed, and a document above the build ceiling is only
counted, never parsed past its metadata, embedded or named.

A corpus that has not changed since the index was built is not rebuilt: a fingerprint of
the corpus and of the settings that shape the index is stored in the index, and a new
ingest compares it before parsing anything (see :func:`corpus_fingerprint`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from governed_evidence.config import Classification
from governed_evidence.embeddings.base import Embedder, ModelIdentity
from governed_evidence.errors import FileRejectedError, IngestError
from governed_evidence.ingest.chunker import Chunk, chunk_blocks
from governed_evidence.ingest.classify import Classified, classify, level_from_front_matter, level_from_path
from governed_evidence.ingest.document import LoadedDocument
from governed_evidence.ingest.embed import embed_with_reuse, embedding_key
from governed_evidence.ingest.frontmatter import FRONT_MATTER_LIMIT
from governed_evidence.ingest.guards import (
    check_name,
    check_source_location,
    check_source_size,
    find_credentials,
    key_block_spans,
    printable_name,
)
from governed_evidence.ingest.loaders import SUPPORTED_SUFFIXES, load_document
from governed_evidence.invisible import strip_invisible
from governed_evidence.logging import get_logger
from governed_evidence.store.build import CarryOver, DocumentRow, IndexBuilder, PassageRow
from governed_evidence.store.meta import IndexMeta
from governed_evidence.store.previous import KeptIndex, kept_index
from governed_evidence.store.schema import SCHEMA_VERSION
from governed_evidence.store.text import search_text

__all__ = [
    "INGEST_LOGIC_VERSION",
    "MAX_PASSAGE_CHARS",
    "IngestReport",
    "citation_id",
    "corpus_fingerprint",
    "ingest_corpus",
]

log = get_logger("ingest")

#: Longest passage stored. Prose passages are at most a few thousand characters (the
#: largest in the GSA handbook is about 8,300); the cap bounds what one citation can carry.
MAX_PASSAGE_CHARS = 20_000

#: Version of what turns files into an index: loaders, guards, classification, chunking,
#: citation ids and what a passage stores. It is part of the corpus fingerprint, so bump it
#: with any change that would build the same corpus into a different index; otherwise an
#: index built by the old logic is kept as "unchanged".
INGEST_LOGIC_VERSION = 2  # 2: links not followed, names checked, labels fail closed, key runs refused

ProgressFn = Callable[[str, int, int], None]


@dataclass
class IngestReport:
    files_seen: int = 0
    documents_indexed: int = 0
    superseded_documents: int = 0
    passages: int = 0
    passages_refused: int = 0
    embeddings_reused: int = 0
    embeddings_computed: int = 0
    #: Documents above the build ceiling: counted, never named.
    excluded_above_ceiling: int = 0
    unsupported_files: int = 0
    rejected: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    #: True when the corpus fingerprint matched and the existing index was kept as it was:
    #: the counts then come from that index, and rejections and warnings (which only a
    #: parse finds) are not repeated.
    unchanged: bool = False
    #: Build time of the index now at the target (the kept one when ``unchanged``).
    built_at: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "unchanged": self.unchanged,
            "built_at": self.built_at,
            "files_seen": self.files_seen,
            "documents_indexed": self.documents_indexed,
            "superseded_documents": self.superseded_documents,
            "passages": self.passages,
            "passages_refused": self.passages_refused,
            "embeddings_reused": self.embeddings_reused,
            "embeddings_computed": self.embeddings_computed,
            "excluded_above_ceiling": self.excluded_above_ceiling,
            "unsupported_files": self.unsupported_files,
            "rejected": [{"document": p, "reason": r} for p, r in self.rejected],
            "warnings": [{"document": p, "warning": w} for p, w in self.warnings],
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
        }


@dataclass
class _Prepared:
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


def _walk(corpus: Path) -> Iterator[Path]:
    """Files under ``corpus`` in a stable order, skipping hidden files and folders."""
    for path in sorted(corpus.rglob("*")):
        rel = path.relative_to(corpus)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if path.is_dir() and not path.is_symlink():
            continue
        yield path


@dataclass(frozen=True)
class _Source:
    path: Path
    rel: PurePosixPath
    #: A format a loader reads; other files are only counted.
    supported: bool


def _sources(corpus: Path) -> list[_Source]:
    """Every file an ingest considers. The fingerprint and the build both iterate this one
    list, so what is fingerprinted is exactly what is built."""
    return [
        _Source(path, PurePosixPath(path.relative_to(corpus).as_posix()), path.suffix.lower() in SUPPORTED_SUFFIXES)
        for path in _walk(corpus)
    ]


@dataclass(frozen=True)
class _Names:
    """Every name one file has inside the corpus."""

    #: Names the walk ingests (supported, not hidden), sorted: the file is indexed under one.
    indexable: tuple[PurePosixPath, ...]
    #: Its other names in the corpus (hidden, or of another format): never indexed, but
    #: their folders still say how sensitive the file is.
    other: tuple[PurePosixPath, ...]
    #: Names outside the corpus, by the link count (their folders mean nothing here).
    outside: int


def _hard_link_groups(corpus: Path, sources: list[_Source]) -> dict[PurePosixPath, _Names]:
    """Every supported file that has another name in the corpus: all its names.

    One file reached by two names is one document with two claims to a level (a hard link
    in public/ to a file in restricted/ must not publish it), so the names are classified
    together and the file is indexed once. Hidden names and names of other formats count
    too: a hard link public/copy.md of restricted/.draft.md is the restricted draft.
    """
    by_inode: dict[tuple[int, int], list[PurePosixPath]] = {}
    links: dict[tuple[int, int], int] = {}
    # Every regular file under the corpus, hidden ones included, without following links.
    for folder, _, files in os.walk(corpus):
        for name in files:
            path = Path(folder, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                key = (info.st_dev, info.st_ino)
                by_inode.setdefault(key, []).append(PurePosixPath(path.relative_to(corpus).as_posix()))
                links[key] = info.st_nlink
    indexable = {s.rel for s in sources if s.supported}
    groups: dict[PurePosixPath, _Names] = {}
    for key, names in by_inode.items():
        found = [n for n in sorted(names) if n in indexable]
        if not found:
            continue
        group = _Names(tuple(found), tuple(n for n in sorted(names) if n not in indexable), links[key] - len(names))
        for member in found:
            groups[member] = group
    return groups


def _source_state(path: Path, rel: PurePosixPath, root: Path, max_file_bytes: int) -> list[object]:
    """What the build's outcome for one supported file depends on, found without parsing it.

    The same location guard as the build decides whether the file may be opened at all; a
    file that may not (a link leaving the corpus, a loop, a pipe) is described by the reason
    alone, which is all the build learns of it too. A file over the size limit is only read
    as far as classification reads it (its front matter window): the build refuses it by its
    size, so the rest of its bytes cannot change the index, and reading them would defeat
    the limit. Every other file is hashed whole, whatever its classification: a change to a
    document above the ceiling (a relabelled one, say) must rebuild too. Its bytes go into
    the one corpus digest only; nothing about it is parsed, stored or named.
    """
    try:
        check_name(str(rel))
        check_source_location(path, root, root_resolved=True)
    except FileRejectedError as exc:
        return ["refused", str(exc)]
    try:
        # Non-blocking, and checked again on the open descriptor: a pipe swapped in after the
        # location check must neither block the ingest nor be read.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        return ["unreadable", type(exc).__name__]
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return ["refused", "not a regular file"]
        remaining = info.st_size if info.st_size <= max_file_bytes else FRONT_MATTER_LIMIT
        digest = hashlib.sha256()
        while remaining > 0:
            block = os.read(fd, min(remaining, 1 << 20))
            if not block:
                break
            digest.update(block)
            remaining -= len(block)
        return ["file", info.st_size, digest.hexdigest()]
    except OSError as exc:
        return ["unreadable", type(exc).__name__]
    finally:
        os.close(fd)


def _fingerprint(
    root: Path,
    sources: list[_Source],
    identity: ModelIdentity,
    *,
    ceiling: Classification,
    default_classification: Classification,
    max_file_bytes: int,
) -> str:
    # Everything besides the files that shapes the index: the ingest logic, the schema, the
    # build settings and the embedding model (its vectors are stored).
    settings = {
        "ingest_logic": INGEST_LOGIC_VERSION,
        "schema_version": SCHEMA_VERSION,
        "max_passage_chars": MAX_PASSAGE_CHARS,
        "corpus": str(root),
        "ceiling": ceiling.label,
        "default_classification": default_classification.label,
        "max_file_bytes": max_file_bytes,
        "embedding_model": identity.model_id,
        "embedding_dimension": identity.dimension,
        "embedding_model_checksum": identity.checksum,
    }
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    # Unsupported files never reach the index; they are listed by path (an added or removed
    # one still rebuilds, conservatively) but never opened.
    groups = _hard_link_groups(root, sources)
    entries = sorted(
        (
            str(s.rel),
            [
                *(_source_state(s.path, s.rel, root, max_file_bytes) if s.supported else ["unsupported"]),
                # Which names are one file changes which one is indexed, and at what level.
                *(
                    [["hard links", *map(str, groups[s.rel].indexable + groups[s.rel].other)]]
                    if s.rel in groups
                    else []
                ),
            ],
        )
        for s in sources
    )
    for rel, state in entries:
        # One JSON line per file: unambiguous whatever characters a file name holds.
        digest.update(json.dumps([rel, *state]).encode() + b"\n")
    return digest.hexdigest()


def corpus_fingerprint(
    corpus: Path,
    identity: ModelIdentity,
    *,
    ceiling: Classification,
    default_classification: Classification = Classification.RESTRICTED,
    max_file_bytes: int = 64 * 1024 * 1024,
) -> str:
    """SHA-256 over everything an ingest of ``corpus`` depends on.

    Equal fingerprints mean an ingest would build the same index (up to its build time):
    the ingest logic version, the schema, the settings (resolved corpus path, ceiling,
    default classification, file size limit), the embedding model, and for every file the
    walk considers, in path order, its relative path and what its outcome depends on (size
    and SHA-256 of its bytes). Only this one digest is stored in the index: no file names,
    sizes or per-file hashes, so it names nothing, above the ceiling or not. It is content
    based, not time based: touching a file (a new modification time, the same bytes) keeps it.
    """
    return _fingerprint(
        corpus.resolve(),
        _sources(corpus),
        identity,
        ceiling=ceiling,
        default_classification=default_classification,
        max_file_bytes=max_file_bytes,
    )


def _classify_names(
    corpus: Path, rel: PurePosixPath, names: _Names | None, default: Classification
) -> tuple[Classified, PurePosixPath]:
    """The classification of the file at ``rel`` over every name it has here, and the name
    it is indexed under.

    Each indexable name is classified on its own (front matter, else its folder), each
    other name by its folder; the file takes the most restrictive result, and is indexed
    under the first indexable name whose own level that is, so a hard link elsewhere
    neither lowers its level nor moves it.
    """
    if names is None:
        return classify(corpus / rel, rel, default), rel
    results = {name: classify(corpus / name, name, default) for name in names.indexable}
    level = max(
        max(result.level for result in results.values()),
        max((level_from_path(name, default) for name in names.other), default=Classification.PUBLIC),
    )
    home = next((name for name in names.indexable if results[name].level == level), names.indexable[0])
    decided = results[home]
    return Classified(level, decided.front, decided.doubts), home


def _fallback_title(path: Path) -> str:
    return re.sub(r"[_-]+", " ", path.stem).strip() or path.name


#: Longest ``superseded_by`` value accepted: a path, not a document.
MAX_SUPERSEDED_BY_CHARS = 1024


def _sanitise(doc: LoadedDocument, fallback_title: str) -> None:
    """Invisible characters out of every field a passage serves, whatever the loader did.

    Titles come from DOCX core properties and PDF metadata, headings from PDF outlines:
    loaders see those strings in many places, so the one guarantee is made here, once.
    """
    doc.title = strip_invisible(doc.title).strip() or fallback_title
    for block in doc.blocks:
        block.text = strip_invisible(block.text)
        block.headings = tuple(strip_invisible(h) for h in block.headings)
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


def _prepare(path: Path, rel: PurePosixPath, decided: Classified, model_id: str, report: IngestReport) -> _Prepared:
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
        doc.title = _fallback_title(path)
    for block in kept:
        block.headings = tuple(h for h in block.headings if not find_credentials(h))
    chunks = []
    oversized = 0
    for chunk in chunk_blocks(kept):
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
    )
    return _Prepared(row, passages, inputs)


def _unchanged_report(sources: list[_Source], kept: KeptIndex) -> IngestReport:
    supported = sum(1 for s in sources if s.supported)
    return IngestReport(
        files_seen=supported,
        unsupported_files=len(sources) - supported,
        documents_indexed=kept.meta.documents,
        passages=kept.meta.passages,
        superseded_documents=kept.superseded_documents,
        excluded_above_ceiling=kept.meta.excluded_above_ceiling,
        unchanged=True,
        built_at=kept.meta.built_at,
    )


def _terminal_progress(stage: str, done: int, total: int) -> None:
    if sys.stderr.isatty():
        end = "\n" if done >= total else ""
        print(f"\r{stage}: {done}/{total}", end=end, file=sys.stderr, flush=True)


def ingest_corpus(
    corpus: Path,
    db: Path,
    embedder: Embedder,
    *,
    ceiling: Classification,
    default_classification: Classification = Classification.RESTRICTED,
    max_file_bytes: int = 64 * 1024 * 1024,
    progress: ProgressFn | None = _terminal_progress,
    force: bool = False,
    carry_over: CarryOver | None = None,
) -> IngestReport:
    """Build a new index for ``corpus`` at ``db``; the old file serves until the rename.

    When the index at ``db`` was built from the same corpus fingerprint (same files, same
    settings, same model) and is sound, it is kept untouched and the report says
    ``unchanged``; ``force`` rebuilds regardless. ``carry_over`` keeps state other parts
    hold in the index file across a rebuild (the statistics cache: see the CLI).
    """
    if not corpus.is_dir():
        raise IngestError("the corpus folder does not exist or is not a folder")
    report = IngestReport()
    identity = embedder.identity
    started = time.perf_counter()
    root = corpus.resolve()
    sources = _sources(corpus)
    # Taken before anything is parsed: a file changed while this build runs then differs
    # from the stored fingerprint next time, so it is rebuilt rather than wrongly kept.
    fingerprint = _fingerprint(
        root,
        sources,
        identity,
        ceiling=ceiling,
        default_classification=default_classification,
        max_file_bytes=max_file_bytes,
    )
    report.seconds["fingerprint"] = time.perf_counter() - started
    if not force:
        t0 = time.perf_counter()
        kept = kept_index(db, fingerprint)
        if kept is not None:
            seconds = report.seconds
            report = _unchanged_report(sources, kept)
            report.seconds = {**seconds, "check": time.perf_counter() - t0, "total": time.perf_counter() - started}
            log.info(
                "ingest_unchanged",
                documents=report.documents_indexed,
                passages=report.passages,
                seconds=round(report.seconds["total"], 3),
            )
            return report
    parse_started = time.perf_counter()
    # Whether every outcome is a function of what the fingerprint covers. A read that failed
    # here but not while fingerprinting may be transient: then no fingerprint is stored, so
    # the next ingest rebuilds instead of keeping the rejection.
    deterministic = True
    prepared: list[_Prepared] = []
    groups = _hard_link_groups(root, sources)
    for source in sources:
        path, rel = source.path, source.rel
        if not source.supported:
            report.unsupported_files += 1
            continue
        report.files_seen += 1
        try:
            try:
                check_name(str(rel))
                check_source_location(path, root, root_resolved=True)
            except FileRejectedError:
                # Not safe to open, so only its path can say how sensitive it is; a file
                # above the ceiling is counted, never named.
                if level_from_path(rel, default_classification) > ceiling:
                    report.excluded_above_ceiling += 1
                    continue
                raise
            names = groups.get(rel)
            decided, canonical = _classify_names(corpus, rel, names, default_classification)
            if decided.level > ceiling:
                report.excluded_above_ceiling += 1
                continue
            if canonical != rel:
                raise FileRejectedError(
                    f"hard link to {canonical}, another name of the same file: indexed once, under that name, "
                    "at the most restrictive level of its names"
                )
            check_source_size(path, max_file_bytes)
            item = _prepare(path, rel, decided, identity.model_id, report)
            if names is not None and names.outside > 0:
                report.warnings.append(
                    (str(rel), f"has {names.outside} more hard link(s) outside the corpus, which do not set its level")
                )
            if item.row.classification > ceiling:
                report.excluded_above_ceiling += 1
                continue
        except FileRejectedError as exc:
            name = printable_name(str(rel))
            report.rejected.append((name, str(exc)))
            log.warning("file_rejected", document=name, reason=str(exc))
            continue
        except OSError as exc:
            report.rejected.append((printable_name(str(rel)), f"cannot be read ({type(exc).__name__})"))
            deterministic = False
            continue
        prepared.append(item)
    report.seconds["parse_and_chunk"] = time.perf_counter() - parse_started

    known_paths = {p.row.path for p in prepared}
    for item in prepared:
        target = item.row.superseded_by
        if target and target not in known_paths:
            report.warnings.append((item.row.path, "superseded_by names a document that is not in the index"))

    t0 = time.perf_counter()
    all_rows = [p for item in prepared for p in item.passages]
    all_inputs = [t for item in prepared for t in item.embed_inputs]
    embedded = embed_with_reuse(
        db, embedder, [(row.text_hash, text) for row, text in zip(all_rows, all_inputs, strict=True)], progress=progress
    )
    report.embeddings_reused = embedded.reused
    report.embeddings_computed = embedded.computed
    report.seconds["embed"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    with IndexBuilder(db, dimension=identity.dimension, ceiling=ceiling, carry_over=carry_over) as builder:
        for item in prepared:
            doc_id = builder.add_document(item.row)
            for row in item.passages:
                builder.add_passage(doc_id, row, embedded.vectors[row.text_hash])
        report.documents_indexed = len(prepared)
        report.superseded_documents = sum(1 for p in prepared if p.row.superseded_by)
        report.passages = len(all_rows)
        report.built_at = datetime.now(UTC).replace(microsecond=0).isoformat()
        builder.commit(
            IndexMeta(
                embedding_model=identity.model_id,
                embedding_model_checksum=identity.checksum,
                embedding_dimension=identity.dimension,
                ceiling=ceiling,
                default_classification=default_classification,
                built_at=report.built_at,
                corpus_name=root.name,
                documents=report.documents_indexed,
                passages=report.passages,
                excluded_above_ceiling=report.excluded_above_ceiling,
                corpus_fingerprint=fingerprint if deterministic else None,
            )
        )
    report.seconds["write"] = time.perf_counter() - t0
    report.seconds["total"] = time.perf_counter() - started
    log.info(
        "ingest_finished",
        documents=report.documents_indexed,
        passages=report.passages,
        rejected=len(report.rejected),
        excluded_above_ceiling=report.excluded_above_ceiling,
        embeddings_reused=report.embeddings_reused,
        seconds=round(report.seconds["total"], 3),
    )
    return report
