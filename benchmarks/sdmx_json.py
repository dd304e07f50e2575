"""Hostile SDMX-JSON answers: the peak memory of one, and another caller's searches during four.

A configured provider that answers 16 MiB of JSON built to be expensive is the case measured
(the security review's answer, ``{"data": {...}, "x": [{}, {}, ...]}``, and variants that put
the same bulk where SDMX-JSON does allow members, or send more observations than are read),
for data messages (``get_data``), structure messages (``structure-*``, answered to
``describe_dataset``'s structure request) and catalogues (``catalogue-*``, ``search_datasets``):

``memory``
    Each variant in a fresh process: a real ``SdmxService.get_data`` call against a provider
    on 127.0.0.1 that answers it (or the describe_dataset or search_datasets call its name
    says), peak resident memory above the baseline taken just before
    the call (the body already held by the local provider; ``/proc/self/clear_refs`` resets
    the peak), the server process's and the parsing child's added together. The bound is 3x
    the answer's size, for bulk; the ``-kept`` variants are messages whose content is kept
    (just under ``MAX_CODES`` codes, or ``MAX_DATAFLOWS`` dataflows) until ``MAX_KEPT_TEXT``
    refuses it, whose cost is what those limits allow, reported apart (``worst_kept_x_body``).
``latency``
    The team server (``serve --transport http --auth tokens``, its own process, over the
    sample corpus built with the real model, or ``--db``) with a provider on 127.0.0.1 that
    answers every request with the variant. One caller's ``search_documents`` latency
    alone, then while four other callers each make the variant's statistics call (a new
    key or dataset each time) one after another. The bound is 200 ms at p95.

    python -m benchmarks.sdmx_json memory
    python -m benchmarks.sdmx_json memory [--variant structure-codes ...]
    python -m benchmarks.sdmx_json latency [--db data/demo.sqlite] [--variant junk-in-meta]

Each prints one JSON object on its last line.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import http.server
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.http_callers import _build_index, _catalogue, _free_port, _start_server, _wait_healthy
from benchmarks.stats import latency, load_average, machine

__all__ = ["VARIANTS", "hostile_body", "main"]

SIZE = 16 * 1024 * 1024
DATASET = "BENCH,DF_HOSTILE,1.0"
#: name -> (prefix, repeated unit, suffix): 16 MiB of the unit between the two.
VARIANTS: dict[str, tuple[bytes, bytes, bytes]] = {
    # The review's answer: a member no SDMX-JSON message defines, holding millions of objects.
    "undefined-member": (b'{"data":{"dataSets":[{"series":{}}]},"x":[', b"{},", b"{}]}"),
    # The same bulk where members are allowed but not read: passed over unbuilt.
    "junk-in-meta": (b'{"meta":{"x":[', b"{},", b'{}]},"data":{"dataSets":[{"series":{}}]}}'),
    "junk-in-annotations": (b'{"data":{"dataSets":[{"annotations":[', b"{},", b'{}],"series":{}}]}}'),
    # Bulk in the part that is built: refused at the outline's value budget.
    "junk-in-structure": (b'{"data":{"structures":[{"x":[', b"{},", b'{}]}],"dataSets":[{"series":{}}]}}'),
    # Observations, each read and counted: refused past the row limit.
    "observations": (b'{"data":{"dataSets":[{"observations":{', b'"0":[1.5],', b'"0":[1.5]}}]}}'),
    # Structure messages, answered to describe_dataset's structure request (sdmx/jsonstructure.py).
    "structure-undefined-member": (b'{"data":{"dataflows":[]},"x":[', b"{},", b"{}]}"),
    "structure-junk-in-meta": (b'{"meta":{"x":[', b"{},", b'{}]},"data":{"dataflows":[]}}'),
    # Bulk in a group no reader asks for (value lists), passed over unbuilt.
    "structure-junk-in-valuelists": (b'{"data":{"dataflows":[],"valuelists":[', b"{},", b"{}]}}"),
    # Bulk inside an artefact that is built: refused at its value budget.
    "structure-junk-in-dsd": (b'{"data":{"dataStructures":[{"id":"DSD","x":[', b"{},", b"{}]}]}}"),
    # Codes, each built and kept: refused past MAX_CODES.
    "structure-codes": (
        b'{"data":{"codelists":[{"id":"CL","codes":[',
        b'{"id":"C","names":{"en":"Code"}},',
        b"{}]}]}}",
    ),
    # Distinct codes, each built and kept until MAX_CODES refuses the message.
    "structure-distinct-codes": (
        b'{"data":{"codelists":[{"id":"CL","codes":[',
        b'{"id":"C%07d","names":{"en":"Code %07d"}},',
        b"{}]}]}}",
    ),
    # Fewer, longer codes, all kept (97,541, just under MAX_CODES): the parsed message comes back whole.
    "structure-codes-kept": (
        b'{"data":{"codelists":[{"id":"CL","codes":[',
        b'{"id":"C%07d","names":{"en":"Code number %07d, kept, with a name long enough that fewer codes fill '
        b'the message: as many of them as the code limit lets in, no more"}},',
        b"{}]}]}}",
    ),
    # The same codes, each name with one character outside Latin-1 (a euro sign) or outside the
    # Basic Multilingual Plane: held at 2 or 4 bytes a character, refused past MAX_KEPT_TEXT.
    "structure-codes-kept-wide": (
        b'{"data":{"codelists":[{"id":"CL","codes":[',
        b'{"id":"C%07d","names":{"en":"Code number %07d, kept, with a name long enough that fewer codes fill '
        b'the message: as many of them as the code limit lets in, no \xe2\x82\xac"}},',
        b"{}]}]}}",
    ),
    "structure-codes-kept-astral": (
        b'{"data":{"codelists":[{"id":"CL","codes":[',
        b'{"id":"C%07d","names":{"en":"Code number %07d, kept, with a name long enough that fewer codes fill '
        b'the message: as many of them as the code limit lets in, no \xf0\x9d\x94\xb8"}},',
        b"{}]}]}}",
    ),
    # The most a structure keeps: as many codes (97,541) with wide names as just fit
    # MAX_KEPT_TEXT, the rest of each code in a member the reader passes over unbuilt.
    "structure-codes-kept-wide-at-budget": (
        b'{"data":{"codelists":[{"id":"CL","codes":[',
        b'{"id":"C%07d","names":{"en":"Code %07d, kept: a wide name, under budget\xe2\x82\xac"},'
        b'"description":"passed over by the reader and not kept, filling the code to 172 bytes.."},',
        b"{}]}]}}",
    ),
    # A catalogue answer (search_datasets): dataflows, each built and kept, refused past MAX_DATAFLOWS.
    "catalogue-dataflows": (
        b'{"data":{"dataflows":[',
        b'{"id":"DF","agencyID":"A","version":"1.0","name":"N"},',
        b"{}]}}",
    ),
    # Fewer dataflows with long descriptions, all kept (just under MAX_DATAFLOWS).
    "catalogue-dataflows-kept": (
        b'{"data":{"dataflows":[',
        b'{"id":"DF%07d","agencyID":"A","version":"1.0","name":"Dataflow %07d","description":"'
        + b"words of a long description " * 9
        + b'"},',
        b"{}]}}",
    ),
    # The same dataflows, their descriptions made of distinct words, each held again by the
    # search index: refused past MAX_KEPT_TEXT.
    "catalogue-distinct-words-kept": (
        b'{"data":{"dataflows":[',
        b'{"id":"DF%07d","agencyID":"A","version":"1.0","name":"Dataflow %07d","description":"'
        + b" ".join(b"%s%%07d" % bytes([letter]) for letter in b"abcdefghijklmnopqrstuvwxyzAB")
        + b'"},',
        b"{}]}}",
    ),
    "catalogue-junk-in-meta": (b'{"meta":{"x":[', b"{},", b'{}]},"data":{"dataflows":[]}}'),
}


def call_of(variant: str) -> str:
    """The service call a variant is answered to: get_data, describe_dataset or search_datasets."""
    if variant.startswith("structure-"):
        return "describe_dataset"
    if variant.startswith("catalogue-"):
        return "search_datasets"
    return "get_data"


def hostile_body(variant: str, size: int = SIZE) -> bytes:
    prefix, unit, suffix = VARIANTS[variant]
    holes = unit.count(b"%")  # numbered units (distinct codes), all of one length below 10 million
    count = (size - len(prefix) - len(suffix)) // len(unit % ((0,) * holes) if holes else unit)
    if holes:
        return prefix + b"".join(unit % ((i,) * holes) for i in range(count)) + suffix
    return prefix + unit * count + suffix


@contextmanager
def _provider(body: bytes) -> Iterator[str]:
    """A provider on 127.0.0.1 answering every request with ``body`` as application/json."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _providers_file(path: Path, base: str) -> Path:
    path.write_text(f'[providers.BENCH]\nbase_url = "{base}"\navailableconstraint = false\n', encoding="utf-8")
    return path


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _measure_one(variant: str) -> dict[str, Any]:
    """One get_data call of ``variant`` in this process: peak RSS above the baseline before it."""
    from governed_evidence.config import Settings
    from governed_evidence.errors import GovernedEvidenceError
    from governed_evidence.sdmx.service import SdmxService

    body = hostile_body(variant)
    with tempfile.TemporaryDirectory(prefix="bench-sdmx-json-") as tmp, _provider(body) as base:
        work = Path(tmp)
        settings = Settings(
            db=work / "no-index.sqlite",
            sdmx_cache_path=work / "cache.sqlite",
            sdmx_providers=_providers_file(work / "providers.toml", base),
        )
        service = SdmxService.from_settings(settings)
        gc.collect()
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        baseline = _status_kb("VmRSS")
        started = time.perf_counter()
        call = call_of(variant)
        try:
            if call == "get_data":
                outcome = f"answered, {service.get_data(DATASET, 'all', provider='BENCH', max_rows=10).total_rows} rows"
            elif call == "describe_dataset":
                outcome = f"answered, {len(service.describe_dataset(DATASET, provider='BENCH').dimensions)} dimensions"
            else:
                outcome = f"answered, {len(service.search_datasets('hostile', provider='BENCH').results)} datasets"
        except GovernedEvidenceError as exc:
            outcome = f"refused: {type(exc).__name__}: {exc}"
        seconds = time.perf_counter() - started
        peak = _status_kb("VmHWM")
        # The child that parsed it (sdmx/isolated.py) started as a copy of this process: its
        # peak above this baseline is what it added, and it ran while this process held the body.
        child_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        service.close()
    above = (peak - baseline) * 1024
    child_above = max(0, child_peak - baseline) * 1024
    total = above + child_above
    return {
        "variant": variant,
        "call": call,
        "body_bytes": len(body),
        "outcome": outcome,
        "seconds": round(seconds, 2),
        "baseline_mb": round(baseline / 1024, 1),
        "server_peak_above_baseline_mb": round(above / 1024 / 1024, 1),
        "parser_child_peak_above_baseline_mb": round(child_above / 1024 / 1024, 1),
        "peak_above_baseline_mb": round(total / 1024 / 1024, 1),
        "peak_above_baseline_x_body": round(total / len(body), 2),
    }


