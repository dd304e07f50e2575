"""Reading a corpus: every considered file classified, guarded and parsed, or, in an
incremental build, copied from the previous index when it is unchanged.

One loop (:func:`read_corpus`) serves a build and a dry run, so a dry run shows exactly what
a build would index, refuse and skip. :func:`copyable` decides which files an incremental
build copies instead of reading (see ADR 0014); the loop also counts what changed against
the index being replaced.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path, PurePosixPath

from governed_evidence.config import Classification
from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.classify import Classified, classify_path
from governed_evidence.ingest.fingerprint import CorpusDigest
from governed_evidence.ingest.governance import GOVERNANCE_FILE, Governance
from governed_evidence.ingest.guards import check_name, check_source_location, check_source_size, printable_name
from governed_evidence.ingest.passages import Prepared, prepare_document
from governed_evidence.ingest.report import IngestReport, ProgressFn, indexed_outcome
from governed_evidence.ingest.sources import Names, Source, classify_names
from governed_evidence.logging import get_logger
from governed_evidence.store.build_rows import CopiedDocument
from governed_evidence.store.lifecycle import STATUSES, Status, is_stale
from governed_evidence.store.previous import PreviousDocument, PreviousIndex

__all__ = [
    "Copied",
    "Read",
    "copyable",
    "full_build_reason",
    "note_skipped",
    "path_of",
    "read_corpus",
    "review_by_of",
    "stored_status",
    "superseded_by_of",
]

log = get_logger("ingest")


def stored_status(stored: str) -> Status:
    """A stored lifecycle status; the store's CHECK allows only these, anything else counts as deprecated."""
    return next((s for s in STATUSES if s == stored), "deprecated")


def _rule(governance: Governance, rel: PurePosixPath, decided_by: str) -> str | None:
    """The governance rule that gave ``rel`` its level, for the per-file report."""
    if decided_by != "rule":
        return None
    rule = governance.deciding(rel, "classification")
    return rule.describe() if rule is not None else None


