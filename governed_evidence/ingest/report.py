"""What an ingest reports: counts, every rejected and skipped file with its reason, warnings, timings.

The operator reads it (the CLI prints it; ``--json`` is :meth:`IngestReport.as_dict`). A
file above the build ceiling is only counted here, never named. Documents are also counted
per classification and outcome, and by the rule that decided their level, so an operator
whose corpus all landed above the serving ceiling learns which rule put it there
(:func:`serving_notice`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from governed_evidence.config import Classification
from governed_evidence.store.lifecycle import Status

__all__ = [
    "OUTCOMES",
    "READABLE_OUTCOMES",
    "UNKNOWN",
    "FileLabel",
    "IngestReport",
    "Outcome",
    "ProgressFn",
    "indexed_outcome",
    "serving_notice",
    "terminal_progress",
]

#: ``(stage, done, total)``, called as a long stage advances.
ProgressFn = Callable[[str, int, int], None]
#: The ``total`` of a stage whose total is not known yet.
UNKNOWN = -1

#: What became of a classified document: served by search; indexed but kept out of search
#: as superseded, draft or deprecated (readable by citation id); above the build ceiling
#: (counted, never read); or refused.
Outcome = Literal["indexed", "superseded", "draft", "deprecated", "above_ceiling", "rejected"]
OUTCOMES: tuple[Outcome, ...] = ("indexed", "superseded", "draft", "deprecated", "above_ceiling", "rejected")
#: The outcomes of documents in the index: a caller at their level can read them.
READABLE_OUTCOMES: tuple[Outcome, ...] = ("indexed", "superseded", "draft", "deprecated")


def indexed_outcome(superseded: bool, status: Status) -> Outcome:
    """What became of an indexed document: searched, or why not (supersession first)."""
    if superseded:
        return "superseded"
    return "indexed" if status == "current" else status


@dataclass(frozen=True)
class FileLabel:
    """Which level one document got, what decided it, and what became of it (never made for
    a document above the build ceiling: those are counted, not named)."""

    document: str
    classification: str
    #: front matter, rule, folder or default.
    decided_by: str
    outcome: Outcome
    #: The governance rule that decided, when one did ("rule 2 (path 'hr')").
    rule: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "document": self.document,
            "classification": self.classification,
            "decided_by": self.decided_by,
            "rule": self.rule,
            "outcome": self.outcome,
        }


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
    #: Files no loader reads (every skipped file, named or not): kept for compatibility.
    unsupported_files: int = 0
    #: Skipped files by corpus-relative path, with the reason ("unsupported format .rtf"),
    #: so none vanishes silently. One whose path puts it above the build ceiling is only
    #: counted (``skipped_above_ceiling``), as documents there are.
    skipped: list[tuple[str, str]] = field(default_factory=list)
    skipped_above_ceiling: int = 0
    rejected: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    #: True when the corpus fingerprint matched and the existing index was kept as it was:
    #: the counts then come from that index, and rejections and warnings (which only a
    #: parse finds) are not repeated.
    unchanged: bool = False
    #: Build time of the index now at the target (the kept one when ``unchanged``).
    built_at: str | None = None
    #: Documents per level label and :data:`Outcome` (counts only). A kept index knows its
    #: indexed and superseded documents per level; those above the build ceiling are then
    #: only in ``excluded_above_ceiling``.
    by_classification: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Documents not rejected (indexed, or above the build ceiling) per deciding rule (front
    #: matter, rule, folder, default) and level label; empty when the index was kept (only a parse
    #: decides).
    decided_by: dict[str, dict[str, int]] = field(default_factory=dict)
    #: True for ``ingest --dry-run``: everything was read and classified, nothing embedded or written.
    dry_run: bool = False
    #: Indexed documents whose ``review_by`` date had passed when the report was made.
    stale_documents: int = 0
    #: How the index was written: "full" (every file parsed) or "incremental" (unchanged
    #: documents copied from the index being replaced); None when nothing was written (the
    #: index was kept, or a dry run).
    build: Literal["full", "incremental"] | None = None
    #: Why a build was full ("--force", "no previous index", other settings); None otherwise.
    full_build_reason: str | None = None
    #: Documents against the index being replaced (an incremental build): copied unchanged,
    #: parsed again (their file changed), parsed for the first time, and no longer indexed
    #: (deleted, moved, refused, or now above the ceiling). Warnings come from files parsed
    #: by this build; a copied file's were given by the build that parsed it.
    files_copied: int = 0
    files_reparsed: int = 0
    files_added: int = 0
    files_removed: int = 0
    #: Each classified document at or below the build ceiling, by name: kept by a dry run
    #: only (``ingest --dry-run`` lists them), so a build holds nothing a file for them.
    files: list[FileLabel] = field(default_factory=list)

    def count(
        self,
        level: Classification,
        decided_by: str,
        outcome: Outcome,
        document: str | None = None,
        rule: str | None = None,
    ) -> None:
        """Count one classified document; ``document`` names it in :attr:`files` in a dry run
        (never given for one above the build ceiling)."""
        if self.dry_run and document is not None and outcome != "above_ceiling":
            self.files.append(FileLabel(document, level.label, decided_by, outcome, rule))
        per_level = self.by_classification.setdefault(level.label, {})
        per_level[outcome] = per_level.get(outcome, 0) + 1
        if outcome != "rejected":
            per_rule = self.decided_by.setdefault(decided_by, {})
            per_rule[level.label] = per_rule.get(level.label, 0) + 1

    def visible_at(self, ceiling: Classification) -> int:
        """Indexed documents (those kept out of search included) a caller at ``ceiling`` can read."""
        return sum(
            sum(counts.get(outcome, 0) for outcome in READABLE_OUTCOMES)
            for label, counts in self.by_classification.items()
            if Classification[label.upper()] <= ceiling
        )

    def as_dict(self) -> dict[str, Any]:
        out = self._counts()
        if self.dry_run:
            out["files"] = [f.as_dict() for f in self.files]
        return out

    def _counts(self) -> dict[str, Any]:
        return {
            "unchanged": self.unchanged,
            "dry_run": self.dry_run,
            "built_at": self.built_at,
            "files_seen": self.files_seen,
            "documents_indexed": self.documents_indexed,
            "superseded_documents": self.superseded_documents,
            "stale_documents": self.stale_documents,
            "build": self.build,
            "full_build_reason": self.full_build_reason,
            "files_reparsed": self.files_reparsed,
            "files_copied": self.files_copied,
            "files_added": self.files_added,
            "files_removed": self.files_removed,
            "passages": self.passages,
            "passages_refused": self.passages_refused,
            "embeddings_reused": self.embeddings_reused,
            "embeddings_computed": self.embeddings_computed,
            "excluded_above_ceiling": self.excluded_above_ceiling,
            "unsupported_files": self.unsupported_files,
            "skipped": [{"document": p, "reason": r} for p, r in self.skipped],
            "skipped_above_ceiling": self.skipped_above_ceiling,
            "by_classification": self.by_classification,
            "decided_by": self.decided_by,
            "rejected": [{"document": p, "reason": r} for p, r in self.rejected],
            "warnings": [{"document": p, "warning": w} for p, w in self.warnings],
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
        }


def serving_notice(report: IngestReport, serving: Classification) -> list[str]:
    """Why nothing of this ingest is visible at ``serving`` and what would change it, one
    line each (the first says what happened); empty when something is visible.

    ``serving`` is the ceiling search and serve use by default. The fail-closed default
    stays as it is (no label and no level folder: restricted); the operator is told which
    flag, folder or label decides instead.
    """
    if report.visible_at(serving) > 0:
        return []
    above = sum(
        sum(counts.get(outcome, 0) for outcome in READABLE_OUTCOMES)
        for label, counts in report.by_classification.items()
        if Classification[label.upper()] > serving
    )
    if above == 0 and report.excluded_above_ceiling == 0:
        return []
    facts = [f"{above} indexed above it"] if above else []
    if report.excluded_above_ceiling:
        facts.append(f"{report.excluded_above_ceiling} above the build ceiling, not indexed")
    lines = [
        f"no document is visible at ceiling {serving.label}, the ceiling search and serve use by default "
        f"({'; '.join(facts)})"
    ]
    if above == 0:
        lines.append("re-ingest with a wider --ceiling to index the documents above the build ceiling")
        return lines
    # Per rule, the documents it put above the serving ceiling; unknown when the index was kept.
    rules = {
        rule: sum(n for label, n in levels.items() if Classification[label.upper()] > serving)
        for rule, levels in report.decided_by.items()
    }
    known = bool(report.decided_by)
    if rules.get("default") or not known:
        lines.append(
            f"{rules.get('default', 'documents')} with no label and no level folder took --default-classification: "
            f"re-ingest with --default-classification {serving.label} if every client may read them"
        )
    if rules.get("rule"):
        lines.append(
            f"{rules['rule']} took their level from a rule of _governance.toml: "
            f'set classification = "{serving.label}" in that rule if that is their level'
        )
    if rules.get("folder") or not known:
        lines.append(
            f"{rules.get('folder', 'documents')} under a folder named after a level took that level: "
            f"move them under {serving.label}/ if that is their level"
        )
    if rules.get("front matter") or not known:
        lines.append(
            f"{rules.get('front matter', 'documents')} labelled in their front matter: "
            f"set 'classification: {serving.label}' where that is their level"
        )
    wider = Classification(serving + 1).label
    lines.append(
        f"or serve clients cleared for more at a wider ceiling "
        f"(--ceiling {wider}, or GOVERNED_EVIDENCE_CEILING={wider})"
    )
    return lines


def terminal_progress(stage: str, done: int, total: int) -> None:
    if sys.stderr.isatty():
        end = "\n" if done >= total else ""
        print(f"\r{stage}: {done}/{total}", end=end, file=sys.stderr, flush=True)
