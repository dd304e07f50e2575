"""`governed-evidence eval`: build the sample index, run the slices, print a scorecard and the gate."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from governed_evidence.config import Classification, Settings
from governed_evidence.errors import InvalidRequestError

# The CLI imports this module for add_eval_parser on every command, `serve` included; what
# running an evaluation needs (the ingest pipeline, the fastmcp client, the search service)
# is imported when it runs.
if TYPE_CHECKING:
    from governed_evidence.evaluation.questions import Question
    from governed_evidence.evaluation.release_gate import Check
    from governed_evidence.evaluation.runner import Searcher, SliceReport
    from governed_evidence.search.models import SearchMode
    from governed_evidence.search.service import SearchService

__all__ = ["add_eval_parser", "run_eval"]

_MODES: tuple[SearchMode, ...] = ("keyword", "semantic", "hybrid")
#: The ceiling the quality slices run at (run_slices' default), and so the report's.
_REPORT_CEILING = Classification.INTERNAL


def add_eval_parser(sub: Any) -> None:
    p = sub.add_parser("eval", help="run the labelled question slices and the release gate, or a BEIR benchmark")
    p.add_argument("target", nargs="?", choices=["questions", "beir"], default="questions")
    p.add_argument("--dataset", help="BEIR dataset folder (corpus.jsonl, queries.jsonl, qrels/) for `eval beir`")
    p.add_argument("--split", default="test", help="qrels split for `eval beir` (default: test)")
    p.add_argument(
        "--suite",
        choices=["sample", "tuning", "validation"],
        default="sample",
        help="sample: the release slices over data/sample_corpus (default); tuning or validation: "
        "the per-corpus slices of evals/suites.toml over real corpora",
    )
    p.add_argument("--cache-dir", help="keep the suite's indexes here and reuse them while the corpora are unchanged")
    p.add_argument("--questions", default="evals/questions.jsonl")
    p.add_argument("--corpus", default="data/sample_corpus", help="corpus to build a fresh index from")
    p.add_argument("--db", help="use this existing index instead of building one")
    p.add_argument(
        "--gate-file", help="thresholds (default: evals/gate.toml; evals/gate-tuning.toml for --suite tuning)"
    )
    p.add_argument("--mode", choices=[*_MODES, "compare"], default="hybrid")
    p.add_argument("--no-mcp", action="store_true", help="run governance slices on the service, not over stdio")
    p.add_argument("--json", action="store_true")
    p.add_argument("--write-baseline", metavar="FILE", help="write the measured metrics (refused on any leak)")
    p.add_argument(
        "--report",
        metavar="DIR",
        help="also write DIR/index.html: the run's figures and charts as one self-contained page "
        "(needs the report extra: pip install 'governed-evidence[report]')",
    )
    p.set_defaults(func=run_eval)


def _superseded(db: Path) -> set[str]:
    from governed_evidence.store.connection import connect

    conn = connect(db, readonly=True)
    try:
        return {str(r[0]) for r in conn.execute("SELECT path FROM documents WHERE status = 'superseded'")}
    finally:
        conn.close()


def _report(
    questions: list[Question],
    service: SearchService,
    modes: tuple[SearchMode, ...],
    db: Path,
    reports: list[SliceReport],
    checks: list[Check],
    passed: bool,
) -> dict[str, Any]:
    """The report's figures: the slices and checks as measured, plus one ranking per question and
    mode for the trade-off curve and recall (evaluation.tradeoff)."""
    from governed_evidence.evaluation.report import index_figures, report_figures
    from governed_evidence.evaluation.tradeoff import probe_questions

    index = index_figures(db, _REPORT_CEILING)
    thresholds = service.thresholds
    return report_figures(
        reports=reports,
        checks=checks,
        gate="PASS" if passed else "FAIL",
        probes={index["corpus"] or db.stem: {mode: probe_questions(questions, service, mode) for mode in modes}},
        thresholds={"strict": thresholds.strict, "normal": thresholds.normal},
        indexes=[index],
        title=index["corpus"] or db.stem,
    )


def _write_report(figures: dict[str, Any] | None, args: argparse.Namespace) -> None:
    if figures is None:
        return
    from governed_evidence.evaluation.report import write_report

    written = write_report(figures, Path(args.report))
    print(f"report written to {written}", file=sys.stderr)


def _print_scorecard(reports: list[SliceReport], checks: list[Check], passed: bool, *, gated: bool = True) -> None:
    width = max([13, *(len(r.slice) for r in reports)])
    print(f"{'slice':<{width}} {'mode':<9} {'n':>4} {'pass':>5} {'fail':>5}  metrics")
    for r in reports:
        metrics = "  ".join(f"{k}={v:.3f}" if v % 1 else f"{k}={int(v)}" for k, v in r.metrics.items())
        print(f"{r.slice:<{width}} {r.mode:<9} {r.n:>4} {r.passed:>5} {r.failed:>5}  {metrics}")
    print()
    if not gated:
        print("(no gate: these figures are measured, never thresholded)")
        return
    for c in checks:
        sign = ">=" if c.kind == "min" else "<="
        value = "missing" if c.value is None else f"{c.value:.3f}"
        hard = " (must be zero)" if c.must_be_zero else ""
        print(f"  [{'ok' if c.passed else 'FAIL'}] {c.slice}.{c.metric} = {value} {sign} {c.bound:g}{hard}")
    print(f"\nEVAL GATE: {'PASS' if passed else 'FAIL'}")


def _run_beir_command(args: argparse.Namespace, settings: Settings) -> int:
    from governed_evidence.embeddings.factory import make_embedder
    from governed_evidence.evaluation.beir import build_beir_index, run_beir

    if not args.dataset:
        raise InvalidRequestError("eval beir needs --dataset DIR (a BEIR folder with corpus.jsonl)")
    dataset = Path(args.dataset)
    embedder = make_embedder(settings)
    with ExitStack() as stack:
        if args.db:
            db = Path(args.db)
        else:
            db = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ge-beir-"))) / "beir.sqlite"
        build = build_beir_index(dataset, db, embedder)
        results = run_beir(dataset, db, embedder, split=args.split)
    if args.json:
        print(
            json.dumps(
                {
                    "dataset": dataset.name,
                    "split": args.split,
                    "build": build,
                    "results": [r.as_dict() for r in results],
                },
                indent=2,
            )
        )
    else:
        print(
            f"{dataset.name} ({args.split}): {int(build['documents'])} documents, "
            f"{int(build['embedded'])} embedded in {build['embed_s']:.0f} s, index built in {build['total_s']:.0f} s"
        )
        print(f"{'mode':<9} {'queries':>7} {'nDCG@10':>8} {'R@100':>7} {'seconds':>8}")
        for r in results:
            print(f"{r.mode:<9} {r.queries:>7} {r.ndcg_at_10:>8.3f} {r.recall_at_100:>7.3f} {r.seconds:>8.1f}")
    return 0


def _run_suite_command(args: argparse.Namespace, settings: Settings) -> int:
    from governed_evidence.embeddings.factory import make_embedder
    from governed_evidence.evaluation.release_gate import evaluate_gate, load_gate
    from governed_evidence.evaluation.suites import load_suite, run_suite
    from governed_evidence.search.rerank import make_reranker

    started = time.perf_counter()
    specs = load_suite(Path("evals/suites.toml"), args.suite, Path.cwd())
    # Validation is measured, never gated on: a threshold there would be a parameter chosen on it.
    gate_file = args.gate_file or ("evals/gate-tuning.toml" if args.suite == "tuning" else None)
    spec = load_gate(Path(gate_file)) if gate_file else None
    modes = _MODES if args.mode == "compare" else (args.mode,)
    run = run_suite(
        specs,
        make_embedder(settings),
        modes,
        cache_dir=Path(args.cache_dir) if args.cache_dir else None,
        gate_enabled=settings.gate == "on",
        # GOVERNED_EVIDENCE_RERANKER measures an endpoint on the suite's questions.
        reranker=make_reranker(settings),
        progress=lambda line: print(line, file=sys.stderr),
        probe=bool(args.report),
    )
    gated = [r for r in run.reports if r.mode == "hybrid" or len(modes) == 1]
    # Only the per-corpus bounds ("corpus:slice"): the governance slices, whose zero bounds
    # every gate file carries, are the sample suite's (they need its labelled documents). A
    # bound on a corpus absent from this machine is not checked; the output says it was skipped.
    checks = [
        c
        for c in (evaluate_gate(spec, gated) if spec else [])
        if ":" in c.slice and c.slice.split(":")[0] not in run.skipped
    ]
    passed = all(c.passed for c in checks)
    figures = None
    if args.report:
        from governed_evidence.evaluation.report import report_figures
        from governed_evidence.search.gate import GateThresholds

        # run_suite searches with the shipped thresholds.
        shipped = GateThresholds()
        figures = report_figures(
            reports=run.reports,
            checks=checks,
            gate=None if spec is None else "PASS" if passed else "FAIL",
            probes=run.probes,
            thresholds={"strict": shipped.strict, "normal": shipped.normal},
            indexes=list(run.indexes.values()),
            title=f"{args.suite} suite",
        )
    seconds = round(time.perf_counter() - started, 1)
    if args.json:
        print(
            json.dumps(
                {
                    "suite": args.suite,
                    "reports": [r.as_dict() for r in run.reports],
                    "skipped": run.skipped,
                    "checks": [
                        {"slice": c.slice, "metric": c.metric, "bound": c.bound, "value": c.value, "passed": c.passed}
                        for c in checks
                    ],
                    "gate": None if spec is None else "PASS" if passed else "FAIL",
                    "seconds": seconds,
                    **({} if figures is None else {"report": figures}),
                },
                indent=2,
            )
        )
    else:
        for name, reason in run.skipped.items():
            print(f"skipped {name}: {reason}")
        if spec is None:
            _print_scorecard(run.reports, [], True, gated=False)
        else:
            _print_scorecard(run.reports, checks, passed)
        print(f"({args.suite} suite: {len(run.passages)} corpora scored, {len(run.skipped)} skipped; {seconds} s)")
    _write_report(figures, args)
    return 0 if passed else 1


def run_eval(args: argparse.Namespace, settings: Settings) -> int:
    if getattr(args, "report", None):
        if args.target == "beir":
            raise InvalidRequestError("--report covers the question slices and suites, not `eval beir`")
        from governed_evidence.evaluation.charts import require_matplotlib

        # Before the run: a missing extra should cost nothing.
        require_matplotlib()
    if args.target == "beir":
        return _run_beir_command(args, settings)
    if args.suite != "sample":
        return _run_suite_command(args, settings)
    from governed_evidence.embeddings.factory import make_embedder
    from governed_evidence.evaluation.mcp_client import McpSearcher
    from governed_evidence.evaluation.questions import load_questions
    from governed_evidence.evaluation.release_gate import evaluate_gate, load_gate
    from governed_evidence.evaluation.runner import GOVERNANCE_SLICES, run_slices
    from governed_evidence.ingest.pipeline import ingest_corpus
    from governed_evidence.search.service import SearchService

    started = time.perf_counter()
    questions = load_questions(Path(args.questions))
    spec = load_gate(Path(args.gate_file or "evals/gate.toml"))
    gate_setting = settings.gate == "on"
    embedder = make_embedder(settings)
    with ExitStack() as stack:
        if args.db:
            db = Path(args.db)
        else:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ge-eval-")))
            db = tmp / "eval.sqlite"
            ingest_corpus(Path(args.corpus), db, embedder, ceiling=Classification.RESTRICTED, progress=None)

        def service_for(ceiling: Classification, gate: bool) -> SearchService:
            # GOVERNED_EVIDENCE_GATE=off overrides every slice: that is the sabotage check.
            return SearchService(
                db,
                ceiling=ceiling,
                embedder_factory=lambda: embedder,
                gate_enabled=gate and gate_setting,
                # As the server searches: with the vectors held in memory.
                vector_memory_bytes=settings.vector_memory_mb * 2**20,
            )

        mcp_cache: dict[tuple[Classification, bool], Searcher] = {}

        def governance_for(ceiling: Classification, gate: bool) -> Searcher:
            key = (ceiling, gate and gate_setting)
            if key not in mcp_cache:
                mcp_cache[key] = stack.enter_context(McpSearcher(db, ceiling=ceiling, gate_enabled=key[1]))
            return mcp_cache[key]

        modes = _MODES if args.mode == "compare" else (args.mode,)
        reports: list[SliceReport] = []
        gated_reports: list[SliceReport] = []
        for mode in modes:
            run = run_slices(
                questions,
                service_for,
                mode=mode,
                superseded_documents=_superseded(db),
                governance_for=None if args.no_mcp else governance_for,
            )
            reports.extend(run)
            if mode == "hybrid" or len(modes) == 1:
                gated_reports = run
        checks = evaluate_gate(spec, gated_reports)
        passed = all(c.passed for c in checks)
        figures = None
        if args.report:
            figures = _report(questions, service_for(_REPORT_CEILING, True), modes, db, reports, checks, passed)
    seconds = round(time.perf_counter() - started, 1)
    if args.json:
        print(
            json.dumps(
                {
                    "reports": [r.as_dict() for r in reports],
                    "checks": [
                        {"slice": c.slice, "metric": c.metric, "bound": c.bound, "value": c.value, "passed": c.passed}
                        for c in checks
                    ],
                    "gate": "PASS" if passed else "FAIL",
                    "governance_via": "service" if args.no_mcp else "mcp-stdio",
                    "seconds": seconds,
                    **({} if figures is None else {"report": figures}),
                },
                indent=2,
            )
        )
    else:
        _print_scorecard(reports, checks, passed)
        via = "the service" if args.no_mcp else "the MCP tools over stdio"
        print(f"(governance slices {', '.join(GOVERNANCE_SLICES)} ran through {via}; {seconds} s)")
    _write_report(figures, args)
    if args.write_baseline:
        leaks = [c for c in checks if c.must_be_zero and not c.passed]
        if leaks:
            raise InvalidRequestError("refusing to write a baseline while a must-be-zero check fails")
        Path(args.write_baseline).write_text(
            json.dumps({r.slice + ":" + r.mode: r.metrics for r in gated_reports}, indent=2, sort_keys=True) + "\n"
        )
    return 0 if passed else 1