def note_skipped(
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
class Copied:
    """A document taken unchanged from the previous index (see :meth:`IndexBuilder.copy_documents`)."""

    document: CopiedDocument
    previous: PreviousDocument


@dataclass
class Read:
    """What reading a corpus found, counted as each document was handed on (none is held:
    a build writes each as it comes), and whether the outcome is a function of what the
    fingerprint covers (a read that failed here but not while fingerprinting may be
    transient: then no fingerprint is stored, so the next ingest rebuilds instead of keeping
    the rejection)."""

    deterministic: bool = True
    #: Documents to index, parsed or copied, and of those the superseded ones.
    documents: int = 0
    superseded: int = 0
    #: Passages of the parsed documents.
    passages: int = 0
    #: Against the index being replaced: documents copied unchanged, parsed again (their
    #: path was in it) and added (it was not), and its documents no longer indexed.
    copied: int = 0
    reparsed: int = 0
    added: int = 0
    removed: int = 0
    #: Documents whose review date has passed.
    stale: int = 0


def copyable(
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
    file's bytes hash as they did then. A file with other names (hard links), now or when the
    previous index was built, is always read: which name is indexed, and its level, depend
    on them. Everything else a document's level and rows depend on is its path and its
    bytes, so the copy is what classifying and parsing it again would give. A hash exists only for a file
    the fingerprint's guards let it open (name, location, regular file, size limit).
    """
    if previous is None or hashes is None or names is not None:
        return None
    old = previous.documents.get(str(rel))
    state = hashes.files.get(str(rel))
    # A document whose other names set its level then may take another level alone now.
    if old is None or old.hard_linked or state is None or state[0] != old.content_hash:
        return None
    return old, state[1]


def read_corpus(
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
    sink: Callable[[Prepared | Copied], None] | None = None,
) -> Read:
    """Classify, guard and parse every considered file, counting each in ``report``.

    The one loop both a build and a dry run go through, so a dry run shows exactly what a
    build would index, refuse and skip. With ``previous`` (an incremental build), a file
    :func:`copyable` finds unchanged is copied instead: the fingerprint walk has already run
    the name and location guards on it, and its level and lifecycle are the stored ones.

    ``sink``, when given, gets each document to index as soon as it is read (a build
    writes it then: :class:`~governed_evidence.ingest.writer.ChunkWriter`); the time it
    takes is not counted as parsing.
    """
    parse_started = time.perf_counter()
    sink_seconds = 0.0
    read = Read()
    known = previous.documents if previous is not None else {}
    # What the superseded_by check needs once every file is read: which considered files
    # were indexed (one byte a file), and each superseding document's target.
    indexed = bytearray(len(considered))
    superseding: list[tuple[str, str]] = []

    def keep(index: int, item: Prepared | Copied) -> None:
        nonlocal sink_seconds
        path, target = path_of(item), superseded_by_of(item)
        indexed[index] = 1
        read.documents += 1
        if target:
            read.superseded += 1
            superseding.append((path, target))
        if isinstance(item, Copied):
            read.copied += 1
        else:
            read.passages += len(item.passages)
            if path in known:
                read.reparsed += 1
            else:
                read.added += 1
        read.stale += is_stale(review_by_of(item), today)
        if sink is not None:
            t0 = time.perf_counter()
            sink(item)
            sink_seconds += time.perf_counter() - t0

    for index, source in enumerate(considered):
        if progress is not None:
            progress("reading", index, len(considered))
        path, rel = source.path, source.rel
        if not source.supported:
            report.unsupported_files += 1
            note_skipped(report, source, governance, ceiling=ceiling, default_classification=default_classification)
            if rel.name == GOVERNANCE_FILE:
                report.warnings.append(
                    (str(rel), f"only the corpus folder's own {GOVERNANCE_FILE} is read; this one is ignored")
                )
            continue
        report.files_seen += 1
        names = groups.get(rel)
        unchanged = copyable(rel, names, previous, hashes)
        if unchanged is not None:
            old, mtime = unchanged
            # What parsing it reported then is reported again, in the same place.
            report.warnings.extend((str(rel), warning) for warning in old.warnings)
            report.passages_refused += old.passages_refused
            outcome = indexed_outcome(old.superseded_by is not None, stored_status(old.lifecycle))
            report.count(old.classification, old.decided_by, outcome, str(rel), _rule(governance, rel, old.decided_by))
            keep(index, Copied(CopiedDocument(old.id, str(rel), old.content_hash, old.classification, mtime), old))
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
                report.count(seen.level, seen.decided_by, "rejected", name, _rule(governance, rel, seen.decided_by))
            continue
        except OSError as exc:
            name = printable_name(str(rel))
            report.rejected.append((name, f"cannot be read ({type(exc).__name__})"))
            if seen is not None:
                report.count(seen.level, seen.decided_by, "rejected", name, _rule(governance, rel, seen.decided_by))
            read.deterministic = False
            continue
        outcome = indexed_outcome(item.row.superseded_by is not None, item.row.lifecycle.status)
        report.count(
            item.row.classification, decided.decided_by, outcome, str(rel), _rule(governance, rel, decided.decided_by)
        )
        keep(index, item)
    if progress is not None and considered:
        progress("reading", len(considered), len(considered))
    report.seconds["parse_and_chunk"] = time.perf_counter() - parse_started - sink_seconds

    targets = {target for _, target in superseding}
    found = {s.name for i, s in enumerate(considered) if indexed[i] and s.name in targets}
    for path_name, target in superseding:
        if target not in found:
            report.warnings.append((path_name, "superseded_by names a document that is not in the index"))
    # A rule for a path no file has is most likely a typo: the documents it meant took
    # another level or status. Rule paths are the operator's own words, never a document's.
    for rule in governance.unmatched(s.rel for s in considered):
        report.warnings.append((GOVERNANCE_FILE, f"{rule.describe()} matches no file in the corpus"))
    report.stale_documents = read.stale
    # Indexed paths are distinct, and every copied or re-parsed one was in the old index.
    read.removed = len(known) - read.copied - read.reparsed
    return read


def path_of(item: Prepared | Copied) -> str:
    return item.row.path if isinstance(item, Prepared) else item.document.path


def superseded_by_of(item: Prepared | Copied) -> str | None:
    return item.row.superseded_by if isinstance(item, Prepared) else item.previous.superseded_by


def review_by_of(item: Prepared | Copied) -> date | None:
    if isinstance(item, Prepared):
        return item.row.lifecycle.review_by
    stored = item.previous.review_by
    try:
        return None if stored is None else date.fromisoformat(stored)
    except ValueError:
        return None


def full_build_reason(db: Path, *, force: bool) -> str:
    """Why no document could be copied from the index at ``db`` (said in the report)."""
    if force:
        return "--force"
    if not db.is_file():
        return "no previous index"
    return "the previous index was built with other settings (ingest version, model, ceiling, governance rules...)"
