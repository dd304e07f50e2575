"""What only the operator is told: how much of the index lies above a caller's ceiling.

An MCP client hears nothing of what it cannot read (no count, no title, no path): its tools
count visible rows only, and an empty answer reads the same whatever lies above. The
operator running ``search`` or ``status`` on the command line needs the rest to understand
an empty answer ("0 passages visible at ceiling public (412 above it)"). So this module is
the CLI's alone: nothing in ``mcp/`` imports it (tests/test_cli_messages.py checks). Its one
statement still carries the ceiling; what lies above is the index's own totals (its
``meta``, written by the build) minus what is visible.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from governed_evidence.config import Classification
from governed_evidence.search import sql
from governed_evidence.search.plan import searched_level
from governed_evidence.store.connection import connect, read_meta

__all__ = ["Visibility", "visibility"]


@dataclass(frozen=True)
class Visibility:
    #: The caller's ceiling.
    ceiling: Classification
    #: The build ceiling of the index: nothing above it was indexed.
    build_ceiling: Classification
    visible_documents: int
    visible_passages: int
    #: In the index, above the caller's ceiling.
    documents_above: int
    passages_above: int
    #: Documents above the build ceiling at ingest: counted there, never indexed.
    not_indexed: int

    def summary(self) -> str:
        """One line for the operator's terminal."""
        line = f"{self.visible_passages} passages visible at ceiling {self.ceiling.label} "
        line += f"({self.passages_above} above it"
        if self.documents_above:
            line += f", in {self.documents_above} documents"
        if self.not_indexed:
            line += f"; {self.not_indexed} documents above the build ceiling {self.build_ceiling.label} not indexed"
        return line + ")"

    def advice(self) -> str | None:
        """What to do when nothing is visible but something is indexed above the ceiling."""
        if self.visible_passages or not self.passages_above:
            return None
        wider = Classification(self.ceiling + 1).label
        level = self.ceiling.label
        return (
            f"clients at ceiling {level} are only told that nothing matched. Label what they may read {level} "
            f"(front matter 'classification: {level}', a folder named {level}/, or ingest "
            f"--default-classification {level}), or use --ceiling {wider} for callers cleared for it"
        )


def visibility(db: Path, ceiling: Classification) -> Visibility:
    """What the index at ``db`` holds at and above ``ceiling``; raises ``IndexUnavailableError``."""
    conn = connect(db, readonly=True)
    try:
        meta = read_meta(conn)
        counts = sql.level_counts(conn, searched_level(ceiling, meta))
    finally:
        conn.close()
    documents = sum(docs for _, docs, _, _ in counts)
    passages = sum(n for _, _, n, _ in counts)
    return Visibility(
        ceiling=ceiling,
        build_ceiling=meta.ceiling,
        visible_documents=documents,
        visible_passages=passages,
        documents_above=max(meta.documents - documents, 0),
        passages_above=max(meta.passages - passages, 0),
        not_indexed=meta.excluded_above_ceiling,
    )
