"""Vectors held in memory: the same ranking as the vec0 KNN, the ceiling applied at load."""

from __future__ import annotations

import shutil
from pathlib import Path

import apsw
import numpy as np
import pytest

from governed_evidence.config import Classification
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.search import sql, vectors
from governed_evidence.search.service import SearchService
from governed_evidence.search.tuning import SearchTuning
from governed_evidence.search.vectors import VectorMatrix, load_matrix
from governed_evidence.store.connection import connect
from tests.helpers import SMALL_CORPUS_QUERIES, HashEmbedder, ungated_service, write

QUERIES = SMALL_CORPUS_QUERIES


def test_matrix_ranking_equals_vec0_knn(built_index: Path, hash_embedder: HashEmbedder) -> None:
    conn = connect(built_index, readonly=True)
    for level in Classification:
        matrix = load_matrix(conn, level, hash_embedder.identity.dimension)
        for query in QUERIES:
            vector = hash_embedder.embed([query])[0]
            expected = sql.vector_ranking(conn, level, vector.tobytes(), 10)
            got = matrix.knn(vector, 10)
            # Same distances (float rounding aside) in the same order; equal distances may swap ids.
            assert [round(d, 5) for _, d in got] == [round(d, 5) for _, d in expected]
            assert {p for p, d in got if d < expected[-1][1] - 1e-6} == {
                p for p, d in expected if d < expected[-1][1] - 1e-6
            }
            assert matrix.distances(vector, [p for p, _ in expected]) == pytest.approx(dict(expected), abs=1e-5)


def test_matrix_holds_nothing_above_the_ceiling(built_index: Path, hash_embedder: HashEmbedder) -> None:
    conn = connect(built_index, readonly=True)
    levels = {
        int(pid): (int(level), int(searchable))
        for pid, level, searchable in conn.execute("SELECT id, classification, searchable FROM passages")
    }
    for ceiling in Classification:
        matrix = load_matrix(conn, ceiling, hash_embedder.identity.dimension)
        expected = sorted(p for p, (level, searchable) in levels.items() if level <= ceiling and searchable)
        assert matrix.ids.tolist() == expected
        # A passage above the ceiling cannot even be scored.
        above = [p for p, (level, _) in levels.items() if level > ceiling]
        assert matrix.distances(hash_embedder.embed(["x"])[0], above) == {}


