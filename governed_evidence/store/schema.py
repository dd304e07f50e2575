"""Schema of the index file, built as SQL text so it can be read and tested as text.

Full-text search uses one FTS5 index *per ceiling*, each holding only passages at or below
its level. BM25 depends on corpus statistics (row count, document frequency of each term);
a single shared index would let restricted passages move public scores and ranks. With
cumulative per-level indexes, a caller at ceiling ``internal`` is ranked exactly as if the
restricted documents had never been ingested. The FTS tables are contentless: they rank
rowids, and passage text is always read from ``passages`` under the caller's ceiling.

Each level also has a plain table of document frequencies (``passages_terms_*``), filled
from FTS5's vocabulary when the build finishes: fts5vocab counts a term's rows by walking
its posting list, which costs as much as searching for it (tens of milliseconds for a
common word at a million passages); a primary-key lookup costs microseconds.
"""

from __future__ import annotations

from governed_evidence.config import Classification
from governed_evidence.store.lifecycle import STATUSES

__all__ = [
    "FTS_TOKENIZER",
    "SCHEMA_VERSION",
    "fts_table",
    "schema_sql",
    "terms_table",
    "vocab_table",
]

#: 2: per-level document-frequency tables. 3: ``passages.search_text``, the indexed form of a
#: passage body where it differs from the text (NULL otherwise), so search never derives it.
#: 4: ``documents.lifecycle``, ``owner``, ``review_by`` and ``effective`` (governance rules and front matter).
#: 5: ``documents.decided_by``, ``warnings``, ``passages_refused`` and ``hard_linked``: what parsing
#: a file reported and whether other names set its level, so an incremental build that copies the
#: document reports what a full build would, and never copies one whose level other names decided.
#: 6: ``documents.source_link``, the document's web link at its source (a governance rule's ``link``).
SCHEMA_VERSION = 6

#: Porter stemming over unicode61 (diacritics folded); query text is tokenised with the
#: same tokenizer so that what a user types is searched as plain words.
FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"


def fts_table(level: Classification) -> str:
    return f"passages_fts_{level.label}"


def vocab_table(level: Classification) -> str:
    return f"passages_vocab_{level.label}"


def terms_table(level: Classification) -> str:
    return f"passages_terms_{level.label}"


#: The lifecycle statuses as an SQL list, for the CHECK that refuses any other.
_STATUSES_SQL = ", ".join(f"'{status}'" for status in STATUSES)


def schema_sql(dimension: int, ceiling: Classification) -> str:
    """DDL for a new index whose vectors have ``dimension`` and whose build ceiling is ``ceiling``.

    ``documents.status`` says whether the document is superseded (``superseded_by``);
    ``lifecycle`` is its governance status. A document's passages are searchable only when
    it is neither superseded nor other than ``current``. Dates are ISO text (YYYY-MM-DD).
    """
    if dimension <= 0:
        raise ValueError("embedding dimension must be positive")
    parts = [
        f"""
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE documents (
    id             INTEGER PRIMARY KEY,
    path           TEXT NOT NULL UNIQUE,
    title          TEXT NOT NULL,
    format         TEXT NOT NULL,
    classification INTEGER NOT NULL,
    content_hash   TEXT NOT NULL,
    status         TEXT NOT NULL CHECK (status IN ('active', 'superseded')),
    superseded_by  TEXT,
    source_mtime   REAL NOT NULL,
    passage_count  INTEGER NOT NULL,
    refused_count  INTEGER NOT NULL,
    lifecycle      TEXT NOT NULL DEFAULT 'current' CHECK (lifecycle IN ({_STATUSES_SQL})),
    owner          TEXT,
    review_by      TEXT,
    effective      TEXT,
    decided_by     TEXT NOT NULL DEFAULT '',
    warnings       TEXT NOT NULL DEFAULT '[]',
    passages_refused INTEGER NOT NULL DEFAULT 0,
    hard_linked    INTEGER NOT NULL DEFAULT 0,
    source_link    TEXT
);
CREATE TABLE passages (
    id             INTEGER PRIMARY KEY,
    document_id    INTEGER NOT NULL REFERENCES documents(id),
    ordinal        INTEGER NOT NULL,
    citation_id    TEXT NOT NULL UNIQUE,
    title          TEXT NOT NULL,
    heading        TEXT NOT NULL,
    line_start     INTEGER,
    line_end       INTEGER,
    page_start     INTEGER,
    page_end       INTEGER,
    classification INTEGER NOT NULL,
    searchable     INTEGER NOT NULL,
    text           TEXT NOT NULL,
    search_text    TEXT,
    text_hash      TEXT NOT NULL,
    UNIQUE (document_id, ordinal)
);
CREATE INDEX passages_by_hash ON passages(text_hash);
-- Every search checks its ~90 candidates against the ceiling here (a second check beside the
-- one inside the rankings). Its columns alone, packed a few hundred to a page instead of a few
-- whole rows with their text: the check takes 2.3x less time (87 ids: 127 to 56 us alone;
-- 0.13 ms of a 10k-passage search, docs/performance.md).
CREATE INDEX passages_visible ON passages(id, classification, searchable, document_id);
""",
        f"""
CREATE VIRTUAL TABLE passage_vectors USING vec0(
    passage_id     INTEGER PRIMARY KEY,
    embedding      float[{int(dimension)}] distance_metric=cosine,
    classification integer,
    searchable     integer
);
""",
    ]
    for level in Classification:
        if level > ceiling:
            break
        parts.append(
            f"""
CREATE VIRTUAL TABLE {fts_table(level)} USING fts5(
    title, heading, body,
    content='',
    tokenize='{FTS_TOKENIZER}'
);
CREATE VIRTUAL TABLE {vocab_table(level)} USING fts5vocab({fts_table(level)}, row);
CREATE TABLE {terms_table(level)} (term TEXT PRIMARY KEY, doc INTEGER NOT NULL) WITHOUT ROWID;
"""
        )
    return "".join(parts)
