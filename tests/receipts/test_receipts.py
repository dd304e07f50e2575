"""Receipts of cited answers, and `governed-evidence verify` against an index.

Each answer is taken through a real MCP client (in memory) from the app `serve` builds; the
verdicts come from the real command. The leakage of receipts is in test_receipt_leakage.py.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from governed_evidence.config import Classification
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.receipts.canonical import b64url, digest, text_digest
from governed_evidence.receipts.command import EXIT_CHANGED
from governed_evidence.store.connection import connect
from tests.helpers import HashEmbedder
from tests.receipts.conftest import verify, write_key, write_public

PUBLIC, INTERNAL = Classification.PUBLIC, Classification.INTERNAL
REPO = Path(__file__).resolve().parents[2]
SAMPLE_CORPUS = REPO / "data" / "sample_corpus"
#: Eight passages of several documents of the sample corpus at ceiling internal.
QUESTION = "leave policy travel expenses"
BEREAVEMENT = "internal/hr/leave-policy.md#bereavement-leave:"


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A copy of the sample corpus (22 documents of every format, three levels) a test may edit."""
    if not SAMPLE_CORPUS.is_dir():
        pytest.skip(f"{SAMPLE_CORPUS} is absent")
    return Path(shutil.copytree(SAMPLE_CORPUS, tmp_path / "corpus"))


@pytest.fixture
def built_index(tmp_path: Path, corpus: Path, hash_embedder: HashEmbedder) -> Path:
    db = tmp_path / "index.sqlite"
    ingest_corpus(corpus, db, hash_embedder, ceiling=Classification.RESTRICTED, progress=None)
    return db


def _save(path: Path, answer: dict[str, Any]) -> str:
    path.write_text(json.dumps(answer, indent=2), encoding="utf-8")
    return str(path)


