"""Leakage must be zero: probes made of the restricted documents' own words, through every tool.

Two oracles, both applied to every answer given at ceilings public and internal:

- *Detectors*: no word or phrase that occurs only above the ceiling appears in any result,
  message or log line (see probes.py for how they are built from the files).
- *Reference index*: the same corpus with its restricted documents removed. Every answer
  (results, order, confidence, withheld counts, reasons, errors, counts) must equal the
  reference's exactly, so nothing above the ceiling took a rank slot, moved a score or a count.

The bulk runs in-process with the hash embedder; one pass uses the real default model
(``sample_index``), and a sample goes through the real MCP server over stdio.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from governed_evidence.config import Classification
from governed_evidence.embeddings.base import Embedder
from governed_evidence.errors import ErrorCode, GovernedEvidenceError, IndexCorruptError, IndexMissingError
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.mcp import build_app
from governed_evidence.mcp.app import CAPABILITIES_URI
from governed_evidence.mcp.errors import error_text
from governed_evidence.search.lookup import NOT_FOUND_HINT, NOT_FOUND_MESSAGE
from governed_evidence.search.models import SearchResponse
from governed_evidence.search.service import SearchService
from governed_evidence.search.tuning import SearchTuning
from governed_evidence.store.connection import connect
from tests.hardening import figures
from tests.hardening.conftest import LogCapture, MemoEmbedder
from tests.hardening.probes import (
    SAMPLE_CORPUS,
    SAMPLE_RESTRICTED,
    SMALL_RESTRICTED,
    Detectors,
    build_probes,
    canary_terms,
    copy_without,
    corpus_vocabulary,
    detectors,
    eval_questions,
    guessed_ids,
    scan,
    true_levels,
)
from tests.hardening.team import answer
from tests.helpers import HashEmbedder, counting_maxscore, small_corpus

PUBLIC, INTERNAL, RESTRICTED = Classification.PUBLIC, Classification.INTERNAL, Classification.RESTRICTED
CEILINGS = (PUBLIC, INTERNAL)
#: What a client reads for a missing citation id, and for one above its ceiling.
NOT_FOUND_TEXT = error_text(ErrorCode.NOT_FOUND, NOT_FOUND_MESSAGE, NOT_FOUND_HINT)
MODES = ("hybrid", "keyword", "semantic")
#: Promised minimum of distinct probe queries built from the restricted documents.
MIN_PROBES = 500
MIN_STDIO_PROBES = 50


@dataclass
class Case:
    """One corpus built twice: with everything (``full``) and without its restricted documents."""

    name: str
    corpus: Path
    full: Path
    reference: Path
    found: dict[Classification, Detectors]
    probes: list[str]
    restricted_ids: list[str]
    lower_ids: list[str]
    embedder: Embedder
    services: list[SearchService] = field(default_factory=list)

    def service(
        self,
        db: Path,
        ceiling: Classification,
        *,
        gate: bool = False,
        held: bool = False,
        tuning: SearchTuning | None = None,
    ) -> SearchService:
        """A service on ``db``; ``held``: with its in-memory copies (vectors, keyword impact lists)
        loaded; ``tuning``: the strategies' thresholds (the shipped ones unless given)."""
        svc = SearchService(
            db,
            ceiling=ceiling,
            embedder_factory=lambda: self.embedder,
            gate_enabled=gate,
            vector_memory_bytes=HELD_MEMORY if held else 0,
            tuning=tuning,
        )
        if held:
            svc.warm()
            assert svc.impacts.copy is not None and svc.vectors.copy is not None
        self.services.append(svc)
        return svc

    def pair(
        self, ceiling: Classification, *, gate: bool = False, held: bool = False, tuning: SearchTuning | None = None
    ) -> tuple[SearchService, SearchService]:
        return (
            self.service(self.full, ceiling, gate=gate, held=held, tuning=tuning),
            self.service(self.reference, ceiling, gate=gate, held=held, tuning=tuning),
        )

    def close(self) -> None:
        for svc in self.services:
            svc.reader.close()


def _ids(db: Path, where: str) -> list[str]:
    conn = connect(db, readonly=True)
    try:
        return [str(r[0]) for r in conn.execute(f"SELECT citation_id FROM passages WHERE {where} ORDER BY id")]
    finally:
        conn.close()


def _stored_restricted_paths(db: Path) -> set[str]:
    conn = connect(db, readonly=True)
    try:
        return {str(r[0]) for r in conn.execute("SELECT path FROM documents WHERE classification = 2")}
    finally:
        conn.close()


