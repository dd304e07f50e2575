"""Tables the SDMX cache and rate ledger add to the SQLite file, as SQL text.

They live beside the document tables (never touching them) and are created on first use
with ``IF NOT EXISTS``, so an index built before this module existed simply gains them.
All are STRICT: a value of the wrong type is an error at write time, and a ledger that
reads back anything else is treated as tampered with (see ``ratelimit.RateLedger``).
"""

from __future__ import annotations

import apsw

__all__ = ["SDMX_SCHEMA_VERSION", "SDMX_TABLES", "carry_over", "carry_over_sql", "schema_sql"]

SDMX_SCHEMA_VERSION = 1
SDMX_TABLES = ("sdmx_cache", "sdmx_catalogue", "sdmx_rate_ledger", "sdmx_meta")


def schema_sql() -> str:
    return """
CREATE TABLE IF NOT EXISTS sdmx_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS sdmx_cache (
    provider     TEXT NOT NULL,
    request      TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('catalogue', 'structure', 'data')),
    status       INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    body         BLOB NOT NULL,
    body_sha256  TEXT NOT NULL,
    size         INTEGER NOT NULL,
    stored_size  INTEGER NOT NULL,
    fetched_at   REAL NOT NULL,
    expires_at   REAL NOT NULL,
    source_url   TEXT NOT NULL,
    PRIMARY KEY (provider, request)
) STRICT;
CREATE INDEX IF NOT EXISTS sdmx_cache_by_age ON sdmx_cache(fetched_at);
CREATE TABLE IF NOT EXISTS sdmx_catalogue (
    provider    TEXT NOT NULL,
    body_sha256 TEXT NOT NULL,
    position    INTEGER NOT NULL,
    agency      TEXT NOT NULL,
    dataset_id  TEXT NOT NULL,
    version     TEXT NOT NULL,
    name        TEXT NOT NULL,
    description TEXT NOT NULL,
    PRIMARY KEY (provider, position)
) STRICT;
CREATE TABLE IF NOT EXISTS sdmx_rate_ledger (
    provider TEXT NOT NULL,
    bucket   TEXT NOT NULL CHECK (bucket IN ('data', 'structure')),
    at       REAL NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS sdmx_rate_ledger_window ON sdmx_rate_ledger(provider, bucket, at);
"""


def carry_over_sql(attached: str = "previous") -> str:
    """Copy the ledger and cache from an ATTACHed previous file into a new one.

    An atomic index rebuild publishes a brand-new file; without this the rate budget would
    reset on every ingest. Run it on the new file's connection after
    ``ATTACH DATABASE ? AS previous`` and :func:`schema_sql`.
    """
    if not attached.isidentifier():
        raise ValueError("attached schema name must be an identifier")
    return f"""
INSERT INTO main.sdmx_rate_ledger(provider, bucket, at)
    SELECT provider, bucket, at FROM {attached}.sdmx_rate_ledger;
INSERT OR REPLACE INTO main.sdmx_cache SELECT * FROM {attached}.sdmx_cache;
INSERT OR REPLACE INTO main.sdmx_catalogue SELECT * FROM {attached}.sdmx_catalogue;
"""


def carry_over(conn: apsw.Connection, attached: str) -> None:
    """The index build's carry-over hook: keep the cache and ledger of the replaced file.

    Does nothing when the attached file holds no statistics tables (never served statistics).
    """
    tables = {
        str(r[0]) for r in conn.execute(f"SELECT name FROM {_identifier(attached)}.sqlite_master WHERE type = 'table'")
    }
    if {"sdmx_cache", "sdmx_rate_ledger", "sdmx_catalogue"} <= tables:
        conn.execute(schema_sql())
        conn.execute(carry_over_sql(attached))


def _identifier(name: str) -> str:
    if not name.isidentifier():
        raise ValueError("attached schema name must be an identifier")
    return name
