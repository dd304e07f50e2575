"""Sixteen callers of mixed clearance at once against one team server: nothing crosses levels.

One server at ceiling restricted over the sample corpus (hash embedder); six public, five
internal and five restricted callers, each with its own token and its own open
streamable-HTTP client, all in one event loop, each making the same bounded sequence of
searches and reads (callers of every level in step, so a request answered at a
neighbour's level would show). Expected answers are computed first, one at a time, by the
stdio-style service at each level over the same index. Every concurrent answer must equal
its caller's level's expected answer and carry nothing above that level, on the wire as in
the parsed answer; the audit trail must name each call's own caller and level.

Not a timed test: how long the calls take is for benchmarks/http_callers.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from governed_evidence.config import Classification
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.store.connection import connect
from tests.hardening import figures
from tests.hardening.probes import SAMPLE_CORPUS, canary_terms, eval_questions, strings_in
from tests.hardening.team import LEVELS, Bodies, answer, http_client, stdio_app, team_server
from tests.hardening.test_leakage import MODES, _classifications
from tests.helpers import HashEmbedder
from tests.serving.server import Running

PUBLIC, INTERNAL, RESTRICTED = Classification.PUBLIC, Classification.INTERNAL, Classification.RESTRICTED
CALLERS = 16
#: Calls each caller makes (searches and reads, interleaved).
CALLS_EACH = 20
#: How long the concurrent phase may take at most (it takes seconds).
DEADLINE_S = 180

Op = tuple[str, dict[str, Any]]


@dataclass
class Index:
    db: Path
    embedder: HashEmbedder
    #: Citation ids stored at each level.
    ids: dict[Classification, list[str]]
    #: Document titles at each level.
    titles: dict[Classification, list[str]]
    paths: dict[Classification, list[str]]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    embedder = HashEmbedder()
    db = tmp_path_factory.mktemp("http-concurrency") / "full.sqlite"
    ingest_corpus(SAMPLE_CORPUS, db, embedder, ceiling=RESTRICTED, progress=None)
    conn = connect(db, readonly=True)
    try:
        ids: dict[Classification, list[str]] = {level: [] for level in LEVELS}
        for cid, level in conn.execute("SELECT citation_id, classification FROM passages ORDER BY id"):
            ids[Classification(level)].append(str(cid))
        titles: dict[Classification, list[str]] = {level: [] for level in LEVELS}
        paths: dict[Classification, list[str]] = {level: [] for level in LEVELS}
        for path, title, level in conn.execute("SELECT path, title, classification FROM documents ORDER BY path"):
            titles[Classification(level)].append(str(title))
            paths[Classification(level)].append(str(path))
    finally:
        conn.close()
    assert all(ids[level] for level in LEVELS)
    yield Index(db, embedder, ids, titles, paths)


def _ops(index: Index) -> list[Op]:
    """Searches (titles of every level, canary terms, denied questions) and reads (ids of
    every level), alternating; modes, confidence levels and contexts in rotation."""
    queries = [t for level in LEVELS for t in index.titles[level][:4]]
    queries += canary_terms()[::6][:6] + eval_questions("denied")[:4]
    searches: list[Op] = [
        (
            "search_documents",
            {"query": q, "limit": 10, "mode": MODES[i % 3], "confidence": ("normal", "strict")[(i // 3) % 2]},
        )
        for i, q in enumerate(queries)
    ]
    cids = [cid for level in LEVELS for cid in index.ids[level][::9]]
    reads: list[Op] = [("read_passage", {"citation_id": c, "context": i % 3}) for i, c in enumerate(cids)]
    ops: list[Op] = []
    for i in range(max(len(searches), len(reads))):
        ops += [searches[i % len(searches)], reads[i % len(reads)]]
    return ops


def _callers() -> dict[str, Classification]:
    """Sixteen callers: 6 public, 5 internal, 5 restricted, their levels in rotation."""
    return {f"caller-{i:02d}": LEVELS[i % len(LEVELS)] for i in range(CALLERS)}


def _sequence(ops: list[Op], i: int) -> list[Op]:
    """Caller ``i``'s calls: callers 3g, 3g+1 and 3g+2 (one of each level) make the same ones."""
    start = (i // len(LEVELS)) * 7
    return [ops[(start + j) % len(ops)] for j in range(CALLS_EACH)]


def _key(op: Op) -> str:
    return json.dumps(op, sort_keys=True)


async def _expected(index: Index, ops: list[Op]) -> dict[tuple[Classification, str], dict[str, Any]]:
    """Each level's answer to each call, one call at a time, from the stdio-style service."""
    out: dict[tuple[Classification, str], dict[str, Any]] = {}
    for level in LEVELS:
        with stdio_app(index.db, level, index.embedder, gate=True) as app:
            async with Client(app) as client:
                for tool, args in ops:
                    result = await client.call_tool(tool, args, raise_on_error=False)
                    out[(level, _key((tool, args)))] = answer(result)
    return out


@dataclass
class Concurrent:
    answers: dict[str, list[tuple[Op, dict[str, Any]]]] = field(default_factory=dict)
    bodies: dict[str, Bodies] = field(default_factory=dict)
    in_flight: int = 0
    most_in_flight: int = 0


async def _concurrently(running: Running, named: dict[str, str], ops: list[Op]) -> Concurrent:
    run = Concurrent()
    names = sorted(named)
    async with AsyncExitStack() as stack:
        clients = {}
        for name in names:
            run.bodies[name] = Bodies()
            clients[name] = await stack.enter_async_context(http_client(running, named[name], run.bodies[name]))
        start = asyncio.Event()

        async def caller(i: int, name: str) -> None:
            got: list[tuple[Op, dict[str, Any]]] = []
            await start.wait()
            for tool, args in _sequence(ops, i):
                run.in_flight += 1
                run.most_in_flight = max(run.most_in_flight, run.in_flight)
                try:
                    result = await clients[name].call_tool(tool, args, raise_on_error=False)
                finally:
                    run.in_flight -= 1
                got.append(((tool, args), answer(result)))
            run.answers[name] = got

        tasks = [asyncio.create_task(caller(i, name)) for i, name in enumerate(names)]
        start.set()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=DEADLINE_S)
    return run


