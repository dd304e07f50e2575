"""``ingest``: build the index from a corpus folder, or report what a build would do."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from governed_evidence import composition
from governed_evidence.commands.common import LEVELS, index_path
from governed_evidence.config import Classification, Settings, parse_level
from governed_evidence.errors import GovernedEvidenceError, InvalidRequestError

if TYPE_CHECKING:
    from governed_evidence.ingest.report import FileLabel, IngestReport

__all__ = ["register", "run_ingest", "write_labels_csv"]

_OUTCOME_WORDS = {
    "indexed": "indexed",
    "superseded": "superseded",
    "draft": "draft (not searched)",
    "deprecated": "deprecated (not searched)",
    "above_ceiling": "above the ceiling (not read)",
    "rejected": "rejected",
}


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("ingest", help="build the index from a corpus folder (atomic)")
    p.add_argument(
        "--corpus",
        required=True,
        help="folder of .md, .txt, .pdf, .docx, .html, .xlsx, .pptx, .csv and .tsv files "
        "(others are listed as skipped)",
    )
    p.add_argument("--db", help="index file (default: $GOVERNED_EVIDENCE_DB or data/evidence.sqlite)")
    p.add_argument(
        "--ceiling", choices=LEVELS, default="restricted", help="highest level to index (default: restricted)"
    )
    p.add_argument(
        "--default-classification",
        choices=LEVELS,
        default="restricted",
        help="level of documents with no label and no level folder (default: restricted)",
    )
    p.add_argument(
        "--embedder", choices=["default", "openai"], help="embedder (default: $GOVERNED_EVIDENCE_EMBEDDER or default)"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help=(
            "parse every file again (without it, a file unchanged since the last build is copied from "
            "the index, and an unchanged corpus keeps the index as it is), "
            "and replace an index built from another corpus folder (refused without it)"
        ),
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help=(
            "read and classify every file and report what would be indexed, refused and skipped, by classification "
            "and status, without loading the model, embedding or writing the index"
        ),
    )
    p.add_argument("--json", action="store_true", help="print the ingest report as JSON")
    p.add_argument(
        "--csv",
        metavar="FILE",
        help="with --dry-run: also write each file's level, what decided it and its outcome to FILE (CSV)",
    )
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no progress on stderr (by default: a bar on a terminal, a line every few seconds otherwise)",
    )
    p.set_defaults(func=run_ingest)


def run_ingest(args: argparse.Namespace, settings: Settings) -> int:
    from governed_evidence.ingest.progress import IngestProgress

    if args.csv and not args.dry_run:
        raise InvalidRequestError("--csv: only with --dry-run")
    db = index_path(args, settings)
    progress = None if args.quiet else IngestProgress()
    try:
        if args.dry_run:
            # No embedder is made (no model loads) and the index is not opened.
            report = composition.dry_run(
                settings,
                Path(args.corpus),
                ceiling=parse_level(args.ceiling),
                default_classification=parse_level(args.default_classification),
                progress=progress,
            )
        else:
            report = composition.ingest(
                settings,
                Path(args.corpus),
                db,
                embedder_name=args.embedder,
                ceiling=parse_level(args.ceiling),
                default_classification=parse_level(args.default_classification),
                force=args.force,
                progress=progress,
            )
    finally:
        # Also on Ctrl-C or an error: the bar ends before anything else is printed.
        if progress is not None:
            progress.close()
    if args.csv:
        write_labels_csv(report, Path(args.csv))
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
        return 0
    secs = report.seconds
    if report.unchanged:
        print(
            f"Index unchanged since {report.built_at}: {report.documents_indexed} documents, "
            f"{report.passages} passages in {db} (corpus fingerprint matches); use --force to rebuild"
        )
        print(f"  checked in {secs['total']:.1f} s; rejections and warnings are listed when the index is rebuilt")
        _print_skipped(report)
        _print_stale(report)
        _print_ingest_levels(report, args.default_classification, settings.ceiling_level)
        return 0
    if report.dry_run:
        print(
            f"Dry run: {report.documents_indexed} documents, {report.passages} passages would be indexed into {db}; "
            f"nothing was embedded or written ({secs['total']:.1f} s)"
        )
    else:
        rate = report.passages / secs["total"] if secs.get("total") else 0.0
        print(f"Indexed {report.documents_indexed} documents, {report.passages} passages into {db}")
        print(
            f"  embeddings: {report.embeddings_computed} computed, {report.embeddings_reused} reused; "
            f"{secs['total']:.1f} s ({rate:.1f} passages/s; parse+chunk {secs['parse_and_chunk']:.1f} s, "
            f"embed {secs['embed']:.1f} s, write {secs['write']:.1f} s)"
        )
        if report.build == "incremental":
            print(
                f"  incremental: {report.files_reparsed} changed file(s) parsed again, {report.files_added} added, "
                f"{report.files_removed} removed, {report.files_copied} unchanged copied from the previous index"
            )
        elif report.full_build_reason:
            print(f"  full build: {report.full_build_reason}")
    _print_stale(report)
    if report.superseded_documents:
        print(f"  superseded documents (kept out of search): {report.superseded_documents}")
    if report.excluded_above_ceiling:
        print(f"  documents above the ceiling, not read: {report.excluded_above_ceiling}")
    if report.passages_refused:
        print(f"  passages refused (credential-shaped content): {report.passages_refused}")
    for path, reason in report.rejected:
        print(f"  rejected {path}: {reason}")
    _print_skipped(report)
    for path, warning in report.warnings:
        print(f"  warning {path}: {warning}")
    if report.dry_run:
        _print_labels(report)
    _print_ingest_levels(report, args.default_classification, settings.ceiling_level)
    return 0


def _decided(label: FileLabel) -> str:
    return label.rule if label.rule else "governance rule" if label.decided_by == "rule" else label.decided_by


def _print_labels(report: IngestReport) -> None:
    """Which file got which level and what decided it (those above the ceiling only counted)."""
    if not report.files:
        return
    width = max(len(_decided(f)) for f in report.files)
    print(f"  files ({len(report.files)}): level, what decided it, outcome")
    for f in sorted(report.files, key=lambda f: f.document):
        print(f"    {f.classification:<10} {_decided(f):<{width}} {f.outcome:<10} {f.document}")
    if report.excluded_above_ceiling:
        print(f"    and {report.excluded_above_ceiling} document(s) above the ceiling, not named")


#: What a spreadsheet would read as a formula at the start of a cell (CSV injection).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: str) -> str:
    return "'" + value if value.startswith(_FORMULA_STARTS) else value


def write_labels_csv(report: IngestReport, path: Path) -> None:
    """The per-file label report as CSV a reviewer can open in a spreadsheet."""
    import csv

    rows = sorted(report.files, key=lambda f: f.document)
    try:
        with path.open("w", encoding="utf-8", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(["document", "classification", "decided_by", "rule", "outcome"])
            for f in rows:
                out.writerow([_cell(f.document), f.classification, f.decided_by, f.rule or "", f.outcome])
    except OSError as exc:
        raise GovernedEvidenceError(f"cannot write the label report to {path}: {exc.strerror or exc}") from None


def _print_skipped(report: IngestReport) -> None:
    """Every file no loader reads, so none vanishes silently (those above the ceiling counted)."""
    for path, reason in report.skipped:
        print(f"  skipped {path}: {reason}")
    if report.skipped_above_ceiling:
        print(f"  skipped files above the ceiling, not named: {report.skipped_above_ceiling}")


def _print_stale(report: IngestReport) -> None:
    if report.stale_documents:
        print(f"  documents overdue for review (review_by passed): {report.stale_documents}")


def _print_ingest_levels(report: IngestReport, default: str, serving: Classification) -> None:
    """Documents per level and outcome, the rule that decided their levels, and a warning
    when none of them is visible at the ceiling search and serve use by default."""
    from governed_evidence.ingest.report import OUTCOMES, serving_notice

    print("  documents by classification:")
    for level in Classification:
        counts = report.by_classification.get(level.label, {})
        parts = ", ".join(f"{counts[o]} {_OUTCOME_WORDS[o]}" for o in OUTCOMES if counts.get(o))
        print(f"    {level.label:<10} {sum(counts.values()):>6}" + (f"  ({parts})" if parts else ""))
    if report.decided_by:
        rules = []
        for rule in ("front matter", "rule", "folder", "default"):
            levels = report.decided_by.get(rule, {})
            if levels:
                name = {"default": f"default (--default-classification {default})", "rule": "governance rule"}.get(
                    rule, rule
                )
                each = ", ".join(f"{c.label} {levels[c.label]}" for c in Classification if c.label in levels)
                rules.append(f"{name} {sum(levels.values())} ({each})")
        print("  level decided by: " + "; ".join(rules))
    print(f"  visible at ceiling {serving.label} (search and serve by default): {report.visible_at(serving)} documents")
    notice = serving_notice(report, serving)
    if notice:
        print(f"warning: {notice[0]}")
        for line in notice[1:]:
            print(f"  - {line}")
