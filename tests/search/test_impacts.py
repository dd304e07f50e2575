"""The in-memory impact lists rank exactly as FTS5 does, hold nothing above their level, and
serve the same answers as the index file."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from governed_evidence.config import Classification
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.search import sql
from governed_evidence.search.copies import MemoryBudget, MemoryCopy
from governed_evidence.search.impacts import ImpactCopier, ImpactIndex, load_impacts
from governed_evidence.search.query import index_tokenizer, match_expression, query_tokens, token_stems
from governed_evidence.search.service import SearchService
from governed_evidence.store.connection import IndexReader, connect
from governed_evidence.store.schema import fts_table, terms_table
from tests.helpers import HashEmbedder
from tests.search.reference import every_row_scores, row_terms
from tests.search.test_bm25 import QUERIES as BM25_QUERIES

#: The bm25 tests' queries, and two that repeat a stem (FTS5 scores each occurrence).
QUERIES = [*BM25_QUERIES, "security security security policy", "running runs ran"]

SHARED_CORPUS = Path(__file__).resolve().parents[3] / "shared" / "data" / "corpora" / "strongdm-comply-soc2"
#: Questions a SOC 2 policy set answers (asked of SHARED_CORPUS).
SOC2_QUERIES = [
    "How often are access reviews performed?",
    "encryption of data at rest and in transit",
    "who approves changes to production systems",
    "vendor risk assessment",
    "business continuity and disaster recovery testing",
    "background checks for new employees",
]


def _fts(conn: object, level: Classification, expression: str) -> dict[int, float]:
    table = fts_table(level)
    weights = ", ".join(str(w) for w in sql.BM25_WEIGHTS)
    rows = conn.execute(  # type: ignore[attr-defined]
        f"SELECT rowid, bm25({table}, {weights}) FROM {table} WHERE {table} MATCH ?", (expression,)
    )
    return {int(r[0]): -float(r[1]) for r in rows}


def _phrases(conn: object, query: str) -> tuple[list[str], list[str]]:
    tokens = query_tokens(conn, query)  # type: ignore[arg-type]
    return tokens, token_stems(conn, tokens)  # type: ignore[arg-type]


def _assert_same_as_fts5(db: Path, level: Classification, queries: list[str]) -> int:
    conn = connect(db, readonly=True)
    impacts = load_impacts(conn, level)
    assert impacts is not None
    checked = 0
    for query in queries:
        tokens, phrases = _phrases(conn, query)
        expected = _fts(conn, level, match_expression(tokens))
        scores = every_row_scores(impacts, phrases)
        got = {int(impacts.ids[i]): float(scores[i]) for i in np.flatnonzero(scores > 0)}
        # The same rows match, each with FTS5's score to float32 precision.
        assert set(got) == set(expected), query
        for pid, score in expected.items():
            assert got[pid] == pytest.approx(score, rel=1e-5), (query, pid)
        # And the ranking is FTS5's: each rank's score equals FTS5's score at that rank.
        ranked = impacts.rank(phrases, 20)
        fts_order = sorted(expected.values(), reverse=True)[:20]
        assert [expected[p] for p in ranked] == pytest.approx(fts_order, rel=1e-5), query
        checked += len(expected)
    return checked


@pytest.mark.parametrize("level", list(Classification))
def test_impact_scores_and_rankings_equal_fts5(built_index: Path, level: Classification) -> None:
    assert _assert_same_as_fts5(built_index, level, QUERIES) >= 5


@pytest.mark.skipif(not SHARED_CORPUS.is_dir(), reason=f"{SHARED_CORPUS} is absent (a real policy corpus)")
def test_impact_rankings_equal_fts5_on_a_real_corpus(tmp_path: Path, hash_embedder: HashEmbedder) -> None:
    db = tmp_path / "soc2.sqlite"
    ingest_corpus(SHARED_CORPUS, db, hash_embedder, ceiling=Classification.RESTRICTED, progress=None)
    assert _assert_same_as_fts5(db, Classification.RESTRICTED, SOC2_QUERIES) >= 100


@pytest.mark.parametrize("level", list(Classification))
def test_impact_lists_hold_only_searchable_passages_at_or_below_their_level(
    built_index: Path, level: Classification
) -> None:
    conn = connect(built_index, readonly=True)
    impacts = load_impacts(conn, level)
    assert impacts is not None
    allowed = {
        int(r[0])
        for r in conn.execute("SELECT id FROM passages WHERE classification <= ? AND searchable = 1", (int(level),))
    }
    above = {int(r[0]) for r in conn.execute("SELECT id FROM passages WHERE classification > ?", (int(level),))}
    held = set(impacts.ids.tolist())
    assert held <= allowed and not held & above
    assert impacts.totals.rows == len(allowed)
    # Every term's document frequency is the one the build stored from FTS5's vocabulary.
    stored = {str(t): int(d) for t, d in conn.execute(f"SELECT term, doc FROM {terms_table(level)}")}
    assert {t: impacts.frequency(t) for t in impacts.terms} == stored


def _tokenised(conn: object, level: Classification, ids: list[int]) -> dict[int, frozenset[str]]:
    """Each visible passage's terms as the index tokenizer gives them (none for the others)."""
    tokenizer = index_tokenizer(conn)  # type: ignore[arg-type]
    rows = sql.passages_by_id(conn, level, set(ids))  # type: ignore[arg-type]
    out: dict[int, frozenset[str]] = {}
    for pid in ids:
        row = rows.get(pid)
        out[pid] = frozenset()
        if row is not None:
            out[pid] = frozenset(row_terms(tokenizer, (row.title, row.heading, row.search_text)).terms)
    return out


