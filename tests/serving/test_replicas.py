"""Two real replicas of the team server over one index file answer alike, request by request.

Two ``governed-evidence serve --transport http --auth tokens`` processes on 127.0.0.1 (the
real default model, an index built by the real ``ingest``, tokens issued by ``token
create``), and a client that sends every call to the other replica than the one before:
stateless HTTP means any replica may answer any request, so the answers must be the same,
field for field. Then a token revoked with ``token revoke`` is refused by both replicas on
their very next request, without a restart.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport

from tests.helpers import run_cli, small_corpus

pytestmark = pytest.mark.model

REPO = Path(__file__).resolve().parents[2]
#: Start-up of one replica: the MCP imports and the listening socket (the model loads in the
#: background; the first search waits for it).
START_TIMEOUT_S = 120.0
#: Stopping one replica after SIGTERM (uvicorn's graceful shutdown, then the model thread).
STOP_TIMEOUT_S = 30.0

PUBLIC, RESTRICTED = "replica-public", "replica-restricted"

#: Exact facts, paraphrases and one question the corpus cannot answer.
QUERIES = (
    "standard-class train fares",
    "how many days can I work from home",
    "time off when a relative dies",
    "acquisition of Quillmoor Analytics",
    "who approves a deployment",
    "Can I bring my dog to the office?",
)


def _env() -> dict[str, str]:
    """This environment without the operator's settings (a CI job's ceiling, an audit log)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVERNED_EVIDENCE_")}
    return {**env, "GOVERNED_EVIDENCE_LOG_LEVEL": "INFO", "ORT_DISABLE_TELEMETRY": "1"}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    operator = tuple(k for k in os.environ if k.startswith("GOVERNED_EVIDENCE_") and k != "GOVERNED_EVIDENCE_LOG_LEVEL")
    return run_cli(*args, env={"ORT_DISABLE_TELEMETRY": "1"}, drop=operator)


def _free_ports(count: int) -> list[int]:
    """Distinct free ports on 127.0.0.1 (held together while chosen, so never the same twice)."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


@dataclass
class Replica:
    name: str
    port: int
    proc: subprocess.Popen[bytes]
    stderr_path: Path
    stderr_file: IO[bytes] = field(repr=False)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.base}/mcp"

    def stderr_tail(self, lines: int = 40) -> str:
        self.stderr_file.flush()
        text = self.stderr_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])


def _start(name: str, port: int, db: Path, tokens_file: Path, tmp: Path) -> Replica:
    stderr_path = tmp / f"{name}.stderr"
    stderr_file = stderr_path.open("wb")
    command = [
        sys.executable,
        "-m",
        "governed_evidence",
        "serve",
        "--transport",
        "http",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--auth",
        "tokens",
        "--tokens-file",
        str(tokens_file),
        "--db",
        str(db),
        "--ceiling",
        "restricted",
    ]
    proc = subprocess.Popen(
        command, cwd=REPO, env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr_file
    )
    return Replica(name, port, proc, stderr_path, stderr_file)


def _wait_healthy(replica: Replica) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if replica.proc.poll() is not None:
            pytest.fail(f"{replica.name} exited with {replica.proc.returncode}:\n{replica.stderr_tail()}")
        try:
            answer = httpx.get(f"{replica.base}/health", timeout=2)
        except httpx.TransportError:
            time.sleep(0.2)
            continue
        assert answer.status_code == 200, (answer.status_code, answer.text)
        assert answer.json() == {"status": "ok"}
        return
    pytest.fail(f"{replica.name} did not answer /health within {START_TIMEOUT_S:.0f} s:\n{replica.stderr_tail()}")


def _stop(replica: Replica) -> int | None:
    if replica.proc.poll() is None:
        replica.proc.terminate()
        try:
            replica.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            replica.proc.kill()
            replica.proc.wait(timeout=STOP_TIMEOUT_S)
            replica.stderr_file.close()
            return None
    replica.stderr_file.close()
    return replica.proc.returncode


@dataclass
class Cluster:
    replicas: tuple[Replica, Replica]
    tokens_file: Path
    tokens: dict[str, str]
    db: Path
    calls: list[str] = field(default_factory=list)
    #: Tokens issued and revoked since (never to appear in a log either).
    retired: list[str] = field(default_factory=list)

    def next_replica(self) -> Replica:
        """Strict alternation: every call goes to the other replica than the call before."""
        replica = self.replicas[len(self.calls) % 2]
        self.calls.append(replica.name)
        return replica

    def failure_context(self) -> str:
        return "\n".join(f"--- {r.name} stderr ---\n{r.stderr_tail()}" for r in self.replicas)


def _create_token(tokens_file: Path, name: str, clearance: str) -> str:
    made = _cli(
        "token", "create", "--name", name, "--clearance", clearance, "--tokens-file", str(tokens_file), "--json"
    )
    assert made.returncode == 0, made.stderr
    printed = json.loads(made.stdout)
    assert printed["name"] == name and printed["clearance"] == clearance
    token: str = printed["token"]
    assert token.startswith("ge_")
    return token


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("replicas")
    corpus = small_corpus(tmp / "corpus")
    db = tmp / "evidence.sqlite"
    built = _cli("ingest", "--corpus", str(corpus), "--db", str(db), "--ceiling", "restricted")
    assert built.returncode == 0, built.stderr
    tokens_file = tmp / "tokens.json"
    issued = {
        name: _create_token(tokens_file, name, clearance)
        for name, clearance in ((PUBLIC, "public"), (RESTRICTED, "restricted"))
    }
    replicas: list[Replica] = []
    try:
        # Both start at once (their model loads overlap), then each is waited for.
        for name, port in zip(("replica-a", "replica-b"), _free_ports(2), strict=True):
            replicas.append(_start(name, port, db, tokens_file, tmp))
        for replica in replicas:
            _wait_healthy(replica)
        yield Cluster((replicas[0], replicas[1]), tokens_file, issued, db)
    finally:
        for replica in replicas:
            _stop(replica)


def _call(replica: Replica, token: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tool call through a fresh fastmcp client (stateless: nothing carries over)."""

    async def go() -> dict[str, Any]:
        transport = StreamableHttpTransport(replica.mcp_url, headers={"Authorization": f"Bearer {token}"})
        async with Client(transport, timeout=120) as client:
            result = await client.call_tool(tool, arguments)
            assert isinstance(result.structured_content, dict), result
            answer = dict(result.structured_content)
            if isinstance(answer.get("receipt"), dict):
                # A receipt's id, time and signature differ on every call; the rest may not differ
                # between replicas.
                answer["receipt"] = {k: v for k, v in answer["receipt"].items() if k not in ("id", "at", "sig")}
            return answer

    return asyncio.run(go())