def test_sign_code_prefilter_is_exact_when_rescoring_everything() -> None:
    rng = np.random.default_rng(7)
    rows = rng.standard_normal((3000, 64)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    ids = np.arange(1, 3001, dtype=np.int64)
    exact = VectorMatrix(Classification.PUBLIC, ids, rows)
    coded = VectorMatrix(Classification.PUBLIC, ids, rows, SearchTuning(rescore_min=3000), vectors.sign_codes(rows))
    for _ in range(20):
        query = rng.standard_normal(64).astype(np.float32)
        assert coded.knn(query, 10) == exact.knn(query, 10)


def test_the_hamming_scan_picks_every_row_under_the_cut_off_then_the_first_at_it() -> None:
    rng = np.random.default_rng(5)
    rows = _clustered(rng, 4_000, 128)
    codes = vectors.sign_codes(rows)
    for i in range(20):
        query_code = vectors.sign_codes(
            rows[i * 131 : i * 131 + 1] + 0.5 * rng.standard_normal((1, 128)).astype(np.float32)
        )
        distance = sum(np.bitwise_count(codes[w] ^ query_code[w, 0]).astype(np.int64) for w in range(codes.shape[0]))
        for wanted in (1, 37, 500, 3_999, 4_000, 5_000):
            # Stable: ties at the cut-off are taken in row order (every row when more are wanted).
            expected = np.sort(np.argsort(distance, kind="stable")[:wanted])
            got = vectors._nearest_codes(codes, query_code, wanted)
            assert np.array_equal(np.sort(got), expected), (i, wanted)
            assert len(got) == min(wanted, 4_000)


def test_sign_code_prefilter_recall_and_exact_distances() -> None:
    """Clustered vectors: the Hamming step keeps most true neighbours, and the distances are exact.

    A floor against regressions only; recall on real embeddings is measured by ``make bench``
    (0.99 and above at 100k and 1M passages).
    """
    rng = np.random.default_rng(11)
    rows = _clustered(rng, 20_000, 384)
    ids = np.arange(1, 20_001, dtype=np.int64)
    exact = VectorMatrix(Classification.PUBLIC, ids, rows)
    coded = VectorMatrix(Classification.PUBLIC, ids, rows, codes=vectors.sign_codes(rows))
    assert SearchTuning().rescore_count(20_000, 10) == 2000
    assert _neighbours_found(exact, coded, rows, rng) / 500 >= 0.85


def _clustered(rng: np.random.Generator, rows: int, dimension: int) -> np.ndarray:
    """Unit rows around 200 centres: structure for a prefilter (and leading directions) to find."""
    centres = rng.standard_normal((200, dimension)).astype(np.float32)
    out = centres[rng.integers(0, 200, rows)] + 0.6 * rng.standard_normal((rows, dimension)).astype(np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def _neighbours_found(
    exact: VectorMatrix, approximate: VectorMatrix, rows: np.ndarray, rng: np.random.Generator
) -> int:
    """True top-10 neighbours ``approximate`` returns for 50 queries near the rows; whatever it
    returns must carry its exact distance, nearest first."""
    found = 0
    for i in range(50):
        query = rows[i * 97] + 0.3 * rng.standard_normal(rows.shape[1]).astype(np.float32)
        truth = {p for p, _ in exact.knn(query, 10)}
        got = approximate.knn(query, 10)
        found += len(truth & {p for p, _ in got})
        assert [d for _, d in got] == sorted(d for _, d in got)
        for pid, distance in got:
            assert distance == pytest.approx(exact.distances(query, [pid])[pid], abs=1e-6)
    return found


def test_the_prefilter_serves_only_an_index_it_keeps_the_neighbours_of() -> None:
    """Checked on the index's own rows: clustered vectors (what embeddings look like) keep their
    neighbours through the sign codes; random unit vectors do not, and are searched exactly."""
    rng = np.random.default_rng(29)
    tuning = SearchTuning()
    for rows, keeps in ((_clustered(rng, 20_000, 384), True), (_random_unit(rng, 20_000, 384), False)):
        ids = np.arange(1, rows.shape[0] + 1, dtype=np.int64)
        coded = VectorMatrix(Classification.PUBLIC, ids, rows, tuning, vectors.sign_codes(rows))
        recall = vectors.prefilter_recall(coded, tuning.prefilter_probes)
        assert (recall >= tuning.prefilter_min_recall) == keeps, recall


def _random_unit(rng: np.random.Generator, rows: int, dimension: int) -> np.ndarray:
    out = rng.standard_normal((rows, dimension)).astype(np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def test_service_answers_the_same_with_vectors_in_memory(built_index: Path, hash_embedder: HashEmbedder) -> None:
    for ceiling in Classification:
        plain = ungated_service(built_index, hash_embedder, ceiling, memory=0)
        held = ungated_service(built_index, hash_embedder, ceiling)
        held.warm()
        assert held.vectors.copy is not None
        for query in QUERIES:
            for mode in ("hybrid", "semantic"):
                a = plain.search(query, limit=10, mode=mode)  # type: ignore[arg-type]
                b = held.search(query, limit=10, mode=mode)  # type: ignore[arg-type]
                # Equal distances (orthogonal hash vectors) may come in either order; nothing else moves.
                assert sorted((round(r.confidence, 4), r.citation_id) for r in a.results) == sorted(
                    (round(r.confidence, 4), r.citation_id) for r in b.results
                )
                assert [round(r.confidence, 4) for r in a.results] == [round(r.confidence, 4) for r in b.results]


@pytest.mark.parametrize("ceiling", [Classification.PUBLIC, Classification.INTERNAL])
def test_restricted_never_returned_with_vectors_in_memory(
    built_index: Path, hash_embedder: HashEmbedder, ceiling: Classification
) -> None:
    svc = ungated_service(built_index, hash_embedder, ceiling)
    svc.warm()
    for query in [*QUERIES, "Zephyr", "cost centre 9931", "88,000"]:
        for mode in ("hybrid", "semantic"):
            dumped = svc.search(query, limit=20, mode=mode, confidence_level="normal").model_dump_json()  # type: ignore[arg-type]
            for word in ("Quillmoor", "Zephyr", "Brackenfield", "9931", "restricted/"):
                assert word not in dumped


@pytest.mark.parametrize("ceiling", [Classification.PUBLIC, Classification.INTERNAL])
@pytest.mark.parametrize("min_recall", [0.0, 1.01], ids=["prefilter kept", "prefilter refused"])
def test_the_sign_code_copy_holds_and_returns_nothing_above_the_ceiling(
    built_index: Path, hash_embedder: HashEmbedder, ceiling: Classification, min_recall: float
) -> None:
    """Must be zero: with every copy searched through sign codes (or refused them at load), the
    copy holds the caller's rows only and nothing restricted reaches a result."""
    tuning = SearchTuning(exact_rows=1, prefilter_min_recall=min_recall)
    svc = SearchService(
        built_index,
        ceiling=ceiling,
        embedder_factory=lambda: hash_embedder,
        gate_enabled=False,
        vector_memory_bytes=64 << 20,
        tuning=tuning,
    )
    svc.warm()
    held = svc.vectors.copy
    assert held is not None and held.checked_recall is not None
    assert (held.codes is not None) == (min_recall == 0.0)
    assert svc.status().vector_search == ("sign-code prefilter" if min_recall == 0.0 else "exact product")
    conn = connect(built_index, readonly=True)
    visible = sorted(
        int(pid)
        for (pid,) in conn.execute(
            "SELECT id FROM passages WHERE classification <= ? AND searchable = 1", (int(ceiling),)
        )
    )
    conn.close()
    assert held.ids.tolist() == visible
    for query in [*QUERIES, "Zephyr", "cost centre 9931", "88,000"]:
        for mode in ("hybrid", "semantic"):
            dumped = svc.search(query, limit=20, mode=mode, confidence_level="normal").model_dump_json()  # type: ignore[arg-type]
            for word in ("Quillmoor", "Zephyr", "Brackenfield", "9931", "restricted/"):
                assert word not in dumped
    svc.close()
    svc.reader.close()


def test_over_budget_falls_back_to_vec0(built_index: Path, hash_embedder: HashEmbedder) -> None:
    svc = ungated_service(built_index, hash_embedder, Classification.RESTRICTED, memory=1024)
    svc.warm()
    assert svc.vectors.copy is None
    plain = ungated_service(built_index, hash_embedder, Classification.RESTRICTED, memory=0)
    for query in QUERIES:
        assert svc.search(query).model_dump() == plain.search(query).model_dump()


def test_a_rebuild_replaces_the_vectors_in_memory(tmp_path: Path, hash_embedder: HashEmbedder) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, "public/a.md", "# Alpha\n\nThe lighthouse keeper logs every storm in the harbour book.\n")
    db = tmp_path / "index.sqlite"
    ingest_corpus(corpus, db, hash_embedder, ceiling=Classification.PUBLIC, progress=None)
    svc = ungated_service(db, hash_embedder, Classification.PUBLIC)
    svc.warm()
    first, first_generation = svc.vectors.copy, svc.vectors.generation
    assert first is not None and first.rows == 1

    write(corpus, "public/b.md", "# Beta\n\nGlacier surveys record the meltwater each spring season.\n")
    shutil.rmtree(tmp_path / "unused", ignore_errors=True)
    ingest_corpus(corpus, db, hash_embedder, ceiling=Classification.PUBLIC, progress=None)
    # The first search after the rebuild is answered (by the vec0 KNN) while the copy reloads.
    hit = svc.search("glacier meltwater spring", mode="semantic").results[0]
    assert hit.document == "public/b.md"
    svc.warm()
    second = svc.vectors.copy
    assert second is not None and svc.vectors.generation != first_generation and second.rows == 2
    assert svc.search("glacier meltwater spring", mode="semantic").results[0].document == "public/b.md"


def test_a_closing_service_copies_nothing_and_still_answers(built_index: Path, hash_embedder: HashEmbedder) -> None:
    svc = ungated_service(built_index, hash_embedder, Classification.INTERNAL)
    svc.close()
    svc.warm()
    assert svc.vectors.copy is None
    assert svc.search("travel expenses", mode="semantic").results


def _file_of_vectors(path: Path, rows: np.ndarray, ids: list[int]) -> apsw.Connection:
    """An index holding only ``rows`` as the vectors of passages ``ids``, inserted in that order."""
    from governed_evidence.store.schema import schema_sql

    conn = connect(path, readonly=False)
    conn.execute(schema_sql(rows.shape[1], Classification.PUBLIC))
    conn.execute("BEGIN")
    conn.execute(
        "INSERT INTO documents(id, path, title, format, classification, content_hash, status, source_mtime, "
        "passage_count, refused_count) VALUES (1, 'a.md', 'A', 'markdown', 0, 'h', 'active', 0, 0, 0)"
    )
    for pid, row in zip(ids, rows, strict=True):
        conn.execute(
            "INSERT INTO passages(id, document_id, ordinal, citation_id, title, heading, classification, "
            "searchable, text, text_hash) VALUES (?, 1, ?, ?, 'A', '', 0, 1, 't', 'h')",
            (pid, pid, f"c{pid}"),
        )
        conn.execute(
            "INSERT INTO passage_vectors(passage_id, embedding, classification, searchable) VALUES (?, ?, 0, 1)",
            (pid, row.astype(np.float32).tobytes()),
        )
    conn.execute("COMMIT")
    return conn


def test_a_copy_stops_between_blocks_when_cancelled(tmp_path: Path) -> None:
    rows = np.random.default_rng(3).standard_normal((9000, 8)).astype(np.float32)
    conn = _file_of_vectors(tmp_path / "many.sqlite", rows, list(range(1, 9001)))
    calls: list[int] = []

    def cancelled() -> bool:
        calls.append(1)
        return True

    assert load_matrix(conn, Classification.PUBLIC, 8, cancelled=cancelled) is None
    assert calls == [1]
    whole = load_matrix(conn, Classification.PUBLIC, 8)
    assert whole is not None and whole.rows == 9000


@pytest.mark.parametrize("exact_rows", [10_000, 100])
def test_the_matrix_layout_follows_its_use_and_holds_the_same_rows(tmp_path: Path, exact_rows: int) -> None:
    """Column-major while every query is a full product (the faster matrix-vector kernel),
    row-major when rescored rows are gathered after the sign codes; either way each id keeps its
    own unit vector, including when the file returns the vectors out of id order."""
    tuning = SearchTuning(exact_rows=exact_rows, prefilter_min_recall=0.0)
    rng = np.random.default_rng(5)
    raw = rng.standard_normal((300, 16)).astype(np.float32)
    raw[7] = 0.0  # no direction: held as zeros
    ids = list(range(300, 0, -1))  # inserted (and read back) in descending id order
    conn = _file_of_vectors(tmp_path / "v.sqlite", raw, ids)
    matrix = load_matrix(conn, Classification.PUBLIC, 16, tuning)
    assert matrix is not None
    if exact_rows < 300:
        assert matrix.matrix.flags.c_contiguous and matrix.codes is not None
    else:
        assert matrix.matrix.flags.f_contiguous and matrix.codes is None
    assert matrix.nbytes == vectors.matrix_bytes(300, 16, tuning)
    assert matrix.ids.tolist() == list(range(1, 301))
    norms = np.linalg.norm(raw, axis=1, keepdims=True)
    unit = np.divide(raw, norms, out=np.zeros_like(raw), where=norms > 0)
    by_id = {pid: unit[i] for i, pid in enumerate(ids)}
    np.testing.assert_allclose(matrix.matrix, np.stack([by_id[p] for p in range(1, 301)]), atol=1e-6)
    query = rng.standard_normal(16).astype(np.float32)
    reference = VectorMatrix(Classification.PUBLIC, matrix.ids, np.ascontiguousarray(matrix.matrix))
    assert [p for p, _ in matrix.knn(query, 10)] == [p for p, _ in reference.knn(query, 10)]
