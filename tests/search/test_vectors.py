"""Vectors held in memory: the same ranking as the vec0 KNN, the ceiling applied at load."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Literal

import apsw
import numpy as np
import pytest

from governed_evidence.config import Classification
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.search import sql, vectors
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


def test_sign_code_prefilter_is_exact_when_rescoring_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    rows = rng.standard_normal((3000, 64)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    ids = np.arange(1, 3001, dtype=np.int64)
    exact = VectorMatrix(Classification.PUBLIC, ids, rows)
    coded = VectorMatrix(Classification.PUBLIC, ids, rows, codes=vectors.sign_codes(rows))
    monkeypatch.setattr(vectors, "RESCORE_MIN", 3000)
    for _ in range(20):
        query = rng.standard_normal(64).astype(np.float32)
        assert coded.knn(query, 10) == exact.knn(query, 10)


@pytest.mark.parametrize("block", [None, vectors.HAMMING_BLOCK, 1000, 999, 128])
def test_the_hamming_scan_in_blocks_picks_what_the_whole_scan_picks(
    monkeypatch: pytest.MonkeyPatch, block: int | None
) -> None:
    """Above WHOLE_SCAN_ROWS the scan runs a block of rows at a time: whole or with any block size
    it picks exactly the rows a direct scan picks (every row under the cut-off, then the first
    rows at it)."""
    rng = np.random.default_rng(5)
    rows = _clustered(rng, 4_000, 128)
    matrix = VectorMatrix(
        Classification.PUBLIC, np.arange(1, 4_001, dtype=np.int64), rows, codes=vectors.sign_codes(rows)
    )
    assert matrix.codes is not None
    if block is not None:  # None: the 4,000 rows scanned whole, as any matrix up to WHOLE_SCAN_ROWS
        monkeypatch.setattr(vectors, "WHOLE_SCAN_ROWS", 0)
        monkeypatch.setattr(vectors, "HAMMING_BLOCK", block)
    for i in range(20):
        query_code = vectors.sign_codes(
            rows[i * 131 : i * 131 + 1] + 0.5 * rng.standard_normal((1, 128)).astype(np.float32)
        )[:, 0]
        words = matrix.codes.shape[0]
        distance = sum(np.bitwise_count(matrix.codes[w] ^ query_code[w]).astype(np.int64) for w in range(words))
        for wanted in (1, 37, 500, 3_999, 4_000, 5_000):
            # Stable: ties at the cut-off are taken in row order, as the scan takes them (and
            # every row when more are wanted than there are).
            expected = np.sort(np.argsort(distance, kind="stable")[:wanted])
            got = matrix._nearest_codes(query_code, wanted)
            assert np.array_equal(np.sort(got), expected), (block, i, wanted)
            assert len(got) == min(wanted, 4_000)


_RESCORE_PROBE = """
import numpy as np
from governed_evidence.search import vectors
rng = np.random.default_rng(3)
rows = rng.standard_normal((1_600, 384)).astype(np.float32)
rows /= np.linalg.norm(rows, axis=1, keepdims=True)
compared = differing = 0
for count in range(1, 1_601):
    picked = np.sort(rng.choice(1_600, count, replace=False))
    unit = rows[int(picked[0])] + 0.2 * rng.standard_normal(384).astype(np.float32)
    unit /= np.linalg.norm(unit)
    got = vectors._rescored(rows, picked, unit)
    assert got.dtype == np.float32 and got.shape == (count,)
    compared += count
    differing += int(np.count_nonzero(got != rows[picked] @ unit))