#: (token name, tool, arguments)
Request = tuple[str, str, dict[str, Any]]


def _same_on_both(cluster: Cluster, requests: list[Request]) -> list[dict[str, Any]]:
    """Each request answered by both replicas, asserted identical; the calls strictly alternate.

    Two passes over an odd number of requests (one is added when needed): request j goes to
    replica j % 2 in the first pass and to the other in the second, so each replica takes
    half of the first calls, and no two consecutive calls reach the same replica.
    """
    sent = requests if len(requests) % 2 else [*requests, (PUBLIC, "index_status", {})]
    answers: list[dict[str, dict[str, Any]]] = [{} for _ in sent]
    for _ in range(2):
        for j, (token_name, tool, arguments) in enumerate(sent):
            replica = cluster.next_replica()
            answers[j][replica.name] = _call(replica, cluster.tokens[token_name], tool, arguments)
    for request, by_replica in zip(sent, answers, strict=True):
        a, b = (by_replica[r.name] for r in cluster.replicas)
        assert a == b, f"{request}: the replicas differ\nA: {a}\nB: {b}\n{cluster.failure_context()}"
    return [by_replica[cluster.replicas[0].name] for by_replica in answers[: len(requests)]]


def _search(token: str, query: str, **options: Any) -> Request:
    return (token, "search_documents", {"query": query, "limit": 5, **options})


