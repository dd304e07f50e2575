"""SQL of the search side, built as text (testable as strings) and run here.

Every statement that touches passages carries the caller's ceiling in its WHERE clause,
and the rankings carry it *inside*: the full-text side queries the per-level index, the
vector side filters on the ``classification`` metadata column within the KNN.
"""

from __future__ import annotations

import apsw

from governed_evidence.config import Classification
from governed_evidence.search.records import DOCUMENT_COLUMNS, PASSAGE_COLUMNS, PASSAGE_FROM, DocumentEntry, Passage
from governed_evidence.store.schema import fts_table, terms_table

__all__ = [
    "BM25_WEIGHTS",
    "VISIBILITY_INDEX",
    "cosine_distances",
    "count_searchable",
    "document_frequencies",
    "document_paths",
    "documents",
    "keyword_ranking",
    "keyword_sql",
    "level_counts",
    "neighbours",
    "passage_by_citation",
    "passage_documents",
    "passages_by_id",
    "quick_check",
    "vector_ranking",
    "vector_sql",
    "visibility_sql",
]

#: The covering index of the ceiling check (store/schema.py).
VISIBILITY_INDEX = "passages_visible"

#: Column weights for bm25(title, heading, body): a match in a title or heading counts more.
BM25_WEIGHTS = (4.0, 2.0, 1.0)


def keyword_sql(level: Classification) -> str:
    table = fts_table(level)
    weights = ", ".join(str(w) for w in BM25_WEIGHTS)
    return f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY bm25({table}, {weights}) LIMIT ?"


def vector_sql() -> str:
    return (
        "SELECT passage_id, distance FROM passage_vectors "
        "WHERE embedding MATCH ? AND k = ? AND classification <= ? AND searchable = 1 "
        "ORDER BY distance"
    )


def keyword_ranking(conn: apsw.Connection, level: Classification, expression: str, k: int) -> list[int]:
    if not expression:
        return []
    return [int(r[0]) for r in conn.execute(keyword_sql(level), (expression, k))]


def vector_ranking(conn: apsw.Connection, level: Classification, vector: bytes, k: int) -> list[tuple[int, float]]:
    return [(int(r[0]), float(r[1])) for r in conn.execute(vector_sql(), (vector, k, int(level)))]


def cosine_distances(conn: apsw.Connection, vector: bytes, ids: list[int]) -> dict[int, float]:
    """Exact cosine distance for specific passages (point lookups; vec0 has no IN index)."""
    out: dict[int, float] = {}
    for pid in ids:
        row = conn.execute(
            "SELECT vec_distance_cosine(embedding, ?) FROM passage_vectors WHERE passage_id = ?", (vector, pid)
        ).fetchone()
        if row is not None:
            out[pid] = float(row[0])
    return out


def passages_by_id(conn: apsw.Connection, level: Classification, ids: set[int]) -> dict[int, Passage]:
    """Searchable passages at or below ``level`` (a second, independent ceiling check)."""
    if not ids:
        return {}
    ordered = sorted(ids)
    marks = ",".join("?" * len(ordered))
    rows = conn.execute(
        f"SELECT {PASSAGE_COLUMNS} {PASSAGE_FROM} "
        f"WHERE p.id IN ({marks}) AND p.classification <= ? AND p.searchable = 1",
        (*ordered, int(level)),
    ).fetchall()
    return {passage.id: passage for passage in map(Passage.from_row, rows)}


def count_searchable(conn: apsw.Connection, level: Classification) -> int:
    """Searchable passages at or below ``level``."""
    row = conn.execute(
        "SELECT count(*) FROM passages WHERE classification <= ? AND searchable = 1", (int(level),)
    ).fetchone()
    return int(row[0]) if row else 0


def passage_documents(conn: apsw.Connection, level: Classification, ids: set[int]) -> dict[int, int]:
    """The document id of each searchable passage of ``ids`` at or below ``level``: the second
    ceiling check of a search's candidates."""
    if not ids:
        return {}
    rows = conn.execute(visibility_sql(len(ids)), (*ids, int(level)))
    return {int(pid): int(document_id) for pid, document_id in rows}


def visibility_sql(count: int) -> str:
    """The statement of :func:`passage_documents` for ``count`` ids, then the level."""
    # The covering index of the check's own columns (every index file of this schema has it):
    # SQLite would otherwise look each id up in the passages table, whose rows hold their text.
    # No join to documents: the gate groups by document id, and a path is read with the row.
    return (
        f"SELECT p.id, p.document_id FROM passages p INDEXED BY {VISIBILITY_INDEX} "
        f"WHERE p.id IN ({','.join('?' * count)}) AND p.classification <= ? AND p.searchable = 1"
    )


def document_paths(conn: apsw.Connection, document_ids: set[int]) -> dict[int, str]:
    """The path of each document of ``document_ids`` (ids of documents of visible passages)."""
    if not document_ids:
        return {}
    ordered = sorted(document_ids)
    rows = conn.execute(f"SELECT id, path FROM documents WHERE id IN ({','.join('?' * len(ordered))})", ordered)
    return {int(document_id): str(path) for document_id, path in rows}


def passage_by_citation(conn: apsw.Connection, ceiling: Classification, citation_id: str) -> Passage | None:
    row = conn.execute(
        f"SELECT {PASSAGE_COLUMNS} {PASSAGE_FROM} WHERE p.citation_id = ? AND p.classification <= ?",
        (citation_id, int(ceiling)),
    ).fetchone()
    return Passage.from_row(row) if row is not None else None


def neighbours(
    conn: apsw.Connection, ceiling: Classification, document_id: int, ordinal: int, context: int
) -> list[Passage]:
    rows = conn.execute(
        f"SELECT {PASSAGE_COLUMNS} {PASSAGE_FROM} WHERE p.document_id = ? AND p.ordinal BETWEEN ? AND ? "
        "AND p.classification <= ? ORDER BY p.ordinal",
        (document_id, ordinal - context, ordinal + context, int(ceiling)),
    ).fetchall()
    return [Passage.from_row(r) for r in rows]


def document_frequencies(conn: apsw.Connection, level: Classification, stems: list[str]) -> dict[str, int]:
    if not stems:
        return {}
    marks = ",".join("?" * len(stems))
    rows = conn.execute(f"SELECT term, doc FROM {terms_table(level)} WHERE term IN ({marks})", stems)
    return {str(t): int(d) for t, d in rows}


def level_counts(conn: apsw.Connection, ceiling: Classification) -> list[tuple[int, int, int, int]]:
    """(level, documents, passages, superseded documents) for every level up to the ceiling."""
    found = {
        int(r[0]): (int(r[1]), int(r[2] or 0), int(r[3] or 0))
        for r in conn.execute(
            "SELECT classification, count(*), sum(passage_count), sum(status = 'superseded') "
            "FROM documents WHERE classification <= ? GROUP BY classification",
            (int(ceiling),),
        )
    }
    return [(int(level), *found.get(int(level), (0, 0, 0))) for level in Classification if level <= ceiling]


def documents(conn: apsw.Connection, ceiling: Classification, limit: int) -> list[DocumentEntry]:
    return [
        DocumentEntry.from_row(r)
        for r in conn.execute(
            f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE classification <= ? ORDER BY path LIMIT ?",
            (int(ceiling), limit),
        )
    ]


def quick_check(conn: apsw.Connection) -> str:
    try:
        rows = [str(r[0]) for r in conn.execute("PRAGMA quick_check")]
    except apsw.Error:
        return "failed"
    return "ok" if rows == ["ok"] else "failed"
