"""`governed-evidence eval --report DIR`: one self-contained HTML page of a run's figures.

The page is built from :func:`report_figures`, the same dict the run prints under ``report``
with ``--json``, so what a reviewer reads is what the run measured. It holds: the release-gate
verdict and every check; every slice per mode; per corpus the gate's trade-off curve with the
shipped threshold marked, and recall before the gate; the hard zeros with the probes behind
each; and the model and index measured on.

Nothing above the report's ceiling (the ceiling the quality slices ran at) is in it: no
question's failures (they name documents), and the index's documents and passages are counted
at that ceiling only. The governance slices search above it by design, and show only their
count, which must be zero, and their number of probes.

The page loads nothing: the charts are inline SVG, there is no script, and a
Content-Security-Policy of ``default-src 'none'`` tells the browser so.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

from governed_evidence import __version__
from governed_evidence.config import Classification
from governed_evidence.evaluation import charts
from governed_evidence.evaluation.release_gate import MUST_BE_ZERO, Check
from governed_evidence.evaluation.runner import SliceReport
from governed_evidence.evaluation.tradeoff import QuestionProbe, recall_figures, tradeoff_curve

__all__ = ["CSP", "index_figures", "render_html", "report_figures", "write_report"]

CSP = "default-src 'none'; style-src 'unsafe-inline'"
_HARD_ZERO = dict(MUST_BE_ZERO)
#: Metrics a check bounds from below (the rest from above).
_MIN_METRICS = {"hit@1", "hit@3", "mrr", "abstention_rate", "normal_abstention_rate", "page@10", "recall@10"}


def index_figures(db: Path, ceiling: Classification) -> dict[str, Any]:
    """The model and index a run measured on, counted at ``ceiling`` only."""
    from governed_evidence.store.connection import connect, read_meta

    conn = connect(db, readonly=True)
    try:
        meta = read_meta(conn)
        level = int(ceiling)
        documents = conn.execute("SELECT COUNT(*) FROM documents WHERE classification <= ?", (level,)).fetchone()
        passages = conn.execute("SELECT COUNT(*) FROM passages WHERE classification <= ?", (level,)).fetchone()
    finally:
        conn.close()
    return {
        "embedding_model": meta.embedding_model,
        "embedding_model_checksum": meta.embedding_model_checksum,
        "embedding_dimension": meta.embedding_dimension,
        "schema_version": meta.schema_version,
        "built_at": meta.built_at,
        "corpus": meta.corpus_name,
        "ceiling": ceiling.label,
        "documents_at_ceiling": int(documents[0]) if documents else 0,
        "passages_at_ceiling": int(passages[0]) if passages else 0,
    }


def report_figures(
    *,
    reports: Sequence[SliceReport],
    checks: Sequence[Check],
    gate: str | None,
    probes: dict[str, dict[str, list[QuestionProbe]]],
    thresholds: dict[str, float],
    indexes: Sequence[dict[str, Any]],
    title: str,
) -> dict[str, Any]:
    """Everything the page shows (``probes``: corpus -> mode -> the questions' probes;
    ``indexes``: :func:`index_figures` of each corpus)."""
    slices = [{k: v for k, v in r.as_dict().items() if k != "failures"} for r in reports]
    return {
        "title": title,
        "version": __version__,
        "generated_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "gate": gate,
        "checks": [
            {"slice": c.slice, "metric": c.metric, "bound": c.bound, "value": c.value, "passed": c.passed}
            for c in checks
        ],
        "slices": slices,
        "thresholds": thresholds,
        "corpora": [
            {
                "name": name,
                "tradeoff": {mode: tradeoff_curve(p, thresholds["strict"]) for mode, p in by_mode.items()},
                "recall": {mode: recall_figures(p) for mode, p in by_mode.items()},
            }
            for name, by_mode in probes.items()
        ],
        "hard_zeros": [
            {
                "slice": s["slice"],
                "mode": s["mode"],
                "metric": metric,
                "value": s["metrics"].get(metric),
                "probes": s["n"],
            }
            for s in slices
            if (metric := _HARD_ZERO.get(s["slice"])) is not None
        ],
        "indexes": list(indexes),
    }


def _number(value: float | None) -> str:
    """A figure as the page prints it (and the comparison test reads it back)."""
    if value is None:
        return "missing"
    return str(int(value)) if float(value).is_integer() else f"{value:.4f}".rstrip("0")


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], cls: str) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _verdict(figures: dict[str, Any]) -> str:
    gate = figures["gate"]
    label = "no gate (measured only)" if gate is None else f"eval gate: {gate}"
    cls = "none" if gate is None else "pass" if gate == "PASS" else "fail"
    rows = [
        [
            escape(f"{c['slice']}.{c['metric']}"),
            _number(c["value"]),
            ("&ge; " if c["metric"] in _MIN_METRICS else "&le; ") + _number(c["bound"]),
            "ok" if c["passed"] else "<strong>FAIL</strong>",
        ]
        for c in figures["checks"]
    ]
    return f'<p class="verdict {cls}" id="verdict">{escape(label)}</p>' + _table(
        ["check", "value", "bound", "result"], rows, "checks"
    )


def _slices(figures: dict[str, Any]) -> str:
    rows = [
        [
            escape(s["slice"]),
            escape(s["mode"]),
            str(s["n"]),
            str(s["pass"]),
            str(s["fail"]),
            " ".join(f'<span class="m">{escape(k)}={_number(v)}</span>' for k, v in s["metrics"].items()),
        ]
        for s in figures["slices"]
    ]
    return charts.slices_chart(figures["slices"]) + _table(
        ["slice", "mode", "n", "pass", "fail", "metrics"], rows, "slices"
    )


def _corpus(number: int, corpus: dict[str, Any]) -> str:
    parts = [f"<h3>{escape(corpus['name'])}</h3>"]
    parts.append(charts.tradeoff_chart(corpus["name"], corpus["tradeoff"], salt=f"tradeoff-{number}"))
    shipped_rows = [
        [
            escape(mode),
            _number(c["shipped"]["threshold"]),
            _number(c["shipped"]["abstained"]),
            _number(c["shipped"]["falsely_withheld"]),
            str(c["unanswerable"]),
            str(c["answerable"]),
        ]
        for mode, c in corpus["tradeoff"].items()
    ]
    parts.append(
        _table(
            ["mode", "shipped threshold", "abstained", "falsely withheld", "unanswerable", "answerable"],
            shipped_rows,
            "shipped",
        )
    )
    for mode, curve in corpus["tradeoff"].items():
        rows = [
            [_number(p["threshold"]), _number(p["abstained"]), _number(p["falsely_withheld"])] for p in curve["points"]
        ]
        parts.append(
            f"<details><summary>every threshold, {escape(mode)}</summary>"
            + _table(["threshold", "abstained", "falsely withheld"], rows, f"curve curve-{escape(mode)}")
            + "</details>"
        )
    parts.append("<h4>Recall before the gate</h4>")
    parts.append(charts.recall_chart(corpus["recall"], salt=f"recall-{number}"))
    recall_rows = [
        [escape(mode), escape(name), str(r["n"]), _number(r["recall@10"]), _number(r["recall@50"])]
        for mode, by_name in corpus["recall"].items()
        for name, r in by_name.items()
    ]
    parts.append(_table(["mode", "questions", "n", "recall@10", "recall@50"], recall_rows, "recall"))
    return "".join(parts)


def _hard_zeros_section(figures: dict[str, Any]) -> str:
    if not figures["hard_zeros"]:
        return (
            '<h2>Hard zeros</h2>\n<p class="note" id="no-hard-zeros">Not measured: these questions hold no '
            "denied, secret or superseded probes.</p>"
        )
    return (
        '<h2>Hard zeros</h2>\n<p class="note">Searched above the report\'s ceiling by design; only the count, '
        "which must be zero, and the number of probes behind it are shown.</p>" + _hard_zeros(figures)
    )


def _hard_zeros(figures: dict[str, Any]) -> str:
    rows = [
        [
            escape(z["slice"]),
            escape(z["mode"]),
            escape(z["metric"]),
            _number(z["value"]),
            str(z["probes"]),
            "ok" if z["value"] == 0 else "<strong>FAIL</strong>",
        ]
        for z in figures["hard_zeros"]
    ]
    return _table(["slice", "mode", "metric", "value", "probes", "result"], rows, "hard-zeros")


def _indexes(figures: dict[str, Any]) -> str:
    parts = []
    for index in figures["indexes"]:
        rows = [[escape(k.replace("_", " ")), escape(str(v))] for k, v in index.items()]
        parts.append(_table(["measured on", ""], rows, "index"))
    rows = [[escape(f"gate threshold ({k})"), _number(v)] for k, v in figures["thresholds"].items()]
    rows += [["governed-evidence", escape(figures["version"])], ["report generated", escape(figures["generated_at"])]]
    return "".join(parts) + _table(["run", ""], rows, "thresholds")


def _measured_on(figures: dict[str, Any]) -> str:
    models = ", ".join(dict.fromkeys(escape(i["embedding_model"]) for i in figures["indexes"]))
    corpora = "; ".join(
        f"{escape(i['corpus'])}: {i['documents_at_ceiling']} documents and {i['passages_at_ceiling']} passages "
        f"at or below {escape(i['ceiling'])}"
        for i in figures["indexes"]
    )
    return (
        f"Measured with {models} on {corpora}. Each corpus is reported at the ceiling its questions "
        "were asked at: nothing above it is shown."
    )


_STYLE = """
body{font-family:sans-serif;margin:2rem auto;max-width:60rem;color:#222;line-height:1.4}
h1{font-size:1.5rem} h2{margin-top:2.5rem;border-bottom:1px solid #ccc} svg{max-width:100%;height:auto}
table{border-collapse:collapse;margin:.8rem 0;font-size:.85rem} td,th{border:1px solid #ddd;padding:.2rem .5rem;
text-align:left} .verdict{font-size:1.3rem;font-weight:bold;padding:.5rem 1rem;display:inline-block}
.pass{background:#e5f5e0;color:#006d2c} .fail{background:#fee0d2;color:#a50f15} .none{background:#eee}
.m{margin-right:.6rem;white-space:nowrap} details{margin:.3rem 0} .note{color:#555;font-size:.9rem}
"""


def render_html(figures: dict[str, Any]) -> str:
    title = escape(figures["title"])
    corpora = "".join(_corpus(i, c) for i, c in enumerate(figures["corpora"]))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Evaluation report: {title}</title><style>{_STYLE}</style></head>
<body>
<h1>Evaluation report: {title}</h1>
<p class="note" id="measured-on">{_measured_on(figures)}</p>
<h2>Release gate</h2>{_verdict(figures)}
<h2>Slices per mode</h2>
<p class="note">Share of each slice's questions that passed; the table gives every figure.</p>{_slices(figures)}
<h2>The gate's trade-off</h2>
<p class="note">As the threshold moves: the share of unanswerable questions the gate abstains on
against the share of answerable ones it falsely withholds. The diamond is the shipped threshold.</p>
{corpora}
{_hard_zeros_section(figures)}
<h2>Model and index</h2>{_indexes(figures)}
</body></html>
"""


def write_report(figures: dict[str, Any], folder: Path) -> Path:
    """Write ``folder/index.html`` (the folder is made when absent); its path."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "index.html"
    target.write_text(render_html(figures), encoding="utf-8")
    return target
