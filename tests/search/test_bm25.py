"""The keyword side's re-scoring reproduces FTS5's bm25() exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from governed_evidence.config import Classification
from governed_evidence.search import bm25, sql
from governed_evidence.search.query import index_tokenizer, match_expression, query_tokens, token_stems
from governed_evidence.store.connection import connect
from governed_evidence.store.schema import fts_table
from governed_evidence.store.text import search_text
from tests.search.reference import bm25_score, row_terms

QUERIES = [
    "travel expenses receipts",
    "password rotation and multi-factor authentication",
    "How many days of annual leave do staff get?",
    "remote work equipment allowance",
    "incident reporting within 24 hours",
    "the of and",
    "Quillmoor acquisition due diligence",
]


def _fts_scores(conn: object, level: Classification, expression: str) -> list[tuple[int, float]]:
    table = fts_table(level)
    weights = ", ".join(str(w) for w in sql.BM25_WEIGHTS)
    rows = conn.execute(  # type: ignore[attr-defined]
        f"SELECT rowid, bm25({table}, {weights}) FROM {table} WHERE {table} MATCH ? ORDER BY rowid", (expression,)
    )
    return [(int(r[0]), float(r[1])) for r in rows]


@pytest.mark.parametrize("level", list(Classification))
def test_python_bm25_equals_fts5_bm25(built_index: Path, level: Classification) -> None:
    conn = connect(built_index, readonly=True)
    tokenizer = index_tokenizer(conn)
    checked = 0
    for query in QUERIES:
        tokens = query_tokens(conn, query)
        phrases = token_stems(conn, tokens)
        expression = match_expression(tokens)
        expected = _fts_scores(conn, level, expression)
        if not expected:
            continue
        totals = bm25.table_totals(conn, level, expression)
        assert totals is not None
        frequencies = sql.document_frequencies(conn, level, list(set(phrases)))
        idfs = [bm25.idf(totals.rows, frequencies.get(p, 0)) for p in phrases]
        rows = sql.passages_by_id(conn, level, {pid for pid, _ in expected})
        for pid, fts_score in expected:
            row = rows[pid]
            terms = row_terms(tokenizer, (row.title, row.heading, search_text(row.text)))
            assert -bm25_score(phrases, idfs, terms, sql.BM25_WEIGHTS, totals) == pytest.approx(fts_score, rel=1e-12)
            checked += 1
    assert checked >= 5


@pytest.mark.parametrize("level", list(Classification))
def test_stored_document_frequencies_equal_fts5_vocabulary(built_index: Path, level: Classification) -> None:
    from governed_evidence.store.schema import terms_table, vocab_table

    conn = connect(built_index, readonly=True)
    stored = conn.execute(f"SELECT term, doc FROM {terms_table(level)} ORDER BY term").fetchall()
    live = conn.execute(f"SELECT term, doc FROM {vocab_table(level)} ORDER BY term").fetchall()
    assert stored == live and len(stored) > 10


def test_each_rows_term_set_is_what_fts5_indexed_for_it(built_index: Path) -> None:
    """Coverage from the index file tokenises rows without counting: the set must be the
    counted row's terms, and the terms FTS5 itself holds for that row."""
    level = Classification.RESTRICTED
    conn = connect(built_index, readonly=True)
    try:
        conn.execute(f"CREATE VIRTUAL TABLE temp.instances USING fts5vocab(main, {fts_table(level)}, instance)")
        indexed: dict[int, set[str]] = {}
        for term, pid in conn.execute("SELECT term, doc FROM temp.instances"):
            indexed.setdefault(int(pid), set()).add(str(term))
        tokenizer = index_tokenizer(conn)
        rows = sql.passages_by_id(conn, level, set(indexed))
        assert len(rows) >= 5
        for pid, row in rows.items():
            columns = (row.title, row.heading, row.search_text)
            held = bm25.row_term_set(tokenizer, columns)
            assert held == row_terms(tokenizer, columns).terms
            assert held == indexed[pid], pid
    finally:
        conn.close()
