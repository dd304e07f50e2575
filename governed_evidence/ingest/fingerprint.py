"""The corpus fingerprint: one digest of everything an ingest's outcome depends on.

A corpus whose fingerprint matches the one stored in the index is not rebuilt. Only the
digest is stored: no file names, sizes or per-file hashes, so it names nothing, above the
ceiling or not.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from governed_evidence.config import Classification
from governed_evidence.embeddings.base import ModelIdentity
from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.frontmatter import FRONT_MATTER_LIMIT
from governed_evidence.ingest.governance import load_governance
from governed_evidence.ingest.guards import check_name, check_source_location
from governed_evidence.ingest.passages import MAX_PASSAGE_CHARS
from governed_evidence.ingest.sources import Names, Source, hard_link_groups, sources
from governed_evidence.store.schema import SCHEMA_VERSION

__all__ = ["INGEST_LOGIC_VERSION", "CorpusDigest", "corpus_fingerprint", "fingerprint"]

#: Version of what turns files into an index: loaders, guards, classification, chunking,
#: citation ids and what a passage stores. It is part of the corpus fingerprint, so bump it
#: with any change that would build the same corpus into a different index; otherwise an
#: index built by the old logic is kept as "unchanged".
#: 2: links not followed, names checked, labels fail closed, key runs refused
#: 3: PDF running headers dropped, sentences kept across page breaks, wrapped lines not headings
#: 4: bare YAML and TOML front matter read, titles from name:, titles and headings one line
#: 5: the governance file's rules, lifecycle (status, owner, review_by, effective) from rules and front matter
#: 6: HTML, XLSX and PPTX read; Office lock files (~$) skipped; sheets and slides never share a passage
#: 7: ERB and Handlebars template tags removed like Liquid's; no title or heading holds a tag
#: 8: CSV and TSV read like a sheet
#: 9: a governance rule's link, stored as the document's source link
#: 10: the similarity calibration measured per level at ingest, recorded in the meta
#: 11: the calibration measured from unrelated questions and headings asked of the model
INGEST_LOGIC_VERSION = 11


@dataclass(frozen=True)
class _State:
    #: What goes into the digest for the file.
    entry: list[object]
    #: SHA-256 and modification time of a file read whole (the ones a build may copy).
    whole: tuple[str, float] | None = None


def _source_state(path: Path, rel: PurePosixPath, root: Path, max_file_bytes: int) -> _State:
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
        return _State(["refused", str(exc)])
    try:
        # Non-blocking, and checked again on the open descriptor: a pipe swapped in after the
        # location check must neither block the ingest nor be read.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        return _State(["unreadable", type(exc).__name__])
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return _State(["refused", "not a regular file"])
        remaining = info.st_size if info.st_size <= max_file_bytes else FRONT_MATTER_LIMIT
        digest = hashlib.sha256()
        while remaining > 0:
            block = os.read(fd, min(remaining, 1 << 20))
            if not block:
                break
            digest.update(block)
            remaining -= len(block)
        sha = digest.hexdigest()
        # Content based, not time based: the modification time is not digested (touching a
        # file keeps the fingerprint); it is only what a copied document records.
        whole = (sha, info.st_mtime) if info.st_size <= max_file_bytes else None
        return _State(["file", info.st_size, sha], whole)
    except OSError as exc:
        return _State(["unreadable", type(exc).__name__])
    finally:
        os.close(fd)


@dataclass(frozen=True)
class CorpusDigest:
    """What the fingerprint found: the one stored digest, and what an incremental build
    needs from the same walk (held in memory only, never stored)."""

    #: The corpus fingerprint (see :func:`corpus_fingerprint`).
    corpus: str
    #: Digest of the settings besides the files and the corpus folder's location: an
    #: incremental build copies a document from the previous index only when this equals the
    #: one that index was built with.
    settings: str
    #: SHA-256 and modification time of each supported file read whole, by corpus-relative
    #: path (files refused by location, unreadable or over the size limit have none); empty
    #: unless asked for (only an incremental build, which copies unchanged files, needs them).
    files: Mapping[str, tuple[str, float]]


def fingerprint(
    root: Path,
    sources: list[Source],
    groups: Mapping[PurePosixPath, Names],
    identity: ModelIdentity,
    *,
    ceiling: Classification,
    default_classification: Classification,
    max_file_bytes: int,
    governance: str | None = None,
    keep_hashes: bool = False,
) -> CorpusDigest:
    """The digests (see :func:`corpus_fingerprint`); ``governance`` is the digest of the
    governance file's bytes, None when the corpus has none. With ``keep_hashes`` each file's
    hash is kept too (:attr:`CorpusDigest.files`)."""
    # Everything besides the files that shapes the index: the ingest logic, the schema, the
    # build settings, the governance rules and the embedding model (its vectors are stored).
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
        # The rules decide levels and what is searched: editing one must rebuild.
        "governance": governance,
    }
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    files: dict[str, tuple[str, float]] = {}
    # One JSON line per file in the order of their names, digested as each file is read:
    # nothing a file is held for the whole walk but its hash, when asked for.
    for s in sorted(sources, key=lambda s: s.name):
        # Unsupported files never reach the index; they are listed by path (an added or
        # removed one still rebuilds, conservatively) but never opened.
        entry: list[object] = ["unsupported"]
        if s.supported:
            state = _source_state(s.path, s.rel, root, max_file_bytes)
            entry = state.entry
            if keep_hashes and state.whole is not None:
                files[s.name] = state.whole
        names = groups.get(s.rel)
        if names is not None:
            # Which names are one file changes which one is indexed, and at what level.
            entry = [*entry, ["hard links", *map(str, names.indexable + names.other)]]
        # Unambiguous whatever characters a file name holds.
        digest.update(json.dumps([s.name, *entry]).encode() + b"\n")
    # What a document's rows depend on besides its path and bytes: the settings without the
    # corpus folder's location (rows hold paths relative to it, so a moved folder copies).
    rows_settings = json.dumps({k: v for k, v in settings.items() if k != "corpus"}, sort_keys=True).encode()
    return CorpusDigest(digest.hexdigest(), hashlib.sha256(rows_settings).hexdigest(), files)


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
    default classification, file size limit), the governance file's bytes, the embedding
    model, and for every file the
    walk considers, in path order, its relative path and what its outcome depends on (size
    and SHA-256 of its bytes). Only this one digest is stored in the index: no file names,
    sizes or per-file hashes, so it names nothing, above the ceiling or not. It is content
    based, not time based: touching a file (a new modification time, the same bytes) keeps it.
    """
    root = corpus.resolve()
    considered = sources(corpus)
    return fingerprint(
        root,
        considered,
        hard_link_groups(root, considered),
        identity,
        ceiling=ceiling,
        default_classification=default_classification,
        max_file_bytes=max_file_bytes,
        governance=load_governance(root).digest,
    ).corpus
