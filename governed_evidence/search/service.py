"""SearchService: hybrid retrieval, the confidence gate and the ceiling, synchronously.

The ceiling is applied *inside* both rankings (a per-level full-text index and a
``classification`` constraint in the vector KNN), so a passage above it never takes a
rank slot, shifts a score or moves a count. Reading a passage above the ceiling fails
exactly like reading one that does not exist.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from governed_evidence.config import Classification
from governed_evidence.embeddings.base import Embedder
from governed_evidence.errors import (
    EmbedderError,
    IndexUnavailableError,
    InvalidRequestError,
    NotFoundError,
)
from governed_evidence.logging import get_logger
from governed_evidence.search import bm25, sql
from governed_evidence.search.bm25 import RowTerms
from governed_evidence.search.fusion import Fused, fuse
from governed_evidence.search.gate import (
    GateThresholds,
    Signals,
    background_similarity,
    calibration_for,
    confidence,
)
from governed_evidence.search.models import (
    DocumentSummary,
    IndexStatus,
    LevelCount,
    PassageView,
    ReadPassageResponse,
    SearchMode,
    SearchResponse,
    SearchResult,
    SourcesResponse,
    Span,
)
from governed_evidence.search.query import index_tokenizer, match_expression, query_tokens, token_stems
from governed_evidence.search.vectors import VectorMatrix, count_searchable, load_matrix, matrix_bytes
from governed_evidence.store.connection import IndexReader
from governed_evidence.store.schema import SCHEMA_VERSION

__all__ = ["MAX_QUERY_CHARS", "NOT_FOUND_MESSAGE", "Candidate", "Ranking", "SearchService"]

log = get_logger("search")

MAX_QUERY_CHARS = 500
#: How many candidates each ranking contributes before fusion and gating.
CANDIDATES = 50
#: How many of the fused candidates are reordered by confidence in hybrid mode.
RERANK_DEPTH = 20
MAX_LIMIT = 20
MAX_CONTEXT = 3
MAX_LISTED_DOCUMENTS = 500
NOT_FOUND_MESSAGE = "No passage with that citation_id is available. Use search_documents to find citation ids."


@dataclass
class Candidate:
    """One fused candidate with the signals the gate saw."""

    fused: Fused
    signals: Signals
    confidence: float
    row: tuple[Any, ...]

    @property
    def document(self) -> str:
        return str(self.row[sql.COL_PATH])


@dataclass
class Ranking:
    requested_mode: SearchMode
    search_mode: SearchMode
    mode_reason: str | None
    candidates: list[Candidate]


def _label(level: int) -> str:
    try:
        return Classification(level).label
    except ValueError:
        return Classification.RESTRICTED.label


def _span(start: int | None, end: int | None) -> Span | None:
    if start is None:
        return None
    return Span(start=int(start), end=int(end if end is not None else start))


def _embed_and_rank(
    embedder: Embedder, text: str, matrix: VectorMatrix | None, depth: int
) -> tuple[np.ndarray, list[tuple[int, float]] | None]:
    vector = np.asarray(embedder.embed([text])[0], dtype=np.float32)
    return vector, (matrix.knn(vector, depth) if matrix is not None else None)


class SearchService:
    """Searches and reads one index file on behalf of callers at one ceiling."""

    def __init__(
        self,
        db: Path,
        *,
        ceiling: Classification,
        embedder_factory: Callable[[], Embedder] | None = None,
        gate_enabled: bool = True,
        thresholds: GateThresholds | None = None,
        vector_memory_bytes: int = 0,
    ) -> None:
        self.db = db
        self.ceiling = ceiling
        self.reader = IndexReader(db)
        self.gate_enabled = gate_enabled
        self.thresholds = thresholds or GateThresholds()
        self._embedder_factory = embedder_factory
        self._embedder: Embedder | None = None
        self._embedder_error: str | None = None if embedder_factory else "no embedder configured"
        self._embedder_lock = threading.Lock()
        self._integrity: dict[tuple[int, int], str] = {}
        self._pool: ThreadPoolExecutor | None = None
        # Vectors held in memory (0: never; the vec0 KNN answers every query).
        self.vector_memory_bytes = vector_memory_bytes
        self._matrix: tuple[tuple[int, int], VectorMatrix] | None = None
        self._matrix_attempted: set[tuple[int, int]] = set()
        self._matrix_lock = threading.Lock()
        self._closing = threading.Event()
        self._totals: dict[tuple[tuple[int, int], int], bm25.TableTotals] = {}

    # -- embedder -------------------------------------------------------------------

    def embedder(self) -> Embedder | None:
        """The query embedder, loaded once; None (with a recorded reason) if unavailable."""
        if self._embedder is not None or self._embedder_factory is None:
            return self._embedder
        with self._embedder_lock:
            if self._embedder is None and self._embedder_error is None:
                try:
                    self._embedder = self._embedder_factory()
                except EmbedderError as exc:
                    self._embedder_error = str(exc)
                    log.warning("embedder_unavailable", reason=str(exc))
        return self._embedder

    def _embed_pool(self) -> ThreadPoolExecutor:
        """Worker threads that embed queries concurrently with the full-text query."""
        if self._pool is None:
            with self._embedder_lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="query-embed")
        return self._pool

    def _semantic_unavailable(self, meta: dict[str, str]) -> str | None:
        embedder = self.embedder()
        if embedder is None:
            return f"meaning search unavailable: {self._embedder_error}"
        try:
            identity = embedder.identity
        except EmbedderError as exc:
            return f"meaning search unavailable: {exc}"
        mismatch = identity.describe_mismatch(
            meta.get("embedding_model", "?"), int(meta.get("embedding_dimension", "0") or 0)
        )
        return f"meaning search refused: {mismatch}" if mismatch else None

    # -- vectors in memory ------------------------------------------------------------

    def warm(self) -> None:
        """Load the query embedder and the in-memory vectors now (serving calls it at start)."""
        self.embedder()
        try:
            generation, conn, meta = self.reader.snapshot()
        except IndexUnavailableError:
            return
        try:
            if self._semantic_unavailable(meta) is None:
                self._load_matrix(generation, conn, meta)
        finally:
            # This thread's connection is not needed again.
            self.reader.close()

    def close(self) -> None:
        """Stop any copy of the vectors in progress (the process is shutting down)."""
        self._closing.set()

    def _matrix_for(self, generation: tuple[int, int]) -> VectorMatrix | None:
        """The in-memory vectors of this file, or None (and a background load is started)."""
        held = self._matrix
        if held is not None and held[0] == generation:
            return held[1]
        if self.vector_memory_bytes <= 0 or self._closing.is_set():
            return None
        with self._matrix_lock:
            if generation in self._matrix_attempted:
                return None
            self._matrix_attempted.add(generation)
        # Until the copy is ready the vec0 KNN answers: an exact ranking, only slower.
        threading.Thread(target=self._background_load, name="vector-load", daemon=True).start()
        return None

    def _background_load(self) -> None:
        try:
            generation, conn, meta = self.reader.snapshot()
            self._load_matrix(generation, conn, meta)
        except IndexUnavailableError:
            pass
        finally:
            self.reader.close()

    def _load_matrix(self, generation: tuple[int, int], conn: apsw.Connection, meta: dict[str, str]) -> None:
        with self._matrix_lock:
            held = self._matrix
            if held is not None and held[0] == generation:
                return
            self._matrix_attempted.add(generation)
            if self.vector_memory_bytes <= 0 or self._closing.is_set():
                return
            level = self._level(meta)
            dimension = int(meta.get("embedding_dimension", "0") or 0)
            rows = count_searchable(conn, level)
            needed = matrix_bytes(rows, dimension)
            if dimension <= 0 or needed > self.vector_memory_bytes:
                log.warning(
                    "vectors_not_held_in_memory",
                    reason="larger than the vector memory budget",
                    needed_mb=round(needed / 2**20, 1),
                    budget_mb=round(self.vector_memory_bytes / 2**20, 1),
                )
                return
            # Drop the previous file's copy first, so a rebuild never holds two.
            self._matrix = None
            started = time.perf_counter()
            try:
                matrix = load_matrix(conn, level, dimension, cancelled=self._closing.is_set)
            except (apsw.Error, ValueError) as exc:
                log.warning("vectors_not_held_in_memory", reason=type(exc).__name__)
                return
            if matrix is None:
                return
            self._matrix = (generation, matrix)
        log.info(
            "vectors_in_memory",
            rows=matrix.rows,
            mb=round(matrix.nbytes / 2**20, 1),
            ceiling=self.ceiling.label,
            ms=round((time.perf_counter() - started) * 1000, 1),
        )

    # -- helpers --------------------------------------------------------------------

    def _level(self, meta: dict[str, str]) -> Classification:
        """The full-text index to use: the caller's ceiling, capped by what was built."""
        built = Classification[meta.get("ceiling", "public").upper()]
        return min(self.ceiling, built)

    @staticmethod
    def _validate_query(query: str) -> str:
        text = query.strip()
        if not text:
            raise InvalidRequestError("query is empty; give the words or question to search for")
        if len(text) > MAX_QUERY_CHARS:
            raise InvalidRequestError(f"query is {len(text)} characters; the limit is {MAX_QUERY_CHARS}")
        return text

    @staticmethod
    def _coverage(
        stems: list[str], frequencies: dict[str, int], rows_total: int, terms: dict[int, RowTerms]
    ) -> dict[int, float]:
        """IDF-weighted share of the query's stems present in each passage."""
        if not stems:
            return dict.fromkeys(terms, 0.0)
        idf = {
            s: math.log(1.0 + (rows_total - frequencies.get(s, 0) + 0.5) / (frequencies.get(s, 0) + 0.5)) for s in stems
        }
        denominator = sum(idf.values()) or 1.0
        wanted = set(stems)
        return {pid: sum(idf[s] for s in row.terms & wanted) / denominator for pid, row in terms.items()}

    def _keyword_ranking(
        self,
        conn: apsw.Connection,
        generation: tuple[int, int],
        level: Classification,
        tokens: list[str],
        phrases: list[str],
        frequencies: dict[str, int],
        table_rows: int,
        depth: int,
        rows: dict[int, tuple[Any, ...]],
        terms: dict[int, RowTerms],
        tokenizer: Any,
    ) -> list[int]:
        """The keyword ranking: FTS5 bm25 over the whole query, or over its selective words re-scored."""
        if not tokens:
            return []
        keep = bm25.selective_prefix(phrases, frequencies, table_rows)
        present = [i for i in keep if frequencies.get(phrases[i], 0) > 0]
        totals = None
        # A token without exactly one stem is a multi-token phrase to FTS5; only FTS5 scores it.
        if len(keep) < len(tokens) and present and "" not in phrases:
            # Table statistics come from FTS5 itself, through any row the probe word matches.
            totals = self._table_totals(conn, generation, level, match_expression([tokens[present[0]]]))
        if totals is None:
            return sql.keyword_ranking(conn, level, match_expression(tokens), depth)
        candidates = sql.keyword_ranking(
            conn, level, match_expression([tokens[i] for i in keep]), depth * bm25.CANDIDATE_FACTOR
        )
        self._fetch_rows(conn, level, candidates, rows, terms, tokenizer)
        idfs = [bm25.idf(totals.rows, frequencies.get(p, 0)) for p in phrases]
        scores = {
            pid: bm25.score(phrases, idfs, terms[pid], sql.BM25_WEIGHTS, totals) for pid in candidates if pid in terms
        }
        return sorted(scores, key=lambda pid: (-scores[pid], pid))[:depth]

    def _table_totals(
        self, conn: apsw.Connection, generation: tuple[int, int], level: Classification, probe: str
    ) -> bm25.TableTotals | None:
        key = (generation, int(level))
        if key not in self._totals:
            totals = bm25.table_totals(conn, level, probe)
            if totals is None:
                return None
            self._totals = {key: totals}
        return self._totals[key]

    @staticmethod
    def _fetch_rows(
        conn: apsw.Connection,
        level: Classification,
        ids: list[int] | set[int],
        rows: dict[int, tuple[Any, ...]],
        terms: dict[int, RowTerms],
        tokenizer: Any,
    ) -> None:
        """Rows (and their indexed terms) for ``ids`` not fetched yet; the ceiling is re-checked."""
        missing = {p for p in ids if p not in rows}
        fetched = sql.passages_by_id(conn, level, missing)
        for pid, row in fetched.items():
            rows[pid] = row
            terms[pid] = bm25.row_terms(tokenizer, (row[sql.COL_TITLE], row[sql.COL_HEADING], row[sql.COL_SEARCH_TEXT]))

    # -- search ---------------------------------------------------------------------

    def rank(self, query: str, mode: SearchMode = "hybrid", *, depth: int = CANDIDATES) -> Ranking:
        """Both rankings (``depth`` each), fused, with every candidate's gate signals; nothing withheld."""
        text = self._validate_query(query)
        if mode not in ("hybrid", "keyword", "semantic"):
            raise InvalidRequestError("mode must be one of: hybrid, keyword, semantic")
        generation, conn, meta = self.reader.snapshot()
        level = self._level(meta)

        search_mode: SearchMode = mode
        mode_reason: str | None = None
        query_vector: np.ndarray | None = None
        unavailable = self._semantic_unavailable(meta)
        pending: Future[tuple[np.ndarray, list[tuple[int, float]] | None]] | None = None
        matrix: VectorMatrix | None = None
        if unavailable is None:
            embedder = self.embedder()
            assert embedder is not None
            matrix = self._matrix_for(generation)
            # The query is embedded (and, with the vectors in memory, ranked) on a worker
            # thread while the full-text query runs here; both release the GIL, and the
            # results are the same as running them in turn.
            ranker = matrix if mode != "keyword" else None
            pending = self._embed_pool().submit(_embed_and_rank, embedder, text, ranker, depth)

        tokens = query_tokens(conn, text)
        phrases = token_stems(conn, tokens)
        stems = list(dict.fromkeys(p for p in phrases if p))
        frequencies = sql.document_frequencies(conn, level, stems)
        tokenizer = index_tokenizer(conn)
        table_rows = sql.fts_row_count(meta, level)
        rows: dict[int, tuple[Any, ...]] = {}
        terms: dict[int, RowTerms] = {}

        def keyword() -> list[int]:
            return self._keyword_ranking(
                conn, generation, level, tokens, phrases, frequencies, table_rows, depth, rows, terms, tokenizer
            )

        keyword_ids: list[int] = []
        if mode in ("hybrid", "keyword") and tokens:
            keyword_ids = keyword()
        nearest: list[tuple[int, float]] | None = None
        if pending is not None:
            try:
                query_vector, nearest = pending.result()
            except EmbedderError as exc:
                unavailable = f"meaning search unavailable: {exc}"
        if unavailable is not None and mode != "keyword":
            search_mode, mode_reason = "keyword", unavailable
        if search_mode == "keyword" and mode == "semantic" and tokens:
            keyword_ids = keyword()
        semantic_ids: list[int] = []
        distances: dict[int, float] = {}
        if search_mode in ("hybrid", "semantic") and query_vector is not None:
            if nearest is None:
                nearest = sql.vector_ranking(conn, level, query_vector.tobytes(), depth)
            for pid, distance in nearest:
                semantic_ids.append(pid)
                distances[pid] = distance

        self._fetch_rows(conn, level, set(keyword_ids) | set(semantic_ids), rows, terms, tokenizer)
        keyword_ids = [p for p in keyword_ids if p in rows]
        semantic_ids = [p for p in semantic_ids if p in rows]
        ranked = set(keyword_ids) | set(semantic_ids)
        rows = {p: r for p, r in rows.items() if p in ranked}
        coverage = self._coverage(stems, frequencies, table_rows, {p: terms[p] for p in rows})
        if query_vector is not None:
            missing = [p for p in rows if p not in distances]
            if matrix is not None:
                distances.update(matrix.distances(query_vector, missing))
            else:
                distances.update(sql.cosine_distances(conn, query_vector.tobytes(), missing))

        if search_mode == "keyword":
            fused = fuse(keyword_ids, [], dict.fromkeys(keyword_ids, 1.0))
        elif search_mode == "semantic":
            fused = fuse([], semantic_ids, {})
        else:
            fused = fuse(keyword_ids, semantic_ids, coverage)

        calibration = calibration_for(meta.get("embedding_model"))
        background = background_similarity([1.0 - distances[p] for p in semantic_ids])
        candidates: list[Candidate] = []
        for item in fused:
            similarity = 1.0 - distances[item.passage_id] if item.passage_id in distances else None
            signals = Signals(similarity, coverage.get(item.passage_id, 0.0), item.matched_by == "both", background)
            candidates.append(Candidate(item, signals, confidence(signals, calibration), rows[item.passage_id]))
        if search_mode == "hybrid":
            # RRF picks the candidates; the best of them are ordered by the same calibrated
            # confidence the gate uses, so a result never outranks a more confident one.
            # Measured on the tuning slices: paraphrase hit@3 0.76 -> 0.81, answerable unchanged.
            candidates[:RERANK_DEPTH] = sorted(candidates[:RERANK_DEPTH], key=lambda c: -c.confidence)
        return Ranking(mode, search_mode, mode_reason, candidates)

    def search(
        self,
        query: str,
        *,
        limit: int = 8,
        mode: SearchMode = "hybrid",
        confidence_level: str = "strict",
    ) -> SearchResponse:
        started = time.perf_counter()
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidRequestError(f"limit must be between 1 and {MAX_LIMIT}")
        if confidence_level not in ("strict", "normal"):
            raise InvalidRequestError("confidence must be one of: strict, normal")
        ranking = self.rank(query, mode)
        threshold = self.thresholds.strict if confidence_level == "strict" else self.thresholds.normal
        results: list[SearchResult] = []
        withheld = 0
        best = 0.0
        for candidate in ranking.candidates:
            best = max(best, candidate.confidence)
            if self.gate_enabled and candidate.confidence < threshold:
                withheld += 1
                continue
            if len(results) >= limit:
                continue
            row = candidate.row
            results.append(
                SearchResult(
                    rank=len(results) + 1,
                    citation_id=row[sql.COL_CITATION],
                    document=row[sql.COL_PATH],
                    title=row[sql.COL_TITLE],
                    heading=row[sql.COL_HEADING],
                    lines=_span(row[sql.COL_LINE_START], row[sql.COL_LINE_END]),
                    pages=_span(row[sql.COL_PAGE_START], row[sql.COL_PAGE_END]),
                    classification=_label(row[sql.COL_CLASSIFICATION]),  # type: ignore[arg-type]
                    matched_by=candidate.fused.matched_by,  # type: ignore[arg-type]
                    confidence=candidate.confidence,
                    text=row[sql.COL_TEXT],
                )
            )
        status = "OK" if results else "NO_RELEVANT_CONTEXT"
        reason = None
        if not results:
            if not ranking.candidates:
                reason = "no passage matched the query"
            else:
                reason = (
                    f"no passage reached the {confidence_level} confidence threshold "
                    f"({threshold:.2f}); the best candidate scored {best:.2f}"
                )
        log.info(
            "search",
            mode=ranking.search_mode,
            status=status,
            results=len(results),
            withheld=withheld,
            ceiling=self.ceiling.label,
            ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return SearchResponse(
            status=status,  # type: ignore[arg-type]
            reason=reason,
            requested_mode=ranking.requested_mode,
            search_mode=ranking.search_mode,
            search_mode_reason=ranking.mode_reason,
            confidence=confidence_level,  # type: ignore[arg-type]
            gate="on" if self.gate_enabled else "off",
            ceiling=self.ceiling.label,  # type: ignore[arg-type]
            withheld=withheld,
            results=results,
        )

    # -- reading --------------------------------------------------------------------

    def read_passage(self, citation_id: str, context: int = 0) -> ReadPassageResponse:
        if not 0 <= context <= MAX_CONTEXT:
            raise InvalidRequestError(f"context must be between 0 and {MAX_CONTEXT}")
        conn, _ = self.reader.connection()
        row = sql.passage_by_citation(conn, self.ceiling, citation_id)
        if row is None:
            raise NotFoundError(NOT_FOUND_MESSAGE)
        views = {
            int(r[sql.COL_ORDINAL]): r
            for r in sql.neighbours(
                conn, self.ceiling, int(row[sql.COL_DOCUMENT_ID]), int(row[sql.COL_ORDINAL]), context
            )
        }
        center = int(row[sql.COL_ORDINAL])

        def view(r: tuple[Any, ...]) -> PassageView:
            return PassageView(
                citation_id=r[sql.COL_CITATION],
                document=r[sql.COL_PATH],
                title=r[sql.COL_TITLE],
                heading=r[sql.COL_HEADING],
                lines=_span(r[sql.COL_LINE_START], r[sql.COL_LINE_END]),
                pages=_span(r[sql.COL_PAGE_START], r[sql.COL_PAGE_END]),
                classification=_label(r[sql.COL_CLASSIFICATION]),  # type: ignore[arg-type]
                position=int(r[sql.COL_ORDINAL]) - center,
                text=r[sql.COL_TEXT],
            )

        return ReadPassageResponse(
            passage=view(row),
            before=[view(views[o]) for o in sorted(views) if o < center],
            after=[view(views[o]) for o in sorted(views) if o > center],
            superseded_by=row[sql.COL_SUPERSEDED_BY],
        )

    # -- catalogue ------------------------------------------------------------------

    def _level_counts(self, conn: apsw.Connection) -> list[LevelCount]:
        return [
            LevelCount(
                classification=_label(level),  # type: ignore[arg-type]
                documents=docs,
                passages=passages,
                superseded_documents=superseded,
            )
            for level, docs, passages, superseded in sql.level_counts(conn, self.ceiling)
        ]

    def list_sources(self) -> SourcesResponse:
        conn, _ = self.reader.connection()
        docs = sql.documents(conn, self.ceiling, MAX_LISTED_DOCUMENTS + 1)
        return SourcesResponse(
            ceiling=self.ceiling.label,  # type: ignore[arg-type]
            totals=self._level_counts(conn),
            documents=[
                DocumentSummary(
                    document=d[0],
                    title=d[1],
                    format=d[2],
                    classification=_label(d[3]),  # type: ignore[arg-type]
                    passages=d[4],
                    superseded_by=d[5],
                )
                for d in docs[:MAX_LISTED_DOCUMENTS]
            ],
            truncated=len(docs) > MAX_LISTED_DOCUMENTS,
        )

    def status(self) -> IndexStatus:
        try:
            conn, meta = self.reader.connection()
        except IndexUnavailableError as exc:
            return IndexStatus(
                ok=False,
                problem=str(exc),
                integrity="unknown",
                semantic_search="unavailable",
                semantic_search_reason="no index",
                ceiling=self.ceiling.label,  # type: ignore[arg-type]
            )
        generation = self.reader.generation()
        if generation not in self._integrity:
            self._integrity[generation] = sql.quick_check(conn)
        integrity = self._integrity[generation]
        counts = self._level_counts(conn)
        unavailable = self._semantic_unavailable(meta)
        return IndexStatus(
            ok=integrity == "ok",
            problem=None if integrity == "ok" else "the index failed its integrity check; rebuild it",
            integrity=integrity,  # type: ignore[arg-type]
            schema_version=SCHEMA_VERSION,
            built_at=meta.get("built_at"),
            embedding_model=meta.get("embedding_model"),
            embedding_dimension=int(meta.get("embedding_dimension", "0") or 0) or None,
            embedding_model_checksum=meta.get("embedding_model_checksum"),
            semantic_search="unavailable" if unavailable else "available",
            semantic_search_reason=unavailable,
            ceiling=self.ceiling.label,  # type: ignore[arg-type]
            documents=sum(c.documents for c in counts),
            passages=sum(c.passages for c in counts),
            by_classification=counts,
        )
