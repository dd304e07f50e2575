"""Leakage must be zero per caller over HTTP: three clearances against one team server at once.

One server at ceiling restricted over the sample corpus's full index (hash embedder), with a
bearer token per level. The three callers are interleaved: each step asks all three the
same thing at the same moment, over three open streamable-HTTP clients in one event loop,
so a caller answered at another's level would show. Every answer, through every documents
tool and the capabilities resource, is held to two oracles:

- *Reference*: it equals what ``serve`` over stdio at the caller's level answers over an
  index built without any document above that level (public: the public documents only;
  internal: without the restricted ones; restricted: the full index), content blocks and
  structured content alike. Only build times are left out (two builds of the documents),
  and in the capabilities the two fields that name the transport and where the ceiling
  comes from, which are checked on their own.
- *Wire scan*: no response body a caller received (tool calls, resource reads, the MCP
  handshake) holds a distinctive word or phrase of a document above their level (the
  detectors of test_leakage.py), a citation id, path or title of one, or a classification
  label above theirs.

A read of a citation id above the caller's level answers with exactly the bytes a read of
an id that does not exist gets, and the audit trail names each call's own caller and level.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastmcp import Client

from governed_evidence.config import Classification
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.mcp import build_app
from governed_evidence.mcp.app import CAPABILITIES_URI
from governed_evidence.search.lookup import NOT_FOUND_MESSAGE
from governed_evidence.search.service import SearchService
from governed_evidence.store.connection import connect
from tests.hardening import figures
from tests.hardening.probes import (
    SAMPLE_CORPUS,
    SAMPLE_RESTRICTED,
    Detectors,
    canary_terms,
    copy_without,
    corpus_vocabulary,
    detectors,
    eval_questions,
    guessed_ids,
    index_strings,
    scan,
    strings_in,
    true_levels,
)
from tests.hardening.team import LEVELS, Bodies, Team, answer, decoded, http_client, stdio_app, team_server
from tests.hardening.test_leakage import (
    CALIBRATION_CALLS,
    MODES,
    Case,
    _classifications,
    make_case,
    reference_server_text,
)
from tests.helpers import HashEmbedder

PUBLIC, INTERNAL, RESTRICTED = Classification.PUBLIC, Classification.INTERNAL, Classification.RESTRICTED
#: Probe queries, aimed at the restricted and at the internal documents. Each run (gate off,
#: gate on) sends every other one, so the two runs together send them all.
RESTRICTED_PROBES = 28
INTERNAL_PROBES = 12
GATES = ("off", "on")
#: A catalogue round (index_status, list_sources, capabilities) after this many steps.
CATALOGUE_EVERY = 60
#: The capabilities fields that name the transport (stdio vs HTTP), not the documents.
TRANSPORT_FIELDS = ("transport", "ceiling_source")
#: Where the ceiling comes from, as the capabilities say it over HTTP.
HTTP_CEILING_SOURCE = (
    "the lower of the server's ceiling and the clearance of the caller's credential; never a tool argument"
)
#: Ids that exist at no level (a path, a section and a span that are not in the index).
MISSING_IDS = (
    "public/no-such-document.md#top:L1-5",
    "public/faq.md#no-such-section:L9000-9001",
    "restricted/hr/no-such-file.md#top:L1-2",
)


@dataclass
class HttpCase:
    case: Case
    #: The index a stdio server at each level is compared with (nothing above the level).
    references: dict[Classification, Path]
    #: Distinctive words and phrases of the documents above public and above internal.
    found: dict[Classification, Detectors]
    #: The citation ids stored at each level.
    ids: dict[Classification, list[str]]
    #: Strings no answer to a caller at the level may hold: ids, paths and titles above it.
    needles: dict[Classification, list[str]]
    probes: list[str]


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = connect(db, readonly=True)
    try:
        return [tuple(r) for r in conn.execute(sql)]
    finally:
        conn.close()


def _needles(db: Path, level: Classification) -> list[str]:
    """Citation ids, paths and (distinctive) titles of what is stored above ``level``."""
    ids = [str(c) for (c,) in _rows(db, f"SELECT citation_id FROM passages WHERE classification > {int(level)}")]
    docs = _rows(db, f"SELECT path, title FROM documents WHERE classification > {int(level)}")
    lower = " ".join(index_strings(db, at_most=level)).casefold()
    titles = [str(t) for _, t in docs if len(str(t)) >= 8 and str(t).casefold() not in lower]
    return ids + [str(p) for p, _ in docs] + titles


def _handshake(db: Path) -> list[str]:
    """What the server says before any document is asked for: instructions, tools, resources."""

    async def listed(app: Any) -> list[str]:
        async with Client(app) as client:
            return [
                str(client.instructions),
                *(t.model_dump_json() for t in await client.list_tools()),
                *(r.model_dump_json() for r in await client.list_resources()),
                *(p.model_dump_json() for p in await client.list_prompts()),
            ]

    service = SearchService(db, ceiling=PUBLIC, embedder_factory=HashEmbedder)
    try:
        return [*asyncio.run(listed(build_app(service))), HTTP_CEILING_SOURCE]
    finally:
        service.reader.close()


@pytest.fixture(scope="module")
def http_case(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpCase]:
    embedder = HashEmbedder()
    work = tmp_path_factory.mktemp("http-leak")
    case = make_case(
        "sample-http",
        SAMPLE_CORPUS,
        SAMPLE_RESTRICTED,
        work,
        embedder,
        extra_probes=canary_terms() + eval_questions("denied"),
    )
    # The public caller's reference and detectors: the corpus without anything above public.
    levels = true_levels(SAMPLE_CORPUS, SAMPLE_RESTRICTED)
    above_public = frozenset(rel for rel, level in levels.items() if level > PUBLIC)
    public_only = work / "public-only"
    public_only.mkdir()
    reference_public = public_only / "reference.sqlite"
    ingest_corpus(
        copy_without(SAMPLE_CORPUS, public_only / "corpus", above_public),
        reference_public,
        embedder,
        ceiling=RESTRICTED,
        progress=None,
    )
    stored_public = {str(p) for (p,) in _rows(case.full, "SELECT path FROM documents WHERE classification = 0")}
    assert stored_public == {rel for rel, level in levels.items() if level is PUBLIC}
    # Detectors for each caller below restricted, from a server that never held anything
    # above their level: its answers and messages (test_leakage's calibration) and what it
    # says over HTTP whoever asks (the handshake, the tool list, the capabilities' wording).
    # test_leakage's public detectors count the internal text its reference serves at
    # internal among the server's own words (so miss what only internal documents say);
    # these are built from a server that never held internal documents.
    handshake = _handshake(reference_public)
    own_words = reference_server_text(reference_public, embedder) + handshake
    found_public = detectors(
        corpus_vocabulary(SAMPLE_CORPUS, levels, PUBLIC, served_db=case.full, server_text=own_words)
    )
    # test_leakage's internal detectors, less the words of the handshake (the same at every level).
    spoken = corpus_vocabulary(SAMPLE_CORPUS, {}, INTERNAL, server_text=handshake)
    found = {
        PUBLIC: found_public,
        INTERNAL: Detectors(
            case.found[INTERNAL].words - spoken.lower_words, case.found[INTERNAL].phrases - spoken.lower_ngrams
        ),
    }
    # Probes aimed at the restricted documents (test_leakage's), and at the internal ones:
    # what is distinctive above public but not above internal.
    step = max(1, len(case.probes) // RESTRICTED_PROBES)
    internal_words = sorted(found_public.words - found[INTERNAL].words)
    internal_phrases = sorted(
        " ".join(p) for p in found_public.phrases - found[INTERNAL].phrases if all(len(t) >= 4 for t in p)
    )
    half = INTERNAL_PROBES // 2
    probes = (
        case.probes[::step][:RESTRICTED_PROBES]
        + internal_words[:: max(1, len(internal_words) // half)][:half]
        + internal_phrases[:: max(1, len(internal_phrases) // half)][:half]
    )
    ids = {
        level: [str(c) for (c,) in _rows(case.full, f"SELECT citation_id FROM passages WHERE classification = {i}")]
        for i, level in enumerate(LEVELS)
    }
    yield HttpCase(
        case=case,
        references={PUBLIC: reference_public, INTERNAL: case.reference, RESTRICTED: case.full},
        found=found,
        ids=ids,
        needles={level: _needles(case.full, level) for level in (PUBLIC, INTERNAL)},
        probes=list(dict.fromkeys(probes)),
    )
    case.close()


# -- the steps every caller takes ------------------------------------------------------------

Op = tuple[str, dict[str, Any]]
CATALOGUE: list[Op] = [("index_status", {}), ("list_sources", {}), ("capabilities", {})]


def _merged(first: list[Op], second: list[Op]) -> list[Op]:
    """Both lists in order, spread evenly through each other."""
    keyed = [(i / len(first), 0, i) for i in range(len(first))] + [(j / len(second), 1, j) for j in range(len(second))]
    return [(first, second)[which][i] for _, which, i in sorted(keyed)]


def _share(items: list[Any], gate: str) -> list[Any]:
    """The run's half of ``items``: the two runs together take every item once."""
    return items[GATES.index(gate) :: len(GATES)]