def test_stems_held_equal_the_rows_tokenised(built_index: Path) -> None:
    conn = connect(built_index, readonly=True)
    level = Classification.RESTRICTED
    impacts = load_impacts(conn, level)
    assert impacts is not None
    ids = [int(r[0]) for r in conn.execute("SELECT id FROM passages")]
    terms = _tokenised(conn, level, ids)
    for query in QUERIES:
        _, phrases = _phrases(conn, query)
        stems = list(dict.fromkeys(p for p in phrases if p))
        # Stem i weighs 2**i: a passage's sum names exactly the stems it holds.
        weights = impacts.held_weights({stem: 2.0**i for i, stem in enumerate(stems)}, np.asarray(ids, dtype=np.int64))
        held = dict(zip(ids, weights.tolist(), strict=True))
        for pid in ids:
            found = {stem for i, stem in enumerate(stems) if int(held[pid]) >> i & 1}
            assert found == terms[pid] & set(stems), (query, pid)


def test_held_weights_sums_the_weights_of_the_stems_each_row_holds(built_index: Path) -> None:
    conn = connect(built_index, readonly=True)
    level = Classification.RESTRICTED
    impacts = load_impacts(conn, level)
    assert impacts is not None
    ids = [int(r[0]) for r in conn.execute("SELECT id FROM passages")] + [10_000]
    terms = _tokenised(conn, level, ids)
    checked = 0
    for n, query in enumerate(QUERIES):
        _, phrases = _phrases(conn, query)
        stems = [*dict.fromkeys(p for p in phrases if p), "zzznotaterm"]
        weights = {stem: 1.0 + 0.5 * i + 0.01 * n for i, stem in enumerate(stems)}
        sums = impacts.held_weights(weights, np.asarray(ids, dtype=np.int64))
        assert sums.shape == (len(ids),)
        got = dict(zip(ids, sums.tolist(), strict=True))
        for pid in ids:
            # Added in the weights' order, as held_weights adds them: equal to the last bit.
            expected = 0.0
            for stem in stems:
                expected += weights[stem] if stem in terms[pid] else 0.0
            assert got[pid] == expected, (query, pid)
            checked += expected > 0
    assert checked > 0
    assert impacts.held_weights({}, np.asarray(ids, dtype=np.int64)).tolist() == [0.0] * len(ids)
    assert impacts.held_weights({"security": 1.0}, np.zeros(0, dtype=np.int64)).shape == (0,)


