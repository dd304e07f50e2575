"""Start-up: from process start to the first answered search_documents over stdio."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.stats import latency

__all__ = ["rpc_request", "run_startup"]


def rpc_request(proc: subprocess.Popen[str], message: dict[str, Any]) -> dict[str, Any] | None:
    """Send one JSON-RPC message on the server's stdin; for a request, read until its reply."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()
    if "id" not in message:
        return None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("server closed stdout early")
        reply: dict[str, Any] = json.loads(line)
        if reply.get("id") == message["id"]:
            return reply


def _peak_rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def _once(db: Path, query: str) -> dict[str, Any]:
    env = {**os.environ, "GOVERNED_EVIDENCE_CEILING": "internal", "GOVERNED_EVIDENCE_LOG_LEVEL": "WARNING"}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "governed_evidence", "serve", "--db", str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        rpc_request(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "0"},
                },
            },
        )
        initialized = time.perf_counter()
        rpc_request(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        reply = rpc_request(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "search_documents", "arguments": {"query": query}},
            },
        )
        answered = time.perf_counter()
        if reply is None or "result" not in reply or reply["result"].get("isError"):
            raise RuntimeError(f"search_documents failed: {reply}")
        rss = _peak_rss_mb(proc.pid)
        t0 = time.perf_counter()
        rpc_request(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "search_documents", "arguments": {"query": query + " risk"}},
            },
        )
        second = time.perf_counter() - t0
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return {
        "initialize_ms": (initialized - started) * 1000,
        "first_answer_ms": (answered - started) * 1000,
        "second_search_ms": second * 1000,
        "peak_rss_mb": rss,
    }


def run_startup(db: Path, runs: int = 5) -> dict[str, Any]:
    samples = [_once(db, "vitamin D deficiency and fracture risk") for _ in range(runs)]
    return {
        "runs": runs,
        "db_passages_note": db.name,
        "initialize_ms": latency([s["initialize_ms"] for s in samples]),
        "first_answer_ms": latency([s["first_answer_ms"] for s in samples]),
        "second_search_ms": latency([s["second_search_ms"] for s in samples]),
        "peak_rss_mb": max((s["peak_rss_mb"] or 0.0) for s in samples),
    }