def make_case(
    name: str,
    corpus: Path,
    restricted: frozenset[str],
    work: Path,
    embedder: Embedder,
    *,
    extra_probes: list[str],
    full: Path | None = None,
) -> Case:
    if full is None:
        full = work / "full.sqlite"
        ingest_corpus(corpus, full, embedder, ceiling=RESTRICTED, progress=None)
    reference = work / "reference.sqlite"
    if full.parent != work:
        # Start from a copy of the full index so unchanged passages reuse its vectors.
        shutil.copyfile(full, reference)
    report = ingest_corpus(
        copy_without(corpus, work / "without", restricted), reference, embedder, ceiling=RESTRICTED, progress=None
    )
    assert report.documents_indexed > 0
    # The pipeline must agree with the description about which documents are restricted.
    assert _stored_restricted_paths(full) == set(restricted)
    levels = true_levels(corpus, restricted)
    own_words = reference_server_text(reference, embedder)
    vocabularies = {c: corpus_vocabulary(corpus, levels, c, served_db=full, server_text=own_words) for c in CEILINGS}
    found = {c: detectors(v) for c, v in vocabularies.items()}
    probes = build_probes(vocabularies[INTERNAL], found[INTERNAL], extra=extra_probes)
    case = Case(
        name,
        corpus,
        full,
        reference,
        found,
        probes,
        [],
        _ids(full, "classification <= 1"),
        embedder,
    )
    # Real restricted citation ids, obtained the way a cleared caller would: by searching.
    top = case.service(full, RESTRICTED)
    seen: dict[str, None] = {}
    for probe in probes:
        for r in top.search(probe, limit=20, mode="keyword", confidence_level="normal").results:
            if r.classification == "restricted":
                seen[r.citation_id] = None
    stored = _ids(full, "classification = 2")
    assert set(seen) <= set(stored)
    # The probes reach (nearly) every restricted passage: they are aimed at the right documents.
    assert len(seen) >= 0.9 * len(stored), f"probes reached {len(seen)} of {len(stored)} restricted passages"
    case.restricted_ids = list(seen) + [c for c in stored if c not in seen]
    return case


#: Invalid calls whose messages (the server's and the MCP layer's wording) calibrate the detectors.
CALIBRATION_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("search_documents", {"query": ""}),
    ("search_documents", {"query": "   "}),
    ("search_documents", {"query": "water " * 100}),
    ("search_documents", {"query": "water", "limit": 0}),
    ("search_documents", {"query": "water", "limit": 21}),
    ("search_documents", {"query": "water", "limit": "many"}),
    ("search_documents", {"query": "water", "limit": 2.5}),
    ("search_documents", {"query": "water", "mode": "fuzzy"}),
    ("search_documents", {"query": "water", "confidence": "lax"}),
    ("search_documents", {"query": "water", "ceiling": "restricted"}),
    ("search_documents", {"query": 7}),
    ("search_documents", {"query": None}),
    ("search_documents", {}),
    ("read_passage", {"citation_id": "nothing"}),
    ("read_passage", {"citation_id": ""}),
    ("read_passage", {"citation_id": "x" * 1001}),
    ("read_passage", {"citation_id": "x", "context": 4}),
    ("read_passage", {"citation_id": "x", "context": -1}),
    ("read_passage", {"citation_id": ["x"]}),
    ("read_passage", {}),
    ("list_sources", {"extra": 1}),
    ("index_status", {"extra": 1}),
]


def reference_server_text(reference: Path, embedder: Embedder) -> list[str]:
    """What a server that never held restricted documents says of itself, at both ceilings."""
    texts: list[str] = []

    async def calls(app: Any) -> None:
        async with Client(app) as client:
            for tool, args in CALIBRATION_CALLS:
                result = await client.call_tool(tool, args, raise_on_error=False)
                texts.extend(getattr(c, "text", "") for c in result.content)
            texts.extend(str(getattr(r, "text", "")) for r in await client.read_resource(CAPABILITIES_URI))
            prompt = await client.get_prompt("evidence_brief", {"question": "water"})
            texts.extend(str(getattr(m.content, "text", "")) for m in prompt.messages)

    for ceiling in CEILINGS:
        for gate in (True, False):
            svc = SearchService(reference, ceiling=ceiling, embedder_factory=lambda: embedder, gate_enabled=gate)
            try:
                texts += [svc.status().model_dump_json(), svc.list_sources().model_dump_json()]
                texts += [_error(lambda c=call, s=svc: c(s)) for call in _invalid_calls("water", "nothing")]
                for confidence in ("strict", "normal"):
                    for query in ("zyxxy qwertz frobnicate", "water"):
                        texts.append(svc.search(query, confidence_level=confidence).model_dump_json())
                asyncio.run(calls(build_app(svc)))
            finally:
                svc.reader.close()
    return texts


