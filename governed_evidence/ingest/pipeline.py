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
from governed_evidence.ingest.fingerprint import INGEST_LOGIC_VERSION, CorpusDigest, corpus_fingerprint, fingerprint
from governed_evidence.ingest.governance import GOVERNANCE_FILE, Governance, load_governance
from governed_evidence.ingest.guards import check_name, check_source_location, check_source_size, printable_name
from governed_evidence.ingest.passages import MAX_PASSAGE_CHARS, Prepared, prepare_document
from governed_evidence.ingest.report import IngestReport, ProgressFn, indexed_outcome, terminal_progress
from governed_evidence.ingest.sources import Names, Source, classify_names, hard_link_groups, sources
from governed_evidence.logging import get_logger
from governed_evidence.store.build import CarryOver, CopiedDocument, IndexBuilder
from governed_evidence.store.lifecycle import STATUSES, Clock, Status, is_stale, utc_today
from governed_evidence.store.meta import IndexMeta
from governed_evidence.store.previous import (
    KeptIndex,
    PreviousDocument,
    PreviousIndex,
    built_from,
    kept_index,
    previous_index,
)

__all__ = [
    "INGEST_LOGIC_VERSION",
    "MAX_PASSAGE_CHARS",
    "IngestReport",
    "corpus_fingerprint",
    "dry_run_corpus",
    "ingest_corpus",
]

log = get_logger("ingest")


def _status(stored: str) -> Status:
    """A stored lifecycle status; the store's CHECK allows only these, anything else counts as deprecated."""
    return next((s for s in STATUSES if s == stored), "deprecated")


def _unchanged_report(considered: list[Source], kept: KeptIndex) -> IngestReport:
    supported = sum(1 for s in considered if s.supported)
    by_classification: dict[str, dict[str, int]] = {}
    for (level, superseded, status), n in sorted(kept.by_state.items()):
        outcome = indexed_outcome(superseded, _status(status))
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


@dataclass(frozen=True)
class _Copied:
    """A document taken unchanged from the previous index (see :meth:`IndexBuilder.copy_documents`)."""

    document: CopiedDocument
    previous: PreviousDocument


@dataclass
class _Read:
    """What reading a corpus found: the documents to index in build order, parsed or copied,
    and whether the outcome is a function of what the fingerprint covers (a read that
    failed here but not while fingerprinting may be transient: then no fingerprint is
    stored, so the next ingest rebuilds instead of keeping the rejection)."""

    items: list[Prepared | _Copied]
    deterministic: bool

    @property
    def prepared(self) -> list[Prepared]:
        return [item for item in self.items if isinstance(item, Prepared)]


def _copyable(
    rel: PurePosixPath,
    names: Names | None,
    previous: PreviousIndex | None,
    hashes: CorpusDigest | None,
) -> tuple[PreviousDocument, float] | None:
    """The previous index's document for ``rel`` and the file's modification time, when the
    document may be copied instead of parsed; None when the file must be read.

    Only when the previous index was built with the same settings (``previous`` is None
    otherwise: ingest logic, schema, ceiling, default level, size limit, passage cap, model,
    governance rules; not the corpus folder's location, as rows hold relative paths) and the
    file's bytes hash as they did then. A file with other
    names (hard links), now or when the previous index was built, is always read: which name
    is indexed, and its level, depend on them.
    Everything else a document's level and rows depend on is its path and its bytes, so the
    copy is what classifying and parsing it again would give. A hash exists only for a file
    the fingerprint's guards let it open (name, location, regular file, size limit).
    """
    if previous is None or hashes is None or names is not None:
        return None
    old = previous.documents.get(str(rel))
    state = hashes.files.get(rel)
    # A document whose other names set its level then may take another level alone now.
    if old is None or old.hard_linked or state is None or state[0] != old.content_hash:
        return None
    return old, state[1]


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
    previous: PreviousIndex | None = None,
    hashes: CorpusDigest | None = None,
) -> _Read:
    """Classify, guard and parse every considered file, counting each in ``report``.

    The one loop both a build and a dry run go through, so a dry run shows exactly what a
    build would index, refuse and skip. With ``previous`` (an incremental build), a file
    :func:`_copyable` finds unchanged is copied instead: the fingerprint walk has already run
    the name and location guards on it, and its level and lifecycle are the stored ones.
    """
    parse_started = time.perf_counter()
    deterministic = True
    items: list[Prepared | _Copied] = []
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
        names = groups.get(rel)
        copyable = _copyable(rel, names, previous, hashes)
        if copyable is not None:
            old, mtime = copyable
            # What parsing it reported then is reported again, in the same place.
            report.warnings.extend((str(rel), warning) for warning in old.warnings)
            report.passages_refused += old.passages_refused
            items.append(_Copied(CopiedDocument(old.id, str(rel), old.content_hash, old.classification, mtime), old))
            outcome = indexed_outcome(old.superseded_by is not None, _status(old.lifecycle))
            report.count(old.classification, old.decided_by, outcome)
            continue
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
            warnings_before, refused_before = len(report.warnings), report.passages_refused
            item = prepare_document(path, rel, decided, model_id, report, governance)
            # Kept with the document, for a later build that copies it instead of parsing it.
            item.row.decided_by = decided.decided_by
            item.row.warnings = tuple(warning for _, warning in report.warnings[warnings_before:])
            item.row.passages_refused = report.passages_refused - refused_before
            item.row.hard_linked = names is not None
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
        items.append(item)
        outcome = indexed_outcome(item.row.superseded_by is not None, item.row.lifecycle.status)
        report.count(item.row.classification, decided.decided_by, outcome)
    if progress is not None and considered:
        progress("reading", len(considered), len(considered))
    report.seconds["parse_and_chunk"] = time.perf_counter() - parse_started

    replaced = {_path(item): _superseded_by(item) for item in items}
    for path_name, target in replaced.items():
        if target and target not in replaced:
            report.warnings.append((path_name, "superseded_by names a document that is not in the index"))
    # A rule for a path no file has is most likely a typo: the documents it meant took
    # another level or status. Rule paths are the operator's own words, never a document's.
    for rule in governance.unmatched(s.rel for s in considered):
        report.warnings.append((GOVERNANCE_FILE, f"{rule.describe()} matches no file in the corpus"))
    report.stale_documents = sum(1 for item in items if is_stale(_review_by(item), today))
    return _Read(items, deterministic)


