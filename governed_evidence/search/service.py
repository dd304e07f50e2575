"""SearchService: hybrid retrieval, the confidence gate and the ceiling, synchronously.

The ceiling is applied *inside* both rankings (a per-level full-text index and a
``classification`` constraint in the vector KNN), so a passage above it never takes a
rank, shifts a score or moves a count. Reading a passage above the ceiling fails exactly
like reading one that does not exist.

This module only orchestrates one query; each step is a part that takes values: the query
plan (:mod:`plan`), the keyword side (:mod:`keyword`), the query embedder
(:mod:`query_embedder`) and the in-memory vectors (:mod:`vectors`), fusion and signals
(:mod:`ranking`), the gate (:mod:`gate`), the optional reranker (:mod:`rerank`), the
responses (:mod:`results`) and reading (:mod:`reading`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from governed_evidence.config import Classification
from governed_evidence.embeddings.base import Embedder
from governed_evidence.errors import EmbedderError, IndexUnavailableError, InvalidRequestError
from governed_evidence.logging import get_logger
from governed_evidence.search import reading, sql
from governed_evidence.search.candidates import Pool, RowCache
from governed_evidence.search.gate import GateOutcome, GateThresholds
from governed_evidence.search.held import HeldCopy
from governed_evidence.search.impacts import ImpactCopier, ImpactIndex
from governed_evidence.search.keyword import KeywordRanker, coverage
from governed_evidence.search.limits import (
    CONFIDENCE_LEVELS,
    DEFAULT_LIMIT,
    MAX_LIMIT,
    SEARCH_MODES,
    ConfidenceLevel,
    SearchMode,
)
from governed_evidence.search.models import IndexStatus, ReadPassageResponse, SearchResponse, SourcesResponse
from governed_evidence.search.plan import plan_query, searched_level, validate_query
from governed_evidence.search.query_embedder import CALLER_THREAD_ROWS, Embedded, QueryEmbedder
from governed_evidence.search.ranking import CANDIDATES, Candidate, Ranking, assemble, gate_ranking, prefetch_rows
from governed_evidence.search.rerank import Reranker, rerank_outcome
from governed_evidence.search.results import search_response
from governed_evidence.search.stages import Stopwatch
from governed_evidence.search.vectors import HeldVectors, MemoryBudget, VectorCopier
from governed_evidence.search.visible_rows import VisibleRows, VisibleRowsCopier
from governed_evidence.store.connection import IndexReader
from governed_evidence.store.lifecycle import Clock, utc_today

__all__ = ["Candidate", "Ranking", "SearchService"]

log = get_logger("search")


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
        vector_memory_bytes: int | MemoryBudget = 0,
        reranker: Reranker | None = None,
        clock: Clock = utc_today,
    ) -> None:
        self.db = db
        #: Today, as staleness is judged (``review_by`` passed): a test can set the day.
        self.clock = clock
        self.ceiling = ceiling
        self.reader = IndexReader(db)
        self.gate_enabled = gate_enabled
        self.thresholds = thresholds or GateThresholds()
        self.reranker = reranker
        self.query_embedder = QueryEmbedder(embedder_factory)
        # One budget for both in-memory copies (vectors, keyword impact lists), as for every level served.
        budget = (
            vector_memory_bytes if isinstance(vector_memory_bytes, MemoryBudget) else MemoryBudget(vector_memory_bytes)
        )
        self.vectors = HeldVectors(self.reader, budget, ceiling)
        self.impacts: HeldCopy[ImpactIndex] = HeldCopy(self.reader, budget, ceiling)
        #: The ceiling check's answer for the level (the smallest copy, 16 bytes a passage).
        self.visible_rows: HeldCopy[VisibleRows] = HeldCopy(self.reader, budget, ceiling)
        self._keyword = KeywordRanker()
        self._integrity: dict[tuple[int, int], str] = {}
        #: Whether each index file generation has the ceiling check's covering index.
        self._covering: dict[tuple[int, int], bool] = {}

    def warm(self) -> None:
        """Load the query embedder, the in-memory vectors, the keyword impact lists and the
        visible rows now (serving calls it at start, in the background)."""
        self.query_embedder.get()
        try:
            generation, conn, meta = self.reader.snapshot()
        except IndexUnavailableError:
            return
        level = searched_level(self.ceiling, meta)
        try:
            if self.query_embedder.unavailable(meta) is None:
                self.vectors.load(generation, conn, level, VectorCopier(meta.embedding_dimension))
            self.impacts.load(generation, conn, level, ImpactCopier())
            self.visible_rows.load(generation, conn, level, VisibleRowsCopier())
        finally:
            # This thread's connection is not needed again.
            self.reader.close()

    def close(self) -> None:
        """Stop any copy in progress (the process is shutting down)."""
        self.vectors.close()
        self.impacts.close()
        self.visible_rows.close()

    # -- search ---------------------------------------------------------------------

    def rank(self, query: str, mode: SearchMode = "hybrid", *, depth: int = CANDIDATES) -> Ranking:
        """Both rankings (``depth`` each), fused, with every candidate's gate signals; nothing withheld."""
        text = validate_query(query)
        if mode not in SEARCH_MODES:
            raise InvalidRequestError(f"mode must be one of: {', '.join(SEARCH_MODES)}")
        watch = Stopwatch()
        generation, conn, meta = self.reader.snapshot()
        level = searched_level(self.ceiling, meta)

        unavailable = self.query_embedder.unavailable(meta)
        impacts = self.impacts.get(generation, level, ImpactCopier())
        pending: Future[Embedded] | None = None
        matrix = None
        # With the keyword side ranked from impact lists in memory, and few of them, the query is
        # embedded on this thread when its vector is needed: a worker costs more than it overlaps.
        embed_here = impacts is not None and impacts.rows <= CALLER_THREAD_ROWS
        if unavailable is None:
            matrix = self.vectors.get(generation, level, VectorCopier(meta.embedding_dimension))
            # Otherwise the query is embedded while the keyword side runs here. With the keyword
            # side in FTS5 (C, the GIL released) the in-memory vectors are ranked on the worker
            # too; with it in memory both rankings are short numpy work, run in turn on this
            # thread: no slower, measured at 10k and 100k passages, and no contention for the GIL.
            if not embed_here:
                overlap = matrix if mode != "keyword" and impacts is None else None
                pending = self.query_embedder.submit(text, overlap, depth)

        plan = plan_query(conn, meta, level, text, impacts)
        if generation not in self._covering:
            self._covering = {generation: sql.has_visibility_index(conn)}
        held = self.visible_rows.get(generation, level, VisibleRowsCopier())
        cache = RowCache(conn, level, covering=self._covering[generation], held=held)
        watch.mark("plan")
        keyword_ids: list[int] = []
        if mode in ("hybrid", "keyword") and plan.tokens:
            keyword_ids = self._keyword.rank(conn, generation, plan, depth, cache, impacts)
        watch.mark("keyword")
        query_vector = None
        nearest: list[tuple[int, float]] | None = None
        try:
            if pending is not None:
                query_vector, nearest = pending.result()
            elif unavailable is None:
                query_vector = self.query_embedder.embed(text)
        except EmbedderError as exc:
            unavailable = f"meaning search unavailable: {exc}"
        watch.mark("embedding_wait")
        search_mode: SearchMode = mode
        mode_reason: str | None = None
        if unavailable is not None and mode != "keyword":
            search_mode, mode_reason = "keyword", unavailable
        if search_mode == "keyword" and mode == "semantic" and plan.tokens:
            keyword_ids = self._keyword.rank(conn, generation, plan, depth, cache, impacts)
        semantic: list[tuple[int, float]] = []
        #: Every row's similarity, when the in-memory product computed them on this thread.
        every = None
        if search_mode in ("hybrid", "semantic") and query_vector is not None:
            if nearest is None and matrix is not None:
                nearest, every = matrix.knn_scored(query_vector, depth)
            if nearest is None:
                nearest = sql.vector_ranking(conn, level, query_vector.tobytes(), depth)
            semantic = nearest
        watch.mark("semantic")

        pool = Pool.of(keyword_ids, semantic, cache)
        if len(cache.visible) > len(pool):
            cache.keep_only(set(pool.ids.tolist()))
        if query_vector is not None:
            # In the order the passages were found visible (ascending, unless the FTS5 re-scoring
            # found some first): a row's product can differ in the last bit with its position in
            # the gathered block, and this is the order the distances have always been taken in.
            unmeasured = set(pool.unmeasured())
            missing = [pid for pid in cache.visible if pid in unmeasured]
            if matrix is not None:
                pool.measured(matrix.distances(query_vector, missing, every))
            else:
                pool.measured(sql.cosine_distances(conn, query_vector.tobytes(), missing))
        watch.mark("rows")
        candidates = assemble(
            search_mode,
            pool,
            coverage=coverage(plan, cache, impacts, pool.ids),
            cache=cache,
            model_id=meta.embedding_model,
            measured=meta.similarity_calibration(level),
        )
        watch.mark("signals")
        return Ranking(mode, search_mode, mode_reason, candidates, watch)

    def search(
        self,
        query: str,
        *,
        limit: int = DEFAULT_LIMIT,
        mode: SearchMode = "hybrid",
        confidence_level: ConfidenceLevel = "strict",
    ) -> SearchResponse:
        started = time.perf_counter()
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidRequestError(f"limit must be between 1 and {MAX_LIMIT}")
        if confidence_level not in CONFIDENCE_LEVELS:
            raise InvalidRequestError(f"confidence must be one of: {', '.join(CONFIDENCE_LEVELS)}")
        ranking = self.rank(query, mode)
        threshold = self.thresholds.strict if confidence_level == "strict" else self.thresholds.normal
        # The reranker sees the best top_n of what the gate keeps, which may be more than limit.
        depth = limit if self.reranker is None else max(limit, self.reranker.top_n)
        outcome = gate_ranking(ranking, threshold=threshold, enabled=self.gate_enabled, limit=depth)
        # What is served (and what the reranker reads) is read whole, in one query.
        prefetch_rows(outcome.kept)
        ranking.watch.mark("gate")
        empty_reason = None
        if self.reranker is not None:
            reranked = rerank_outcome(
                self.reranker,
                validate_query(query),
                outcome,
                limit=limit,
                withhold=self.gate_enabled,
                mode_reason=ranking.mode_reason,
            )
            outcome, empty_reason = reranked.outcome, reranked.reason
            ranking = dataclasses.replace(ranking, mode_reason=reranked.mode_reason)
            ranking.watch.mark("rerank")
        return self.respond(
            ranking,
            outcome,
            threshold=threshold,
            confidence_level=confidence_level,
            started=started,
            empty_reason=empty_reason,
        )

    def respond(
        self,
        ranking: Ranking,
        outcome: GateOutcome[Candidate],
        *,
        threshold: float,
        confidence_level: ConfidenceLevel,
        started: float,
        empty_reason: str | None = None,
    ) -> SearchResponse:
        """What the gate (and the reranker) kept, served: the cited response, validated, and the
        search's log line (``started``: the search's ``time.perf_counter()`` at its start)."""
        response = search_response(
            ranking,
            outcome,
            threshold=threshold,
            confidence_level=confidence_level,
            gate_enabled=self.gate_enabled,
            ceiling=self.ceiling.label,
            today=self.clock(),
            empty_reason=empty_reason,
        )
        ranking.watch.mark("response")
        log.info(
            "search",
            mode=ranking.search_mode,
            status=response.status,
            results=len(response.results),
            withheld=outcome.withheld,
            ceiling=self.ceiling.label,
            ms=round((time.perf_counter() - started) * 1000, 2),
            stages_ms=ranking.watch.rounded(),
        )
        return response

    # -- reading --------------------------------------------------------------------

    def read_passage(self, citation_id: str, context: int = 0) -> ReadPassageResponse:
        conn, _ = self.reader.connection()
        return reading.read_passage(conn, self.ceiling, citation_id, context, self.clock())

    def list_sources(self) -> SourcesResponse:
        conn, _ = self.reader.connection()
        return reading.list_sources(conn, self.ceiling, self.clock())

    def status(self) -> IndexStatus:
        try:
            conn, meta = self.reader.connection()
        except IndexUnavailableError as exc:
            return reading.unavailable_status(str(exc), self.ceiling)
        generation = self.reader.generation()
        if generation not in self._integrity:
            self._integrity[generation] = sql.quick_check(conn)
        return reading.index_status(
            conn,
            meta,
            self.ceiling,
            integrity=self._integrity[generation],
            semantic_unavailable=self.query_embedder.unavailable(meta),
        )