@pytest.fixture(scope="module")
def hash_cases(tmp_path_factory: pytest.TempPathFactory) -> Any:
    embedder = HashEmbedder()
    sample_work = tmp_path_factory.mktemp("leak-sample")
    small_work = tmp_path_factory.mktemp("leak-small")
    cases = {
        "sample": make_case(
            "sample",
            SAMPLE_CORPUS,
            SAMPLE_RESTRICTED,
            sample_work,
            embedder,
            extra_probes=canary_terms() + eval_questions("denied"),
        ),
        "small": make_case(
            "small",
            small_corpus(small_work / "corpus"),
            SMALL_RESTRICTED,
            small_work,
            embedder,
            extra_probes=["Quillmoor", "Zephyr", "41.7 million", "cost centre 9931", "Brackenfield", "88,000"],
        ),
    }
    yield cases
    for case in cases.values():
        case.close()


@dataclass
class Tally:
    calls: int = 0
    leaks: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)

    @classmethod
    def merged(cls, parts: list[Tally]) -> Tally:
        """One tally of several (one per ceiling, counted in parallel)."""
        return cls(
            sum(t.calls for t in parts), [x for t in parts for x in t.leaks], [x for t in parts for x in t.mismatches]
        )

    def check(self, found: Detectors, ceiling: Classification, label: str, answer: Any) -> None:
        dumped = answer.model_dump(mode="json") if hasattr(answer, "model_dump") else answer
        hits = scan(found, dumped)
        above = [r for r in _classifications(dumped) if Classification[r.upper()] > ceiling]
        if hits or above:
            self.leaks.append(f"{label}: {hits[:5]} {above[:3]}")


def _classifications(value: Any) -> list[str]:
    out: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "classification" and isinstance(v, str):
                out.append(v)
            else:
                out += _classifications(v)
    elif isinstance(value, list):
        for v in value:
            out += _classifications(v)
    return out


#: Memory for the in-memory copies of the small test indexes (far more than they need).
HELD_MEMORY = 1 << 30


def _check_logs(found: Detectors, logs: LogCapture, tally: Tally) -> int:
    lines = logs.lines()
    for line in lines:
        record = json.loads(line)  # every line is a JSON record
        record.pop("timestamp", None)
        hits = scan(found, {k: v for k, v in record.items() if isinstance(v, str)}, "error")
        if hits:
            tally.leaks.append(f"log line: {hits[:5]}")
    return len(lines)


# -- searches ---------------------------------------------------------------------------


def _search_probes(case: Case, ceiling: Classification) -> Tally:
    tally = Tally()
    found = case.found[ceiling]
    full, reference = case.pair(ceiling, gate=False)
    for probe in case.probes:
        for mode in MODES:
            normal = full.search(probe, limit=20, mode=mode, confidence_level="normal")  # type: ignore[arg-type]
            strict = full.search(probe, limit=20, mode=mode, confidence_level="strict")  # type: ignore[arg-type]
            expected = reference.search(probe, limit=20, mode=mode, confidence_level="normal")  # type: ignore[arg-type]
            tally.calls += 3
            label = f"{ceiling.label}/{mode}/{probe!r}"
            tally.check(found, ceiling, label, normal)
            if normal != expected:
                tally.mismatches.append(label)
            if (strict.results, strict.withheld, strict.status) != (normal.results, normal.withheld, normal.status):
                # With the gate off the level only names itself; anything else is checked on its own.
                tally.mismatches.append(label + " strict differs from normal with the gate off")
                tally.check(found, ceiling, label + "/strict", strict)
    return tally


@pytest.mark.parametrize("name", ["sample", "small"])
def test_search_probes_leak_nothing_and_match_the_reference(
    hash_cases: dict[str, Case], name: str, captured_logs: LogCapture
) -> None:
    """Every probe, every mode, both confidence levels, gate off, at public and internal."""
    case = hash_cases[name]
    # One thread per ceiling: SQLite releases the GIL, so two cores share the work.
    with ThreadPoolExecutor(max_workers=len(CEILINGS)) as pool:
        parts = list(pool.map(lambda c: _search_probes(case, c), CEILINGS))
    tally = Tally.merged(parts)
    log_lines = _check_logs(case.found[INTERNAL], captured_logs, tally)
    figures.add("leakage: distinct probe queries (hash embedder)", len(case.probes))
    figures.add("leakage: tool calls", tally.calls)
    figures.add("leakage: log lines checked", log_lines)
    figures.add("leakage: leaks found", len(tally.leaks))
    figures.add("leakage: answers differing from the reference index", len(tally.mismatches))
    if name == "sample":
        assert len(case.probes) >= MIN_PROBES, f"only {len(case.probes)} probes were built"
    assert log_lines >= tally.calls, "every search is logged (and every log line was checked)"
    assert not tally.leaks, f"{len(tally.leaks)} leaks in {tally.calls} calls, e.g. {tally.leaks[:5]}"
    assert not tally.mismatches, f"{len(tally.mismatches)} answers moved, e.g. {tally.mismatches[:5]}"


