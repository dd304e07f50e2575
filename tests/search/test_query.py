"""FTS5 query building: user text is searched as words, never as FTS syntax."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from governed_evidence.config import Classification
from governed_evidence.search import sql
from governed_evidence.search.query import match_expression, query_tokens, quote_token, token_stems
from governed_evidence.store.connection import connect

HOSTILE = [
    "multi-agent",
    "20.04",
    "O'Brien",
    "classification:restricted",
    "NEAR(a b)",
    "NEAR(",
    '"',
    '""',
    "*",
    "title:*",
    "a AND OR NOT b",
    "^start",
    "col:val -minus +plus",
    "{title heading}: x",
    "'; DROP TABLE passages; --",
    "\\x00 \u200b zero width",
]


@pytest.fixture
def conn() -> apsw.Connection:
    return apsw.Connection(":memory:")


def test_quote_token_doubles_embedded_quotes() -> None:
    assert quote_token('say "hi"') == '"say ""hi"""'
    assert quote_token("plain") == '"plain"'


def test_match_expression_is_an_or_of_quoted_tokens() -> None:
    assert match_expression(["multi", "agent"]) == '"multi" OR "agent"'
    assert match_expression([]) == ""


def test_tokens_split_like_the_index_tokenizer(conn: apsw.Connection) -> None:
    assert query_tokens(conn, "multi-agent") == ["multi", "agent"]
    assert query_tokens(conn, "20.04") == ["20", "04"]
    assert query_tokens(conn, "O'Brien") == ["o", "brien"]
    assert query_tokens(conn, "classification:restricted") == ["classification", "restricted"]
    assert query_tokens(conn, "Café naïve") == ["cafe", "naive"]


def test_stopwords_are_dropped_unless_nothing_else_remains(conn: apsw.Connection) -> None:
    assert query_tokens(conn, "what is the leave policy") == ["leave", "policy"]
    assert query_tokens(conn, "what is the") == ["what", "is", "the"]


def test_stems_match_the_porter_index(conn: apsw.Connection) -> None:
    assert token_stems(conn, ["policies", "running"]) == ["polici", "run"]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_searches_as_words_and_never_errors(built_index: Path, text: str) -> None:
    db = connect(built_index, readonly=True)
    try:
        tokens = query_tokens(db, text)
        expression = match_expression(tokens)
        # Must run without an FTS5 syntax error at every level.
        for level in Classification:
            sql.keyword_ranking(db, level, expression, 10)
    finally:
        db.close()


def test_an_operator_word_is_matched_literally(tmp_path: Path) -> None:
    from governed_evidence.store.schema import FTS_TOKENIZER

    db = apsw.Connection(str(tmp_path / "t.sqlite"))
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize='{FTS_TOKENIZER}')")
    db.execute("INSERT INTO t(rowid, body) VALUES (1, 'the near field and the not clause'), (2, 'other words')")
    expression = match_expression(query_tokens(db, "NEAR( NOT"))
    rows = [r[0] for r in db.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,))]
    assert rows == [1]


def test_keyword_sql_is_parameterised_and_weighted() -> None:
    text = sql.keyword_sql(Classification.INTERNAL)
    assert text.startswith("SELECT rowid FROM passages_fts_internal WHERE passages_fts_internal MATCH ?")
    assert "bm25(passages_fts_internal, 4.0, 2.0, 1.0)" in text
    assert text.endswith("LIMIT ?")


def test_vector_sql_filters_inside_the_knn() -> None:
    text = sql.vector_sql()
    assert "embedding MATCH ? AND k = ? AND classification <= ? AND searchable = 1" in text
