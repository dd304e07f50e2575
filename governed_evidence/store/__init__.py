"""The one SQLite file: connections (apsw + sqlite-vec), schema and atomic builds."""

from governed_evidence.store.build import IndexBuilder
from governed_evidence.store.connection import IndexReader, connect
from governed_evidence.store.schema import SCHEMA_VERSION, fts_table, vocab_table

__all__ = [
    "SCHEMA_VERSION",
    "IndexBuilder",
    "IndexReader",
    "connect",
    "fts_table",
    "vocab_table",
]
