"""The benchmark's pictures beside docs/performance.md, drawn from its JSON.

* ``performance-scale.svg``: hybrid search p50 and p95 with and without the query embedding,
  and memory per passage (peak RSS of the searching process, the vectors it holds, the file
  on disk), against passages indexed (10k to 1M);
* ``performance-ingest.svg``: the ingest rate, passages per second, of each ingestion measured.

`make bench` (benchmarks.run) draws them at its end from its results; on their own, from the
committed figures: ``python -m benchmarks.charts [--json docs/performance.json] [--out docs]``.
Needs the ``report`` extra (matplotlib), which the development lock carries.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from governed_evidence.evaluation.charts import figure, svg_text

__all__ = ["INGEST_SVG", "SCALE_SVG", "ingest_chart", "main", "scale_chart", "write_charts"]

ROOT = Path(__file__).resolve().parents[1]
SCALE_SVG = "performance-scale.svg"
INGEST_SVG = "performance-ingest.svg"

_LATENCY = (
    ("hybrid_ms", "p50", "hybrid p50", "#08519c", "-"),
    ("hybrid_ms", "p95", "hybrid p95", "#08519c", "--"),
    ("hybrid_with_embedding_ms", "p50", "incl. query embedding p50", "#e6550d", "-"),
    ("hybrid_with_embedding_ms", "p95", "incl. query embedding p95", "#e6550d", "--"),
)


def _kib_per_passage(megabytes: float | None, passages: int) -> float | None:
    return None if megabytes is None or not passages else megabytes * 1024 / passages


def scale_chart(results: dict[str, Any]) -> str:
    """Latency and memory per passage against passages (the sizes measured, in order)."""
    sizes = sorted(results["sizes"].items(), key=lambda kv: int(kv[0]))
    passages = [int(size) for size, _ in sizes]
    fig = figure(9.0, 3.8)
    latency, memory = fig.subplots(1, 2)
    for key, stat, label, colour, style in _LATENCY:
        ys = [entry["search"][key][stat] for _, entry in sizes]
        latency.plot(passages, ys, style, color=colour, marker="o", linewidth=2, label=label)
    latency.set_xscale("log")
    latency.set_xlabel("passages indexed")
    latency.set_ylabel("ms per search")
    latency.set_title("Hybrid search latency", fontsize="medium")
    latency.set_ylim(bottom=0)
    latency.legend(fontsize="small", frameon=False)
    latency.grid(alpha=0.3)
    series = {
        "peak RSS of the searching process": ([e["search"].get("peak_rss_mb") for _, e in sizes], "#6a51a3"),
        "vectors held in memory": ([e["search"].get("vectors_in_memory_mb") for _, e in sizes], "#31a354"),
        "index file on disk": ([e["build"].get("db_bytes", 0) / 2**20 for _, e in sizes], "#636363"),
    }
    for label, (megabytes, colour) in series.items():
        points = [(n, _kib_per_passage(mb, n)) for n, mb in zip(passages, megabytes, strict=True)]
        kept = [(n, v) for n, v in points if v is not None]
        memory.plot([n for n, _ in kept], [v for _, v in kept], color=colour, marker="o", linewidth=2, label=label)
    memory.set_xscale("log")
    memory.set_xlabel("passages indexed")
    memory.set_ylabel("KiB per passage")
    memory.set_title("Memory per passage", fontsize="medium")
    memory.set_ylim(bottom=0)
    memory.legend(fontsize="small", frameon=False)
    memory.grid(alpha=0.3)
    return svg_text(fig, "performance-scale", inline=False)


def _ingest_rates(results: dict[str, Any]) -> list[tuple[str, float]]:
    rates: list[tuple[str, float]] = []
    handbook = results.get("ingest_handbook", {}).get("first", {})
    if handbook.get("passages_per_s"):
        rates.append((f"GSA handbook, real model\n({handbook['passages']:,} passages)", handbook["passages_per_s"]))
    for key in ("ingest_scale_3k", "ingest_scale"):
        first = results.get(key, {}).get("first", {})
        if first.get("passages_per_s"):
            rates.append((f"SciFact files, hash vectors\n({first['passages']:,} passages)", first["passages_per_s"]))
    for size, entry in sorted(results["sizes"].items(), key=lambda kv: int(kv[0])):
        rate = entry["build"].get("build_passages_per_s")
        if rate:
            rates.append((f"generated index build, stored vectors\n({int(size):,} passages)", rate))
    return rates


def ingest_chart(results: dict[str, Any]) -> str:
    """Passages per second of each ingestion measured (log scale: the model dominates)."""
    rates = _ingest_rates(results)
    fig = figure(9.0, 0.55 * len(rates) + 1.2)
    ax = fig.add_subplot()
    colours = ["#e6550d" if "real model" in label else "#3182bd" for label, _ in rates]
    ax.barh(range(len(rates)), [rate for _, rate in rates], color=colours)
    for i, (_, rate) in enumerate(rates):
        ax.annotate(f"{rate:,.0f}/s", (rate, i), xytext=(4, 0), textcoords="offset points", va="center")
    ax.set_yticks(range(len(rates)), [label for label, _ in rates], fontsize="small")
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(10, max((rate for _, rate in rates), default=10) * 4)
    ax.set_xlabel("passages per second (log scale)")
    ax.set_title("Ingest rate", fontsize="medium")
    ax.grid(axis="x", alpha=0.3)
    return svg_text(fig, "performance-ingest", inline=False)


def write_charts(results: dict[str, Any], folder: Path) -> list[Path]:
    """Both pictures into ``folder`` (docs/ beside performance.md); their paths."""
    written = []
    for name, draw in ((SCALE_SVG, scale_chart), (INGEST_SVG, ingest_chart)):
        target = folder / name
        target.write_text(draw(results), encoding="utf-8")
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.charts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default=str(ROOT / "docs" / "performance.json"), help="the benchmark's figures")
    parser.add_argument("--out", help="folder to write the pictures to (default: beside the JSON)")
    ns = parser.parse_args(argv)
    source = Path(ns.json)
    results = json.loads(source.read_text(encoding="utf-8"))
    for path in write_charts(results, Path(ns.out) if ns.out else source.parent):
        print(path)


if __name__ == "__main__":
    main()
