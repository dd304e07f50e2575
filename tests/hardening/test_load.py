"""Load: 8 concurrent clients x 200 mixed search/read calls against ONE server process.

The server is the real `governed-evidence serve` over stdio with the real default model.
stdio carries exactly one MCP session per server process (one pipe pair), so the 8 clients
are 8 concurrent callers multiplexed over that session by JSON-RPC request id, each with up
to one call in flight: the server handles up to 8 calls at once on its worker threads. A
second test runs 8 separate sessions against one in-process app (one SearchService) to show
sessions do not bleed into each other either.

Cross-talk oracle: every request is first answered sequentially; under load each response
must be identical to the sequential answer for the same arguments (same documents, order,
citations and text), and a search's top result must be its query's expected document.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from governed_evidence.config import Classification
from governed_evidence.embeddings.base import Embedder
from governed_evidence.mcp import build_app
from governed_evidence.search.service import SearchService
from tests.hardening import figures
from tests.hardening.conftest import MemoEmbedder
from tests.hardening.probes import QUESTIONS

CLIENTS = 8
CALLS_PER_CLIENT = 200
SEED = 8
#: The p95 must stay under this (seconds); a generous bound, the figure itself is reported.
P95_BOUND_S = 2.0
#: Calls per session in the in-process variant (isolation, not throughput, is its point).
SESSION_CALLS = 60


def _questions() -> list[tuple[str, str]]:
    """(question, expected top document) for questions answered at ceiling internal."""
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [
        (str(r["question"]), str(r["expected"][0]))
        for r in rows
        if r.get("slice") in ("answerable", "paraphrase") and r.get("expected")
    ]


def _fingerprint(tool: str, content: dict[str, Any]) -> Any:
    """What must not differ between two answers to the same call."""
    if tool == "search_documents":
        return (
            content["status"],
            content["search_mode"],
            content["withheld"],
            [(r["citation_id"], r["document"], r["text"], round(r["confidence"], 6)) for r in content["results"]],
        )
    return (
        content["passage"]["citation_id"],
        content["passage"]["text"],
        [p["citation_id"] for p in content["before"] + content["after"]],
    )


def _workload(
    questions: list[tuple[str, str]], readable: list[str], calls: int = CALLS_PER_CLIENT
) -> list[list[tuple[str, dict[str, Any]]]]:
    rng = random.Random(SEED)
    plans = []
    for _ in range(CLIENTS):
        plan: list[tuple[str, dict[str, Any]]] = []
        for _ in range(calls):
            if rng.random() < 0.6:
                question, _ = rng.choice(questions)
                mode = rng.choice(["hybrid", "hybrid", "keyword", "semantic"])
                plan.append(("search_documents", {"query": question, "mode": mode, "limit": 5, "confidence": "normal"}))
            else:
                plan.append(("read_passage", {"citation_id": rng.choice(readable), "context": rng.randint(0, 2)}))
        plans.append(plan)
    return plans


def _key(tool: str, args: dict[str, Any]) -> str:
    return tool + json.dumps(args, sort_keys=True)


async def _drive(sessions: list[Client], plans: list[list[tuple[str, dict[str, Any]]]]) -> dict[str, Any]:
    """Sequential answers first, then every plan concurrently; returns latencies and mismatches."""
    expected: dict[str, Any] = {}
    for tool, args in {_key(t, a): (t, a) for plan in plans for t, a in plan}.values():
        result = await sessions[0].call_tool(tool, args)
        expected[_key(tool, args)] = _fingerprint(tool, result.structured_content)
    latencies: list[float] = []
    mismatches: list[str] = []
    errors: list[str] = []

    async def client(index: int) -> None:
        session = sessions[index % len(sessions)]
        for tool, args in plans[index]:
            started = time.perf_counter()
            result = await session.call_tool(tool, args, raise_on_error=False)
            latencies.append(time.perf_counter() - started)
            if result.is_error:
                errors.append(f"{tool}: {result.content[0].text}")  # type: ignore[union-attr]
            elif _fingerprint(tool, result.structured_content) != expected[_key(tool, args)]:
                mismatches.append(f"client {index}: {tool} {args}")

    started = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(CLIENTS)))
    return {
        "latencies": latencies,
        "mismatches": mismatches,
        "errors": errors,
        "seconds": time.perf_counter() - started,
        "expected": expected,
    }


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _readable_and_checked(db: Path, embedder: Embedder) -> tuple[list[tuple[str, str]], list[str]]:
    """Questions whose top answer is their expected document, and citation ids to read."""
    service = SearchService(db, ceiling=Classification.INTERNAL, embedder_factory=lambda: embedder)
    try:
        questions = []
        readable: list[str] = []
        for question, document in _questions():
            results = service.search(question, limit=5, confidence_level="normal").results
            if results and results[0].document == document:
                questions.append((question, document))
            readable += [r.citation_id for r in results]
    finally:
        service.reader.close()
    return questions, sorted(set(readable))


def _check_top_documents(plans: list[list[tuple[str, dict[str, Any]]]], outcome: dict[str, Any]) -> None:
    documents = dict(_questions())
    for plan in plans:
        for tool, args in plan:
            if tool == "search_documents" and args["mode"] == "hybrid":
                top = outcome["expected"][_key(tool, args)][3][0][1]
                assert top == documents[args["query"]], (args, top)


def test_eight_concurrent_clients_against_one_stdio_server(
    sample_index: Path, minilm: Embedder, tmp_path: Path
) -> None:
    db = tmp_path / "served.sqlite"
    shutil.copyfile(sample_index, db)
    questions, readable = _readable_and_checked(db, MemoEmbedder(minilm))
    assert len(questions) >= 20 and len(readable) >= 40
    plans = _workload(questions, readable)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "GOVERNED_EVIDENCE_CEILING": "internal",
        "GOVERNED_EVIDENCE_LOG_LEVEL": "WARNING",
        "ORT_DISABLE_TELEMETRY": "1",
    }
    transport = StdioTransport(
        command=sys.executable,
        args=["-m", "governed_evidence", "serve", "--db", str(db)],
        env=env,
        keep_alive=False,
        log_file=tmp_path / "stderr.log",
    )

    async def body() -> dict[str, Any]:
        async with Client(transport) as client:
            return await _drive([client], plans)

    outcome = asyncio.run(body())
    latencies = outcome["latencies"]
    p50, p95 = _percentile(latencies, 0.50), _percentile(latencies, 0.95)
    figures.put("load (stdio, one server): clients x calls", CLIENTS * CALLS_PER_CLIENT)
    figures.put("load (stdio, one server): p50 ms", round(p50 * 1000, 1))
    figures.put("load (stdio, one server): p95 ms", round(p95 * 1000, 1))
    figures.put("load (stdio, one server): max ms", round(max(latencies) * 1000, 1))
    figures.put("load (stdio, one server): calls per second", round(len(latencies) / outcome["seconds"], 1))
    figures.put("load (stdio, one server): errors", len(outcome["errors"]))
    figures.put("load (stdio, one server): cross-talk mismatches", len(outcome["mismatches"]))
    print(f"\nload over stdio: {len(latencies)} calls, p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms")
    assert len(latencies) == CLIENTS * CALLS_PER_CLIENT
    assert not outcome["errors"], outcome["errors"][:5]
    assert not outcome["mismatches"], outcome["mismatches"][:5]
    _check_top_documents(plans, outcome)
    assert p95 < P95_BOUND_S


def test_eight_sessions_against_one_app_do_not_cross_talk(sample_index: Path, minilm: Embedder) -> None:
    embedder = MemoEmbedder(minilm)
    questions, readable = _readable_and_checked(sample_index, embedder)
    plans = _workload(questions, readable, calls=SESSION_CALLS)
    service = SearchService(sample_index, ceiling=Classification.INTERNAL, embedder_factory=lambda: embedder)
    app = build_app(service)

    async def body() -> dict[str, Any]:
        sessions = [Client(app) for _ in range(CLIENTS)]
        for session in sessions:
            await session.__aenter__()
        try:
            return await _drive(sessions, plans)
        finally:
            for session in sessions:
                await session.__aexit__(None, None, None)

    try:
        outcome = asyncio.run(body())
    finally:
        service.reader.close()
    latencies = outcome["latencies"]
    figures.put("load (8 in-memory sessions, one app): p95 ms", round(_percentile(latencies, 0.95) * 1000, 1))
    figures.put("load (8 in-memory sessions, one app): cross-talk mismatches", len(outcome["mismatches"]))
    assert len(latencies) == CLIENTS * SESSION_CALLS
    assert not outcome["errors"], outcome["errors"][:5]
    assert not outcome["mismatches"], outcome["mismatches"][:5]
    _check_top_documents(plans, outcome)
