"""docs/performance.md (tables) and docs/performance.json (everything) from one run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.peers_report import peers_section

__all__ = ["write_report"]


def _status(value: float | None, limit: float) -> str:
    if value is None:
        return "not measured"
    return "met" if value <= limit else "not met"


def _goal_table(results: dict[str, Any]) -> list[str]:
    sizes = results["sizes"]

    def search(size: int) -> dict[str, Any] | None:
        entry = sizes.get(str(size))
        return entry["search"] if entry else None

    rows = ["| Goal (2-core machine) | Target | Measured | Status |", "|---|---|---|---|"]
    for size, limit in ((100_000, 20.0), (1_000_000, 30.0)):
        s = search(size)
        value = s["hybrid_with_embedding_ms"]["p95"] if s else None
        shown = f"{value:.1f} ms" if value is not None else "-"
        rows.append(
            f"| Hybrid p95 incl. query embedding, {size:,} passages | <= {limit:.0f} ms | {shown} "
            f"| {_status(value, limit)} |"
        )
    for size in sorted(int(k) for k in sizes):
        s = sizes[str(size)]["search"]
        ratio = _vector_side(s)["p95"] / s["numpy_ms"]["p95"]
        ok = ratio <= 1.5 and s["recall_at_10"] >= 0.99
        rows.append(
            f"| Vector side vs numpy p95, recall@10, {size:,} passages | <= 1.5x, >= 0.99 "
            f"| {ratio:.2f}x, {s['recall_at_10']:.3f} | {'met' if ok else 'not met'} |"
        )
    handbook = results.get("ingest_handbook")
    share = handbook["first"]["non_embedding_share"] if handbook else None
    rows.append(
        f"| Non-embedding share of ingest (GSA handbook, real model) | <= 10% "
        f"| {'-' if share is None else f'{100 * share:.1f}%'} | {_status(share, 0.10)} |"
    )
    rss = handbook["peak_rss_mb"] if handbook else None
    rows.append(
        f"| Ingest peak RSS (GSA handbook, real model) | <= 600 MB "
        f"| {'-' if rss is None else f'{rss:,.0f} MB'} | {_status(rss, 600)} |"
    )
    scale = results.get("ingest_scale")
    again = scale["reingest"]["seconds"].get("total") if scale else None
    passages = scale["reingest"]["passages"] if scale else 0
    rows.append(
        f"| Re-ingest of an unchanged 10k-passage corpus | <= 2 s "
        f"| {'-' if again is None else f'{again:.2f} s ({passages:,} passages)'} | {_status(again, 2.0)} |"
    )
    for key in ("ingest_scale_3k", "ingest_scale"):
        run = results.get(key) or {}
        changed, force = run.get("one_file_changed"), run.get("force")
        if not (changed and force):
            continue
        ratio = changed["seconds"]["total"] / force["seconds"]["total"]
        rows.append(
            f"| One edited file of {run['files']:,}, against `--force` | <= 0.3x (goal 0.1x) "
            f"| {ratio:.2f}x ({changed['seconds']['total']:.2f} s vs {force['seconds']['total']:.2f} s; "
            f"{changed.get('files_copied', 0):,} files copied) | {_status(ratio, 0.3)} |"
        )
    startup = results.get("startup")
    first = startup["first_answer_ms"]["p50"] / 1000 if startup else None
    rows.append(
        f"| Start-up to first answered search (p50) | <= 1.0 s "
        f"| {'-' if first is None else f'{first:.2f} s'} | {_status(first, 1.0)} |"
    )
    return rows


def _vector_side(s: dict[str, Any]) -> dict[str, float]:
    """The product's vector ranking: the in-memory copy when it was held, else the vec0 KNN."""
    found: dict[str, float] = s.get("memory_knn_ms") or s["vec0_knn_ms"]
    return found


def _ms(d: dict[str, Any] | None) -> str:
    if not d:
        return "-"
    return f"{d['p50']:.1f} / {d['p95']:.1f} / {d['p99']:.1f}"