def _served_alike(a: SearchResponse, b: SearchResponse) -> bool:
    """The same answer, but for confidences one rounding step apart: in keyword mode a candidate's
    similarity comes from the vector matrix in memory or from sqlite-vec in the file, two exact
    float32 cosines that may differ in their last bits, which four places can round apart."""
    da, db = a.model_dump(), b.model_dump()
    ca = [r.pop("confidence") for r in da["results"]]
    cb = [r.pop("confidence") for r in db["results"]]
    da.pop("reason"), db.pop("reason")
    return da == db and all(abs(x - y) <= 1.0001e-4 for x, y in zip(ca, cb, strict=True))


def _search_probes_held(case: Case, ceiling: Classification, tuning: SearchTuning) -> Tally:
    tally = Tally()
    found = case.found[ceiling]
    full, reference = case.pair(ceiling, held=True, tuning=tuning)
    plain = case.service(case.full, ceiling)
    for probe in case.probes:
        for mode in MODES:
            got = full.search(probe, limit=20, mode=mode, confidence_level="normal")  # type: ignore[arg-type]
            expected = reference.search(probe, limit=20, mode=mode, confidence_level="normal")  # type: ignore[arg-type]
            tally.calls += 2
            label = f"{ceiling.label}/{mode}/{probe!r} (in-memory copies)"
            tally.check(found, ceiling, label, got)
            if got != expected:
                tally.mismatches.append(label)
            if mode == "keyword":
                # The impact lists rank as FTS5 does, answer for answer. (The vector side's equal
                # distances may come in either order from the two paths: tests/search/test_vectors.py.)
                from_file = plain.search(probe, limit=20, mode=mode, confidence_level="normal")  # type: ignore[arg-type]
                tally.calls += 1
                if not _served_alike(got, from_file):
                    tally.mismatches.append(label + " differs from the answer served from the index file")
    return tally


