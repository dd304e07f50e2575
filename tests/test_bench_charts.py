"""benchmarks.charts: the pictures docs/performance.md embeds are drawn from docs/performance.json,
the committed ones are what the committed figures draw, and `make bench` writes them."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from benchmarks import charts

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def _texts(svg: str) -> str:
    root = ET.fromstring(svg)
    return " ".join(t for el in root.iter() if el.tag.endswith("text") for t in el.itertext())


def test_the_committed_pictures_are_what_the_committed_figures_draw(tmp_path: Path) -> None:
    written = charts.write_charts(json.loads((DOCS / "performance.json").read_text(encoding="utf-8")), tmp_path)
    assert [p.name for p in written] == [charts.SCALE_SVG, charts.INGEST_SVG]
    for path in written:
        assert path.read_text(encoding="utf-8") == (DOCS / path.name).read_text(encoding="utf-8"), (
            f"docs/{path.name} is stale: run `python -m benchmarks.charts`"
        )


def test_the_pictures_carry_the_figures_they_plot(tmp_path: Path) -> None:
    results = json.loads((DOCS / "performance.json").read_text(encoding="utf-8"))
    # One size changed: the drawing follows the figures, not a copy of the committed picture.
    results["sizes"]["1000000"]["search"]["hybrid_ms"]["p95"] = 99.0
    scale = charts.scale_chart(results)
    assert "Hybrid search latency" in _texts(scale) and "Memory per passage" in _texts(scale)
    assert scale != (DOCS / charts.SCALE_SVG).read_text(encoding="utf-8")
    ingest = _texts(charts.ingest_chart(results))
    for rate in (
        results["ingest_handbook"]["first"]["passages_per_s"],
        *(entry["build"]["build_passages_per_s"] for entry in results["sizes"].values()),
    ):
        assert f"{rate:,.0f}/s" in ingest


def test_the_performance_doc_embeds_both_pictures_and_the_generator_keeps_them(tmp_path: Path) -> None:
    from benchmarks.report import write_report

    results = json.loads((DOCS / "performance.json").read_text(encoding="utf-8"))
    write_report(results, tmp_path / "performance.md", tmp_path / "performance.json")
    for doc in (DOCS / "performance.md", tmp_path / "performance.md"):
        text = doc.read_text(encoding="utf-8")
        for name in (charts.SCALE_SVG, charts.INGEST_SVG):
            assert re.search(rf"!\[[^\]]+\]\({re.escape(name)}\)", text), f"{doc} does not embed {name}"


def test_the_pictures_can_be_drawn_on_their_own(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    charts.main(["--json", str(DOCS / "performance.json"), "--out", str(tmp_path)])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([charts.SCALE_SVG, charts.INGEST_SVG])
    assert str(tmp_path / charts.SCALE_SVG) in capsys.readouterr().out
