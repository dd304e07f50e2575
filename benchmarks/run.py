"""Run the benchmarks and write docs/performance.md and docs/performance.json.

Each measurement runs in its own process (so its peak RSS is its own):

    python -m benchmarks.run                 # full: 10k and 100k search, ingest, start-up
    python -m benchmarks.run --sizes 10000,100000,1000000
    python -m benchmarks.run --quick         # 10k only; prints one JSON object on its last line

Generated indexes are kept under .cache/bench/ and reused while the generator is unchanged
(``--rebuild`` forces a new build).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.charts import write_charts
from benchmarks.peers_report import PEERS_JSON, PROJECT, best_peer, load_peers
from benchmarks.report import write_report
from benchmarks.stats import load_average, machine

__all__ = ["main", "quick_line"]

ROOT = Path(__file__).resolve().parent.parent
DATASET = (ROOT / "../shared/data/beir-scifact").resolve()
HANDBOOK = (ROOT / "../shared/data/corpora/gsa-tts-handbook/pages").resolve()
VECTOR_CACHE = ROOT / ".cache" / "beir-scifact.sqlite"
BENCH_DIR = ROOT / ".cache" / "bench"


def _phase(args: list[str], timeout: float | None = None) -> dict[str, Any]:
    """Run one phase in a fresh interpreter; its last stdout line is its JSON result."""
    # numpy's BLAS on one thread: the exact reference then uses one core, like the vec0 scan
    # it is compared with, and does not stall on a core that another process holds.
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--phase", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"benchmark phase {args[0]} failed ({proc.returncode})")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _current(db: Path) -> bool:
    """Whether the index at ``db`` is of this version's schema."""
    from governed_evidence.store.connection import connect, meta_rows
    from governed_evidence.store.schema import SCHEMA_VERSION

    conn = connect(db, readonly=True)
    try:
        return meta_rows(conn).get("schema_version") == str(SCHEMA_VERSION)
    except Exception:  # noqa: BLE001 - anything unreadable is rebuilt
        return False
    finally:
        conn.close()


def _index_for(
    size: int, rebuild: bool, *, bench_dir: Path = BENCH_DIR, vector_cache: Path = VECTOR_CACHE
) -> tuple[Path, dict[str, Any]]:
    from benchmarks.corpus import GENERATOR_VERSION

    bench_dir.mkdir(parents=True, exist_ok=True)
    db = bench_dir / f"scifact-{size}.sqlite"
    info_path = db.with_suffix(".info.json")
    if not rebuild and db.is_file() and info_path.is_file():
        info: dict[str, Any] = json.loads(info_path.read_text(encoding="utf-8"))
        # An index of an older schema is refused by search: rebuilt, not reused. So is one
        # built with synthetic vectors once the real ones are there to build from.
        synthetic = str(info.get("vectors", "")).startswith("synthetic") and vector_cache.is_file()
        if (
            info.get("generator_version") == GENERATOR_VERSION
            and info.get("passages") == size
            and not synthetic
            and _current(db)
        ):
            info["reused_cached_build"] = True
            return db, info
    info = _phase(["build", "--db", str(db), "--size", str(size), "--vector-cache", str(vector_cache)])
    info["reused_cached_build"] = False
    return db, info


