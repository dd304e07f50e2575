"""What an ingest reports: counts, every rejected file with its reason, warnings, timings.

The operator reads it (the CLI prints it; ``--json`` is :meth:`IngestReport.as_dict`). A
file above the build ceiling is only counted here, never named.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["IngestReport", "ProgressFn", "terminal_progress"]

#: ``(stage, done, total)``, called as a long stage advances.
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


def terminal_progress(stage: str, done: int, total: int) -> None:
    if sys.stderr.isatty():
        end = "\n" if done >= total else ""
        print(f"\r{stage}: {done}/{total}", end=end, file=sys.stderr, flush=True)