def test_the_top_rows_are_the_rows_scored_one_phrase_at_a_time(built_index: Path) -> None:
    """The ranking over every row is the one adding each phrase's idf x impact in turn gives:
    repeated stems count each time, unknown ones add nothing."""
    conn = connect(built_index, readonly=True)
    impacts = load_impacts(conn, Classification.RESTRICTED)
    assert impacts is not None
    for query in QUERIES:
        _, phrases = _phrases(conn, query)
        phrases = [*phrases, "zzznotaterm", *phrases[:1]]
        scores = every_row_scores(impacts, phrases)
        ranked = impacts.rank(phrases, 10)
        positions = np.searchsorted(impacts.ids, ranked)
        expected = sorted(np.flatnonzero(scores > 0).tolist(), key=lambda i: (-scores[i], i))[:10]
        assert [scores[i] for i in positions] == pytest.approx([scores[i] for i in expected], rel=1e-12), query
    assert impacts.rank([], 10) == []
    assert impacts.rank(["zzznotaterm"], 10) == []


def test_loading_writes_nothing_to_the_index_file(built_index: Path) -> None:
    before = (built_index.stat().st_size, built_index.read_bytes())
    conn = connect(built_index, readonly=True)
    assert load_impacts(conn, Classification.RESTRICTED) is not None
    # The temporary vocabulary table is gone again: a second copy on the same connection works.
    assert load_impacts(conn, Classification.PUBLIC) is not None
    conn.close()
    assert (built_index.stat().st_size, built_index.read_bytes()) == before


def test_a_cancelled_copy_returns_nothing(built_index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from governed_evidence.search import impacts as module

    monkeypatch.setattr(module, "_POLL_ROWS", 1)
    conn = connect(built_index, readonly=True)
    assert load_impacts(conn, Classification.RESTRICTED, cancelled=lambda: True) is None


def test_an_index_whose_level_is_empty_has_no_copy(tmp_path: Path, hash_embedder: HashEmbedder) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "internal").mkdir(parents=True)
    (corpus / "internal" / "only.md").write_text("# Internal only\n\nBudget figures for next year.\n")
    db = tmp_path / "index.sqlite"
    ingest_corpus(corpus, db, hash_embedder, ceiling=Classification.INTERNAL, progress=None)
    conn = connect(db, readonly=True)
    assert load_impacts(conn, Classification.PUBLIC) is None
    assert ImpactCopier().needed_bytes(conn, Classification.PUBLIC) == 0
    held = load_impacts(conn, Classification.INTERNAL)
    assert held is not None and held.rows == 1


def _answers(svc: SearchService, queries: list[str]) -> list[object]:
    out: list[object] = []
    for query in queries:
        for mode in ("keyword", "hybrid"):
            response = svc.search(query, mode=mode, limit=8, confidence_level="normal")
            out.append([(r.citation_id, r.confidence, r.matched_by) for r in response.results])
            out.append((response.status, response.withheld))
    return out


@pytest.mark.parametrize("ceiling", list(Classification))
def test_the_service_answers_the_same_with_and_without_the_impact_lists(
    built_index: Path, hash_embedder: HashEmbedder, ceiling: Classification
) -> None:
    held = SearchService(
        built_index, ceiling=ceiling, embedder_factory=lambda: hash_embedder, vector_memory_bytes=1 << 30
    )
    held.warm()
    assert isinstance(held.impacts.copy, ImpactIndex) and held.impacts.copy.level == ceiling
    plain = SearchService(built_index, ceiling=ceiling, embedder_factory=lambda: hash_embedder)
    assert plain.impacts.copy is None
    try:
        assert _answers(held, QUERIES) == _answers(plain, QUERIES)
    finally:
        held.reader.close()
        plain.reader.close()
    assert plain.impacts.copy is None


