"""Ingest a corpus folder into a new index file, atomically.

Order matters for governance: a file's classification is decided from its path and front
matter *before* its content is parsed, and a document above the build ceiling is only
counted, never parsed past its metadata, embedded or named.

A corpus that has not changed since the index was built is not rebuilt: a fingerprint of
the corpus and of the settings that shape the index is stored in the index, and a new
ingest compares it before parsing anything (see :func:`corpus_fingerprint`).

The steps live in modules named for them: :mod:`sources` (what is considered, and which
names are one file), :mod:`governance` (the corpus's rules), :mod:`fingerprint`,
:mod:`passages` (one document's passages), :mod:`embed` (vectors, reused where unchanged)
and :mod:`report`.

:func:`dry_run_corpus` runs the same reading and classification and stops before the
embedder: what a reviewer checks before the first real build.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path, PurePosixPath

from governed_evidence.config import Classification
from governed_evidence.embeddings.base import Embedder
from governed_evidence.errors import FileRejectedError, IngestError
from governed_evidence.ingest.classify import Classified, classify_path
from governed_evidence.ingest.embed import embed_with_reuse
from governed_evidence.ingest.fingerprint import INGEST_LOGIC_VERSION, corpus_fingerprint, fingerprint
from governed_evidence.ingest.governance import GOVERNANCE_FILE, Governance, load_governance
from governed_evidence.ingest.guards import check_name, check_source_location, check_source_size, printable_name
from governed_evidence.ingest.passages import MAX_PASSAGE_CHARS, Prepared, prepare_document
from governed_evidence.ingest.report import IngestReport, ProgressFn, indexed_outcome, terminal_progress
from governed_evidence.ingest.sources import Names, Source, classify_names, hard_link_groups, sources
from governed_evidence.logging import get_logger
from governed_evidence.store.build import CarryOver, IndexBuilder
from governed_evidence.store.lifecycle import STATUSES, Clock, is_stale, utc_today
from governed_evidence.store.meta import IndexMeta
from governed_evidence.store.previous import KeptIndex, built_from, kept_index

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
        # A status the store's CHECK allows is one of these; anything else counts as deprecated.
        outcome = indexed_outcome(superseded, next((s for s in STATUSES if s == status), "deprecated"))
        per_level = by_classification.setdefault(Classification(level).label, {})
        per_level[outcome] = per_level.get(outcome, 0) + n
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


def _note_skipped(
    report: IngestReport,
    source: Source,
    governance: Governance,
    *,
    ceiling: Classification,
    default_classification: Classification,
) -> None:
    """List a file no loader reads by its path and the reason, never opening it.

    Only its path can say how sensitive it is; one whose path puts it above the ceiling is
    counted, not named, like a document there (a file name can say what a file is about).
    """
    if classify_path(source.rel, default_classification, governance).level > ceiling:
        report.skipped_above_ceiling += 1
        return
    report.skipped.append((printable_name(str(source.rel)), source.skip_reason or "unsupported format"))


@dataclass
class _Read:
    """What reading a corpus found: the documents to index, and whether the outcome is a
    function of what the fingerprint covers (a read that failed here but not while
    fingerprinting may be transient: then no fingerprint is stored, so the next ingest
    rebuilds instead of keeping the rejection)."""

    prepared: list[Prepared]
    deterministic: bool


def _read_corpus(
    corpus: Path,
    root: Path,
    considered: list[Source],
    groups: dict[PurePosixPath, Names],
    governance: Governance,
    report: IngestReport,
    *,
    ceiling: Classification,
    default_classification: Classification,
    max_file_bytes: int,
    model_id: str,
    progress: ProgressFn | None,
    today: date,
) -> _Read:
    """Classify, guard and parse every considered file, counting each in ``report``.

    The one loop both a build and a dry run go through, so a dry run shows exactly what a
    build would index, refuse and skip.
    """
    parse_started = time.perf_counter()
    deterministic = True
    prepared: list[Prepared] = []
    for index, source in enumerate(considered):
        if progress is not None:
            progress("reading", index, len(considered))
        path, rel = source.path, source.rel
        if not source.supported:
            report.unsupported_files += 1
            _note_skipped(report, source, governance, ceiling=ceiling, default_classification=default_classification)
            if rel.name == GOVERNANCE_FILE:
                report.warnings.append(
                    (str(rel), f"only the corpus folder's own {GOVERNANCE_FILE} is read; this one is ignored")
                )
            continue
        report.files_seen += 1
        # The level as far as it is known, for the per-level counts of the report.
        seen: Classified | None = None
        try:
            try:
                check_name(str(rel))
                check_source_location(path, root, root_resolved=True)
            except FileRejectedError:
                # Not safe to open, so only its path can say how sensitive it is; a file
                # above the ceiling is counted, never named.
                seen = classify_path(rel, default_classification, governance)
                if seen.level > ceiling:
                    report.excluded_above_ceiling += 1
                    report.count(seen.level, seen.decided_by, "above_ceiling")
                    continue
                raise
            names = groups.get(rel)
            decided, canonical = classify_names(corpus, rel, names, default_classification, governance)
            seen = decided
            if decided.level > ceiling:
                report.excluded_above_ceiling += 1
                report.count(decided.level, decided.decided_by, "above_ceiling")
                continue
            if canonical != rel:
                raise FileRejectedError(
                    f"hard link to {canonical}, another name of the same file: indexed once, under that name, "
                    "at the most restrictive level of its names"
                )
            check_source_size(path, max_file_bytes)
            item = prepare_document(path, rel, decided, model_id, report, governance)
            if names is not None and names.outside > 0:
                report.warnings.append(
                    (str(rel), f"has {names.outside} more hard link(s) outside the corpus, which do not set its level")
                )
            if item.row.classification > ceiling:
                report.excluded_above_ceiling += 1
                report.count(item.row.classification, decided.decided_by, "above_ceiling")
                continue
        except FileRejectedError as exc:
            name = printable_name(str(rel))
            report.rejected.append((name, str(exc)))
            # Info, not warning: the report lists every rejection with its reason, and the
            # CLI prints the report; a warning would say it twice on the terminal.
            log.info("file_rejected", document=name, reason=str(exc))
            if seen is not None:
                report.count(seen.level, seen.decided_by, "rejected")
            continue
        except OSError as exc:
            report.rejected.append((printable_name(str(rel)), f"cannot be read ({type(exc).__name__})"))
            if seen is not None:
                report.count(seen.level, seen.decided_by, "rejected")
            deterministic = False
            continue
        prepared.append(item)
        outcome = indexed_outcome(item.row.superseded_by is not None, item.row.lifecycle.status)
        report.count(item.row.classification, decided.decided_by, outcome)
    if progress is not None and considered:
        progress("reading", len(considered), len(considered))
    report.seconds["parse_and_chunk"] = time.perf_counter() - parse_started

    known_paths = {p.row.path for p in prepared}
    for item in prepared:
        target = item.row.superseded_by
        if target and target not in known_paths:
            report.warnings.append((item.row.path, "superseded_by names a document that is not in the index"))
    # A rule for a path no file has is most likely a typo: the documents it meant took
    # another level or status. Rule paths are the operator's own words, never a document's.
    for rule in governance.unmatched(s.rel for s in considered):
        report.warnings.append((GOVERNANCE_FILE, f"{rule.describe()} matches no file in the corpus"))
    report.stale_documents = sum(1 for p in prepared if is_stale(p.row.lifecycle.review_by, today))
    return _Read(prepared, deterministic)


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
    read = _read_corpus(
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
    report.documents_indexed = len(read.prepared)
    report.superseded_documents = sum(1 for p in read.prepared if p.row.superseded_by)
    report.passages = sum(len(p.passages) for p in read.prepared)
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
    )
    report.seconds["fingerprint"] = time.perf_counter() - started
    today = clock()
    if not force:
        t0 = time.perf_counter()
        kept = kept_index(db, digest, today=today)
        if kept is not None:
            seconds = report.seconds
            report = _unchanged_report(considered, kept)
            # Skipped files are known without parsing anything: listed as in a rebuild.
            for source in considered:
                if not source.supported:
                    _note_skipped(
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
    read = _read_corpus(
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
    )
    prepared, deterministic = read.prepared, read.deterministic

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
                corpus_path=str(root),
                documents=report.documents_indexed,
                passages=report.passages,
                excluded_above_ceiling=report.excluded_above_ceiling,
                corpus_fingerprint=digest if deterministic else None,
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
