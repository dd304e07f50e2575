"""Receipts leak nothing: a caller's receipt is what a server without the documents above
their level would give, over stdio and over HTTP (must be zero).

Two oracles, on the sample corpus:

- *Reference*: a caller's receipt equals, apart from its id, time and signature, the receipt
  a server over an index built without any document above the caller's level gives for the
  same call (the whole answer is compared too). The index fingerprint, the hashes of the
  passages and of their ids, the arguments' hash and the key are all held to it.
- *Two clearances*: callers at public and at internal asking the same question get receipts
  that differ only in what each may see (the clearance, the fingerprint, the passages), and
  each one's passages hash exactly the texts that caller was served.

Over stdio each server is the real `serve` in a child process with the receipt key in its
environment; over HTTP, the team server with a bearer token per caller (tests/hardening/team.py).
"""

from __future__ import annotations

import asyncio
import os
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from governed_evidence.config import Classification
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.receipts.canonical import digest, text_digest
from governed_evidence.receipts.keys import load_signer
from tests.hardening.probes import SAMPLE_CORPUS, SAMPLE_RESTRICTED, canary_terms, copy_without, eval_questions
from tests.hardening.team import RECEIPTS, answer, http_client, stdio_app, steady_receipt, team_server
from tests.helpers import HashEmbedder
from tests.receipts.conftest import write_key