def test_a_search_receipt_verifies_against_the_same_index(
    built_index: Path, served: Any, receipt_key: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = served(built_index, INTERNAL, receipt_key).call("search_documents", {"query": QUESTION, "limit": 8})
    receipt = answer["receipt"]
    ids = [r["citation_id"] for r in answer["results"]]
    assert len(ids) >= 3
    assert receipt["signed"] is True and receipt["sig"] and receipt["tool"] == "search_documents"
    assert receipt["clearance"] == "internal" and receipt["index"]["model"] == "test/hash-bow"
    # What the receipt says of each passage is the SHA-256 of the text exactly as served.
    assert receipt["cited"] == [b64url(hashlib.sha256(r["text"].encode()).digest()) for r in answer["results"]]
    assert receipt["ids"] == digest(ids)
    assert receipt["args"] == digest({"query": QUESTION, "limit": 8, "mode": "hybrid", "confidence": "strict"})
    assert QUESTION not in json.dumps(receipt)

    code, verdict = verify(capsys, _save(tmp_path / "answer.json", answer), "--db", str(built_index))
    assert code == 0, verdict
    assert verdict["signature"] == "valid" and verdict["citation_ids_match"] is True
    assert verdict["same_index"] is True
    assert [(p["citation_id"], p["state"]) for p in verdict["passages"]] == [(i, "unchanged") for i in ids]

    # The human summary says the same.
    capsys.readouterr()
    from governed_evidence.cli import main

    assert main(["verify", str(tmp_path / "answer.json"), "--db", str(built_index)]) == 0
    out = capsys.readouterr().out
    assert "signature: valid" in out and out.count("unchanged: ") == len(ids)


def test_an_edited_file_reads_changed_since_after_an_incremental_ingest(
    corpus: Path,
    built_index: Path,
    served: Any,
    receipt_key: Path,
    hash_embedder: HashEmbedder,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    answer = served(built_index, INTERNAL, receipt_key).call("search_documents", {"query": QUESTION, "limit": 8})
    ids = [r["citation_id"] for r in answer["results"]]
    edited = next(i for i in ids if i.startswith(BEREAVEMENT))
    saved = _save(tmp_path / "answer.json", answer)

    leave = corpus / "internal" / "hr" / "leave-policy.md"
    text = leave.read_text(encoding="utf-8")
    assert text.count("five days of paid compassionate leave") == 1
    leave.write_text(text.replace("five days of paid", "six days of paid"), encoding="utf-8")
    report = ingest_corpus(corpus, built_index, hash_embedder, ceiling=Classification.RESTRICTED, progress=None)
    assert report.files_copied > 0  # incremental: the unchanged files were copied

    code, verdict = verify(capsys, saved, "--db", str(built_index))
    assert code == EXIT_CHANGED
    assert verdict["signature"] == "valid" and verdict["same_index"] is False
    states = {p["citation_id"]: p["state"] for p in verdict["passages"]}
    assert states[edited] == "changed since"
    assert {i: s for i, s in states.items() if i != edited} == {i: "unchanged" for i in ids if i != edited}


def test_a_gone_passage_and_a_superseded_document_say_so(
    corpus: Path,
    built_index: Path,
    served: Any,
    receipt_key: Path,
    hash_embedder: HashEmbedder,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    app = served(built_index, INTERNAL, receipt_key)
    found = app.call("search_documents", {"query": QUESTION, "limit": 8})
    old = "internal/hr/remote-work-policy-2022.md"
    # Superseded documents are kept out of search but stay readable by citation id.
    conn = connect(built_index, readonly=True)
    try:
        (first,) = conn.execute(
            "SELECT p.citation_id FROM passages p JOIN documents d ON d.id = p.document_id WHERE d.path = ? "
            "ORDER BY p.ordinal LIMIT 1",
            (old,),
        ).fetchone()
    finally:
        conn.close()
    read = app.call("read_passage", {"citation_id": first})
    assert read["superseded_by"] == "internal/hr/remote-work-policy-2024.md"
    saved = [_save(tmp_path / "search.json", found), _save(tmp_path / "read.json", read)]
    (corpus / "internal" / "hr" / "leave-policy.md").unlink()
    ingest_corpus(corpus, built_index, hash_embedder, ceiling=Classification.RESTRICTED, progress=None)

    code, verdict = verify(capsys, saved[0], "--db", str(built_index))
    assert code == EXIT_CHANGED
    states = {p["citation_id"]: p["state"] for p in verdict["passages"]}
    assert {s for i, s in states.items() if i.startswith("internal/hr/leave-policy.md")} == {"gone"}
    assert {s for i, s in states.items() if not i.startswith("internal/hr/leave-policy.md")} == {"unchanged"}
    code, verdict = verify(capsys, saved[1], "--db", str(built_index))
    assert code == 0
    assert verdict["passages"] == [
        {"citation_id": first, "state": "unchanged", "superseded_by": "internal/hr/remote-work-policy-2024.md"}
    ]


@pytest.mark.parametrize(
    ("field", "alter"),
    [
        ("cited", lambda r: {**r, "cited": [_flip(r["cited"][0]), *r["cited"][1:]]}),
        ("ids", lambda r: {**r, "ids": _flip(r["ids"])}),
        ("at", lambda r: {**r, "at": r["at"].replace("T", "t")}),
        ("clearance", lambda r: {**r, "clearance": "internaL"}),
        ("args", lambda r: {**r, "args": _flip(r["args"])}),
        ("index", lambda r: {**r, "index": {**r["index"], "fp": _flip(r["index"]["fp"])}}),
        ("sig", lambda r: {**r, "sig": _flip(r["sig"], at=10)}),
    ],
)
def test_one_altered_byte_fails_verification(
    built_index: Path,
    served: Any,
    receipt_key: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    field: str,
    alter: Any,
) -> None:
    answer = served(built_index, INTERNAL, receipt_key).call("search_documents", {"query": QUESTION, "limit": 8})
    altered = {**answer, "receipt": alter(answer["receipt"])}
    changed = [i for i, (a, b) in enumerate(zip(json.dumps(answer), json.dumps(altered), strict=True)) if a != b]
    assert len(changed) == 1, field  # one byte, in the receipt
    code, verdict = verify(capsys, _save(tmp_path / "altered.json", altered), "--db", str(built_index))
    assert code == 1 and verdict["signature"] == "invalid" and verdict["ok"] is False


def _flip(text: str, at: int = 0) -> str:
    """``text`` with one base64url character replaced by another."""
    return text[:at] + ("A" if text[at] != "A" else "B") + text[at + 1 :]


def test_an_altered_citation_id_in_the_answer_is_refused(
    built_index: Path, served: Any, receipt_key: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = served(built_index, INTERNAL, receipt_key).call("search_documents", {"query": QUESTION, "limit": 8})
    results = [dict(r) for r in answer["results"]]
    results[0]["citation_id"] = results[1]["citation_id"]
    code, verdict = verify(
        capsys, _save(tmp_path / "swapped.json", {**answer, "results": results}), "--db", str(built_index)
    )
    assert code == EXIT_CHANGED and verdict["signature"] == "valid"
    assert verdict["citation_ids_match"] is False and verdict["passages"] == []


def test_a_receipt_alone_has_its_signature_checked_and_keys_are_chosen_by_id(
    built_index: Path, served: Any, receipt_key: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = served(built_index, INTERNAL, receipt_key).call("search_documents", {"query": QUESTION, "limit": 3})
    alone = _save(tmp_path / "receipt.json", answer["receipt"])
    old = write_public(write_key(tmp_path / "old.pem"), tmp_path / "old-public.pem")
    current = write_public(receipt_key, tmp_path / "public.pem")

    code, verdict = verify(capsys, alone, "--public-key", str(old), "--public-key", str(current))
    assert code == 0 and verdict["signature"] == "valid" and verdict["passages"] == []
    assert verdict["citation_ids_match"] is None
    # Only a retired key: the receipt's key id is not among those given.
    code, verdict = verify(capsys, alone, "--public-key", str(old))
    assert code == 1 and verdict["signature"] == "unknown key"
    # The raw public key that index_status shows works as well as a PEM file.
    status = served(built_index, INTERNAL, receipt_key).call("index_status", {})
    assert status["receipts"]["key_id"] == answer["receipt"]["key"]
    # (After `=`: a base64url key may start with '-'.)
    code, verdict = verify(capsys, alone, f"--public-key={status['receipts']['public_key']}")
    assert code == 0 and verdict["signature"] == "valid"


def test_without_a_key_receipts_are_given_unsigned_and_say_so(
    built_index: Path, served: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = served(built_index, INTERNAL)
    answer = app.call("search_documents", {"query": QUESTION, "limit": 3})
    receipt = answer["receipt"]
    assert receipt["signed"] is False and receipt["sig"] is None and receipt["key"] is None
    assert receipt["cited"] == [text_digest(r["text"]) for r in answer["results"]]
    code, verdict = verify(capsys, _save(tmp_path / "answer.json", answer), "--db", str(built_index))
    assert code == 1 and verdict["signature"] == "unsigned"
    # The passages are still compared with the index.
    assert {p["state"] for p in verdict["passages"]} == {"unchanged"}
    assert app.call("index_status", {})["receipts"] == {
        "signed": False, "algorithm": None, "key_id": None, "public_key": None
    }  # fmt: skip


def test_read_passage_receipts_cover_the_neighbours_served(
    built_index: Path, served: Any, receipt_key: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = served(built_index, INTERNAL, receipt_key)
    cid = app.call("search_documents", {"query": QUESTION, "limit": 1})["results"][0]["citation_id"]
    answer = app.call("read_passage", {"citation_id": cid, "context": 1})
    views = [*answer["before"], answer["passage"], *answer["after"]]
    assert len(views) == 3
    assert answer["receipt"]["cited"] == [text_digest(v["text"]) for v in views]
    code, verdict = verify(capsys, _save(tmp_path / "read.json", answer), "--db", str(built_index))
    assert code == 0 and [p["citation_id"] for p in verdict["passages"]] == [v["citation_id"] for v in views]


def test_the_audit_trail_records_each_receipt_id(
    built_index: Path, served: Any, receipt_key: Path, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.jsonl"
    app = served(built_index, PUBLIC, receipt_key, audit)
    found = app.call("search_documents", {"query": QUESTION, "limit": 2})
    read = app.call("read_passage", {"citation_id": found["results"][0]["citation_id"]})
    app.call("list_sources", {})
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(line["tool"], line.get("receipt")) for line in lines] == [
        ("search_documents", found["receipt"]["id"]),
        ("read_passage", read["receipt"]["id"]),
        ("list_sources", None),
    ]
    assert found["receipt"]["id"] != read["receipt"]["id"]


def test_capabilities_show_the_public_key(built_index: Path, served: Any, receipt_key: Path) -> None:
    import asyncio

    from fastmcp import Client

    from governed_evidence.mcp.app import CAPABILITIES_URI

    app = served(built_index, INTERNAL, receipt_key)

    async def body() -> dict[str, Any]:
        async with Client(app.app) as client:
            return json.loads((await client.read_resource(CAPABILITIES_URI))[0].text)  # type: ignore[union-attr]

    receipts = asyncio.run(body())["receipts"]
    status = app.call("index_status", {})["receipts"]
    assert receipts["signed"] is True and receipts["algorithm"] == "Ed25519"
    assert (receipts["key_id"], receipts["public_key"]) == (status["key_id"], status["public_key"])
    assert "BEGIN" not in json.dumps(receipts)  # never the private key, nor any PEM


def test_a_receipt_for_eight_results_adds_well_under_a_kilobyte(
    built_index: Path, served: Any, receipt_key: Path
) -> None:
    answer = served(built_index, INTERNAL, receipt_key).call(
        "search_documents", {"query": "how do I claim travel expenses and leave", "limit": 8}
    )
    assert len(answer["results"]) == 8
    without = {k: v for k, v in answer.items() if k != "receipt"}
    added = len(json.dumps(answer, separators=(",", ":"))) - len(json.dumps(without, separators=(",", ":")))
    ids = sum(len(r["citation_id"]) for r in answer["results"])
    print(f"receipt for 8 results: {added} bytes added (the citation ids it binds: {ids} characters)")
    assert added < 900


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("not json", "the receipt is not JSON"),
        ('{"results": []}', "no receipt found"),
        ('{"receipt": {"v": 1, "id": "x", "tool": "search_documents", "args": "a"}}', "the receipt is malformed"),
        ('{"receipt": {"v": 2, "id": "x", "at": "t", "tool": "t", "args": "a", "clearance": "public", '
         '"signed": false}}', "the receipt is malformed: v"),
    ],
)  # fmt: skip
def test_what_is_not_a_receipt_gets_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, text: str, says: str
) -> None:
    from governed_evidence.cli import main

    path = tmp_path / "pasted.json"
    path.write_text(text, encoding="utf-8")
    capsys.readouterr()
    assert main(["verify", str(path)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {says}")
    # The same from stdin, as pasted.
    monkeypatch.setattr("sys.stdin", _Stdin(text.encode()))
    assert main(["verify", "-"]) == 2
    assert says in capsys.readouterr().err


class _Stdin:
    def __init__(self, data: bytes) -> None:
        import io

        self.buffer = io.BytesIO(data)


def test_a_missing_file_and_a_bad_key_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from governed_evidence.cli import main
    from governed_evidence.composition import receipt_issuer
    from governed_evidence.config import Settings
    from governed_evidence.errors import ConfigError

    capsys.readouterr()
    assert main(["verify", str(tmp_path / "absent.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
    not_a_key = tmp_path / "not-a-key.pem"
    not_a_key.write_text("-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n")
    for path, says in ((tmp_path / "absent.pem", "cannot read the receipt key"), (not_a_key, "is not an unencrypted")):
        with pytest.raises(ConfigError, match=says) as raised:
            receipt_issuer(Settings(receipt_key=path))
        assert "bm90IGEga2V5" not in str(raised.value)


def test_the_fingerprint_moves_only_for_levels_that_see_the_change(
    corpus: Path, built_index: Path, hash_embedder: HashEmbedder
) -> None:
    from governed_evidence.receipts.fingerprint import level_fingerprint

    def fingerprints() -> dict[Classification, str]:
        conn = connect(built_index, readonly=True)
        try:
            return {level: level_fingerprint(conn, level) for level in Classification}
        finally:
            conn.close()

    before = fingerprints()
    assert len(set(before.values())) == 3
    salary = corpus / "restricted" / "hr" / "salary-bands-2025.md"
    salary.write_text(salary.read_text(encoding="utf-8") + "\nA closing line added.\n", encoding="utf-8")
    ingest_corpus(corpus, built_index, hash_embedder, ceiling=Classification.RESTRICTED, progress=None)
    after = fingerprints()
    assert after[PUBLIC] == before[PUBLIC] and after[INTERNAL] == before[INTERNAL]
    assert after[Classification.RESTRICTED] != before[Classification.RESTRICTED]
    # A rebuild of the same documents gives the same fingerprints (the build time is not in them).
    ingest_corpus(corpus, built_index, hash_embedder, ceiling=Classification.RESTRICTED, progress=None, force=True)
    assert fingerprints() == after


def test_a_lone_surrogate_in_a_pasted_receipt_fails_its_signature_without_a_crash(
    built_index: Path, served: Any, receipt_key: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = served(built_index, INTERNAL, receipt_key).call("search_documents", {"query": QUESTION, "limit": 2})
    # JSON carries a lone surrogate as an escape; UTF-8 cannot encode it.
    pasted = json.dumps({**answer, "receipt": {**answer["receipt"], "tool": "search_\ud800"}})
    path = tmp_path / "pasted.json"
    path.write_text(pasted, encoding="utf-8")
    code, verdict = verify(capsys, str(path), "--db", str(built_index))
    assert code == 1 and verdict["signature"] == "invalid"
    # The human summary prints it as its code (and an escape sequence likewise).
    from governed_evidence.cli import main

    altered = {**answer, "receipt": {**answer["receipt"], "tool": "search_\ud800\x1b[2J"}}
    path.write_text(json.dumps(altered), encoding="utf-8")
    capsys.readouterr()
    assert main(["verify", str(path), "--db", str(built_index)]) == 1
    out = capsys.readouterr().out
    assert "search_\\ud800\\u001b[2J" in out and "\x1b" not in out