def _steps(hc: HttpCase, gate: str) -> list[Op]:
    """This run's searches and reads, interleaved, with catalogue rounds among them.

    Searches: every probe in every mode at confidence normal and strict (with the gate off,
    strict only names itself differently, so there it is asked in one mode per probe, in
    rotation). Reads: the stored ids of every level, guesses near the restricted and internal
    ones and ids that exist nowhere, context 0-3 in rotation. And test_leakage's invalid calls.
    """
    searches: list[Op] = []
    for i, probe in enumerate(_share(hc.probes, gate)):
        asked = [(mode, "normal") for mode in MODES]
        asked += [(mode, "strict") for mode in MODES] if gate == "on" else [(MODES[i % len(MODES)], "strict")]
        searches += [
            ("search_documents", {"query": probe, "limit": 20, "mode": mode, "confidence": confidence})
            for mode, confidence in asked
        ]
    every_id = [cid for level in LEVELS for cid in hc.ids[level]]
    guesses = guessed_ids(hc.ids[RESTRICTED][::8] + hc.ids[INTERNAL][::16])[::3]
    reads: list[Op] = [
        ("read_passage", {"citation_id": cid, "context": i % 4})
        for i, cid in enumerate(_share(every_id + guesses, gate) + list(MISSING_IDS))
    ]
    steps: list[Op] = []
    for i, op in enumerate(_merged(searches, _merged(reads, list(CALIBRATION_CALLS)))):
        if i % CATALOGUE_EVERY == 0:
            steps += CATALOGUE
        steps.append(op)
    return steps + CATALOGUE


