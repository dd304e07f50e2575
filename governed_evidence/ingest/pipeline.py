"""Ingest a corpus folder into a new index file, atomically.

Order matters for governance: a file's classification is decided from its path and front
matter *before* its content is parsed, and a document above the build ceiling is only
counted, never parsed past its metadata, embedded or named.

A corpus that has not changed since the index was built is not rebuilt: a fingerprint of
the corpus and of the settings that shape the index is stored in the index, and a new
ingest compares it before parsing anything (see :func:`corpus_fingerprint`).

A corpus that has changed is built incrementally: a file whose bytes are what they were
when the index being replaced was built, under the same settings, is neither classified
nor parsed again (its level and rows are a function of its path, its bytes and those
settings); its document, passages, vectors and full-text entries are copied from that index
into the new file (:meth:`IndexBuilder.copy_documents`), in the order and under the ids a
full build would give them. Only changed and new files are parsed and embedded. The new
file is still built beside the old one and renamed over it, so the old index serves until
then, as with a full build.

The steps live in modules named for them: :mod:`sources` (what is considered, and which
names are one file), :mod:`governance` (the corpus's rules), :mod:`fingerprint`,
:mod:`reading` (the loop over the files, parsing each or copying it unchanged),
:mod:`passages` (one document's passages), :mod:`embed` (vectors, reused where unchanged)
and :mod:`report`.

:func:`dry_run_corpus` runs the same reading and classification and stops before the
embedder: what a reviewer checks before the first real build.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

from governed_evidence.config import Classification
from governed_evidence.embeddings.base import Embedder
from governed_evidence.errors import IngestError
from governed_evidence.ingest.calibrate import level_calibrations
from governed_evidence.ingest.fingerprint import INGEST_LOGIC_VERSION, corpus_fingerprint, fingerprint
from governed_evidence.ingest.governance import load_governance
from governed_evidence.ingest.passages import MAX_PASSAGE_CHARS
from governed_evidence.ingest.reading import (
    full_build_reason,
    note_skipped,
    read_corpus,
    stored_status,
)
from governed_evidence.ingest.report import IngestReport, ProgressFn, indexed_outcome, terminal_progress
from governed_evidence.ingest.sources import Source, hard_link_groups, sources
from governed_evidence.ingest.writer import ChunkWriter
from governed_evidence.logging import get_logger
from governed_evidence.store.build import CarryOver, IndexBuilder
from governed_evidence.store.lifecycle import Clock, utc_today
from governed_evidence.store.meta import IndexMeta
from governed_evidence.store.previous import KeptIndex, PreviousIndex, built_from, kept_index, previous_index

__all__ = [
    "INGEST_LOGIC_VERSION",
    "MAX_PASSAGE_CHARS",
    "IngestReport",
    "corpus_fingerprint",
    "dry_run_corpus",
    "ingest_corpus",
]

log = get_logger("ingest")


def _unchanged_report(considered: list[Source], kept: KeptIndex) -> IngestReport:
    supported = sum(1 for s in considered if s.supported)
    by_classification: dict[str, dict[str, int]] = {}
    for (level, superseded, status), n in sorted(kept.by_state.items()):
        outcome = indexed_outcome(superseded, stored_status(status))
        per_level = by_classification.setdefault(Classification(level).label, {})
        per_level[outcome] = per_level.get(outcome, 0) + n
    decided_by: dict[str, dict[str, int]] = {}
    if kept.meta.build_counts:
        # What the build reported (those above the ceiling, refused files and the deciding
        # rules included): the index alone knows only what it holds.
        counts = json.loads(kept.meta.build_counts)
        by_classification = counts.get("by_classification", by_classification)
        decided_by = counts.get("decided_by", {})
    return IngestReport(
        files_seen=supported,
        unsupported_files=len(considered) - supported,
        documents_indexed=kept.meta.documents,
        passages=kept.meta.passages,
        superseded_documents=kept.superseded_documents,
        excluded_above_ceiling=kept.meta.excluded_above_ceiling,
        unchanged=True,
        built_at=kept.meta.built_at,
        by_classification=by_classification,
        decided_by=decided_by,
        stale_documents=kept.stale_documents,
    )


def _check_same_corpus(db: Path, root: Path) -> None:
    """Refuse to replace an index that records another corpus folder than ``root``."""
    previous = built_from(db)
    if previous is None or previous.corpus_path == str(root):
        return
    gone = "" if Path(previous.corpus_path).is_dir() else ", a folder that no longer exists"
    built = f", built {previous.built_at}" if previous.built_at else ""
    raise IngestError(
        f"{db} holds the index of another corpus ({previous.corpus_path}{built}{gone}); nothing was replaced. "
        f"To replace it with the index of {root}, run the ingest again with --force; "
        "to keep both, give this corpus its own index file with --db"
    )


def dry_run_corpus(
    corpus: Path,
    *,
    ceiling: Classification,
    default_classification: Classification = Classification.RESTRICTED,
    max_file_bytes: int = 64 * 1024 * 1024,
    progress: ProgressFn | None = terminal_progress,
    clock: Clock = utc_today,
) -> IngestReport:
    """What :func:`ingest_corpus` would index, refuse and skip, by classification and status.

    Every file is classified, guarded and parsed as a build would, and nothing else: no
    embedder is asked for (so no model is loaded), no index is opened or written. The
    governance file is read as strictly as by a build, so a malformed one fails here too.
    """
    if not corpus.is_dir():
        raise IngestError(f"the corpus folder {corpus} does not exist or is not a folder")
    started = time.perf_counter()
    root = corpus.resolve()
    governance = load_governance(root)
    considered = sources(corpus)
    report = IngestReport(dry_run=True)
    read = read_corpus(
        corpus,
        root,
        considered,
        hard_link_groups(root, considered),
        governance,
        report,
        ceiling=ceiling,
        default_classification=default_classification,
        max_file_bytes=max_file_bytes,
        # Only keys the embedding reuse; nothing is embedded or stored.
        model_id="dry-run",
        progress=progress,
        today=clock(),
    )
    report.documents_indexed = read.documents
    report.superseded_documents = read.superseded
    report.passages = read.passages
    report.seconds["total"] = time.perf_counter() - started
    log.info(
        "ingest_dry_run",
        documents=report.documents_indexed,
        passages=report.passages,
        rejected=len(report.rejected),
        seconds=round(report.seconds["total"], 3),
    )
    return report


def ingest_corpus(
    corpus: Path,
    db: Path,
    embedder: Embedder,
    *,
    ceiling: Classification,
    default_classification: Classification = Classification.RESTRICTED,
    max_file_bytes: int = 64 * 1024 * 1024,
    progress: ProgressFn | None = terminal_progress,
    force: bool = False,
    refuse_other_corpus: bool = False,
    carry_over: CarryOver | None = None,
    clock: Clock = utc_today,
) -> IngestReport:
    """Build a new index for ``corpus`` at ``db``; the old file serves until the rename.

    When the index at ``db`` was built from the same corpus fingerprint (same files, same
    settings, same governance rules, same model) and is sound, it is kept untouched and the
    report says ``unchanged``; ``force`` rebuilds regardless. With ``refuse_other_corpus``
    an index that records another corpus folder is not replaced: :class:`IngestError` says
    which (the CLI's default, so one shared default file cannot silently swap corpora;
    callers that own their index files leave it off). ``carry_over`` keeps state other
    parts hold in the index file across a rebuild (the statistics cache: see the CLI).
    ``clock`` gives the day the report counts documents overdue for review against.

    A malformed governance file raises :class:`IngestError` before anything is read or
    written, so the index at ``db`` keeps serving.
    """
    if not corpus.is_dir():
        raise IngestError(f"the corpus folder {corpus} does not exist or is not a folder")
    report = IngestReport()
    identity = embedder.identity
    started = time.perf_counter()
    root = corpus.resolve()
    if refuse_other_corpus:
        # Before the fingerprint reads every file: another folder never matches it anyway.
        _check_same_corpus(db, root)
    governance = load_governance(root)
    considered = sources(corpus)
    # Which names are one file: the fingerprint covers it and the build uses it (one walk).
    groups = hard_link_groups(root, considered)
    # Taken before anything is parsed: a file changed while this build runs then differs
    # from the stored fingerprint next time, so it is rebuilt rather than wrongly kept.
    digest = fingerprint(
        root,
        considered,
        groups,
        identity,
        ceiling=ceiling,
        default_classification=default_classification,
        max_file_bytes=max_file_bytes,
        governance=governance.digest,
        # Only a build that may copy unchanged files from the index it replaces needs their
        # hashes; any other would hold one a file for nothing.
        keep_hashes=not force and db.is_file(),
    )
    report.seconds["fingerprint"] = time.perf_counter() - started
    today = clock()
    previous: PreviousIndex | None = None
    if not force:
        t0 = time.perf_counter()
        kept = kept_index(db, digest.corpus, today=today)
        if kept is not None:
            seconds = report.seconds
            report = _unchanged_report(considered, kept)
            # Skipped files are known without parsing anything: listed as in a rebuild.
            for source in considered:
                if not source.supported:
                    note_skipped(
                        report, source, governance, ceiling=ceiling, default_classification=default_classification
                    )
            report.seconds = {**seconds, "check": time.perf_counter() - t0, "total": time.perf_counter() - started}
            log.info(
                "ingest_unchanged",
                documents=report.documents_indexed,
                passages=report.passages,
                seconds=round(report.seconds["total"], 3),
            )
            return report
        previous = previous_index(db, digest.settings)
        report.seconds["check"] = time.perf_counter() - t0
    report.build = "full" if previous is None else "incremental"
    if previous is None:
        report.full_build_reason = full_build_reason(db, force=force)
    copy_from = db if previous is not None else None
    with IndexBuilder(
        db, dimension=identity.dimension, ceiling=ceiling, carry_over=carry_over, copy_from=copy_from
    ) as builder:
        # Each document is written as it is read, a chunk of passages at a time: the build
        # never holds the corpus's texts and vectors (docs/performance.md, "Ingest memory").
        writer = ChunkWriter(builder, embedder, db, progress=progress)
        read = read_corpus(
            corpus,
            root,
            considered,
            groups,
            governance,
            report,
            ceiling=ceiling,
            default_classification=default_classification,
            max_file_bytes=max_file_bytes,
            model_id=identity.model_id,
            progress=progress,
            today=today,
            previous=previous,
            hashes=digest,
            sink=writer.add,
        )
        writer.finish()
        report.embeddings_reused = writer.reused
        report.embeddings_computed = writer.computed
        report.seconds["embed"] = writer.embed_seconds
        t0 = time.perf_counter()
        report.documents_indexed = read.documents
        report.superseded_documents = read.superseded
        report.passages = writer.passages + writer.copied_passages
        # A copied passage's vector is a stored one too: reused + computed = passages.
        report.embeddings_reused += writer.copied_passages
        report.files_copied, report.files_reparsed = read.copied, read.reparsed
        report.files_added, report.files_removed = read.added, read.removed
        report.built_at = datetime.now(UTC).replace(microsecond=0).isoformat()
        similarity = level_calibrations(builder.conn, ceiling, embedder)
        builder.commit(
            IndexMeta(
                embedding_model=identity.model_id,
                embedding_model_checksum=identity.checksum,
                embedding_dimension=identity.dimension,
                ceiling=ceiling,
                default_classification=default_classification,
                built_at=report.built_at,
                corpus_name=root.name,
                corpus_path=str(root),
                documents=report.documents_indexed,
                passages=report.passages,
                excluded_above_ceiling=report.excluded_above_ceiling,
                corpus_fingerprint=digest.corpus if read.deterministic else None,
                settings_digest=digest.settings,
                build_counts=json.dumps(
                    {"by_classification": report.by_classification, "decided_by": report.decided_by}, sort_keys=True
                ),
                similarity=similarity,
            )
        )
    # Writing rows as they come, and the commit (its checks, the durable rename).
    report.seconds["write"] = writer.write_seconds + time.perf_counter() - t0
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