def test_alternating_replicas_answer_every_tool_identically(cluster: Cluster) -> None:
    searches = [_search(token, query, confidence="normal") for query in QUERIES for token in (PUBLIC, RESTRICTED)]
    # The default (strict) gate, and keyword-only ranking.
    searches += [_search(token, QUERIES[0]) for token in (PUBLIC, RESTRICTED)]
    searches += [_search(RESTRICTED, "train fares", mode="keyword")]
    found = dict(zip((json.dumps(r, sort_keys=True) for r in searches), _same_on_both(cluster, searches), strict=True))

    def answer(token: str, query: str) -> dict[str, Any]:
        return found[json.dumps(_search(token, query, confidence="normal"), sort_keys=True)]

    # The answers are real ones, each at its caller's level: two replicas on a wrong index or
    # at a wrong ceiling would agree as well.
    fares = answer(PUBLIC, "standard-class train fares")
    assert fares["status"] == "OK" and fares["ceiling"] == "public" and fares["search_mode"] == "hybrid"
    assert "train fares" in fares["results"][0]["text"]
    secret = answer(RESTRICTED, "acquisition of Quillmoor Analytics")
    assert secret["ceiling"] == "restricted"
    assert secret["results"][0]["classification"] == "restricted" and "Quillmoor" in secret["results"][0]["text"]
    assert all(r["classification"] == "public" for r in answer(PUBLIC, "acquisition of Quillmoor Analytics")["results"])
    remote = answer(RESTRICTED, "how many days can I work from home")
    assert any("three days per week" in r["text"] for r in remote["results"]), remote
    for token in (PUBLIC, RESTRICTED):
        assert answer(token, "Can I bring my dog to the office?")["status"] == "NO_RELEVANT_CONTEXT"

    # Every passage either caller was shown, read back through both replicas.
    cited = sorted(
        {
            (request[0], r["citation_id"])
            for request, a in zip(searches, found.values(), strict=True)
            for r in a["results"]
        }
    )
    assert len({cid for _, cid in cited}) >= 5, cited
    reads: list[Request] = [(token, "read_passage", {"citation_id": cid, "context": 1}) for token, cid in cited]
    for page in _same_on_both(cluster, reads):
        assert page["passage"]["text"]

    tokens = (PUBLIC, RESTRICTED)
    sources = dict(zip(tokens, _same_on_both(cluster, [(t, "list_sources", {}) for t in tokens]), strict=True))
    assert {d["classification"] for d in sources[PUBLIC]["documents"]} == {"public"}
    assert "restricted" in {d["classification"] for d in sources[RESTRICTED]["documents"]}
    statuses = dict(zip(tokens, _same_on_both(cluster, [(t, "index_status", {}) for t in tokens]), strict=True))
    for token, level in zip(tokens, ("public", "restricted"), strict=True):
        status = statuses[token]
        assert status["ok"] and status["integrity"] == "ok" and status["semantic_search"] == "available"
        assert status["ceiling"] == level
        assert status["built_at"]  # one file: one build time, on both replicas

    # The client really did alternate, call after call, and each replica took half.
    assert all(a != b for a, b in zip(cluster.calls, cluster.calls[1:], strict=False))
    assert cluster.calls.count("replica-a") == cluster.calls.count("replica-b")


def _post(replica: Replica, token: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_sources", "arguments": {}}}
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
    }
    return httpx.post(replica.mcp_url, json=body, headers=headers, timeout=30)


def test_a_revoked_token_is_refused_by_both_replicas_without_a_restart(cluster: Cluster) -> None:
    public, restricted = cluster.tokens[PUBLIC], cluster.tokens[RESTRICTED]
    pids = [r.proc.pid for r in cluster.replicas]
    for replica in cluster.replicas:
        answer = _post(replica, restricted)
        assert answer.status_code == 200, (replica.name, answer.text, cluster.failure_context())
        assert answer.json()["result"]["structuredContent"]["ceiling"] == "restricted"
        assert _post(replica, public).status_code == 200

    revoked = _cli("token", "revoke", "--name", RESTRICTED, "--tokens-file", str(cluster.tokens_file))
    assert revoked.returncode == 0, revoked.stderr

    for replica in cluster.replicas:
        refused = _post(replica, restricted)
        assert refused.status_code == 401, (replica.name, refused.status_code, refused.text)
        assert refused.headers["www-authenticate"].lower().startswith("bearer")
        # The other token still works: the file was re-read, not abandoned.
        kept = _post(replica, public)
        assert kept.status_code == 200, (replica.name, kept.text)
        assert kept.json()["result"]["structuredContent"]["ceiling"] == "public"
    cluster.retired.append(restricted)

    # Issued again under the same name (a new token): both replicas take it at once, and
    # still refuse the old one. The other tests keep a working restricted token.
    renewed = _create_token(cluster.tokens_file, RESTRICTED, "restricted")
    cluster.tokens[RESTRICTED] = renewed
    for replica in cluster.replicas:
        answer = _post(replica, renewed)
        assert answer.status_code == 200, (replica.name, answer.text)
        assert answer.json()["result"]["structuredContent"]["ceiling"] == "restricted"
        assert _post(replica, restricted).status_code == 401
    # The same processes throughout: nothing restarted.
    assert [r.proc.pid for r in cluster.replicas] == pids
    assert all(r.proc.poll() is None for r in cluster.replicas)


def test_replicas_never_log_a_token(cluster: Cluster) -> None:
    logs = "".join(r.stderr_path.read_text(encoding="utf-8", errors="replace") for r in cluster.replicas)
    for token in [*cluster.tokens.values(), *cluster.retired]:
        assert token not in logs