def _run_phase(ns: argparse.Namespace) -> None:
    result: dict[str, Any]
    if ns.phase == "build":
        from benchmarks.corpus import build_corpus_index
        from benchmarks.stats import peak_rss_mb

        result = build_corpus_index(DATASET, Path(ns.db), ns.size, vector_cache=Path(ns.vector_cache))
        result["peak_rss_mb"] = peak_rss_mb()
        Path(ns.db).with_suffix(".info.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    elif ns.phase == "search":
        from benchmarks.search import run_search

        result = run_search(Path(ns.db), DATASET, ns.queries)
    elif ns.phase == "ingest":
        from benchmarks.ingest import run_ingest

        result = run_ingest(HANDBOOK)
    elif ns.phase == "reingest":
        from benchmarks.ingest import run_reingest_scale

        result = run_reingest_scale(DATASET, ns.size)
    elif ns.phase == "quantisation":
        from benchmarks.quantisation import run_quantisation

        result = run_quantisation(Path(ns.db), ns.queries)
    elif ns.phase == "startup":
        from benchmarks.startup import run_startup

        result = run_startup(Path(ns.db))
    else:
        raise SystemExit(f"unknown phase {ns.phase}")
    print(json.dumps(result))


#: The peers' own venv (`make bench-peers` makes it); the quick run uses it when it is there.
PEERS_PYTHON = ROOT / ".cache" / "peers-venv" / "bin" / "python"
#: The peers the quick run times beside the project: the two fastest of every full run so far
#: (LanceDB's builds alone would take longer than the rest of the quick run).
QUICK_PEERS = "tantivy_numpy,bm25s_numpy"
QUICK_PEERS_JSON = BENCH_DIR / "quick-peers.json"


def _quick_peers(size: int, python: Path = PEERS_PYTHON, out: Path = QUICK_PEERS_JSON) -> dict[str, Any]:
    """The project and the fastest peers timed interleaved in one process, now, on this machine.

    A ratio between this run's project figure and a stored peers run would compare two
    machines (or two loads of one); so the ratio is measured here or not given."""
    if not python.is_file():
        return {"reason": "the peers are not installed: `make bench-peers` installs them into .cache/peers-venv"}
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "LANCEDB_LOG": "error"}
    out.unlink(missing_ok=True)
    cmd = [str(python), "-m", "benchmarks.peers", "--sizes", str(size), "--systems", QUICK_PEERS]
    cmd += ["--passes", "1", "--out", str(out), "--peers-dir", str(BENCH_DIR / "quick-peers")]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    found = load_peers(out)
    if proc.returncode != 0 or found is None or str(size) not in found["sizes"]:
        sys.stderr.write(proc.stderr[-2000:])
        return {"reason": f"the peers run failed ({proc.returncode}); its stderr is above"}
    return {"run": found, "entry": found["sizes"][str(size)]}


def search_line(size: int, search: dict[str, Any]) -> dict[str, Any]:
    """This run's search figures at one size (each size's progress line; the start of :func:`quick_line`)."""
    return {
        "passages": size,
        "hybrid_p50_ms": search["hybrid_ms"]["p50"],
        "hybrid_p95_ms": search["hybrid_ms"]["p95"],
        "keyword_p95_ms": search["keyword_ms"]["p95"],
        "semantic_p95_ms": search["semantic_ms"]["p95"],
        "query_embed_ms": search["query_embed_ms"]["p50"],
        "numpy_p95_ms": search["numpy_ms"]["p95"],
        "recall_at_10": search["recall_at_10"],
    }


