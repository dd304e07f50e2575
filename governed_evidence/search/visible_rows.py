"""The ceiling check's answer for a whole level, read once per index file and held in memory.

Every candidate either ranking returns is checked against the caller's ceiling a second
time, beside the per-level rankings (ADR 0002): is it a searchable passage at or below the
level, and of which document. Asked of SQL per query, that check was the largest single
piece of a search at 10k passages (about 0.11 ms of 1.2 for ~90 ids). Its answer depends
only on the file and the level, so it is read once, with the same predicate, into two
arrays (every visible passage id, ascending, and its document id) and each query looks its
candidates up there: the same answer, about 0.01 ms.

The set is read by its own statement from the passages table, not derived from either
ranking's copy, so it stays an independent check: an id a ranking returned by mistake is
still dropped. Served rows are read with the ceiling in SQL as before. Like the other
copies (:mod:`held`) it is keyed by the file's generation, drawn from the shared memory
budget (16 bytes a passage), loaded in the background, and until it is held the check is
asked of SQL per query.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import apsw
import numpy as np

from governed_evidence.config import Classification
from governed_evidence.search import sql

__all__ = ["ROW_BYTES", "VisibleRows", "VisibleRowsCopier", "load_visible_rows"]

#: Bytes a visible passage costs: its id and its document id (int64 each).
ROW_BYTES = 16
#: Rows read between checks for a shutdown.
_POLL_ROWS = 1 << 16


@dataclass(frozen=True)
class VisibleRows:
    """Every searchable passage at or below ``level``, with its document."""

    level: Classification
    #: Passage ids, ascending.
    ids: np.ndarray
    #: The document id of each, in the same order.
    document_ids: np.ndarray

    @property
    def rows(self) -> int:
        return int(self.ids.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.ids.nbytes + self.document_ids.nbytes)

    def documents(self, passage_ids: Iterable[int]) -> dict[int, int]:
        """The document id of each of ``passage_ids`` that is visible, in ascending id order
        (as :func:`sql.passage_documents` returns them); any other id is simply not found."""
        # Sorted, not made unique: a repeated id is the same key again, and np.unique costs 4x.
        wanted = np.sort(np.fromiter(passage_ids, dtype=np.int64))
        documents = self.documents_at(wanted)
        found = documents >= 0
        return dict(zip(wanted[found].tolist(), documents[found].tolist(), strict=True))

    def documents_at(self, passage_ids: np.ndarray) -> np.ndarray:
        """The document id of each of ``passage_ids`` (int64, any order, repeats allowed), -1
        where it is not visible (document ids are rowids, never negative)."""
        if passage_ids.shape[0] == 0 or self.rows == 0:
            return np.full(passage_ids.shape[0], -1, dtype=np.int64)
        where = np.minimum(np.searchsorted(self.ids, passage_ids), self.rows - 1)
        documents: np.ndarray = np.where(self.ids[where] == passage_ids, self.document_ids[where], -1)
        return documents


def load_visible_rows(
    conn: apsw.Connection, level: Classification, cancelled: Callable[[], bool] = lambda: False
) -> VisibleRows | None:
    """Read the level's visible passages; None when cancelled."""
    ids = array("q")
    documents = array("q")
    rows = sql.visible_passages(conn, level, covering=sql.has_visibility_index(conn))
    for seen, (pid, document_id) in enumerate(rows, start=1):
        ids.append(pid)
        documents.append(document_id)
        if seen % _POLL_ROWS == 0 and cancelled():
            return None
    return VisibleRows(
        level=level,
        ids=np.frombuffer(ids, dtype=np.int64).copy(),
        document_ids=np.frombuffer(documents, dtype=np.int64).copy(),
    )


class VisibleRowsCopier:
    """Sizes and takes the visible rows for :class:`~governed_evidence.search.held.HeldCopy`."""

    kind = "visible_rows"

    def needed_bytes(self, conn: apsw.Connection, level: Classification) -> int:
        return ROW_BYTES * sql.count_searchable(conn, level)

    def copy(self, conn: apsw.Connection, level: Classification, cancelled: Callable[[], bool]) -> VisibleRows | None:
        return load_visible_rows(conn, level, cancelled)