@pytest.mark.parametrize("way", ["every row scored", "MaxScore", "sign-code prefilter"])
def test_search_probes_with_the_in_memory_copies_leak_nothing(
    hash_cases: dict[str, Case], captured_logs: LogCapture, way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same probes ranked from the vector matrix and the keyword impact lists: nothing
    above the ceiling, answers equal to the reference index's and to those served from the
    index file itself. ``MaxScore``: the keyword top k found by MaxScore at every size (as from
    500,000 rows), which must answer some probes; ``sign-code prefilter``: the vectors searched
    through their sign codes at every size (as above 50,000 rows), the prefilter kept whatever
    its check at load measured."""
    answered: list[bool] = []
    maxscore = way == "MaxScore"
    tuning = SearchTuning()
    if maxscore:
        # Pruned wherever a bound can be set, however small the corpus.
        tuning = SearchTuning(pruned_rows=0, essential_share=1.0)
        answered = counting_maxscore(monkeypatch)
    elif way == "sign-code prefilter":
        tuning = SearchTuning(exact_rows=0, prefilter_min_recall=0.0)
    case = hash_cases["sample"]
    with ThreadPoolExecutor(max_workers=len(CEILINGS)) as pool:
        parts = list(pool.map(lambda c: _search_probes_held(case, c, tuning), CEILINGS))
    tally = Tally.merged(parts)
    log_lines = _check_logs(case.found[INTERNAL], captured_logs, tally)
    figures.add(f"leakage, in-memory copies ({way}): tool calls", tally.calls)
    figures.add(f"leakage, in-memory copies ({way}): leaks found", len(tally.leaks))
    figures.add(
        f"leakage, in-memory copies ({way}): answers differing from the reference or the file", len(tally.mismatches)
    )
    if maxscore:
        figures.add("leakage, in-memory copies (MaxScore): keyword rankings MaxScore answered", sum(answered))
        # A few dozen: most probes match too few of the sample corpus's passages to bound the 50th.
        assert sum(answered) >= 20, f"MaxScore answered {sum(answered)} of {len(answered)} keyword rankings"
    assert log_lines >= tally.calls
    assert not tally.leaks, f"{len(tally.leaks)} leaks in {tally.calls} calls, e.g. {tally.leaks[:5]}"
    assert not tally.mismatches, f"{len(tally.mismatches)} answers moved, e.g. {tally.mismatches[:5]}"


def test_gate_on_answers_match_the_reference(hash_cases: dict[str, Case]) -> None:
    """With the gate on, withheld counts and abstention reasons do not depend on restricted text."""
    case = hash_cases["sample"]
    tally = Tally()
    for ceiling in CEILINGS:
        full, reference = case.pair(ceiling, gate=True)
        for probe in case.probes[::3]:
            for confidence in ("strict", "normal"):
                a = full.search(probe, limit=8, confidence_level=confidence)
                b = reference.search(probe, limit=8, confidence_level=confidence)
                tally.calls += 2
                tally.check(case.found[ceiling], ceiling, probe, a)
                if a != b:
                    tally.mismatches.append(f"{ceiling.label}/{confidence}/{probe!r}")
    figures.add("leakage: tool calls", tally.calls)
    figures.add("leakage: leaks found", len(tally.leaks))
    assert not tally.leaks, tally.leaks[:5]
    assert not tally.mismatches, tally.mismatches[:5]


# -- reading ----------------------------------------------------------------------------


def _read(svc: SearchService, cid: str, context: int) -> tuple[str, str]:
    try:
        return "ok", svc.read_passage(cid, context).model_dump_json()
    except GovernedEvidenceError as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("name", ["sample", "small"])
def test_restricted_and_guessed_ids_read_exactly_like_missing_ones(
    hash_cases: dict[str, Case], name: str, captured_logs: LogCapture
) -> None:
    case = hash_cases[name]
    guesses = guessed_ids(case.restricted_ids)
    tally = Tally()
    for ceiling in CEILINGS:
        full, reference = case.pair(ceiling)
        for cid in case.restricted_ids + guesses:
            for context in range(4):
                got, expected = _read(full, cid, context), _read(reference, cid, context)
                tally.calls += 1
                if got != ("NotFoundError", NOT_FOUND_MESSAGE):
                    tally.leaks.append(f"{ceiling.label} read {cid!r}: {got[0]}")
                if got != expected:
                    tally.mismatches.append(cid)
        # Passages the caller may see read the same as in the reference, neighbours included.
        visible = case.lower_ids if ceiling is INTERNAL else [c for c in case.lower_ids if c.startswith("public/")]
        for cid in visible:
            got, expected = _read(full, cid, 3), _read(reference, cid, 3)
            tally.calls += 1
            tally.check(case.found[ceiling], ceiling, cid, json.loads(got[1]) if got[0] == "ok" else got[1])
            if got != expected:
                tally.mismatches.append(cid)
    _check_logs(case.found[INTERNAL], captured_logs, tally)
    figures.add("leakage: real restricted citation ids tried", len(case.restricted_ids))
    figures.add("leakage: guessed citation ids tried", len(guesses))
    figures.add("leakage: tool calls", tally.calls)
    figures.add("leakage: leaks found", len(tally.leaks))
    assert case.restricted_ids and len(guesses) > 5 * len(case.restricted_ids)
    assert not tally.leaks, tally.leaks[:5]
    assert not tally.mismatches, tally.mismatches[:5]


# -- catalogue and error paths ------------------------------------------------------------


def _without_build_time(value: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if k != "built_at"}


@pytest.mark.parametrize("name", ["sample", "small"])
def test_list_sources_status_and_capabilities_show_nothing_above_the_ceiling(
    hash_cases: dict[str, Case], name: str
) -> None:
    case = hash_cases[name]
    tally = Tally()
    for ceiling in CEILINGS:
        full, reference = case.pair(ceiling)
        sources, status = full.list_sources(), full.status()
        tally.check(case.found[ceiling], ceiling, "list_sources", sources)
        tally.check(case.found[ceiling], ceiling, "index_status", status)
        assert sources == reference.list_sources()
        assert _without_build_time(status.model_dump()) == _without_build_time(reference.status().model_dump())
        assert status.documents == len(sources.documents)
        assert {t.classification for t in sources.totals} == {c.label for c in Classification if c <= ceiling}

        async def resource(svc: SearchService = full) -> str:
            async with Client(build_app(svc)) as client:
                return str((await client.read_resource(CAPABILITIES_URI))[0].text)  # type: ignore[union-attr]

        capabilities = json.loads(asyncio.run(resource()))
        tally.check(case.found[ceiling], ceiling, "capabilities", capabilities)
        tally.calls += 5
    figures.add("leakage: tool calls", tally.calls)
    assert not tally.leaks, tally.leaks


def _error(call: Callable[[], object]) -> str:
    try:
        call()
    except GovernedEvidenceError as exc:
        return f"{type(exc).__name__}: {exc}"
    return "no error"


def _invalid_calls(probe: str, cid: str) -> list[Callable[[SearchService], object]]:
    return [
        lambda s: s.search((probe + " ") * (501 // (len(probe) + 1) + 1)),
        lambda s: s.search("   "),
        lambda s: s.search(probe, limit=0),
        lambda s: s.search(probe, limit=21),
        lambda s: s.search(probe, mode="fuzzy"),  # type: ignore[arg-type]
        lambda s: s.search(probe, confidence_level="lax"),
        lambda s: s.read_passage(cid, context=4),
        lambda s: s.read_passage(cid, context=-1),
    ]


def test_error_paths_leak_nothing(hash_cases: dict[str, Case], tmp_path: Path, captured_logs: LogCapture) -> None:
    """Invalid calls made of restricted words fail the same way against the reference index."""
    case = hash_cases["sample"]
    tally = Tally()
    for ceiling in CEILINGS:
        full, reference = case.pair(ceiling)
        for i, probe in enumerate(case.probes[::4]):
            cid = case.restricted_ids[i % len(case.restricted_ids)]
            for call in _invalid_calls(probe, cid):
                got = _error(lambda c=call, s=full: c(s))
                expected = _error(lambda c=call, s=reference: c(s))
                tally.calls += 1
                if got == "no error" or got != expected:
                    tally.mismatches.append(f"{got} / {expected}")
                tally.check(case.found[ceiling], ceiling, "error", {"error": got})
    # An index that is missing, or a "database" made of restricted text, says nothing of its content.
    bogus = tmp_path / "bogus.sqlite"
    bogus.write_bytes((case.corpus / "restricted/hr/salary-bands-2025.md").read_bytes() * 20)
    for path, expected_type in ((tmp_path / "absent.sqlite", IndexMissingError), (bogus, IndexCorruptError)):
        svc = case.service(path, INTERNAL)
        with pytest.raises(expected_type) as info:
            svc.search("Project Wagtail salary bands")
        tally.check(case.found[INTERNAL], INTERNAL, "broken index", {"error": str(info.value)})
        tally.check(case.found[INTERNAL], INTERNAL, "broken index status", svc.status())
        assert str(tmp_path) not in str(info.value)
        tally.calls += 2
    _check_logs(case.found[INTERNAL], captured_logs, tally)
    figures.add("leakage: error-path calls", tally.calls)
    figures.add("leakage: leaks found", len(tally.leaks))
    assert not tally.leaks, tally.leaks[:5]
    assert not tally.mismatches, tally.mismatches[:5]


#: Where a validation error repeats the caller's input.
INPUT_ECHO = re.compile(r"input_value=.*?, input_type=\w+", re.DOTALL)


def test_mcp_errors_and_reads_leak_nothing(hash_cases: dict[str, Case]) -> None:
    """Through the MCP layer (in memory): validation errors, denied reads and tool errors."""
    case = hash_cases["sample"]
    tally = Tally()
    missing = "public/faq.md#no-such-section:L9000-9001"

    async def body(svc: SearchService, ref: SearchService, ceiling: Classification) -> None:
        async with Client(build_app(svc)) as client, Client(build_app(ref)) as ref_client:
            absent = await client.call_tool("read_passage", {"citation_id": missing}, raise_on_error=False)
            for cid in case.restricted_ids:
                denied = await client.call_tool("read_passage", {"citation_id": cid}, raise_on_error=False)
                tally.calls += 1
                if not denied.is_error or denied.content != absent.content:
                    tally.leaks.append(f"read_passage {cid!r} differs from a missing id")
            for probe in case.probes[::10]:
                for args in (
                    {"query": probe, "limit": 0},
                    {"query": probe, "mode": "fuzzy"},
                    {"query": probe * 60},
                    {"query": probe, "ceiling": "restricted"},
                    {"query": probe, "confidence": "normal", "limit": 20},
                ):
                    got = await client.call_tool("search_documents", args, raise_on_error=False)
                    want = await ref_client.call_tool("search_documents", args, raise_on_error=False)
                    tally.calls += 1
                    # Whole answers, receipts included (apart from their id, time and signature).
                    if answer(got) != answer(want):
                        tally.mismatches.append(f"{args}")
                    # Validation errors quote (a shortened copy of) the caller's own input;
                    # what the server adds around it is what counts.
                    text = " ".join(getattr(c, "text", "") for c in got.content)
                    extra = scan(case.found[ceiling], {"error": INPUT_ECHO.sub(" ", text)})
                    if extra:
                        tally.leaks.append(f"{args}: {sorted(extra)[:5]}")

    for ceiling in CEILINGS:
        asyncio.run(body(*case.pair(ceiling, gate=False), ceiling))
    figures.add("leakage: tool calls", tally.calls)
    figures.add("leakage: leaks found", len(tally.leaks))
    assert not tally.leaks, tally.leaks[:5]
    assert not tally.mismatches, tally.mismatches[:5]


# -- public queries keep their ranks ------------------------------------------------------


def _public_queries(case: Case) -> list[str]:
    conn = connect(case.full, readonly=True)
    try:
        headings = sorted(
            {str(h) for (h,) in conn.execute("SELECT heading FROM passages WHERE classification <= 1") if h}
        )
        titles = sorted({str(t) for (t,) in conn.execute("SELECT title FROM documents WHERE classification <= 1")})
    finally:
        conn.close()
    questions = eval_questions("answerable", "paraphrase", "unanswerable", "superseded")
    return [q for q in questions + titles + headings if q.strip()][:150]


def test_public_queries_rank_identically_with_or_without_restricted_documents(hash_cases: dict[str, Case]) -> None:
    case = hash_cases["sample"]
    queries = _public_queries(case)
    mismatches: list[str] = []
    calls = 0
    for ceiling in CEILINGS:
        for gate in (True, False):
            full, reference = case.pair(ceiling, gate=gate)
            # With the gate off the confidence level changes nothing but its own name
            # (the probe test checks that), so one level is enough there.
            levels = ("strict", "normal") if gate else ("normal",)
            for query in queries:
                for mode in MODES:
                    for confidence in levels:
                        a = full.search(query, limit=20, mode=mode, confidence_level=confidence)  # type: ignore[arg-type]
                        b = reference.search(query, limit=20, mode=mode, confidence_level=confidence)  # type: ignore[arg-type]
                        calls += 2
                        if a != b:
                            mismatches.append(f"{ceiling.label}/gate={gate}/{mode}/{confidence}/{query!r}")
    figures.add("rank invariance: public queries", len(queries))
    figures.add("rank invariance: searches compared", calls // 2)
    figures.add("rank invariance: answers that moved", len(mismatches))
    assert len(queries) >= 100
    assert not mismatches, f"{len(mismatches)} answers moved, e.g. {mismatches[:5]}"


# -- the real default model ---------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm_case(sample_index: Path, minilm: Embedder, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The sample corpus with all-MiniLM-L6-v2 (the session's index) and its reference."""
    case = make_case(
        "sample-minilm",
        SAMPLE_CORPUS,
        SAMPLE_RESTRICTED,
        tmp_path_factory.mktemp("leak-minilm"),
        MemoEmbedder(minilm),
        extra_probes=canary_terms() + eval_questions("denied"),
        full=sample_index,
    )
    yield case
    case.close()


def test_real_model_pass(minilm_case: Case, captured_logs: LogCapture) -> None:
    """Every probe once (modes, confidence levels and ceilings in rotation) with all-MiniLM-L6-v2."""
    case = minilm_case
    tally = Tally()
    pairs = {c: case.pair(c) for c in CEILINGS}
    for i, probe in enumerate(case.probes):
        ceiling = CEILINGS[i % 2]
        mode = MODES[(i // 2) % 3]
        confidence = ("normal", "strict")[(i // 6) % 2]
        full, reference = pairs[ceiling]
        a = full.search(probe, limit=20, mode=mode, confidence_level=confidence)  # type: ignore[arg-type]
        b = reference.search(probe, limit=20, mode=mode, confidence_level=confidence)  # type: ignore[arg-type]
        tally.calls += 1
        assert a.search_mode == mode, "the real model must serve meaning search"
        tally.check(case.found[ceiling], ceiling, f"{mode}/{probe!r}", a)
        if a != b:
            tally.mismatches.append(f"{ceiling.label}/{mode}/{probe!r}")
    for cid in case.restricted_ids:
        for ceiling in CEILINGS:
            got = _read(pairs[ceiling][0], cid, 1)
            tally.calls += 1
            if got != ("NotFoundError", NOT_FOUND_MESSAGE):
                tally.leaks.append(cid)
    _check_logs(case.found[INTERNAL], captured_logs, tally)
    figures.add("leakage: distinct probe queries (real model)", len(case.probes))
    figures.add("leakage: tool calls", tally.calls)
    figures.add("leakage: leaks found", len(tally.leaks))
    figures.add("leakage: answers differing from the reference index", len(tally.mismatches))
    assert len(case.probes) >= MIN_PROBES
    assert not tally.leaks, tally.leaks[:5]
    assert not tally.mismatches, tally.mismatches[:5]


# -- through the real MCP server over stdio -------------------------------------------------


def _transport(db: Path, ceiling: Classification, log_file: Path) -> StdioTransport:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "GOVERNED_EVIDENCE_CEILING": ceiling.label,
        "GOVERNED_EVIDENCE_GATE": "off",
        "GOVERNED_EVIDENCE_LOG_LEVEL": "INFO",
        "ORT_DISABLE_TELEMETRY": "1",
    }
    return StdioTransport(
        command=sys.executable,
        args=["-m", "governed_evidence", "serve", "--db", str(db)],
        env=env,
        keep_alive=False,
        log_file=log_file,
    )


def test_stdio_probe_sample_leaks_nothing(minilm_case: Case, tmp_path: Path) -> None:
    """A sample of the probes through `governed-evidence serve`, gate off, stderr logs included."""
    case = minilm_case
    db = tmp_path / "served.sqlite"
    shutil.copyfile(case.full, db)
    found = case.found
    sample = case.probes[:: max(1, len(case.probes) // MIN_STDIO_PROBES)][:MIN_STDIO_PROBES]
    restricted_ids = case.restricted_ids
    in_process = {c: case.service(case.full, c) for c in CEILINGS}
    tally = Tally()

    async def body(client: Client, ceiling: Classification) -> None:
        for i, probe in enumerate(sample):
            # Every mode at "normal", and "strict" in one mode per probe (in rotation).
            for mode, confidence in [(m, "normal") for m in MODES] + [(MODES[i % 3], "strict")]:
                args = {"query": probe, "limit": 20, "mode": mode, "confidence": confidence}
                result = await client.call_tool("search_documents", args)
                tally.calls += 1
                tally.check(found[ceiling], ceiling, f"stdio {mode} {probe!r}", result.structured_content)
                local = in_process[ceiling].search(probe, limit=20, mode=mode, confidence_level=confidence)  # type: ignore[arg-type]
                served = [r["citation_id"] for r in result.structured_content["results"]]
                if served != [r.citation_id for r in local.results]:
                    tally.mismatches.append(f"{ceiling.label}/{mode}/{probe!r}")
            cid = restricted_ids[i % len(restricted_ids)]
            guesses = guessed_ids([cid])
            for guess in (cid, guesses[i % len(guesses)]):
                read = await client.call_tool("read_passage", {"citation_id": guess}, raise_on_error=False)
                tally.calls += 1
                if not read.is_error or read.content[0].text != NOT_FOUND_TEXT:  # type: ignore[union-attr]
                    tally.leaks.append(f"read {guess!r}")
            bad = await client.call_tool("search_documents", {"query": probe, "limit": 0}, raise_on_error=False)
            tally.calls += 1
            assert bad.is_error
        for tool in ("list_sources", "index_status"):
            tally.check(found[ceiling], ceiling, tool, (await client.call_tool(tool, {})).structured_content)
            tally.calls += 1

    logs = {c: tmp_path / f"stderr-{c.label}.log" for c in CEILINGS}

    async def session(ceiling: Classification) -> None:
        async with Client(_transport(db, ceiling, logs[ceiling])) as client:
            await body(client, ceiling)

    for ceiling in CEILINGS:
        asyncio.run(session(ceiling))
        lines = [line for line in logs[ceiling].read_text().splitlines() if line.strip()]
        assert any('"tool": "search_documents"' in line for line in lines)
        for line in lines:
            record = json.loads(line)  # stderr carries JSON records only
            record.pop("timestamp", None)
            hits = scan(found[INTERNAL], {k: v for k, v in record.items() if isinstance(v, str)}, "error")
            if hits:
                tally.leaks.append(f"stderr: {hits[:5]}")
        figures.add("leakage: stderr log lines checked (stdio)", len(lines))
    figures.add("leakage: probe queries through stdio", len(sample))
    figures.add("leakage: tool calls", tally.calls)
    figures.add("leakage: leaks found", len(tally.leaks))
    assert len(sample) >= MIN_STDIO_PROBES
    assert not tally.leaks, tally.leaks[:5]
    assert not tally.mismatches, tally.mismatches[:5]