print(vectors.RESCORE_BLOCK, compared, differing)
"""


def test_rescoring_in_blocks_gives_every_row_the_whole_gathers_score() -> None:
    """The sign-code path rescores its rows a block at a time: on one BLAS thread, as every
    command runs numpy, each row's similarity is the one the whole gather's product gives, to
    the bit, for every count of rows from 1 to 1,600 (one to four blocks, a last block of one
    row among them). On more threads the whole product's own last bits change with how
    OpenBLAS splits its rows. In a fresh process: the thread count is fixed when numpy loads."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    done = subprocess.run(
        [sys.executable, "-c", _RESCORE_PROBE],
        env={**env, "OPENBLAS_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    block, compared, differing = (int(x) for x in done.stdout.split())
    assert block < 1_600 // 3  # the counts span several blocks
    assert compared == 1_600 * 1_601 // 2
    assert differing == 0


def test_sign_code_prefilter_recall_and_exact_distances(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clustered vectors: the Hamming step keeps most true neighbours, and the distances are exact.

    A floor against regressions only; recall on real embeddings is measured by ``make bench``
    (0.99 and above at 100k and 1M passages).
    """
    rng = np.random.default_rng(11)
    rows = _clustered(rng, 20_000, 384)
    ids = np.arange(1, 20_001, dtype=np.int64)
    exact = VectorMatrix(Classification.PUBLIC, ids, rows)
    coded = VectorMatrix(Classification.PUBLIC, ids, rows, codes=vectors.sign_codes(rows))
    assert vectors.rescore_count(20_000, 10) == 2000
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


def _projected(rows: np.ndarray) -> VectorMatrix:
    ids = np.arange(1, rows.shape[0] + 1, dtype=np.int64)
    return VectorMatrix(Classification.PUBLIC, ids, rows, projection=vectors.Projection.of(rows))


def test_principal_basis_is_orthonormal_and_keeps_the_leading_directions() -> None:
    rng = np.random.default_rng(3)
    # Rank-8 rows in 384 dimensions: eight leading directions reproduce every inner product.
    rows = (rng.standard_normal((5000, 8)) @ rng.standard_normal((8, 384))).astype(np.float32)
    basis = vectors.principal_basis(rows, 8)
    assert basis.shape == (384, 8) and basis.dtype == np.float32 and basis.flags.c_contiguous
    np.testing.assert_allclose(basis.T @ basis, np.eye(8), atol=1e-5)
    query = rows[17]
    np.testing.assert_allclose((rows @ basis) @ (basis.T @ query), rows @ query, rtol=1e-3, atol=1e-2)


def test_projected_prefilter_is_exact_when_rescoring_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _clustered(np.random.default_rng(13), 3000, 384)
    exact = VectorMatrix(Classification.PUBLIC, np.arange(1, 3001, dtype=np.int64), rows)
    monkeypatch.setattr(vectors, "PROJECTED_RESCORE_MIN", 3000)
    projected = _projected(rows)
    rng = np.random.default_rng(2)
    for _ in range(20):
        query = rng.standard_normal(384).astype(np.float32)
        assert projected.knn(query, 10) == exact.knn(query, 10)


def test_projected_prefilter_recall_and_exact_distances() -> None:
    """The projected product keeps nearly every true neighbour, and the distances are exact.

    A floor against regressions only; recall on real embeddings is measured by ``make bench``
    and ``python -m benchmarks.projection``.
    """
    rows = _clustered(np.random.default_rng(11), 20_000, 384)
    exact = VectorMatrix(Classification.PUBLIC, np.arange(1, 20_001, dtype=np.int64), rows)
    projected = _projected(rows)
    assert vectors.projected_count(20_000, 10) == 1000
    assert _neighbours_found(exact, projected, rows, np.random.default_rng(5)) / 500 >= 0.95  # 0.962 when written


def test_service_answers_the_same_with_vectors_in_memory(built_index: Path, hash_embedder: HashEmbedder) -> None:
    for ceiling in Classification:
        plain = ungated_service(built_index, hash_embedder, ceiling, memory=0)
        held = ungated_service(built_index, hash_embedder, ceiling)
        held.warm()
        assert held.vectors.matrix is not None
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
def test_the_projection_holds_and_returns_nothing_above_the_ceiling(
    built_index: Path, hash_embedder: HashEmbedder, ceiling: Classification, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Must be zero: with every copy searched through the projection, its directions come from
    the caller's rows only and nothing restricted reaches a result."""
    monkeypatch.setattr(vectors, "PROJECTED_ROWS", 1)
    monkeypatch.setattr(vectors, "PROJECTED_DIMENSION", 8)
    svc = ungated_service(built_index, hash_embedder, ceiling)
    svc.warm()
    held = svc.vectors.matrix
    assert held is not None and held.projection is not None
    conn = connect(built_index, readonly=True)
    visible = sorted(
        int(pid)
        for (pid,) in conn.execute(
            "SELECT id FROM passages WHERE classification <= ? AND searchable = 1", (int(ceiling),)
        )
    )
    conn.close()
    # The projected rows are the caller's rows, one each, and the directions are those of them alone.
    assert held.ids.tolist() == visible and held.projection.rows.shape == (len(visible), 8)
    np.testing.assert_allclose(held.projection.basis, vectors.principal_basis(held.matrix, 8), atol=1e-6)
    for query in [*QUERIES, "Zephyr", "cost centre 9931", "88,000"]:
        for mode in ("hybrid", "semantic"):
            dumped = svc.search(query, limit=20, mode=mode, confidence_level="normal").model_dump_json()  # type: ignore[arg-type]
            for word in ("Quillmoor", "Zephyr", "Brackenfield", "9931", "restricted/"):
                assert word not in dumped
    svc.close()


def test_over_budget_falls_back_to_vec0(built_index: Path, hash_embedder: HashEmbedder) -> None:
    svc = ungated_service(built_index, hash_embedder, Classification.RESTRICTED, memory=1024)
    svc.warm()
    assert svc.vectors.matrix is None
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
    first, first_generation = svc.vectors.matrix, svc.vectors.generation
    assert first is not None and first.rows == 1

    write(corpus, "public/b.md", "# Beta\n\nGlacier surveys record the meltwater each spring season.\n")
    shutil.rmtree(tmp_path / "unused", ignore_errors=True)
    ingest_corpus(corpus, db, hash_embedder, ceiling=Classification.PUBLIC, progress=None)
    # The first search after the rebuild is answered (by the vec0 KNN) while the copy reloads.
    hit = svc.search("glacier meltwater spring", mode="semantic").results[0]
    assert hit.document == "public/b.md"
    svc.warm()
    second = svc.vectors.matrix
    assert second is not None and svc.vectors.generation != first_generation and second.rows == 2
    assert svc.search("glacier meltwater spring", mode="semantic").results[0].document == "public/b.md"


def test_a_closing_service_copies_nothing_and_still_answers(built_index: Path, hash_embedder: HashEmbedder) -> None:
    svc = ungated_service(built_index, hash_embedder, Classification.INTERNAL)
    svc.close()
    svc.warm()
    assert svc.vectors.matrix is None
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


@pytest.mark.parametrize(("exact_rows", "projected_rows"), [(10_000, 10_000), (100, 10_000), (10_000, 100)])
def test_the_matrix_layout_follows_its_use_and_holds_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exact_rows: int, projected_rows: int
) -> None:
    """Column-major while every query is a full product (the faster matrix-vector kernel),
    row-major when rescored rows are gathered (after sign codes or a projected product); either
    way each id keeps its own unit vector, including when the file returns the vectors out of
    id order."""
    monkeypatch.setattr(vectors, "EXACT_ROWS", exact_rows)
    monkeypatch.setattr(vectors, "PROJECTED_ROWS", projected_rows)
    monkeypatch.setattr(vectors, "PROJECTED_DIMENSION", 4)
    rng = np.random.default_rng(5)
    raw = rng.standard_normal((300, 16)).astype(np.float32)
    raw[7] = 0.0  # no direction: held as zeros
    ids = list(range(300, 0, -1))  # inserted (and read back) in descending id order
    conn = _file_of_vectors(tmp_path / "v.sqlite", raw, ids)
    matrix = load_matrix(conn, Classification.PUBLIC, 16)
    assert matrix is not None
    if exact_rows < 300:
        assert matrix.matrix.flags.c_contiguous and matrix.codes is not None and matrix.projection is None
    elif projected_rows <= 300:
        assert matrix.matrix.flags.c_contiguous and matrix.codes is None
        assert matrix.projection is not None and matrix.projection.basis.shape == (16, 4)
        assert matrix.projection.rows.flags.f_contiguous
        np.testing.assert_allclose(matrix.projection.rows, matrix.matrix @ matrix.projection.basis, atol=1e-6)
    else:
        assert matrix.matrix.flags.f_contiguous and matrix.codes is None and matrix.projection is None
    assert matrix.nbytes == vectors.matrix_bytes(300, 16)
    assert matrix.ids.tolist() == list(range(1, 301))
    norms = np.linalg.norm(raw, axis=1, keepdims=True)
    unit = np.divide(raw, norms, out=np.zeros_like(raw), where=norms > 0)
    by_id = {pid: unit[i] for i, pid in enumerate(ids)}
    np.testing.assert_allclose(matrix.matrix, np.stack([by_id[p] for p in range(1, 301)]), atol=1e-6)
    query = rng.standard_normal(16).astype(np.float32)
    reference = VectorMatrix(Classification.PUBLIC, matrix.ids, np.ascontiguousarray(matrix.matrix))
    assert [p for p, _ in matrix.knn(query, 10)] == [p for p, _ in reference.knn(query, 10)]


@pytest.mark.parametrize("order", ["C", "F"])
def test_rows_are_gathered_as_indexing_gathers_them(order: Literal["C", "F"]) -> None:
    """Rescoring copies its rows with ``np.take``: the same rows, in the order asked (repeats,
    none, the last row), as ``matrix[rows]`` gives, for either memory layout."""
    rng = np.random.default_rng(17)
    matrix = np.asarray(rng.standard_normal((300, 384)), dtype=np.float32, order=order)
    for rows in (rng.permutation(300)[:120], np.array([5, 5, 299, 0]), np.array([], dtype=np.int64)):
        gathered = vectors._gathered(matrix, rows)
        assert gathered.dtype == np.float32
        assert np.array_equal(gathered, matrix[rows])