def _above(index: Index, level: Classification) -> list[str]:
    """Ids and paths stored above ``level``: none may appear in a body sent to its callers."""
    return [s for lvl in LEVELS if lvl > level for s in index.ids[lvl] + index.paths[lvl]]


def test_sixteen_callers_of_mixed_clearance_at_once(index: Index, tmp_path: Path) -> None:
    ops = _ops(index)
    callers = _callers()
    used = list({_key(op): op for i in range(CALLERS) for op in _sequence(ops, i)}.values())
    expected = asyncio.run(_expected(index, used))

    with team_server(index.db, index.embedder, tmp_path, gate=True, callers=callers) as team:
        run = asyncio.run(_concurrently(team.running, team.named, ops))
        audit = team.audit_lines()

    stored = {cid for level in LEVELS for cid in index.ids[level]}
    visible = {level: {c for lvl in LEVELS if lvl <= level for c in index.ids[lvl]} for level in LEVELS}
    above_level: list[str] = []
    differing: list[str] = []
    calls = 0
    for name, answers in run.answers.items():
        level = callers[name]
        for (tool, args), got in answers:
            calls += 1
            label = f"{name} ({level.label}) {tool} {json.dumps(args)[:100]}"
            classes = [c for c in _classifications(got) if Classification[c.upper()] > level]
            cids = {s for s in strings_in(got) if s in stored}
            if classes or not cids <= visible[level]:
                above_level.append(f"{label}: {classes[:3]} {sorted(cids - visible[level])[:3]}")
            if got != expected[(level, _key((tool, args)))]:
                differing.append(label)
        needles = _above(index, level)
        for text in run.bodies[name].texts:
            found = [n for n in needles if n in text]
            if found:
                above_level.append(f"{name} ({level.label}) on the wire: {found[:3]}")
    audit_problems = [
        f"{line['caller']} answered at {line['clearance_applied']}, returned {line.get('returned')}"
        for line in audit
        if line["clearance_applied"] != callers[line["caller"]].label
        or not set(line.get("returned") or []) <= visible[callers[line["caller"]]]
    ]

    figures.put("http concurrency: callers at once", CALLERS)
    figures.add("http concurrency: calls", calls)
    figures.put("http concurrency: most calls in flight", run.most_in_flight)
    figures.add("http concurrency: answers above the caller's level", len(above_level) + len(audit_problems))
    figures.add("http concurrency: answers differing from the caller's level", len(differing))

    assert not above_level, f"{len(above_level)} answers carry passages above the caller's level: {above_level[:3]}"
    assert not audit_problems, audit_problems[:3]
    assert not differing, f"{len(differing)} of {calls} answers differ from their level's: {differing[:3]}"
    assert calls == CALLERS * CALLS_EACH and len(audit) == calls
    assert run.most_in_flight >= CALLERS // 2, "the callers' requests overlapped"
    # The levels are told apart: the same calls give different answers at different levels.
    for level in (PUBLIC, INTERNAL):
        assert any(expected[(level, k)] != expected[(RESTRICTED, k)] for k in map(_key, used))