async def _ask(client: Client[Any], op: Op) -> dict[str, Any]:
    tool, args = op
    if tool == "capabilities":
        (content,) = await client.read_resource(CAPABILITIES_URI)
        body = json.loads(str(getattr(content, "text", "")))
        governance = body["governance"]
        return {
            "capabilities": {
                **{k: v for k, v in body.items() if k not in TRANSPORT_FIELDS},
                "governance": {k: v for k, v in governance.items() if k not in TRANSPORT_FIELDS},
            },
            "transport": (body["transport"], governance["ceiling_source"]),
        }
    return answer(await client.call_tool(tool, args, raise_on_error=False))


@dataclass
class Run:
    calls: int = 0
    mismatches: list[str] = field(default_factory=list)
    #: The first differing answers in full (what the caller got, what the reference gave).
    examples: list[tuple[Any, Any]] = field(default_factory=list)
    transports: set[tuple[str, str]] = field(default_factory=set)
    bodies: dict[Classification, Bodies] = field(default_factory=lambda: {level: Bodies() for level in LEVELS})


async def _interleaved(team: Team, hc: HttpCase, steps: list[Op], gate: bool) -> Run:
    run = Run()
    async with AsyncExitStack() as stack:
        http = {
            level: await stack.enter_async_context(http_client(team.running, team.tokens[level], run.bodies[level]))
            for level in LEVELS
        }
        references = {}
        for level in LEVELS:
            app = stack.enter_context(stdio_app(hc.references[level], level, hc.case.embedder, gate=gate))
            references[level] = await stack.enter_async_context(Client(app))
        for tool, args in steps:
            # All three callers at once, then each level's reference.
            got = await asyncio.gather(*(_ask(http[level], (tool, args)) for level in LEVELS))
            run.calls += len(LEVELS)
            for level, answered in zip(LEVELS, got, strict=True):
                expected = await _ask(references[level], (tool, args))
                if tool == "capabilities":
                    run.transports.add(answered.pop("transport"))
                    expected.pop("transport")
                if answered != expected:
                    run.mismatches.append(f"{level.label} {tool} {json.dumps(args)[:120]}")
                    if len(run.examples) < 2:
                        run.examples.append((answered, expected))
    return run