def test_vectors_and_impact_lists_draw_on_one_budget(built_index: Path, hash_embedder: HashEmbedder) -> None:
    reader = IndexReader(built_index)
    conn, _ = reader.connection()
    needed = ImpactCopier().needed_bytes(conn, Classification.RESTRICTED)
    assert needed > 0
    budget = MemoryBudget(needed)
    budget.reserve(object(), 1)  # another copy holds one byte: the lists no longer fit
    held: MemoryCopy[ImpactIndex] = MemoryCopy(reader, budget, Classification.RESTRICTED)
    held.load(reader.generation(), conn, Classification.RESTRICTED, ImpactCopier())
    assert held.copy is None
    # A service with too small a budget still answers, from FTS5.
    svc = SearchService(
        built_index, ceiling=Classification.RESTRICTED, embedder_factory=lambda: hash_embedder, vector_memory_bytes=64
    )
    svc.warm()
    assert svc.impacts.copy is None and svc.vectors.copy is None
    assert svc.search("travel expenses receipts", mode="keyword").results
    svc.reader.close()
    reader.close()


def test_a_rebuild_replaces_the_impact_lists(tmp_path: Path, hash_embedder: HashEmbedder) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "internal").mkdir(parents=True)
    (corpus / "internal" / "a.md").write_text("# Alpha\n\nThe quillmoor rule applies to travel.\n")
    db = tmp_path / "index.sqlite"
    ingest_corpus(corpus, db, hash_embedder, ceiling=Classification.INTERNAL, progress=None)
    svc = SearchService(
        db, ceiling=Classification.INTERNAL, embedder_factory=lambda: hash_embedder, vector_memory_bytes=1 << 30
    )
    svc.warm()
    first = svc.impacts.copy
    assert first is not None and first.frequency("quillmoor") == 1
    (corpus / "internal" / "b.md").write_text("# Beta\n\nA second quillmoor page.\n")
    ingest_corpus(corpus, db, hash_embedder, ceiling=Classification.INTERNAL, progress=None, force=True)
    # The next search sees the new file: it answers (from FTS5 or the new copy), and a copy of
    # the new generation replaces the old one.
    assert len(svc.search("quillmoor", mode="keyword").results) == 2
    svc.warm()
    second = svc.impacts.copy
    assert second is not None and second is not first and second.frequency("quillmoor") == 2
    svc.reader.close()


@pytest.mark.skipif(os.name != "posix", reason="file modes")
def test_a_read_only_index_file_still_gets_its_copy(built_index: Path) -> None:
    built_index.chmod(0o444)
    try:
        conn = connect(built_index, readonly=True)
        assert load_impacts(conn, Classification.INTERNAL) is not None
    finally:
        built_index.chmod(0o644)


def test_a_search_never_waits_for_a_copy_in_progress(built_index: Path) -> None:
    import threading

    reader = IndexReader(built_index)
    started, release = threading.Event(), threading.Event()

    class SlowCopier(ImpactCopier):
        def copy(self, conn, level, cancelled):  # type: ignore[no-untyped-def]
            started.set()
            release.wait(10)
            return super().copy(conn, level, cancelled)

    held: MemoryCopy[ImpactIndex] = MemoryCopy(reader, 1 << 30, Classification.RESTRICTED)
    conn, _ = reader.connection()
    generation = reader.generation()
    loading = threading.Thread(target=held.load, args=(generation, conn, Classification.RESTRICTED, SlowCopier()))
    loading.start()
    assert started.wait(10)
    try:
        answered = threading.Event()

        def ask() -> None:
            held.get(generation, Classification.RESTRICTED, ImpactCopier())
            answered.set()

        threading.Thread(target=ask, daemon=True).start()
        # While the copy is being taken, asking for it answers at once: nothing held yet.
        assert answered.wait(5)
        assert held.copy is None
    finally:
        release.set()
        loading.join(10)
    assert held.copy is not None
    reader.close()
