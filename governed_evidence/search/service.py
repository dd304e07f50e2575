"""SearchService: hybrid retrieval, the confidence gate and the ceiling, synchronously.

The ceiling is applied *inside* both rankings (the level's own full-text index or its impact
lists; vectors copied only at or below the level, or a ``classification`` constraint in the
vec0 KNN), so a passage above it never takes a rank, shifts a score or moves a count.
Reading a passage above the ceiling fails exactly like reading one that does not exist.

A search is a pipeline of stages, each a module that takes values and returns values
(docs/architecture.md draws it): the query's plan (:mod:`plan`), the keyword ranking
(:mod:`keyword`) with the query embedded before it or beside it on a worker
(:mod:`query_embedder`), the semantic ranking (:mod:`semantic`), the candidates with their
confidence (:mod:`candidates`), the gate (:mod:`gate`), the optional reranker (:mod:`rerank`)
and the response (:mod:`results`). Which source each ranking reads, and where the query is
embedded, is picked once per search (:mod:`strategy`). Reading by citation, sources and status
are :mod:`lookup`'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from governed_evidence.config import Classification
from governed_evidence.embeddings.base import Embedder
from governed_evidence.embeddings.calibration import calibration_for
from governed_evidence.errors import EmbedderError, IndexUnavailableError, InvalidRequestError
from governed_evidence.logging import get_logger
from governed_evidence.search import lookup, semantic, sql
from governed_evidence.search.candidates import CANDIDATES, Candidate, Pool, Ranking, assemble
from governed_evidence.search.copies import MemoryBudget, MemoryCopy
from governed_evidence.search.gate import GateOutcome, GateThresholds, gate
from governed_evidence.search.impacts import ImpactCopier, ImpactIndex
from governed_evidence.search.keyword import coverage, rank_keywords
from governed_evidence.search.limits import (
    CONFIDENCE_LEVELS,
    DEFAULT_LIMIT,
    MAX_LIMIT,
    SEARCH_MODES,
    ConfidenceLevel,
    SearchMode,
)
from governed_evidence.search.models import IndexStatus, ReadPassageResponse, SearchResponse, SourcesResponse
from governed_evidence.search.plan import Snapshot, plan_query, searched_level, validate_query
from governed_evidence.search.query_embedder import QueryEmbedder
from governed_evidence.search.rerank import Reranker, rerank_outcome
from governed_evidence.search.results import search_response
from governed_evidence.search.stages import Stopwatch
from governed_evidence.search.strategy import pick_strategy
from governed_evidence.search.tuning import DEFAULT_TUNING, SearchTuning
from governed_evidence.search.vectors import VectorCopier, VectorMatrix
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
        tuning: SearchTuning | None = None,
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
        self.tuning = tuning or DEFAULT_TUNING
        self.query_embedder = QueryEmbedder(embedder_factory)
        # One budget for both in-memory copies (vectors, keyword impact lists), as for every level served.
        budget = (
            vector_memory_bytes if isinstance(vector_memory_bytes, MemoryBudget) else MemoryBudget(vector_memory_bytes)
        )
        self.vectors: MemoryCopy[VectorMatrix] = MemoryCopy(self.reader, budget, ceiling)
        self.impacts: MemoryCopy[ImpactIndex] = MemoryCopy(self.reader, budget, ceiling)
        self._integrity: dict[tuple[int, int], str] = {}

    def warm(self) -> None:
        """Load the query embedder, the in-memory vectors and the keyword impact lists now
        (serving calls it at start, in the background)."""
        self.query_embedder.get()
        try:
            generation, conn, meta = self.reader.snapshot()
        except IndexUnavailableError:
            return
        level = searched_level(self.ceiling, meta)
        try:
            if self.query_embedder.unavailable(meta) is None:
                self.vectors.load(generation, conn, level, VectorCopier(meta.embedding_dimension, self.tuning))
            self.impacts.load(generation, conn, level, ImpactCopier())
        finally:
            # This thread's connection is not needed again.
            self.reader.close()

    def close(self) -> None:
        """Stop any copy in progress (the process is shutting down)."""
        self.vectors.close()
        self.impacts.close()

    # -- search ---------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        limit: int = DEFAULT_LIMIT,
        mode: SearchMode = "hybrid",
        confidence_level: ConfidenceLevel = "strict",
    ) -> SearchResponse:
        """The pipeline: rank, gate, rerank when configured, serve."""
        started = time.perf_counter()
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidRequestError(f"limit must be between 1 and {MAX_LIMIT}")
        if confidence_level not in CONFIDENCE_LEVELS:
            raise InvalidRequestError(f"confidence must be one of: {', '.join(CONFIDENCE_LEVELS)}")
        ranking = self.rank(query, mode)
        threshold = self.thresholds.of(confidence_level)
        # The reranker sees the best top_n of what the gate keeps, which may be more than limit.
        depth = limit if self.reranker is None else max(limit, self.reranker.top_n)
        outcome = gate(ranking.candidates, threshold=threshold, enabled=self.gate_enabled, limit=depth)
        # What is served (and what the reranker reads) is read whole, in one statement.
        outcome = replace(outcome, kept=ranking.with_rows(outcome.kept))
        ranking.watch.mark("gate")
        empty_reason = None
        if self.reranker is not None:
            ranking, outcome, empty_reason = self._rerank(self.reranker, query, ranking, outcome, limit)
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
        self._log(ranking, outcome, response, started)
        return response

    def _rerank(
        self, reranker: Reranker, query: str, ranking: Ranking, outcome: GateOutcome[Candidate], limit: int
    ) -> tuple[Ranking, GateOutcome[Candidate], str | None]:
        """The reranker's order of what the gate kept, and why nothing is left when it withheld all."""
        reranked = rerank_outcome(
            reranker,
            validate_query(query),
            outcome,
            limit=limit,
            withhold=self.gate_enabled,
            mode_reason=ranking.mode_reason,
        )
        ranking = replace(ranking, mode_reason=reranked.mode_reason)
        ranking.watch.mark("rerank")
        return ranking, reranked.outcome, reranked.reason

    def _log(self, ranking: Ranking, outcome: GateOutcome[Candidate], response: SearchResponse, started: float) -> None:
        """The search's one log line: what it did, never the query or any passage."""
        log.info(
            "search",
            mode=ranking.search_mode,
            status=response.status,
            results=len(response.results),
            withheld=outcome.withheld,
            ceiling=self.ceiling.label,
            strategy=ranking.strategy.describe(),
            ms=round((time.perf_counter() - started) * 1000, 2),
            stages_ms=ranking.watch.rounded(),
        )

    def rank(self, query: str, mode: SearchMode = "hybrid", *, depth: int = CANDIDATES) -> Ranking:
        """Both rankings (``depth`` each), fused, with every candidate's gate signals; nothing withheld.

        Keyword mode ranks by keywords alone, but the query is still embedded when it can be:
        the candidates' similarity is one of the signals their confidence is made of."""
        text = validate_query(query)
        if mode not in SEARCH_MODES:
            raise InvalidRequestError(f"mode must be one of: {', '.join(SEARCH_MODES)}")
        watch = Stopwatch()
        snapshot = self._snapshot()
        conn, meta, level = snapshot.conn, snapshot.meta, snapshot.level
        reason = self.query_embedder.unavailable(meta)
        impacts = self.impacts.get(snapshot.generation, level, ImpactCopier())
        matrix = None if reason else self.vectors.get(snapshot.generation, level, self._vector_copier(snapshot))
        search_mode: SearchMode = "keyword" if reason and mode != "keyword" else mode
        strategy = pick_strategy(impacts, matrix, semantic=search_mode != "keyword", tuning=self.tuning)
        embedding = None if reason else self.query_embedder.start(text, on_worker=strategy.embed_on_worker)
        plan = plan_query(conn, meta, level, text, impacts)
        watch.mark("plan")
        keyword_ids: list[int] = []
        if search_mode != "semantic":
            keyword_ids = rank_keywords(conn, plan, depth, impacts, strategy, self.tuning)
        watch.mark("keyword")
        vector = None
        try:
            vector = embedding.result() if embedding is not None else None
        except EmbedderError as exc:
            # It failed while the keyword side ran: a keyword search, said so.
            reason, search_mode = f"meaning search unavailable: {exc}", "keyword"
            if mode == "semantic":
                keyword_ids = rank_keywords(conn, plan, depth, impacts, strategy, self.tuning)
        watch.mark("embedding_wait")
        nearest = (
            semantic.nearest(conn, level, vector, depth, matrix)
            if vector is not None and search_mode != "keyword"
            else []
        )
        watch.mark("semantic")
        visible = sql.passage_documents(conn, level, {*keyword_ids, *(pid for pid, _ in nearest)})
        pool = Pool.of(keyword_ids, nearest, visible)
        if vector is not None:
            pool.measured(semantic.distances(conn, vector, pool.unmeasured(), matrix))
        candidates = assemble(
            search_mode,
            pool,
            coverage=coverage(conn, plan, impacts, pool.ids),
            calibration=calibration_for(meta.embedding_model, meta.similarity_calibration(level)),
        )
        watch.mark("candidates")
        return Ranking(
            mode, search_mode, reason if search_mode != mode else None, candidates, snapshot, strategy, watch
        )

    def _snapshot(self) -> Snapshot:
        generation, conn, meta = self.reader.snapshot()
        return Snapshot(generation, conn, meta, searched_level(self.ceiling, meta))

    def _vector_copier(self, snapshot: Snapshot) -> VectorCopier:
        return VectorCopier(snapshot.meta.embedding_dimension, self.tuning)

    # -- reading --------------------------------------------------------------------

    def read_passage(self, citation_id: str, context: int = 0) -> ReadPassageResponse:
        conn, _ = self.reader.connection()
        return lookup.read_passage(conn, self.ceiling, citation_id, context, self.clock())

    def list_sources(self) -> SourcesResponse:
        conn, _ = self.reader.connection()
        return lookup.list_sources(conn, self.ceiling, self.clock())

    def status(self) -> IndexStatus:
        try:
            conn, meta = self.reader.connection()
        except IndexUnavailableError as exc:
            return lookup.unavailable_status(str(exc), self.ceiling)
        generation = self.reader.generation()
        if generation not in self._integrity:
            self._integrity[generation] = sql.quick_check(conn)
        matrix = self.vectors.copy if self.vectors.generation == generation else None
        return lookup.index_status(
            conn,
            meta,
            self.ceiling,
            integrity=self._integrity[generation],
            semantic_unavailable=self.query_embedder.unavailable(meta),
            vector_search="vec0 KNN" if matrix is None else matrix.strategy,
        )