# -- the wire --------------------------------------------------------------------------------


def _scan_wire(hc: HttpCase, bodies: Bodies, level: Classification) -> tuple[int, list[str]]:
    """Bodies scanned, and what above ``level`` was found in them."""
    leaks: list[str] = []
    scanned = 0
    for sent, message in bodies.messages():
        scanned += 1
        value = decoded(message)
        # As sent (JSON-escaped) and every string in it decoded (texts holding JSON included).
        text = sent + "\n" + "\n".join(strings_in(value))
        hits = scan(hc.found[level], message)
        above = [c for c in _classifications(value) if Classification[c.upper()] > level]
        needles = [n for n in hc.needles[level] if n in text]
        if hits or above or needles:
            leaks.append(f"{level.label}: {hits[:5]} {above[:3]} {needles[:3]} in {text[:200]!r}")
    return scanned, leaks


@dataclass
class RawReads:
    posted: int = 0
    compared: int = 0
    differing: list[str] = field(default_factory=list)


async def _raw_reads(team: Team, hc: HttpCase, level: Classification, gate: str) -> RawReads:
    """Reads above ``level`` posted as raw JSON-RPC (one request id): each answer must be,
    byte for byte, the answer to a read of an id that does not exist."""
    headers = {
        "Authorization": f"Bearer {team.tokens[level]}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    above = [cid for lvl in LEVELS if lvl > level for cid in hc.ids[lvl]]
    raw = RawReads()
    async with httpx.AsyncClient(headers=headers, timeout=30) as client:

        async def read(cid: str, context: int) -> tuple[int, str, bytes]:
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "read_passage", "arguments": {"citation_id": cid, "context": context}},
            }
            response = await client.post(team.running.mcp_url, json=body)
            raw.posted += 1
            return response.status_code, response.headers.get("content-type", ""), response.content

        missing = {await read(cid, i) for i, cid in enumerate(MISSING_IDS)}
        assert len(missing) == 1, "reads of ids that do not exist all answer alike"
        (expected,) = missing
        assert expected[0] == 200 and NOT_FOUND_MESSAGE.encode() in expected[2]
        for i, cid in enumerate(_share(above + guessed_ids(above[::10]), gate)):
            raw.compared += 1
            if await read(cid, i % 4) != expected:
                raw.differing.append(f"{level.label} read {cid!r} context {i % 4}")
    return raw


