"""Synthetic-scale corpora from BEIR SciFact, built through the product's IndexBuilder.

Text: SciFact abstracts split into passages of at most ``CHUNK_WORDS`` words at sentence
boundaries. Replica 0 is the original text; replica ``r >= 1`` rewrites about a quarter of
the words (deterministically per word and replica) into replica-specific variants, so the
vocabulary and the document frequencies grow with the corpus instead of every term
repeating identically.

Vectors: the real all-MiniLM-L6-v2 vectors of the 5,183 abstracts (read from the cached
SciFact index when it is present), perturbed per passage with Gaussian noise and
re-normalised. Without the cache, synthetic random unit vectors are used instead. Which
one was used is recorded in the returned info (``vectors``).

Classification is mixed per document (about 60% public, 25% internal, 15% restricted, 2%
superseded) so the ceiling filters inside both rankings are exercised. The vectors, their
classification and searchability are saved beside the index (``.npy``) for the exact
numpy reference.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import zlib
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import sqlite_vec

from governed_evidence.config import Classification
from governed_evidence.embeddings.minilm import DIMENSION, MODEL_ID, MODEL_SHA256
from governed_evidence.ingest.embed import embedding_key
from governed_evidence.store.build import IndexBuilder
from governed_evidence.store.build_rows import DocumentRow, PassageRow
from governed_evidence.store.meta import IndexMeta
from governed_evidence.store.text import search_text

__all__ = ["GENERATOR_VERSION", "build_corpus_index", "load_reference"]

#: Bump when the generated corpus changes, so cached indexes are rebuilt.
GENERATOR_VERSION = 1
CHUNK_WORDS = 90
#: Norm of the Gaussian noise added to a real vector before re-normalising (cosine to the
#: original about 0.94).
NOISE_NORM = 0.35
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[A-Za-z]{4,}")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _chunks(text: str) -> list[str]:
    out: list[str] = []
    current: list[str] = []
    for sentence in _SENTENCE.split(text.strip()):
        words = sentence.split()
        if current and len(current) + len(words) > CHUNK_WORDS:
            out.append(" ".join(current))
            current = []
        current.extend(words)
    if current:
        out.append(" ".join(current))
    return out or [text]


def _variant(replica: int) -> Any:
    tag = _LETTERS[(replica - 1) % 26] + _LETTERS[((replica - 1) // 26) % 26]

    def repl(match: re.Match[str]) -> str:
        word = match.group(0)
        if zlib.crc32(f"{replica}:{word.lower()}".encode()) % 4:
            return word
        return word + tag

    return repl


def _rewrite(text: str, replica: int) -> str:
    return text if replica == 0 else _WORD.sub(_variant(replica), text)


def _base_vectors(dataset: Path, cache: Path | None, ids: list[str]) -> tuple[np.ndarray, str]:
    """(len(ids) x 384 unit vectors, description)."""
    if cache is not None and cache.is_file():
        conn = apsw.Connection(f"file:{cache}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        found = {
            str(cid): np.frombuffer(blob, dtype=np.float32)
            for cid, blob in conn.execute(
                "SELECT p.citation_id, v.embedding FROM passages p JOIN passage_vectors v ON v.passage_id = p.id"
            )
        }
        conn.close()
        if all(i in found for i in ids):
            return np.stack([found[i] for i in ids]), (
                "real all-MiniLM-L6-v2 vectors of the 5,183 SciFact abstracts, perturbed per passage "
                f"(Gaussian noise of norm {NOISE_NORM}) and re-normalised"
            )
    rng = np.random.default_rng(7)
    base = rng.standard_normal((len(ids), DIMENSION)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    return base, "synthetic random unit vectors (no cached SciFact index found)"


def _level(doc_key: str) -> tuple[Classification, bool]:
    h = zlib.crc32(doc_key.encode())
    bucket = h % 100
    level = (
        Classification.PUBLIC if bucket < 60 else Classification.INTERNAL if bucket < 85 else Classification.RESTRICTED
    )
    superseded = (h >> 8) % 50 == 0
    return level, superseded


def build_corpus_index(
    dataset: Path, db: Path, passages: int, *, vector_cache: Path | None, seed: int = 1
) -> dict[str, Any]:
    """Build an index of exactly ``passages`` passages at ``db``; returns what was built and how fast."""
    started = time.perf_counter()
    docs = [json.loads(line) for line in (dataset / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line]
    ids = [str(d["_id"]) for d in docs]
    base, vector_kind = _base_vectors(dataset, vector_cache, ids)
    chunked = [_chunks(str(d.get("text", ""))) for d in docs]
    rng = np.random.default_rng(seed)
    sigma = float(NOISE_NORM / np.sqrt(DIMENSION))

    vectors = np.zeros((passages, DIMENSION), dtype=np.float32)
    levels = np.zeros(passages, dtype=np.int8)
    searchable = np.zeros(passages, dtype=np.int8)
    written = 0
    documents = 0
    replica = 0
    with IndexBuilder(db, dimension=DIMENSION, ceiling=Classification.RESTRICTED) as builder:
        while written < passages:
            for d_index, doc in enumerate(docs):
                if written >= passages:
                    break
                pieces = chunked[d_index][: passages - written]
                path = f"scifact/r{replica:04d}/{ids[d_index]}.md"
                level, superseded = _level(path)
                title = _rewrite(str(doc.get("title", "")), replica)
                doc_id = builder.add_document(
                    DocumentRow(
                        path,
                        title,
                        "markdown",
                        level,
                        hashlib.sha256(path.encode()).hexdigest(),
                        f"scifact/r{replica + 1:04d}/{ids[d_index]}.md" if superseded else None,
                        0.0,
                        len(pieces),
                        0,
                    )
                )
                noise = (rng.standard_normal((len(pieces), DIMENSION)) * sigma).astype(np.float32)
                block = base[d_index] + noise
                block = (block / np.linalg.norm(block, axis=1, keepdims=True)).astype(np.float32)
                for ordinal, piece in enumerate(pieces):
                    text = _rewrite(piece, replica)
                    builder.add_passage(
                        doc_id,
                        PassageRow(
                            ordinal,
                            f"{path}#top:L{ordinal + 1}-{ordinal + 1}",
                            title,
                            "",
                            ordinal + 1,
                            ordinal + 1,
                            None,
                            None,
                            level,
                            superseded,
                            text,
                            search_text(text),
                            embedding_key(MODEL_ID, f"{title}\n{text}"),
                        ),
                        block[ordinal].tobytes(),
                    )
                    vectors[written] = block[ordinal]
                    levels[written] = int(level)
                    searchable[written] = 0 if superseded else 1
                    written += 1
                documents += 1
            replica += 1
        insert_s = time.perf_counter() - started
        builder.commit(
            IndexMeta(
                embedding_model=MODEL_ID,
                embedding_model_checksum=MODEL_SHA256,
                embedding_dimension=DIMENSION,
                ceiling=Classification.RESTRICTED,
                default_classification=Classification.RESTRICTED,
                built_at="benchmark",
                corpus_name=f"scifact-x{passages}",
                documents=documents,
                passages=passages,
            )
        )
    np.save(db.with_suffix(".vectors.npy"), vectors)
    np.save(db.with_suffix(".levels.npy"), levels)
    np.save(db.with_suffix(".searchable.npy"), searchable)
    info = {
        "generator_version": GENERATOR_VERSION,
        "passages": passages,
        "documents": documents,
        "replicas": replica,
        "vectors": vector_kind,
        "by_level": {c.label: int((levels == int(c)).sum()) for c in Classification},
        "superseded_passages": int((searchable == 0).sum()),
        "build_s": round(time.perf_counter() - started, 2),
        "build_insert_s": round(insert_s, 2),
        "build_passages_per_s": round(passages / (time.perf_counter() - started), 1),
        "db_bytes": db.stat().st_size,
        "db_bytes_per_passage": round(db.stat().st_size / passages, 1),
    }
    db.with_suffix(".info.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return info


def load_reference(db: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vectors, classification levels, searchable) in passage-id order (id = row index + 1)."""
    return (
        np.load(db.with_suffix(".vectors.npy")),
        np.load(db.with_suffix(".levels.npy")),
        np.load(db.with_suffix(".searchable.npy")),
    )
