"""`eval --report DIR`: the page's figures are the run's JSON, nothing above its ceiling is in it,
and without the report extra it fails before the run, saying how to install it.

The run is the sample corpus with evals/questions.jsonl (as `--questions FILE --corpus DIR`
gives it) in-process, with the hash embedder in place of the model and the governance slices on
the service: what is compared is the page against the run, not the model's quality.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from governed_evidence import cli
from governed_evidence.config import Classification
from governed_evidence.search.gate import GateThresholds
from governed_evidence.store.connection import connect
from tests.evaluation.html_tables import number, tables, text
from tests.helpers import HashEmbedder, logging_restored

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "data" / "sample_corpus"
QUESTIONS = REPO / "evals" / "questions.jsonl"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, Path]:
    """One `eval --mode compare --json --report DIR` run: its JSON, its page, its report folder."""
    folder = tmp_path_factory.mktemp("report")
    patch = pytest.MonkeyPatch()
    patch.setattr("governed_evidence.embeddings.factory.make_embedder", lambda settings, name=None: HashEmbedder())
    patch.setenv("GOVERNED_EVIDENCE_LOG_LEVEL", "WARNING")
    capture = folder / "stdout.json"
    out = folder / "out"
    try:
        real_stdout = sys.stdout
        with capture.open("w", encoding="utf-8") as sink, logging_restored():
            sys.stdout = sink
            try:
                code = cli.main(
                    ["eval", "--corpus", str(CORPUS), "--questions", str(QUESTIONS), "--mode", "compare",
                     "--no-mcp", "--json", "--report", str(out)]
                )  # fmt: skip
            finally:
                sys.stdout = real_stdout
    finally:
        patch.undo()
    assert code in (0, 1), capture.read_text(encoding="utf-8")
    return json.loads(capture.read_text(encoding="utf-8")), (out / "index.html").read_text(encoding="utf-8"), out


def test_every_slice_per_mode_in_the_page_is_the_runs_json(run: tuple[dict[str, Any], str, Path]) -> None:
    result, html, _ = run
    rows = tables(html)["slices"]
    assert len(rows) == len(result["reports"]) == 21  # seven slices (crosslingual among them), three modes
    for row, report in zip(rows, result["reports"], strict=True):
        assert row[:5] == [report["slice"], report["mode"], str(report["n"]), str(report["pass"]), str(report["fail"])]
        shown = dict(pair.split("=") for pair in row[5].split())
        assert {k: float(v) for k, v in shown.items()} == pytest.approx(report["metrics"], abs=5e-5)
    checks = tables(html)["checks"]
    assert [r[0] for r in checks] == [f"{c['slice']}.{c['metric']}" for c in result["checks"]]
    # The page prints 4 decimal places, as the slices' metrics are rounded in the JSON.
    assert [number(r[1]) for r in checks] == pytest.approx([c["value"] for c in result["checks"]], abs=5e-5)
    assert [number(r[2].split()[-1]) for r in checks] == [c["bound"] for c in result["checks"]]
    assert [r[3] == "ok" for r in checks] == [c["passed"] for c in result["checks"]]
    verdict = re.search(r'id="verdict">eval gate: (\w+)<', html)
    assert verdict is not None and verdict.group(1) == result["gate"]


def test_the_trade_off_and_recall_in_the_page_are_the_runs_json(run: tuple[dict[str, Any], str, Path]) -> None:
    result, html, _ = run
    (corpus,) = result["report"]["corpora"]
    page = tables(html)
    for mode, curve in corpus["tradeoff"].items():
        points = [[number(c) for c in row] for row in page[f"curve curve-{mode}"]]
        assert points == [[p["threshold"], p["abstained"], p["falsely_withheld"]] for p in curve["points"]]
    shipped = {row[0]: [number(c) for c in row[1:]] for row in page["shipped"]}
    assert shipped == {
        mode: [c["shipped"]["threshold"], c["shipped"]["abstained"], c["shipped"]["falsely_withheld"],
               c["unanswerable"], c["answerable"]]
        for mode, c in corpus["tradeoff"].items()
    }  # fmt: skip
    recall = {(r[0], r[1]): [number(c) for c in r[2:]] for r in page["recall"]}
    assert recall == {
        (mode, name): [r["n"], r["recall@10"], r["recall@50"]]
        for mode, by_name in corpus["recall"].items()
        for name, r in by_name.items()
    }
    run_rows = {r[0]: r[1] for r in page["thresholds"]}
    assert (
        number(run_rows["gate threshold (strict)"])
        == result["report"]["thresholds"]["strict"]
        == GateThresholds().strict
    )
    assert number(run_rows["gate threshold (normal)"]) == result["report"]["thresholds"]["normal"]
    assert run_rows["governed-evidence"] == result["report"]["version"]
    zeros = [[r[0], r[1], r[2], number(r[3]), number(r[4])] for r in page["hard-zeros"]]
    assert zeros == [
        [z["slice"], z["mode"], z["metric"], z["value"], z["probes"]] for z in result["report"]["hard_zeros"]
    ]
    assert {z["slice"] for z in result["report"]["hard_zeros"]} == {"denied", "secret", "superseded"}


def test_the_curve_at_the_shipped_threshold_is_what_the_slices_measured(run: tuple[dict[str, Any], str, Path]) -> None:
    """One ranking per question gives the curve; at the shipped threshold it reads what the
    searches through the gate measured, in every mode."""
    result, _, _ = run
    (corpus,) = result["report"]["corpora"]
    by = {(r["slice"], r["mode"]): r for r in result["reports"]}
    for mode, curve in corpus["tradeoff"].items():
        unanswerable = by["unanswerable", mode]
        assert curve["unanswerable"] == unanswerable["n"]
        assert curve["shipped"]["abstained"] == pytest.approx(unanswerable["metrics"]["abstention_rate"], abs=1e-4)
        retrieval = [by[name, mode] for name in ("answerable", "paraphrase")]
        withheld = sum(r["metrics"]["false_abstention"] * r["n"] for r in retrieval) / sum(r["n"] for r in retrieval)
        assert curve["answerable"] == sum(r["n"] for r in retrieval)
        assert curve["shipped"]["falsely_withheld"] == pytest.approx(withheld, abs=1e-4)
        # The curve moves: nothing is withheld at threshold 0, everything above the best confidence.
        assert curve["points"][0] == {"threshold": 0.0, "abstained": 0.0, "falsely_withheld": 0.0}


def test_nothing_above_the_reports_ceiling_is_in_the_page(run: tuple[dict[str, Any], str, Path]) -> None:
    """Must be zero: the restricted documents' paths, titles and their own words, and counts that
    include them, never reach the page (it reports at internal, the quality slices' ceiling)."""
    result, html, folder = run
    db = folder.parent / "restricted-probe.sqlite"
    from governed_evidence.ingest.pipeline import ingest_corpus

    ingest_corpus(CORPUS, db, HashEmbedder(), ceiling=Classification.RESTRICTED, progress=None)
    conn = connect(db, readonly=True)
    try:
        level = int(Classification.INTERNAL)
        above = conn.execute("SELECT path, title FROM documents WHERE classification > ?", (level,)).fetchall()
        visible = " ".join(
            str(r[0]) for r in conn.execute("SELECT text FROM passages WHERE classification <= ?", (level,))
        ).lower()
        hidden = " ".join(
            str(r[0]) for r in conn.execute("SELECT text FROM passages WHERE classification > ?", (level,))
        )
        totals = conn.execute("SELECT (SELECT COUNT(*) FROM documents), (SELECT COUNT(*) FROM passages)").fetchone()
        at_ceiling = conn.execute(
            "SELECT (SELECT COUNT(*) FROM documents WHERE classification <= ?),"
            " (SELECT COUNT(*) FROM passages WHERE classification <= ?)",
            (level, level),
        ).fetchone()
    finally:
        conn.close()
    assert above, "the sample corpus has restricted documents"
    page = html.lower()
    for path, title in above:
        assert str(path).lower() not in page
        assert Path(str(path)).stem.lower() not in page
        assert str(title).lower() not in page
    # Words only the restricted passages use (long enough not to be chart or table vocabulary).
    own = {w for w in re.findall(r"[a-z]{9,}", hidden.lower()) if w not in visible}
    assert len(own) > 10
    assert [w for w in own if w in text(html).lower()] == []
    (index,) = result["report"]["indexes"]
    assert (index["documents_at_ceiling"], index["passages_at_ceiling"]) == tuple(at_ceiling)
    assert tuple(at_ceiling) != tuple(totals)
    rows = dict((r[0], r[1]) for r in tables(html)["index"])
    assert (rows["documents at ceiling"], rows["passages at ceiling"]) == tuple(str(n) for n in at_ceiling)
    note = re.search(r"sample_corpus: (\d+) documents and (\d+) passages at or below internal", html)
    assert note is not None and note.groups() == tuple(str(n) for n in at_ceiling)


def test_the_page_loads_nothing(run: tuple[dict[str, Any], str, Path]) -> None:
    _, html, _ = run
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert re.findall(r"(?i)https?:|//[a-z0-9.-]+\.[a-z]{2,}/|<script|<link|<img|<iframe|@import|src=", html) == []
    # Every chart of the run: slices, and per corpus the trade-off and recall.
    assert html.count("<svg") == 3


def test_without_the_report_extra_the_run_stops_before_it_starts_saying_how_to_install(tmp_path: Path) -> None:
    hidden = tmp_path / "no-matplotlib"
    (hidden / "matplotlib").mkdir(parents=True)
    (hidden / "matplotlib" / "__init__.py").write_text('raise ImportError("matplotlib is hidden for this test")\n')
    env = {**os.environ, "PYTHONPATH": str(hidden), "GOVERNED_EVIDENCE_LOG_LEVEL": "WARNING"}
    done = subprocess.run(
        [sys.executable, "-m", "governed_evidence", "eval", "--report", str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert "pip install 'governed-evidence[report]'" in done.stderr
    assert not (tmp_path / "out").exists()
    assert done.stdout == ""


def test_report_is_refused_for_beir(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["eval", "beir", "--report", "out"]) == 2
    assert "--report covers the question slices and suites, not `eval beir`" in capsys.readouterr().err


def test_a_pilots_own_questions_and_corpus_give_their_own_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--questions FILE --corpus DIR` with only answerable questions: the page is written, its
    curve has no unanswerable question to abstain on (said as 0 of 0), and recall is measured."""
    from tests.helpers import small_corpus

    corpus = small_corpus(tmp_path / "pilot-corpus")
    questions = tmp_path / "pilot.jsonl"
    questions.write_text(
        "\n".join(
            json.dumps({"id": f"p-{i}", "slice": "answerable", "question": q, "expected": [doc]})
            for i, (q, doc) in enumerate(
                [
                    ("How many days of bereavement leave can I take?", "public/leave.md"),
                    ("How do I claim train fares?", "public/expenses.md"),
                ]
            )
        )
        + "\n"
    )
    monkeypatch.setattr(
        "governed_evidence.embeddings.factory.make_embedder", lambda settings, name=None: HashEmbedder()
    )
    out = tmp_path / "out"
    code = cli.main(["eval", "--corpus", str(corpus), "--questions", str(questions), "--no-mcp", "--report", str(out)])
    assert code in (0, 1)
    html = (out / "index.html").read_text(encoding="utf-8")
    assert "Evaluation report: pilot-corpus" in html
    page = tables(html)
    assert [r[0] for r in page["slices"]] == ["answerable"]
    ((mode, _, abstained, _, unanswerable, answerable),) = page["shipped"]
    assert (mode, abstained, unanswerable, answerable) == ("hybrid", "0", "0", "2")
    assert [r[:3] for r in page["recall"]] == [["hybrid", "answerable", "2"], ["hybrid", "all", "2"]]
    assert "hard-zeros" not in page
    assert 'id="no-hard-zeros">Not measured' in html


def test_a_suite_report_draws_each_corpus_at_its_own_ceiling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`eval --suite validation --report DIR`: one trade-off curve and one recall table per corpus,
    each corpus counted at the ceiling its questions are asked at, and the page equal to the JSON;
    the restricted Zephyr document (above both ceilings) appears nowhere."""
    from governed_evidence.evaluation.suites import CorpusSpec
    from tests.helpers import small_corpus

    corpus = small_corpus(tmp_path / "policies")
    questions = tmp_path / "policies.jsonl"
    rows = [
        ("a-1", "answerable", "How many days of bereavement leave can I take?", ["public/leave.md"]),
        ("a-2", "answerable", "How do I claim train fares?", ["public/expenses.md"]),
        ("u-1", "unanswerable", "What is the canteen menu on Fridays?", []),
        ("u-2", "unanswerable", "Who won the regional chess tournament?", []),
    ]
    questions.write_text(
        "".join(json.dumps({"id": i, "slice": s, "question": q, "expected": e}) + "\n" for i, s, q, e in rows)
    )
    specs = [
        CorpusSpec("public-view", corpus, questions, ceiling=Classification.PUBLIC),
        CorpusSpec("internal-view", corpus, questions, ceiling=Classification.INTERNAL),
    ]
    monkeypatch.setattr("governed_evidence.evaluation.suites.load_suite", lambda path, suite, base: specs)
    monkeypatch.setattr(
        "governed_evidence.embeddings.factory.make_embedder", lambda settings, name=None: HashEmbedder()
    )
    out = tmp_path / "out"
    assert cli.main(["eval", "--suite", "validation", "--json", "--report", str(out)]) == 0
    result = json.loads(capsys.readouterr().out)
    html = (out / "index.html").read_text(encoding="utf-8")
    page = tables(html)
    assert "Evaluation report: validation suite" in html
    assert [c["name"] for c in result["report"]["corpora"]] == ["public-view", "internal-view"]
    shipped = [[number(c) for c in row[1:]] for row in page["shipped"]]
    assert shipped == [
        [t["shipped"]["threshold"], t["shipped"]["abstained"], t["shipped"]["falsely_withheld"], 2, 2]
        for c in result["report"]["corpora"]
        for t in c["tradeoff"].values()
    ]
    assert [r[:3] for r in page["slices"]] == [[r["slice"], r["mode"], str(r["n"])] for r in result["reports"]]
    # Recall from the report's one ranking per question is the suite's own recall of each slice.
    by = {r["slice"]: r["metrics"] for r in result["reports"]}
    for c in result["report"]["corpora"]:
        measured = by[f"{c['name']}:answerable"]
        drawn = c["recall"]["hybrid"]["answerable"]
        assert (drawn["recall@10"], drawn["recall@50"]) == pytest.approx(
            (measured["recall@10"], measured["recall@50"]), abs=1e-4
        )
    assert html.count("<svg") == 1 + 2 * 2  # the slices, and per corpus the trade-off and recall
    counts = {i["corpus"]: (i["ceiling"], i["documents_at_ceiling"]) for i in result["report"]["indexes"]}
    public, internal = counts.values()
    assert public[0] == "public" and internal[0] == "internal" and public[1] < internal[1]
    assert "zephyr" not in text(html).lower() and "quillmoor" not in text(html).lower()
    assert 'id="no-hard-zeros"' in html and "no gate (measured only)" in html