def run_memory(variants: list[str] | None = None) -> dict[str, Any]:
    results = []
    for variant in variants or list(VARIANTS):
        # A fresh process each: a peak is a process's, and one variant's must not hide another's.
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.sdmx_json", "_measure", variant],
            check=True,
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    # The bound is for bulk (refused, or passed over); what a "-kept" variant costs is what the
    # server keeps of a message within MAX_CODES, MAX_DATAFLOWS and MAX_KEPT_TEXT, reported beside it.
    bulk = [r["peak_above_baseline_x_body"] for r in results if "-kept" not in r["variant"]]
    kept = [r["peak_above_baseline_x_body"] for r in results if "-kept" in r["variant"]]
    return {
        "machine": machine(),
        "bound_x_body": 3.0,
        "worst_x_body": max(bulk, default=None),
        "worst_kept_x_body": max(kept, default=None),
        "variants": results,
    }


async def _caller(stack: Any, url: str, token: str) -> Any:
    """One caller posting JSON-RPC tool calls on its own connection (a read of a hostile answer may be slow)."""
    import httpx

    client = await stack.enter_async_context(
        httpx.AsyncClient(
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
            },
            timeout=600,
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
        if result.get("isError"):
            content = result.get("content") or [{}]
            return str(content[0].get("text", ""))[:120], True
        return result.get("structuredContent"), False

    return call


def _stats_call(variant: str, i: int, n: int) -> tuple[str, dict[str, Any]]:
    """Caller i's n-th statistics call: a new key or dataset each time (a read answer is cached)."""
    call = call_of(variant)
    if call == "get_data":
        return call, {"dataset": DATASET, "key": f"K{i}x{n}", "provider": "BENCH"}
    if call == "describe_dataset":
        return call, {"dataset": f"BENCH,DF_HOSTILE{i}X{n},1.0", "provider": "BENCH"}
    return call, {"query": f"hostile {i} {n}", "provider": "BENCH"}


async def _latency(
    url: str, search_token: str, stats_tokens: list[str], queries: list[str], calls: int, variant: str
) -> Any:
    from contextlib import AsyncExitStack

    async with AsyncExitStack() as stack:
        search = await _caller(stack, url, search_token)
        stats = [await _caller(stack, url, token) for token in stats_tokens]

        async def searches(n: int, offset: int) -> list[float]:
            samples = []
            for j in range(n):
                t0 = time.perf_counter()
                _, is_error = await search("search_documents", {"query": queries[(offset + j) % len(queries)]})
                samples.append((time.perf_counter() - t0) * 1000)
                if is_error:
                    raise RuntimeError("a search failed")
            return samples

        await searches(5, 0)  # warm-up, not measured
        alone = await searches(calls, 5)
        stop = asyncio.Event()
        stats_ms: list[float] = []
        outcomes: dict[str, int] = {}

        async def statistics(call: Any, i: int) -> None:
            n = 0
            while not stop.is_set():
                t0 = time.perf_counter()
                answer, is_error = await call(*_stats_call(variant, i, n))
                stats_ms.append((time.perf_counter() - t0) * 1000)
                kind = f"error: {answer}" if is_error else "answered"
                outcomes[kind] = outcomes.get(kind, 0) + 1
                n += 1

        tasks = [asyncio.create_task(statistics(call, i)) for i, call in enumerate(stats)]
        await asyncio.sleep(1.0)  # the four calls are under way
        during = await searches(calls, 5 + calls)
        stop.set()
        await asyncio.gather(*tasks)
    return alone, during, stats_ms, outcomes


def run_latency(db: Path | None, variant: str, calls: int) -> dict[str, Any]:
    from governed_evidence.access import tokens
    from governed_evidence.config import Classification

    result: dict[str, Any] = {"machine": machine(), "variant": variant, "call": call_of(variant), "bound_p95_ms": 200}
    body = hostile_body(variant)
    with tempfile.TemporaryDirectory(prefix="bench-sdmx-json-") as tmp, _provider(body) as base:
        work = Path(tmp)
        if db is None or not db.exists():
            db = db or work / "sample.sqlite"
            result["index"] = {"corpus": "data/sample_corpus", "model": "default", **_build_index(db)}
        queries, _ = _catalogue(db)
        tokens_file = work / "tokens.json"
        search_token = tokens.create(tokens_file, "bench-search", Classification.INTERNAL)
        stats_tokens = [tokens.create(tokens_file, f"bench-stats-{i}", Classification.PUBLIC) for i in range(4)]
        os.environ["GOVERNED_EVIDENCE_SDMX_PROVIDERS"] = str(_providers_file(work / "providers.toml", base))
        os.environ["GOVERNED_EVIDENCE_SDMX_CACHE_PATH"] = str(work / "cache.sqlite")
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        log = work / "server.log"
        proc = _start_server(db, tokens_file, port, log)
        try:
            result["server_ready_s"] = round(_wait_healthy(url, proc), 2)
            result["load_average_before"] = load_average()
            alone, during, stats_ms, outcomes = asyncio.run(
                _latency(f"{url}/mcp", search_token, stats_tokens, queries, calls, variant)
            )
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
    result["search_alone_ms"] = latency(alone)
    result["search_during_four_stats_calls_ms"] = latency(during)
    result["stats_calls"] = {"n": len(stats_ms), "outcomes": outcomes, "ms": latency(stats_ms) if stats_ms else {}}
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sdmx_json", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    mem = sub.add_parser("memory", help="peak memory of one call per variant (each in a fresh process)")
    mem.add_argument("--variant", action="append", choices=sorted(VARIANTS), help="only these (default: every one)")
    lat = sub.add_parser("latency", help="a caller's search latency during four statistics calls")
    lat.add_argument(
        "--db", type=Path, help="an index to serve (default: the sample corpus, built now; built here if absent)"
    )
    lat.add_argument("--variant", choices=sorted(VARIANTS), default="junk-in-meta")
    lat.add_argument("--calls", type=int, default=40, help="measured searches, alone and during (default 40)")
    one = sub.add_parser("_measure")
    one.add_argument("variant", choices=sorted(VARIANTS))
    args = parser.parse_args(argv)
    if args.command == "memory":
        result = run_memory(args.variant)
    elif args.command == "latency":
        result = run_latency(args.db, args.variant, args.calls)
    else:
        result = _measure_one(args.variant)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
