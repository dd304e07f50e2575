"""Latency of mixed-clearance callers at once over real HTTP: the team server under 16 callers.

``governed-evidence serve --transport http --auth tokens`` at ceiling restricted runs in its
own process over the sample corpus (built with the real default model unless ``--db`` names
an index). Sixteen callers (6 public, 5 internal, 5 restricted by default), each with its
own token and its own connection, start together and each make ``--calls`` searches and
reads, one after another (a closed loop: 16 requests in flight at most). Each call is timed
from sending its POST to having read the whole answer. Before that, one caller of each level
makes the same calls one at a time (``sequential_ms``: the latency without queueing).

The callers post the JSON-RPC requests themselves (the server is stateless: one call, one
POST) rather than through an MCP client, so the figures are the server's and the HTTP
path's, not the client library's (``--client fastmcp`` times fastmcp's client instead,
which also checks each answer against the tool's output schema).

    python -m benchmarks.http_callers            # prints one JSON object on its last line
    python -m benchmarks.http_callers --db data/demo.sqlite --calls 50

Every answer is also checked: none may hold a passage above its caller's level
(``above_level_answers``, which must be 0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx

from benchmarks.stats import latency, load_average, machine
from governed_evidence.access import tokens
from governed_evidence.config import Classification
from governed_evidence.store.connection import connect

__all__ = ["main", "run_http_callers"]

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_CORPUS = ROOT / "data" / "sample_corpus"
LEVELS = tuple(Classification)
MODES = ("hybrid", "keyword", "semantic")
#: How long the server may take to answer /health after it is started (the model loads first).
START_TIMEOUT_S = 120.0
#: How long the measured calls may take in all.
RUN_TIMEOUT_S = 600.0

Op = tuple[str, dict[str, Any]]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _build_index(db: Path) -> dict[str, Any]:
    from governed_evidence.embeddings.minilm import MiniLMEmbedder
    from governed_evidence.ingest.pipeline import ingest_corpus

    started = time.perf_counter()
    report = ingest_corpus(SAMPLE_CORPUS, db, MiniLMEmbedder(), ceiling=Classification.RESTRICTED, progress=None)
    return {"built_s": round(time.perf_counter() - started, 1), "passages": report.passages}


def _catalogue(db: Path) -> tuple[list[str], dict[Classification, list[str]]]:
    """Queries (document titles and section headings of every level) and the ids at each level."""
    conn = connect(db, readonly=True)
    try:
        titles = [str(t) for (t,) in conn.execute("SELECT title FROM documents ORDER BY path")]
        headings = [str(h) for (h,) in conn.execute("SELECT DISTINCT heading FROM passages ORDER BY id") if h]
        ids: dict[Classification, list[str]] = {level: [] for level in LEVELS}
        for cid, level in conn.execute("SELECT citation_id, classification FROM passages ORDER BY id"):
            ids[Classification(level)].append(str(cid))
    finally:
        conn.close()
    return titles + headings[::5], ids


def _ops(queries: list[str], ids: dict[Classification, list[str]]) -> list[Op]:
    """Searches and reads alternating; modes, confidence levels and contexts in rotation."""
    cids = [cid for level in LEVELS for cid in ids[level][::3]]
    ops: list[Op] = []
    for i in range(max(len(queries), len(cids))):
        ops.append(
            (
                "search_documents",
                {
                    "query": queries[i % len(queries)],
                    "limit": 8,
                    "mode": MODES[i % 3],
                    "confidence": ("strict", "normal")[(i // 3) % 2],
                },
            )
        )
        ops.append(("read_passage", {"citation_id": cids[i % len(cids)], "context": i % 3}))
    return ops


def _classifications(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [v for k, v in value.items() if k == "classification" and isinstance(v, str)] + [
            c for k, v in value.items() if k != "classification" for c in _classifications(v)
        ]
    if isinstance(value, list):
        return [c for v in value for c in _classifications(v)]
    return []


def _above(structured: Any, level: Classification) -> bool:
    return any(Classification[c.upper()] > level for c in _classifications(structured))


def _mix(callers: int) -> list[Classification]:
    return [LEVELS[i % len(LEVELS)] for i in range(callers)]


def _start_server(db: Path, tokens_file: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "GOVERNED_EVIDENCE_LOG_LEVEL": "WARNING",
        "ORT_DISABLE_TELEMETRY": "1",
    }
    env.pop("GOVERNED_EVIDENCE_AUDIT_LOG", None)
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "governed_evidence",
                "serve",
                "--transport",
                "http",
                "--auth",
                "tokens",
                "--tokens-file",
                str(tokens_file),
                "--db",
                str(db),
                "--ceiling",
                "restricted",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _wait_healthy(base: str, proc: subprocess.Popen[bytes]) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < START_TIMEOUT_S:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode}) before answering /health")
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return time.perf_counter() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the server did not answer /health within {START_TIMEOUT_S:.0f} s")


#: One caller's call: (tool, arguments) -> (structured content or None, is_error).
CallFn = Callable[[str, dict[str, Any]], Awaitable[tuple[Any, bool]]]


async def _raw_caller(stack: AsyncExitStack, url: str, token: str) -> CallFn:
    client = await stack.enter_async_context(
        httpx.AsyncClient(
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
            },
            timeout=60,
        )
    )
    counter = iter(range(1, 1 << 30))

    async def call(tool: str, args: dict[str, Any]) -> tuple[Any, bool]:
        body = {
            "jsonrpc": "2.0",
            "id": next(counter),
            "method": "tools/call",
            "params": {"name": tool, "arguments": args},
        }
        response = await client.post(url, json=body)
        response.raise_for_status()
        result = response.json()["result"]
        return result.get("structuredContent"), bool(result.get("isError"))

    return call


async def _fastmcp_caller(stack: AsyncExitStack, url: str, token: str) -> CallFn:
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    client = await stack.enter_async_context(
        Client(StreamableHttpTransport(url, headers={"Authorization": f"Bearer {token}"}), timeout=60)
    )

    async def call(tool: str, args: dict[str, Any]) -> tuple[Any, bool]:
        result = await client.call_tool(tool, args, raise_on_error=False)
        return result.structured_content, bool(result.is_error)

    return call


async def _run_callers(
    url: str, issued: list[tuple[Classification, str]], ops: list[Op], calls: int, warmup: int, client: str
) -> dict[str, Any]:
    samples: dict[str, list[float]] = {}
    above = 0
    errors = 0
    make = _raw_caller if client == "raw" else _fastmcp_caller
    async with AsyncExitStack() as stack:
        callers = [(level, await make(stack, url, token)) for level, token in issued]
        # Not measured: every caller's first calls (connections opened, code paths warmed).
        for i, (_, call) in enumerate(callers):
            for j in range(warmup):
                await call(*ops[(i * 7 + j) % len(ops)])
        # One call at a time, one caller of each level in turn: the latency without queueing.
        sequential: list[float] = []
        for i, (level, call) in enumerate(callers[: len(LEVELS)]):
            for j in range(calls):
                t0 = time.perf_counter()
                structured, _ = await call(*ops[(i * 7 + warmup + j) % len(ops)])
                sequential.append((time.perf_counter() - t0) * 1000)
                above += _above(structured, level)
        start = asyncio.Event()

        async def run(i: int, level: Classification, call: CallFn) -> None:
            nonlocal above, errors
            await start.wait()
            for j in range(calls):
                tool, args = ops[(i * 7 + warmup + j) % len(ops)]
                t0 = time.perf_counter()
                structured, is_error = await call(tool, args)
                ms = (time.perf_counter() - t0) * 1000
                samples.setdefault(tool, []).append(ms)
                samples.setdefault(level.label, []).append(ms)
                samples.setdefault("all", []).append(ms)
                errors += is_error
                above += _above(structured, level)

        tasks = [asyncio.create_task(run(i, level, call)) for i, (level, call) in enumerate(callers)]
        wall = time.perf_counter()
        start.set()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=RUN_TIMEOUT_S)
        wall = time.perf_counter() - wall
    return {
        "sequential_ms": latency(sequential),
        "calls": len(samples["all"]),
        "wall_s": round(wall, 2),
        "calls_per_s": round(len(samples["all"]) / wall, 1),
        "latency_ms": latency(samples["all"]),
        "by_tool_ms": {t: latency(samples[t]) for t in ("search_documents", "read_passage") if t in samples},
        "by_level_ms": {lvl.label: latency(samples[lvl.label]) for lvl in LEVELS if lvl.label in samples},
        # read_passage of an id above the caller's level answers "not found" (an error result).
        "error_answers": errors,
        "above_level_answers": above,
    }


def run_http_callers(
    db: Path | None = None, *, callers: int = 16, calls: int = 20, warmup: int = 3, client: str = "raw"
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "client": client,
    }
    with tempfile.TemporaryDirectory(prefix="bench-http-") as tmp:
        work = Path(tmp)
        if db is None:
            db = work / "sample.sqlite"
            result["index"] = {"corpus": "data/sample_corpus", "model": "default", **_build_index(db)}
        else:
            result["index"] = {"db": str(db)}
        queries, ids = _catalogue(db)
        ops = _ops(queries, ids)
        tokens_file = work / "tokens.json"
        mix = _mix(callers)
        issued = [(level, tokens.create(tokens_file, f"bench-{i:02d}", level)) for i, level in enumerate(mix)]
        result["callers"] = {"total": callers, **{lvl.label: mix.count(lvl) for lvl in LEVELS}}
        result["calls_per_caller"] = calls
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        log = work / "server.log"
        proc = _start_server(db, tokens_file, port, log)
        try:
            result["server_ready_s"] = round(_wait_healthy(base, proc), 2)
            result["load_average_before"] = load_average()
            result.update(asyncio.run(_run_callers(f"{base}/mcp", issued, ops, calls, warmup, client)))
            result["load_average_after"] = load_average()
        except BaseException:
            sys.stderr.write(log.read_text(encoding="utf-8", errors="replace")[-4000:])
            raise
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.http_callers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", help="an index to serve (default: the sample corpus, built now with the real model)")
    parser.add_argument("--callers", type=int, default=16, help="callers at once, levels in rotation (default 16)")
    parser.add_argument("--calls", type=int, default=20, help="measured calls per caller (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured calls per caller first (default 3)")
    parser.add_argument("--client", choices=["raw", "fastmcp"], default="raw", help="how callers post (default raw)")
    ns = parser.parse_args(argv)
    if not 1 <= ns.callers <= 256 or not 1 <= ns.calls <= 10_000 or not 0 <= ns.warmup <= 100:
        parser.error("--callers 1-256, --calls 1-10000, --warmup 0-100")
    result = run_http_callers(
        Path(ns.db) if ns.db else None, callers=ns.callers, calls=ns.calls, warmup=ns.warmup, client=ns.client
    )
    print(json.dumps(result))
    if result["above_level_answers"]:
        raise SystemExit(f"{result['above_level_answers']} answers held passages above their caller's level")


if __name__ == "__main__":
    main()