def _search_table(sizes: dict[str, Any]) -> list[str]:
    lines = [
        "| Passages | Queries | Query embedding | Keyword | Semantic | Hybrid | Hybrid incl. embedding "
        "| Peak RSS | Vectors in memory (load) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, entry in sorted(sizes.items(), key=lambda kv: int(kv[0])):
        s = entry["search"]
        held = (
            f"{s['vectors_in_memory_mb']:,.0f} MB ({s['vector_load_s']:.1f} s)"
            if s.get("vectors_in_memory_mb")
            else "-"
        )
        lines.append(
            f"| {int(size):,} | {s['queries']} | {_ms(s['query_embed_ms'])} | {_ms(s['keyword_ms'])} "
            f"| {_ms(s['semantic_ms'])} | {_ms(s['hybrid_ms'])} | {_ms(s['hybrid_with_embedding_ms'])} "
            f"| {s['peak_rss_mb']:.0f} MB | {held} |"
        )
    return lines


def _sides_table(sizes: dict[str, Any]) -> list[str]:
    lines = [
        "| Passages | Vector side (strategy) | vec0 KNN | numpy exact | vector side / numpy p50, p95 "
        "| recall@10 (vec0) | FTS5 whole query | keyword top-10 overlap |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for size, entry in sorted(sizes.items(), key=lambda kv: int(kv[0])):
        s = entry["search"]
        side = _vector_side(s)
        ratio50 = side["p50"] / s["numpy_ms"]["p50"] if s["numpy_ms"]["p50"] else float("nan")
        ratio = side["p95"] / s["numpy_ms"]["p95"] if s["numpy_ms"]["p95"] else float("nan")
        overlap = s.get("keyword_overlap_at_10")
        lines.append(
            f"| {int(size):,} | {_ms(side)} ({s.get('vector_strategy', 'vec0 KNN')}) | {_ms(s['vec0_knn_ms'])} "
            f"| {_ms(s['numpy_ms'])} | {ratio50:.2f}x / {ratio:.2f}x "
            f"| {s['recall_at_10']:.3f} ({s.get('vec0_recall_at_10', s['recall_at_10']):.3f}) "
            f"| {_ms(s.get('fts_whole_query_ms'))} | {'-' if overlap is None else f'{overlap:.3f}'} |"
        )
    return lines


def _build_table(sizes: dict[str, Any]) -> list[str]:
    lines = [
        "| Passages | Documents | public / internal / restricted | Build (IndexBuilder) | Passages/s "
        "| File size | Bytes/passage | Build peak RSS |",
        "|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for size, entry in sorted(sizes.items(), key=lambda kv: int(kv[0])):
        b = entry["build"]
        lv = b["by_level"]
        lines.append(
            f"| {int(size):,} | {b['documents']:,} | {lv['public']:,} / {lv['internal']:,} / {lv['restricted']:,} "
            f"| {b['build_s']:.1f} s | {b['build_passages_per_s']:,.0f} | {b['db_bytes'] / 1e6:,.1f} MB "
            f"| {b['db_bytes_per_passage']:,.0f} | {_mb(b.get('peak_rss_mb'))} |"
        )
    return lines


def _mb(value: float | None) -> str:
    # An index built outside `benchmarks.run` (by hand, at a size reused later) has no peak
    # recorded: a dash, not a zero.
    return "-" if value is None else f"{value:,.0f} MB"


def _ingest_rows(name: str, run: dict[str, Any], rss: float) -> list[str]:
    def seconds(sec: dict[str, float], key: str) -> str:
        return f"{sec[key]:.2f}" if key in sec else "-"

    rows = []
    runs = [("first", run["first"]), ("unchanged re-ingest", run["reingest"])]
    if "one_file_changed" in run:
        changed = run["one_file_changed"]
        how = f"incremental, {changed['files_copied']:,} copied" if changed.get("build") == "incremental" else "rebuilt"
        runs.append((f"re-ingest after one file changed ({how})", changed))
    if "force" in run:
        runs.append(("the same with --force (every file parsed)", run["force"]))
    for label, r in runs:
        sec = r["seconds"]
        if r.get("unchanged"):
            label += " (index kept: fingerprint matched)"
        rate = "-" if r["passages_per_s"] is None else f"{r['passages_per_s']:,.1f}"
        rows.append(
            f"| {name}, {label} | {r['passages']:,} | {r['embeddings_computed']:,} "
            f"| {seconds(sec, 'fingerprint')} | {seconds(sec, 'parse_and_chunk')} | {seconds(sec, 'embed')} "
            f"| {seconds(sec, 'write')} | {sec.get('total', 0):.2f} "
            f"| {rate} "
            f"| {100 * (r['non_embedding_share'] or 0):.0f}% | {r['db_bytes_per_passage']:,.0f} | {rss:.0f} MB |"
        )
    return rows


def write_report(results: dict[str, Any], md_path: Path, json_path: Path, peers: dict[str, Any] | None = None) -> None:
    """Both files; ``peers`` (docs/peers.json, from `make bench-peers`) adds its section."""
    m = results["machine"]
    before, after = results.get("load_average_before", []), results.get("load_average_after", [])
    # The run itself keeps one or two cores busy, so a load average up to about 1.8 after it
    # is its own; more, or a load before it started, means other work shared the machine.
    busy = bool(before and before[0] > 1.0) or any(x > 1.8 for x in after)
    sizes = results["sizes"]
    first_search = sizes[min(sizes, key=int)]["search"] if sizes else {}
    lines = [
        "# Performance",
        "",
        "Generated by `make bench` (`python -m benchmarks.run`); the machine-readable figures are in",
        "`docs/performance.json`. `make bench-quick` runs the 10k size only and, where `make bench-peers`",
        "has installed the peers, times the project interleaved with tantivy and bm25s for its ratio to",
        "the faster (never against another run's figures). Latencies are p50 / p95 / p99 in milliseconds.",
        "The pictures beside this file (`performance-scale.svg`, `performance-ingest.svg`) are drawn from the",
        "same JSON at the end of the run; `python -m benchmarks.charts` draws them again from it.",
        "",
        "## Machine",
        "",
        f"- {m['nproc']} CPUs ({m['cpu']}), {m['ram_gib']} GiB RAM, Python {m['python']}, "
        f"SQLite {m['sqlite']}, sqlite-vec {m['sqlite_vec']}, numpy {m['numpy']}",
        f"- {m['platform']}",
        f"- Run started {results.get('started_at')}, took {results.get('wall_s')} s. "
        f"Load average (1/5/15 min) before: {before}, after: {after}.",
    ]
    carried = sorted(
        {
            f"{name} (run started {value['reused_from_run_started_at']})"
            for name, value in [*results.items(), *((f"search at {k}", v) for k, v in sizes.items())]
            if isinstance(value, dict) and value.get("reused_from_run_started_at")
        }
    )
    if carried:
        # An earlier run may have been on another host: its figures compare with each other, not with this run's.
        lines.append(
            "- Carried over from earlier runs, possibly on another host (`--reuse`): " + "; ".join(carried) + "."
        )
    if busy:
        lines += [
            "- **The machine was not idle**: other processes were running during the",
            "  measurement, competing for the 2 cores; absolute figures are pessimistic and tails noisy.",
        ]
    else:
        lines.append("- Nothing else ran during the measurement (the load average above is the benchmark's own).")
    lines += [
        "",
        "## Search latency",
        "",
        "SciFact queries (test queries first; *Queries* per mode) each run through `SearchService.search` with default",
        f"limit and the confidence gate at its default (on, strict), caller ceiling `{first_search.get('ceiling')}` "
        "(restricted passages are filtered inside both rankings).",
        "The query embedding (real MiniLM int8, one query at a time) is timed separately; the keyword,",
        "semantic and hybrid columns use precomputed query vectors behind a stub embedder with the real",
        "model's identity, so they are the search alone. *Hybrid incl. embedding* runs the real model inside",
        "the search, as a caller sees it. The service holds the searchable vectors in memory (the server's",
        "default, `GOVERNED_EVIDENCE_VECTOR_MEMORY_MB=4096`; the copy is made before timing starts, its load",
        "time is shown). numpy runs on one BLAS thread.",
        "",
        *_search_table(sizes),
        "",
        "![Hybrid search p50 and p95, with and without the query embedding, and memory per passage, "
        "against passages indexed](performance-scale.svg)",
        "",
        "### Each side alone",
        "",
        "*Vector side* is the product's vector ranking alone (k=50, ceiling applied): an exact matrix product",
        "up to 50,000 visible passages; above, a sign-code (1 bit per dimension) Hamming scan picking 1% of",
        "the rows (at least 2,000) for exact rescoring, used on an index only where its check when the copy",
        "loads keeps 0.99 of the exact top 10 (ADR 0007; the column names the strategy that served).",
        "*vec0 KNN* is sqlite-vec's KNN query",
        "with the ceiling filter inside it (used while the copy loads or when it would exceed the memory",
        "budget). *numpy exact* is a brute-force matrix product plus top-k over the same vectors with the",
        "same filter, the physical-limit anchor; recall@10 is each ranking's top 10 against the exact top 10.",
        "*FTS5 whole query* is FTS5's OR query over every query word (the keyword side while the impact lists",
        "are not held); the product's keyword side ranks the same whole query from the impact lists in memory",
        "(ADR 0015; MaxScore from 500,000 rows), and *keyword top-10 overlap* compares its top 10 with FTS5's.",
        "",
        *_sides_table(sizes),
        "",
        "### Generated corpora",
        "",
    ]
    if sizes:
        lines += [
            f"Vectors: {next(iter(sizes.values()))['build']['vectors']}. Text: SciFact abstracts split at "
            "sentence boundaries into passages of <= 90 words; replicas beyond the first rewrite about a quarter "
            "of the words into replica-specific variants, so vocabulary grows with the corpus. One SQLite file, "
            "product schema, built through `IndexBuilder` (ceiling restricted: three per-level FTS5 indexes).",
            "",
            *_build_table(sizes),
            "",
        ]
    lines += ["## Ingestion", ""]
    ingest_rows: list[str] = []
    if "ingest_handbook" in results:
        r = results["ingest_handbook"]
        ingest_rows += _ingest_rows("GSA handbook (real MiniLM)", r, r["peak_rss_mb"])
    for key in ("ingest_scale_3k", "ingest_scale"):
        if key in results:
            r = results[key]
            ingest_rows += _ingest_rows(f"{r['corpus']} (hash embedder)", r, r["peak_rss_mb"])
    if ingest_rows:
        lines += [
            "End to end through `ingest_corpus`, seconds from `IngestReport.seconds` (parse and chunk are one",
            "timer in the pipeline). The hash-embedder run replaces the model with deterministic pseudo-vectors",
            "to isolate everything but the model at 10k-passage scale. *Fingerprint* hashes every file and the",
            "settings; when it matches the one stored in the index (and the index passes its checks) the index",
            "is kept as it is, so an unchanged re-ingest is the fingerprint plus that check. After one changed",
            "file the build is incremental: every other document's rows, vectors and full-text entries are",
            "copied from the previous index, and only the changed file is parsed and embedded. `--force`",
            "parses every file again (reusing stored vectors). *Other than embed* is (total - embed) / total.",
            "",
            "| Corpus | Passages | Embedded | Fingerprint s | Parse+chunk s | Embed s | Write s | Total s "
            "| Passages/s | Other than embed | Bytes/passage | Peak RSS |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            *ingest_rows,
            "",
            "![Ingest rate, passages per second, of each ingestion above and of the generated index "
            "builds](performance-ingest.svg)",
            "",
        ]
    else:
        lines += ["Not measured in this run.", ""]
    lines += ["## Start-up", ""]
    if "startup" in results:
        s = results["startup"]
        lines += [
            f"`python -m governed_evidence serve --db ...` on the {s['index_passages']:,}-passage index, a raw "
            f"JSON-RPC client over stdio, {s['runs']} runs. Time from process start (p50 / p95 / p99 ms):",
            "",
            "| initialize answered | first search_documents answered | next search | Server peak RSS |",
            "|---:|---:|---:|---:|",
            f"| {_ms(s['initialize_ms'])} | {_ms(s['first_answer_ms'])} | {_ms(s['second_search_ms'])} "
            f"| {s['peak_rss_mb']:.0f} MB |",
            "",
        ]
    else:
        lines += ["Not measured in this run.", ""]
    if "quantisation" in results:
        q = results["quantisation"]
        lines += [
            "## Experiment: quantised KNN in sqlite-vec (not the product path)",
            "",
            f"The {q['passages']:,}-passage vectors copied into an in-memory database as sqlite-vec `bit[384]` and",
            "`int8[384]` vec0 tables (classification filter inside the KNN), the k candidates rescored exactly",
            f"from float vectors in a plain rowid table; {q['queries']} real SciFact query vectors, recall@10",
            "against the exact numpy top 10 under the same filter.",
            "",
            "| Variant | p50 / p95 / p99 ms | recall@10 |",
            "|---|---:|---:|",
        ]
        for key, value in q.items():
            if isinstance(value, dict) and "recall_at_10" in value:
                lines.append(f"| {key} | {_ms(value['ms'])} | {value['recall_at_10']:.3f} |")
        lines.append("")
    if peers:
        lines += [*peers_section(peers), ""]
    lines += ["## Goals", "", *_goal_table(results), ""]
    findings = Path(__file__).with_name("findings.md")
    if findings.is_file():
        lines += [findings.read_text(encoding="utf-8").rstrip(), ""]
    md_path.parent.mkdir(parents=True, exist_ok=True)
    md_path.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    json_path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
