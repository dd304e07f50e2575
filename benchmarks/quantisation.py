"""Experiment: what sqlite-vec's quantised KNN would buy at a given size (not the product path).

Copies a generated index's vectors into an in-memory SQLite database as (a) sqlite-vec
``bit[384]`` (binary quantisation, Hamming KNN) and (b) ``int8[384]`` (scalar quantisation),
each with the classification filter inside the KNN, plus the float vectors in a plain
rowid table for exact rescoring of the oversampled candidates. Reports p50/p95 and
recall@10 against the exact numpy top 10 under the same ceiling filter.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, cast

import apsw
import numpy as np
import sqlite_vec

from benchmarks.corpus import load_reference
from benchmarks.stats import latency, peak_rss_mb

__all__ = ["run_quantisation"]

CEILING = 1  # internal, as in the search benchmark


def run_quantisation(db: Path, queries: int = 300, oversample: tuple[int, ...] = (100, 200, 400)) -> dict[str, Any]:
    vectors, levels, searchable = load_reference(db)
    n, dim = vectors.shape
    conn = apsw.Connection(":memory:")
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.execute(
        f"CREATE VIRTUAL TABLE vbin USING vec0(id INTEGER PRIMARY KEY, e bit[{dim}], classification integer);"
        f"CREATE VIRTUAL TABLE vint8 USING vec0(id INTEGER PRIMARY KEY, e int8[{dim}], classification integer);"
        "CREATE TABLE fvec(id INTEGER PRIMARY KEY, v BLOB NOT NULL);"
    )
    t0 = time.perf_counter()
    keep = np.flatnonzero(searchable == 1)
    with conn:
        for i in keep:
            blob = vectors[i].tobytes()
            pid, level = int(i) + 1, int(levels[i])
            conn.execute(
                "INSERT INTO vbin(id, e, classification) VALUES (?, vec_quantize_binary(?), ?)", (pid, blob, level)
            )
            conn.execute(
                "INSERT INTO vint8(id, e, classification) VALUES (?, vec_quantize_int8(?, 'unit'), ?)",
                (pid, blob, level),
            )
            conn.execute("INSERT INTO fvec(id, v) VALUES (?, ?)", (pid, blob))
    load_s = time.perf_counter() - t0

    allowed = np.flatnonzero((levels <= CEILING) & (searchable == 1))
    matrix = np.ascontiguousarray(vectors[allowed])
    # The real MiniLM vectors of the SciFact queries, saved by the search benchmark.
    qv = np.load(db.parent / "query-vectors.npy")[:queries].astype(np.float32)
    exact = []
    for q in qv:
        s = matrix @ q
        top = np.argpartition(-s, 10)[:10]
        exact.append({int(x) for x in allowed[top] + 1})

    def rescore(q: np.ndarray, ids: list[int]) -> list[int]:
        marks = ",".join("?" * len(ids))
        rows = conn.execute(f"SELECT id, v FROM fvec WHERE id IN ({marks})", ids).fetchall()
        cand = np.frombuffer(b"".join(cast(bytes, r[1]) for r in rows), dtype=np.float32).reshape(len(rows), dim)
        order = np.argsort(-(cand @ q))[:50]
        return [int(rows[i][0]) for i in order]

    out: dict[str, Any] = {"passages": n, "queries": len(qv), "load_s": round(load_s, 1)}
    for table, quantise in (("vbin", "vec_quantize_binary(?)"), ("vint8", "vec_quantize_int8(?, 'unit')")):
        for k in oversample if table == "vbin" else (50, 200):
            sql = f"SELECT id FROM {table} WHERE e MATCH {quantise} AND k = ? AND classification <= ?"
            times, recalls = [], []
            for q, want in zip(qv, exact, strict=True):
                t = time.perf_counter()
                ids = [int(r[0]) for r in conn.execute(sql, (q.tobytes(), k, CEILING))]
                got = rescore(q, ids)
                times.append((time.perf_counter() - t) * 1000)
                recalls.append(len(set(got[:10]) & want) / 10)
            out[f"{table}_k{k}_rescored"] = {"ms": latency(times), "recall_at_10": round(float(np.mean(recalls)), 4)}
    out["peak_rss_mb"] = peak_rss_mb()
    return out
