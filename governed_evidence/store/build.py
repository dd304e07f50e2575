"""Atomic index builds: write a shadow file, verify it, rename it over the old one.

A failed or interrupted build leaves the previous index in place and serving; the rename
is the only moment the served file changes, and it is atomic on POSIX filesystems.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

import apsw

from governed_evidence.config import Classification
from governed_evidence.errors import IngestError
from governed_evidence.store.build_rows import CopiedDocument, DocumentRow, PassageRow
from governed_evidence.store.connection import connect
from governed_evidence.store.copying import COPY_PLAN_SQL, copy_run
from governed_evidence.store.meta import IndexMeta
from governed_evidence.store.schema import fts_table, schema_sql, terms_table, vocab_table

__all__ = ["CarryOver", "IndexBuilder"]

#: Copies state another part keeps in the index file from the file being replaced (attached
#: under the given schema name) into the new one. Handed in by whoever composes the build,
#: so the store knows nothing of what that state is.
CarryOver = Callable[[apsw.Connection, str], None]


#: The previous index, attached to the shadow file's connection for copying.
_SOURCE = "source"
#: The build connection's page cache, in KiB (SQLite's default is 2 MiB).
_BUILD_CACHE_KIB = 64 * 1024


def _remove_orphaned_shadows(target: Path) -> None:
    """Delete shadow files left by builds that were killed (their process no longer exists)."""
    prefix = f".{target.name}.build-"
    for path in target.parent.glob(prefix + "*"):
        pid_text = path.name[len(prefix) :].split("-", 1)[0]
        if not pid_text.isdigit():
            continue
        try:
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        except PermissionError:
            continue  # a live process of another user: not ours to remove


class IndexBuilder:
    """Context manager owning a shadow index file until :meth:`commit` publishes it."""

    def __init__(
        self,
        target: Path,
        *,
        dimension: int,
        ceiling: Classification,
        carry_over: CarryOver | None = None,
        copy_from: Path | None = None,
    ) -> None:
        """``copy_from`` is the index being replaced, when :meth:`copy_documents` will copy from it."""
        self.target = target
        self.ceiling = ceiling
        self._carry_over = carry_over
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove_orphaned_shadows(target)
        # Same directory as the target, so the final rename never crosses filesystems.
        self.shadow = target.with_name(f".{target.name}.build-{os.getpid()}-{secrets.token_hex(4)}")
        self.conn: apsw.Connection = connect(self.shadow, readonly=False)
        # The shadow file is private until published; durability is ensured at commit.
        self.conn.execute("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;")
        # SQLite's default page cache (2 MiB) is smaller than one chunk of sqlite-vec's vectors
        # with the pages a build keeps dirty beside it: reading vectors back within the build
        # (copying, calibrating, verifying) then fetched each chunk's pages again for every row.
        # 64 MiB holds them; it is an upper bound, used only as the file grows
        # (docs/performance.md, "Ingestion").
        self.conn.execute(f"PRAGMA cache_size = -{_BUILD_CACHE_KIB}")
        self._copying = False
        if copy_from is not None:
            # Attached before the transaction begins (SQLite attaches outside one). Reads of
            # it inside the build's one transaction hold a shared lock until the commit, so
            # every copy sees the same file even if another build renames a new one into place.
            try:
                self.conn.execute(f"ATTACH DATABASE ? AS {_SOURCE}", (str(copy_from),))
            except apsw.Error as exc:
                self.abort()
                raise IngestError("the previous index cannot be opened to copy from") from exc
            self._copying = True
        self.conn.execute("BEGIN")
        self.conn.execute(schema_sql(dimension, ceiling))
        if self._copying:
            self.conn.execute(COPY_PLAN_SQL)
        self._committed = False
        #: Documents whose passages are stored but not searched (superseded, draft, deprecated).
        self._unsearched: set[int] = set()

    def __enter__(self) -> IndexBuilder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._committed:
            self.abort()

    def abort(self) -> None:
        with contextlib.suppress(apsw.Error):
            self.conn.close()
        for suffix in ("", "-journal", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.shadow}{suffix}")

    def add_document(self, row: DocumentRow) -> int:
        self.conn.execute(
            "INSERT INTO documents(path, title, format, classification, content_hash, status, "
            "superseded_by, source_mtime, passage_count, refused_count, lifecycle, owner, review_by, effective, "
            "decided_by, warnings, passages_refused, hard_linked, source_link) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                row.path,
                row.title,
                row.format,
                int(row.classification),
                row.content_hash,
                "superseded" if row.superseded_by else "active",
                row.superseded_by,
                row.source_mtime,
                row.passage_count,
                row.refused_count,
                row.lifecycle.status,
                row.lifecycle.owner,
                None if row.lifecycle.review_by is None else row.lifecycle.review_by.isoformat(),
                None if row.lifecycle.effective is None else row.lifecycle.effective.isoformat(),
                row.decided_by,
                json.dumps(list(row.warnings)),
                row.passages_refused,
                int(row.hard_linked),
                row.lifecycle.link,
            ),
        )
        document_id = int(self.conn.last_insert_rowid())
        if row.superseded_by or not row.lifecycle.searchable:
            self._unsearched.add(document_id)
        return document_id

    def add_passage(self, document_id: int, row: PassageRow, embedding: bytes) -> None:
        """Store a passage, its vector and its entry in every full-text index that may hold it.

        Whether it is searched is the document's decision as much as the passage's: a draft
        or deprecated document's passages are readable by citation id but never ranked.
        """
        searchable = 0 if row.superseded or document_id in self._unsearched else 1
        self.conn.execute(
            "INSERT INTO passages(document_id, ordinal, citation_id, title, heading, line_start, "
            "line_end, page_start, page_end, classification, searchable, text, search_text, text_hash) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                document_id,
                row.ordinal,
                row.citation_id,
                row.title,
                row.heading,
                row.line_start,
                row.line_end,
                row.page_start,
                row.page_end,
                int(row.classification),
                searchable,
                row.text,
                # Stored only where it differs (a passage with links, tags or a table rule):
                # search reads it for the coverage signal while the keyword impact lists are not
                # held, and must not recompute it per query.
                None if row.search_text == row.text else row.search_text,
                row.text_hash,
            ),
        )
        passage_id = self.conn.last_insert_rowid()
        self.conn.execute(
            "INSERT INTO passage_vectors(passage_id, embedding, classification, searchable) VALUES (?,?,?,?)",
            (passage_id, embedding, int(row.classification), searchable),
        )
        if not searchable:
            return
        for level in Classification:
            if level > self.ceiling:
                break
            if row.classification <= level:
                self.conn.execute(
                    f"INSERT INTO {fts_table(level)}(rowid, title, heading, body) VALUES (?,?,?,?)",
                    (passage_id, row.title, row.heading, row.search_text),
                )

    def copy_documents(self, run: Sequence[CopiedDocument]) -> int:
        """Copy ``run`` (documents in build order) with their passages, vectors and full-text
        entries from the previous index; returns the number of passages copied.

        Rows get the ids, and every table its rows in the order, a build adding the same
        documents one by one would give, so the index is the one a full build would write.
        A previous row is copied only where its path, content hash and classification are
        the ones planned; any other difference fails the build (the old index keeps serving).
        """
        if not run:
            return 0
        if not self._copying:
            raise IngestError("this build has no previous index to copy from")
        return copy_run(self.conn, _SOURCE, self.ceiling, run)

    def verify(self) -> None:
        """Refuse to publish a file that fails integrity or whose parts disagree."""
        conn = self.conn
        problems: list[str] = []
        check = [str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall()]
        if check != ["ok"]:
            problems.append("integrity_check failed")
        (passages,) = conn.execute("SELECT count(*) FROM passages").fetchone() or (0,)
        (vectors,) = conn.execute("SELECT count(*) FROM passage_vectors").fetchone() or (0,)
        if passages != vectors:
            problems.append(f"{passages} passages but {vectors} vectors")
        (declared,) = conn.execute("SELECT coalesce(sum(passage_count), 0) FROM documents").fetchone() or (0,)
        if declared != passages:
            problems.append(f"documents declare {declared} passages, found {passages}")
        for level in Classification:
            if level > self.ceiling:
                break
            table = fts_table(level)
            try:
                conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
            except apsw.Error:
                problems.append(f"{table} integrity-check failed")
            (expected,) = conn.execute(
                "SELECT count(*) FROM passages WHERE searchable = 1 AND classification <= ?",
                (int(level),),
            ).fetchone() or (0,)
            (indexed,) = conn.execute(f"SELECT count(*) FROM {table}_docsize").fetchone() or (0,)
            if expected != indexed:
                problems.append(f"{table} holds {indexed} rows, expected {expected}")
            (terms,) = conn.execute(f"SELECT count(*) FROM {terms_table(level)}").fetchone() or (0,)
            if indexed and not terms:
                problems.append(f"{terms_table(level)} is empty")
        if problems:
            raise IngestError("index verification failed: " + "; ".join(problems))

    def _carry_over_previous(self, carry_over: CarryOver) -> None:
        """Hand the file being replaced to ``carry_over``, attached as ``previous``.

        Other parts keep state in the index file (the statistics cache and rate ledger):
        without this every ingest would reset it. An unreadable old file carries nothing.
        """
        if not self.target.is_file():
            return
        try:
            self.conn.execute("ATTACH DATABASE ? AS previous", (str(self.target),))
        except apsw.Error:
            return
        try:
            carry_over(self.conn, "previous")
        except apsw.Error:
            pass  # a damaged previous file has nothing worth keeping
        finally:
            self.conn.execute("DETACH DATABASE previous")

    def commit(self, meta: IndexMeta) -> None:
        """Write ``meta`` (with the schema version and row counts), verify, make durable and publish."""
        fts_rows: dict[str, int] = {}
        for level in Classification:
            if level > self.ceiling:
                break
            (rows,) = self.conn.execute(f"SELECT count(*) FROM {fts_table(level)}_docsize").fetchone() or (0,)
            # Read by the gate's IDF; stored so a query never counts the index.
            fts_rows[level.label] = int(rows)
            # Document frequencies, copied once so a query looks them up instead of walking postings.
            self.conn.execute(f"INSERT INTO {terms_table(level)}(term, doc) SELECT term, doc FROM {vocab_table(level)}")
        self.conn.executemany(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", sorted(meta.with_fts_rows(fts_rows).rows().items())
        )
        self.conn.execute("COMMIT")
        if self._copying:
            self.conn.execute(f"DETACH DATABASE {_SOURCE}")
            self._copying = False
        if self._carry_over is not None:
            self._carry_over_previous(self._carry_over)
        self.conn.execute("PRAGMA journal_mode=DELETE")
        self.verify()
        self.conn.close()
        fd = os.open(self.shadow, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(self.shadow, self.target)
        dir_fd = os.open(self.target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        self._committed = True