PUBLIC, INTERNAL, RESTRICTED = Classification.PUBLIC, Classification.INTERNAL, Classification.RESTRICTED
#: What may differ between two callers' receipts for the same call: what each may see.
SEEN = {"clearance", "index", "ids", "cited"}


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sample corpus built whole, and built without its restricted documents."""
    if not SAMPLE_CORPUS.is_dir():
        pytest.skip(f"{SAMPLE_CORPUS} is absent")
    work = tmp_path_factory.mktemp("receipt-leakage")
    embedder = HashEmbedder()
    full, reference = work / "full.sqlite", work / "reference.sqlite"
    ingest_corpus(SAMPLE_CORPUS, full, embedder, ceiling=RESTRICTED, progress=None)
    without = copy_without(SAMPLE_CORPUS, work / "without", SAMPLE_RESTRICTED)
    ingest_corpus(without, reference, embedder, ceiling=RESTRICTED, progress=None)
    return {"full": full, "reference": reference, "work": work}


def _questions() -> list[str]:
    """Questions aimed at the restricted documents (their canary terms) and ordinary ones."""
    canaries = canary_terms() if SAMPLE_CORPUS.is_dir() else []
    ordinary = eval_questions("answerable")[:8] or ["leave policy travel expenses"]
    return canaries[:16] + ordinary


def _compare_two_clearances(low: dict[str, Any], high: dict[str, Any]) -> None:
    """Receipts of the same call at public (``low``) and internal (``high``) answers."""
    a, b = low["structured"]["receipt"], high["structured"]["receipt"]
    assert {k: v for k, v in a.items() if k not in SEEN} == {k: v for k, v in b.items() if k not in SEEN}
    assert (a["clearance"], b["clearance"]) == ("public", "internal")
    assert a["index"]["fp"] != b["index"]["fp"] and a["index"]["model"] == b["index"]["model"]
    for got in (low, high):
        results = got["structured"]["results"]
        receipt = got["structured"]["receipt"]
        assert set(receipt) >= {"v", "tool", "args", "clearance", "index", "ids", "cited", "key", "signed"}
        assert receipt["cited"] == [text_digest(r["text"]) for r in results]
        assert receipt["ids"] == digest([r["citation_id"] for r in results])


def steady_id(structured: dict[str, Any] | None) -> str:
    assert structured is not None
    receipt = structured["receipt"]
    assert receipt["sig"] and steady_receipt(receipt) != receipt
    return str(receipt["id"])


def _stdio(db: Path, ceiling: Classification, key: Path, log: Path) -> StdioTransport:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "GOVERNED_EVIDENCE_CEILING": ceiling.label,
        "GOVERNED_EVIDENCE_GATE": "off",
        "GOVERNED_EVIDENCE_RECEIPT_KEY": str(key),
        "ORT_DISABLE_TELEMETRY": "1",
    }
    return StdioTransport(
        command=sys.executable,
        args=["-m", "governed_evidence", "serve", "--db", str(db)],
        env=env,
        keep_alive=False,
        log_file=log,
    )


@pytest.mark.model
def test_stdio_receipts_equal_the_reference_and_differ_between_clearances_only_in_what_each_sees(
    indexes: dict[str, Path],
) -> None:
    key = write_key(indexes["work"] / "stdio-key.pem")
    key_id = load_signer(key).public.id
    questions = _questions()
    calls = 0
    #: Questions both levels found passages for (the receipts then cite something).
    cited = 0

    async def body() -> None:
        nonlocal calls, cited
        async with AsyncExitStack() as stack:
            clients: dict[tuple[str, Classification], Client[StdioTransport]] = {}
            for which in ("full", "reference"):
                for level in (PUBLIC, INTERNAL):
                    log = indexes["work"] / f"stdio-{which}-{level.label}.log"
                    transport = _stdio(indexes[which], level, key, log)
                    clients[which, level] = await stack.enter_async_context(Client(transport, timeout=120))
            for question in questions:
                args = {"query": question, "limit": 8, "mode": "keyword", "confidence": "normal"}
                got = {
                    place: answer(await client.call_tool("search_documents", args, raise_on_error=False))
                    for place, client in clients.items()
                }
                calls += len(got)
                for level in (PUBLIC, INTERNAL):
                    full, reference = got["full", level], got["reference", level]
                    assert not full["error"], full
                    assert full == reference, (level.label, question)
                    assert full["structured"]["receipt"]["key"] == key_id
                _compare_two_clearances(got["full", PUBLIC], got["full", INTERNAL])
                cited += all(got["full", level]["structured"]["results"] for level in (PUBLIC, INTERNAL))
                # A read of what was found: the same receipt as the reference's.
                for level in (PUBLIC, INTERNAL):
                    results = got["full", level]["structured"]["results"]
                    if not results:
                        continue
                    read = {"citation_id": results[0]["citation_id"], "context": 2}
                    full_read = answer(await clients["full", level].call_tool("read_passage", read))
                    ref_read = answer(await clients["reference", level].call_tool("read_passage", read))
                    calls += 2
                    assert full_read == ref_read, (level.label, read)

    asyncio.run(body())
    assert calls >= 4 * len(questions) and cited >= 5


def test_http_callers_of_two_clearances_get_receipts_that_differ_only_in_what_each_sees(
    indexes: dict[str, Path], tmp_path: Path
) -> None:
    embedder = HashEmbedder()
    questions = _questions()

    async def body(team: Any) -> list[str]:
        ids: list[str] = []
        async with AsyncExitStack() as stack:
            http = {
                level: await stack.enter_async_context(http_client(team.running, team.tokens[level]))
                for level in (PUBLIC, INTERNAL)
            }
            # Each caller's reference never held a document above internal.
            refs = {}
            for level in (PUBLIC, INTERNAL):
                app = stack.enter_context(stdio_app(indexes["reference"], level, embedder, gate=False))
                refs[level] = await stack.enter_async_context(Client(app))
            for question in questions:
                args = {"query": question, "limit": 8, "mode": "keyword", "confidence": "normal"}
                raw = {
                    level: await http[level].call_tool("search_documents", args, raise_on_error=False)
                    for level in (PUBLIC, INTERNAL)
                }
                got = {level: answer(result) for level, result in raw.items()}
                for level in (PUBLIC, INTERNAL):
                    expected = answer(await refs[level].call_tool("search_documents", args, raise_on_error=False))
                    assert got[level] == expected, (level.label, question)
                    assert got[level]["structured"]["receipt"]["key"] == RECEIPTS.public.id
                _compare_two_clearances(got[PUBLIC], got[INTERNAL])
                ids += [steady_id(raw[level].structured_content) for level in (PUBLIC, INTERNAL)]
        return ids

    with team_server(indexes["full"], embedder, tmp_path, gate=False) as team:
        issued = asyncio.run(body(team))
        lines = [line for line in team.audit_lines() if line["tool"] == "search_documents"]
    # The trail names each receipt beside its own caller and level, and nowhere else.
    assert [line["receipt"] for line in lines] == issued
    assert [line["clearance_applied"] for line in lines] == ["public", "internal"] * len(questions)
    assert len(set(issued)) == len(issued)
