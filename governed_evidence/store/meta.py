"""The index's own description: one typed value, written by the builder, read by everyone.

The ``meta`` table holds text keys and values (SQLite has no record type); this module is
the only code that knows the keys. The builder writes ``schema_version`` and the per-level
full-text row counts itself, so a caller cannot forget them or write a wrong one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from governed_evidence.config import Classification
from governed_evidence.errors import IndexCorruptError
from governed_evidence.store.schema import SCHEMA_VERSION

__all__ = ["IndexMeta"]

_FTS_ROWS = "fts_rows_"
_SIMILARITY = "similarity_"


@dataclass(frozen=True)
class IndexMeta:
    embedding_model: str
    embedding_dimension: int
    embedding_model_checksum: str = ""
    #: The build ceiling: nothing above it is in the file, and no full-text index exists above it.
    ceiling: Classification = Classification.PUBLIC
    default_classification: Classification | None = None
    built_at: str = ""
    corpus_name: str = ""
    #: The corpus folder's resolved path, which tells an ingest whether the index it would
    #: replace was built from another corpus; "" in indexes written before it was recorded.
    corpus_path: str = ""
    documents: int = 0
    passages: int = 0
    #: Documents above the build ceiling: counted, never named.
    excluded_above_ceiling: int = 0
    #: Digest of everything the build depended on (see ingest.pipeline.corpus_fingerprint);
    #: None when the build was not a function of it (a read failed) or not an ingest at all.
    corpus_fingerprint: str | None = None
    #: Digest of the build's settings besides the files (see ingest.fingerprint.CorpusDigest):
    #: a later build copies this index's documents only when its own is equal. None in
    #: indexes written before incremental builds, or not by an ingest.
    settings_digest: str | None = None
    #: The build's report counts (documents per level and outcome, per deciding rule), as JSON
    #: the ingest writes and reads: an unchanged corpus reports what its build reported.
    #: Counts only, never a name. None in indexes written before it was recorded.
    build_counts: str | None = None
    schema_version: int = SCHEMA_VERSION
    #: Rows of each level's full-text index, by level label (the bm25 and gate statistics).
    fts_rows: Mapping[str, int] = field(default_factory=dict)
    #: The embedding model's similarity calibration measured over the corpus at ingest
    #: (embeddings/calibration.py), by level label: (floor, ceiling) measured over the
    #: passages at or below that level only, so nothing above a caller's level shapes a
    #: score it is served. Empty in indexes built before it was recorded.
    similarity: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    def similarity_calibration(self, level: Classification) -> tuple[float, float] | None:
        """(floor, ceiling) measured at ingest over the passages at or below ``level``, or None."""
        return self.similarity.get(level.label)

    def fts_row_count(self, level: Classification) -> int:
        return int(self.fts_rows.get(level.label, 0))

    def with_fts_rows(self, rows: Mapping[str, int]) -> IndexMeta:
        return replace(self, fts_rows=dict(rows), schema_version=SCHEMA_VERSION)

    def rows(self) -> dict[str, str]:
        """The ``meta`` table's key/value rows for this value."""
        out = {
            "schema_version": str(self.schema_version),
            "embedding_model": self.embedding_model,
            "embedding_model_checksum": self.embedding_model_checksum,
            "embedding_dimension": str(self.embedding_dimension),
            "ceiling": self.ceiling.label,
            "built_at": self.built_at,
            "corpus_name": self.corpus_name,
            "documents": str(self.documents),
            "passages": str(self.passages),
            "excluded_above_ceiling": str(self.excluded_above_ceiling),
        }
        if self.default_classification is not None:
            out["default_classification"] = self.default_classification.label
        if self.corpus_fingerprint is not None:
            out["corpus_fingerprint"] = self.corpus_fingerprint
        if self.corpus_path:
            out["corpus_path"] = self.corpus_path
        if self.settings_digest is not None:
            out["settings_digest"] = self.settings_digest
        if self.build_counts is not None:
            out["build_counts"] = self.build_counts
        out.update({f"{_FTS_ROWS}{label}": str(n) for label, n in self.fts_rows.items()})
        out.update({f"{_SIMILARITY}{label}": f"{lo!r},{hi!r}" for label, (lo, hi) in self.similarity.items()})
        return out

    @classmethod
    def from_rows(cls, rows: Mapping[str, str]) -> IndexMeta:
        """Read the ``meta`` table; a file of another schema, or missing keys, is not an index we serve."""
        version = rows.get("schema_version")
        if version != str(SCHEMA_VERSION):
            raise IndexCorruptError(
                "the index was built by an incompatible version (schema "
                f"{version or '?'}, expected {SCHEMA_VERSION}); rebuild it"
            )
        try:
            default = rows.get("default_classification")
            return cls(
                embedding_model=rows["embedding_model"],
                embedding_dimension=int(rows["embedding_dimension"]),
                embedding_model_checksum=rows.get("embedding_model_checksum", ""),
                ceiling=Classification[rows["ceiling"].upper()],
                default_classification=Classification[default.upper()] if default else None,
                built_at=rows.get("built_at", ""),
                corpus_name=rows.get("corpus_name", ""),
                corpus_path=rows.get("corpus_path", ""),
                documents=int(rows.get("documents", "0")),
                passages=int(rows.get("passages", "0")),
                excluded_above_ceiling=int(rows.get("excluded_above_ceiling", "0")),
                corpus_fingerprint=rows.get("corpus_fingerprint"),
                settings_digest=rows.get("settings_digest"),
                build_counts=rows.get("build_counts"),
                schema_version=SCHEMA_VERSION,
                fts_rows={k[len(_FTS_ROWS) :]: int(v) for k, v in rows.items() if k.startswith(_FTS_ROWS)},
                similarity={k[len(_SIMILARITY) :]: _pair(v) for k, v in rows.items() if k.startswith(_SIMILARITY)},
            )
        except (KeyError, ValueError):
            raise IndexCorruptError("the index metadata is incomplete or damaged; rebuild it") from None


def _pair(value: str) -> tuple[float, float]:
    floor, ceiling = value.split(",")
    return float(floor), float(ceiling)