def _audit_problems(team: Team, hc: HttpCase) -> tuple[int, list[str]]:
    level_of = {f"caller-{level.label}": level for level in LEVELS}
    problems: list[str] = []
    lines = team.audit_lines()
    for line in lines:
        level = level_of[line["caller"]]
        visible = {cid for lvl in LEVELS if lvl <= level for cid in hc.ids[lvl]}
        if line["clearance_applied"] != level.label:
            problems.append(f"{line['caller']} answered at {line['clearance_applied']}")
        if not set(line.get("returned") or []) <= visible:
            problems.append(f"{line['caller']} was returned {sorted(set(line['returned']) - visible)[:3]}")
    return len(lines), problems


# -- the test -------------------------------------------------------------------------------


@pytest.mark.parametrize("gate", GATES)
def test_each_caller_over_http_answers_as_stdio_at_their_level(http_case: HttpCase, gate: str, tmp_path: Path) -> None:
    hc = http_case
    steps = _steps(hc, gate)
    with team_server(hc.case.full, hc.case.embedder, tmp_path, gate=gate == "on") as team:
        run = asyncio.run(_interleaved(team, hc, steps, gate == "on"))
        raw = [asyncio.run(_raw_reads(team, hc, level, gate)) for level in (PUBLIC, INTERNAL)]
        made = sorted(s.ceiling for s in team.levels.made())
        audited, audit_problems = _audit_problems(team, hc)

    leaks: list[str] = []
    scanned = 0
    for level in (PUBLIC, INTERNAL):
        n, found = _scan_wire(hc, run.bodies[level], level)
        scanned += n
        leaks += found
    # The scan can fail: the bodies a caller above received hold what it looks for.
    _, restricted_sees = _scan_wire(hc, run.bodies[RESTRICTED], INTERNAL)
    _, internal_sees = _scan_wire(hc, run.bodies[INTERNAL], PUBLIC)
    read_differences = [d for r in raw for d in r.differing]
    tool_calls = sum(1 for tool, _ in steps if tool != "capabilities")

    figures.add("http leakage: probe queries per caller", len(_share(hc.probes, gate)))
    figures.add(
        "http leakage: searches per caller",
        sum(1 for op in steps if op[0] == "search_documents" and op not in CALIBRATION_CALLS),
    )
    figures.add("http leakage: invalid calls per caller", sum(1 for op in steps if op in CALIBRATION_CALLS))
    figures.add("http leakage: calls per caller (every documents tool and the capabilities)", len(steps))
    figures.add("http leakage: calls over HTTP, all callers", run.calls + sum(r.posted for r in raw))
    figures.add("http leakage: response bodies scanned", scanned)
    figures.add("http leakage: above-level reads compared byte for byte", sum(r.compared for r in raw))
    figures.add("http leakage: leaks found", len(leaks) + len(read_differences) + len(audit_problems))
    figures.add("http leakage: answers differing from the reference index", len(run.mismatches))

    assert not leaks, f"{len(leaks)} bodies carry text above the caller's level, e.g. {leaks[:3]}"
    assert not read_differences, read_differences[:5]
    assert not audit_problems, audit_problems[:5]
    assert not run.mismatches, (
        f"{len(run.mismatches)} of {run.calls} answers differ, e.g. {run.mismatches[:5]}; first: {run.examples[:1]}"
    )
    assert made == list(LEVELS), "one service per level, each at its own level"
    assert run.transports == {("http", HTTP_CEILING_SOURCE)}
    assert restricted_sees and internal_sees, "the wire scan finds what is there"
    # One audit line per call that reached a tool (an invalid call refused by the schema
    # reaches none).
    invalid = sum(1 for op in steps if op in CALIBRATION_CALLS)
    posted = sum(r.posted for r in raw)
    assert (tool_calls - invalid) * len(LEVELS) + posted <= audited <= tool_calls * len(LEVELS) + posted