def quick_line(size: int, search: dict[str, Any], peers: dict[str, Any]) -> dict[str, Any]:
    """The one JSON object `make bench-quick` ends with: this run's search figures and, from the
    interleaved peers run (:func:`_quick_peers`), the project's p95 against the best peer's."""
    line = search_line(size, search)
    entry = peers.get("entry")
    if entry is None:
        line.update(ratio_to_best_peer_p95=None, best_peer=None, peers_note=peers.get("reason"))
        # The last full run's own ratio (measured within that run), said as such.
        recorded = load_peers(PEERS_JSON) or {}
        stored = recorded.get("sizes", {}).get(str(size))
        if stored:
            line["recorded_ratio_to_best_peer_p95"] = stored.get("ratio_to_best_peer_p95")
            line["recorded_run"] = stored.get("from_run_started_at") or recorded.get("started_at")
        return line
    systems = entry["systems"]
    best = best_peer(systems)
    line.update(
        # The protocol of `make bench-peers`: search alone, gate off, interleaved with the peers.
        project_p95_ms=systems[PROJECT]["ms"]["p95"],
        best_peer_p95_ms=systems[best]["ms"]["p95"] if best else None,
        ratio_to_best_peer_p95=entry["ratio_to_best_peer_p95"],
        best_peer=best,
        project_ndcg_at_10=systems[PROJECT]["ndcg_at_10"],
        best_peer_ndcg_at_10=systems[best]["ndcg_at_10"] if best else None,
        # nDCG is SciFact's only with the real vectors (`make bench-scifact` caches them).
        vectors=entry.get("vectors"),
        peers_run=peers["run"]["started_at"],
    )
    return line


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10k search only; last line is one JSON object")
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated passage counts")
    parser.add_argument("--queries", type=int, default=300, help="SciFact queries per mode (at least 300)")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the generated indexes")
    parser.add_argument("--skip", default="", help="comma-separated of: ingest, reingest, startup, quantisation")
    parser.add_argument(
        "--quantisation-size", type=int, default=100_000, help="size for the quantised-KNN experiment (0: skip)"
    )
    parser.add_argument("--out", default=str(ROOT / "docs" / "performance.md"))
    parser.add_argument(
        "--reuse", help="a previous performance.json whose figures fill in the phases skipped with --skip"
    )
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--vector-cache", default=str(VECTOR_CACHE), help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.phase:
        _run_phase(ns)
        return

    sizes = [10_000] if ns.quick else [int(s) for s in ns.sizes.split(",") if s]
    skip = set(ns.skip.split(",")) if ns.skip else set()
    started = time.time()
    results: dict[str, Any] = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "machine": machine(),
        "load_average_before": load_average(),
        "sizes": {},
    }
    for size in sizes:
        db, info = _index_for(size, ns.rebuild)
        print(f"[bench] {size} passages: index ready ({info.get('build_s')} s build)", file=sys.stderr)
        search = _phase(["search", "--db", str(db), "--queries", str(ns.queries)])
        print(f"[bench] {size} passages: {json.dumps(search_line(size, search))}", file=sys.stderr)
        results["sizes"][str(size)] = {"build": info, "search": search}
    if ns.quick:
        print("[bench] 10000 passages: the project beside tantivy and bm25s, interleaved", file=sys.stderr)
        peers = _quick_peers(sizes[0])
        print(json.dumps(quick_line(sizes[0], results["sizes"][str(sizes[0])]["search"], peers)))
        return
    if "ingest" not in skip:
        print("[bench] ingest: GSA handbook with the real model", file=sys.stderr)
        results["ingest_handbook"] = _phase(["ingest"])
    if "reingest" not in skip:
        print("[bench] re-ingest: 3k SciFact Markdown files", file=sys.stderr)
        results["ingest_scale_3k"] = _phase(["reingest", "--size", "3000"])
        print("[bench] re-ingest: 10k SciFact Markdown files", file=sys.stderr)
        results["ingest_scale"] = _phase(["reingest", "--size", "10000"])
    if "quantisation" not in skip and ns.quantisation_size:
        db, _ = _index_for(ns.quantisation_size, False)
        print(f"[bench] quantised KNN experiment at {ns.quantisation_size}", file=sys.stderr)
        results["quantisation"] = _phase(["quantisation", "--db", str(db), "--queries", str(ns.queries)])
    if "startup" not in skip:
        db, _ = _index_for(sizes[0], False)
        print("[bench] start-up over stdio", file=sys.stderr)
        results["startup"] = _phase(["startup", "--db", str(db)])
        results["startup"]["index_passages"] = sizes[0]
    if ns.reuse:
        previous = json.loads(Path(ns.reuse).read_text(encoding="utf-8"))
        for size, entry in previous.get("sizes", {}).items():
            first = entry.get("reused_from_run_started_at", previous.get("started_at"))
            results["sizes"].setdefault(size, {**entry, "reused_from_run_started_at": first})
        names = {"ingest": ["ingest_handbook"], "reingest": ["ingest_scale_3k", "ingest_scale"], "startup": ["startup"]}
        for phase in skip:
            for key in names.get(phase, [phase]):
                if key in previous:
                    first = previous[key].get("reused_from_run_started_at", previous.get("started_at"))
                    results[key] = {**previous[key], "reused_from_run_started_at": first}
    results["load_average_after"] = load_average()
    results["wall_s"] = round(time.time() - started, 1)
    out = Path(ns.out)
    write_report(results, out, out.with_suffix(".json"), peers=load_peers(PEERS_JSON))
    # The pictures docs/performance.md embeds, drawn from the same results (benchmarks.charts).
    write_charts(results, out.parent)
    print(json.dumps({"written": str(out), "json": str(out.with_suffix(".json"))}))


if __name__ == "__main__":
    main()