def _path(item: Prepared | _Copied) -> str:
    return item.row.path if isinstance(item, Prepared) else item.document.path


def _superseded_by(item: Prepared | _Copied) -> str | None:
    return item.row.superseded_by if isinstance(item, Prepared) else item.previous.superseded_by


def _review_by(item: Prepared | _Copied) -> date | None:
    if isinstance(item, Prepared):
        return item.row.lifecycle.review_by
    stored = item.previous.review_by
    try:
        return None if stored is None else date.fromisoformat(stored)
    except ValueError:
        return None


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


def _full_build_reason(db: Path, *, force: bool) -> str:
    """Why no document could be copied from the index at ``db`` (said in the report)."""
    if force:
        return "--force"
    if not db.is_file():
        return "no previous index"
    return "the previous index was built with other settings (ingest version, model, ceiling, governance rules...)"


def _count_changes(report: IngestReport, items: list[Prepared | _Copied], previous: PreviousIndex | None) -> None:
    """Documents copied, parsed again (their path was in the previous index), added and
    removed, against the index being replaced; a full build counts against none."""
    known = previous.documents if previous is not None else {}
    indexed = {_path(item) for item in items}
    report.files_copied = sum(1 for item in items if isinstance(item, _Copied))
    report.files_reparsed = sum(1 for item in items if isinstance(item, Prepared) and item.row.path in known)
    report.files_added = sum(1 for item in items if isinstance(item, Prepared) and item.row.path not in known)
    report.files_removed = sum(1 for path in known if path not in indexed)


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
        previous = previous_index(db, digest.settings)
        report.seconds["check"] = time.perf_counter() - t0
    report.build = "full" if previous is None else "incremental"
    if previous is None:
        report.full_build_reason = _full_build_reason(db, force=force)
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
        previous=previous,
        hashes=digest,
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
    copy_from = db if previous is not None else None
    with IndexBuilder(
        db, dimension=identity.dimension, ceiling=ceiling, carry_over=carry_over, copy_from=copy_from
    ) as builder:
        copied_passages = 0
        run: list[CopiedDocument] = []
        for item in read.items:
            if isinstance(item, _Copied):
                run.append(item.document)
                continue
            # Consecutive unchanged documents are copied in one go, in build order.
            copied_passages += builder.copy_documents(run)
            run = []
            doc_id = builder.add_document(item.row)
            for row in item.passages:
                builder.add_passage(doc_id, row, embedded.vectors[row.text_hash])
        copied_passages += builder.copy_documents(run)
        report.documents_indexed = len(read.items)
        report.superseded_documents = sum(1 for item in read.items if _superseded_by(item))
        report.passages = len(all_rows) + copied_passages
        # A copied passage's vector is a stored one too: reused + computed = passages.
        report.embeddings_reused += copied_passages
        _count_changes(report, read.items, previous)
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
                corpus_fingerprint=digest.corpus if deterministic else None,
                settings_digest=digest.settings,
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
