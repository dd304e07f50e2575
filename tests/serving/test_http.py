"""The team server over real HTTP on 127.0.0.1: per-caller clearance, credentials, Host
checks, health and the audit trail, through the fastmcp client over streamable HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastmcp.exceptions import ToolError

from governed_evidence.access import tokens
from governed_evidence.access.caller import Caller
from governed_evidence.config import Classification
from governed_evidence.errors import ConfigError
from governed_evidence.mcp import build_app
from governed_evidence.mcp.audit import AuditSink
from governed_evidence.mcp.calls import NOT_CLEARED_MESSAGE, Calls
from governed_evidence.search.copies import MemoryBudget
from governed_evidence.search.levels import LevelServices
from governed_evidence.search.service import SearchService
from governed_evidence.serving.http import HttpOptions, check_binding
from tests.helpers import HashEmbedder
from tests.serving.server import Running, get, serving

#: A phrase only each level's documents hold.
PHRASES = {
    Classification.PUBLIC: "standard-class train fares",
    Classification.INTERNAL: "work from home three days per week",
    Classification.RESTRICTED: "acquisition of Quillmoor Analytics",
}


def _levels(db: Path, ceiling: Classification = Classification.RESTRICTED) -> LevelServices:
    embedder = HashEmbedder()
    budget = MemoryBudget(64 * 2**20)

    def make(level: Classification) -> SearchService:
        return SearchService(db, ceiling=level, embedder_factory=lambda: embedder, vector_memory_bytes=budget)

    return LevelServices(make, ceiling)


@pytest.fixture
def issued(tmp_path: Path) -> tuple[Path, dict[Classification, str]]:
    path = tmp_path / "tokens.json"
    return path, {level: tokens.create(path, f"caller-{level.label}", level) for level in Classification}


@pytest.fixture
def team(built_index: Path, issued: tuple[Path, dict[Classification, str]], tmp_path: Path) -> Iterator[Team]:
    path, _ = issued
    audit_file = tmp_path / "audit.jsonl"
    audit = AuditSink.open(str(audit_file))
    levels = _levels(built_index)
    calls = Calls(levels, anonymous=None, audit=audit, transport="http")
    app = build_app(calls, auth=tokens.TokensFileVerifier(path))
    with serving(app, HttpOptions(auth="tokens")) as running:
        yield Team(running, issued[1], path, audit_file, levels)
    audit.close()
    levels.close()


class Team:
    def __init__(
        self, running: Running, issued: dict[Classification, str], path: Path, audit: Path, levels: LevelServices
    ) -> None:
        self.running, self.issued, self.path, self.audit, self.levels = running, issued, path, audit, levels

    def audit_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.audit.read_text(encoding="utf-8").splitlines()]


def _call(running: Running, token: str | None, tool: str, **arguments: Any) -> Any:
    async def go() -> Any:
        async with running.client(token) as client:
            result = await client.call_tool(tool, arguments)
            return result.structured_content

    return asyncio.run(go())


def _search(running: Running, token: str, query: str) -> dict[str, Any]:
    found: dict[str, Any] = _call(running, token, "search_documents", query=query, confidence="normal", limit=10)
    return found


def test_each_caller_sees_its_own_level_and_nothing_above(team: Team) -> None:
    for caller_level, token in team.issued.items():
        sources = _call(team.running, token, "list_sources")
        seen = {d["classification"] for d in sources["documents"]}
        assert seen <= {level.label for level in Classification if level <= caller_level}
        assert caller_level.label in seen
        assert {t["classification"] for t in sources["totals"]} <= {
            level.label for level in Classification if level <= caller_level
        }
        status = _call(team.running, token, "index_status")
        assert status["ceiling"] == caller_level.label
        for level, phrase in PHRASES.items():
            results = _search(team.running, token, phrase)["results"]
            classes = {r["classification"] for r in results}
            assert all(Classification[c.upper()] <= caller_level for c in classes), (caller_level, phrase)
            if level <= caller_level:
                assert any(phrase.split()[-1].lower() in r["text"].lower() for r in results), (caller_level, phrase)
    # One service per level was made, each at its own level.
    assert sorted(s.ceiling for s in team.levels.made()) == list(Classification)


def test_a_passage_above_the_caller_reads_exactly_like_a_missing_one(team: Team) -> None:
    restricted = team.issued[Classification.RESTRICTED]
    found = _search(team.running, restricted, PHRASES[Classification.RESTRICTED])["results"]
    secret = next(r["citation_id"] for r in found if r["classification"] == "restricted")
    public = team.issued[Classification.PUBLIC]
    with pytest.raises(ToolError) as denied:
        _call(team.running, public, "read_passage", citation_id=secret)
    with pytest.raises(ToolError) as missing:
        _call(team.running, public, "read_passage", citation_id=secret[:-4] + "0000")
    assert str(denied.value) == str(missing.value)


def test_missing_wrong_and_revoked_tokens_get_401_with_a_challenge(team: Team) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

    def post(token: str | None) -> httpx.Response:
        extra = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.post(team.running.mcp_url, json=body, headers={**headers, **extra}, timeout=10)

    internal = team.issued[Classification.INTERNAL]
    assert post(internal).status_code == 200
    for token in (None, "ge_not-a-token", internal[:-1] + ("A" if internal[-1] != "A" else "B")):
        answer = post(token)
        assert answer.status_code == 401, token
        assert answer.headers["www-authenticate"].lower().startswith("bearer")
    assert tokens.revoke(team.path, "caller-internal")
    # The very next request, no restart.
    assert post(internal).status_code == 401
    assert post(team.issued[Classification.PUBLIC]).status_code == 200


def test_a_401_says_in_json_how_to_get_a_token_and_nothing_of_the_index(team: Team) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    internal = team.issued[Classification.INTERNAL]
    answers = {}
    for name, extra in (
        ("missing", {}),
        ("wrong", {"Authorization": "Bearer ge_not-a-token"}),
        ("other scheme", {"Authorization": "Basic dXNlcjpwYXNz"}),
        ("near miss", {"Authorization": f"Bearer {internal[:-1]}{'A' if internal[-1] != 'A' else 'B'}"}),
    ):
        answer = httpx.post(team.running.mcp_url, json=body, headers={**headers, **extra}, timeout=10)
        assert answer.status_code == 401, name
        assert answer.headers["content-type"] == "application/json"
        assert answer.headers["www-authenticate"].lower().startswith("bearer")
        answers[name] = answer.json()
    for name, said in answers.items():
        assert set(said) == {"error", "error_description", "hint"}, name
        assert "governed-evidence token create" in said["hint"]
        text = json.dumps(said).lower()
        for word in ("restricted", "internal", "public", "passage", "document", "minilm", "index"):
            assert word not in text, (name, word)
    assert answers["missing"]["error"] == answers["other scheme"]["error"] == "unauthorized"
    assert answers["wrong"] == answers["near miss"]
    assert answers["wrong"]["error"] == "invalid_token"


def test_health_answers_without_a_credential_and_says_nothing_of_the_corpus(team: Team) -> None:
    answer = get(f"{team.running.base}/health")
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok"}


def test_a_foreign_host_or_origin_is_refused(team: Team) -> None:
    assert get(f"{team.running.base}/health", Host="evil.example").status_code == 421
    assert get(f"{team.running.base}/health", Host="localhost").status_code == 200
    assert get(f"{team.running.base}/health", Origin="https://evil.example").status_code == 403
    # No origin is listed by default: not even a page on this machine (fastmcp's own rule lets
    # every loopback origin in when the Host is loopback), nor the server's own origin.
    for origin in ("http://127.0.0.1:5173", "http://localhost", "https://127.0.0.1:8000", team.running.base, "null"):
        assert get(f"{team.running.base}/health", Origin=origin).status_code == 403, origin
        assert _post_origin(team, origin).status_code == 403, origin
    # An MCP client that is not a browser sends no Origin.
    assert _post_origin(team, None).status_code == 200


def _post_origin(team: Team, origin: str | None) -> httpx.Response:
    token = team.issued[Classification.INTERNAL]
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    if origin is not None:
        headers["Origin"] = origin
    return httpx.post(team.running.mcp_url, json=body, headers=headers, timeout=10)


def test_an_allowed_host_and_origin_are_accepted(built_index: Path) -> None:
    levels = _levels(built_index)
    app = build_app(Calls(levels, anonymous=Caller("anonymous", Classification.PUBLIC, "network"), transport="http"))
    options = HttpOptions(allowed_hosts=("evidence.internal",), allowed_origins=("https://evidence.internal",))
    with serving(app, options) as running:
        assert get(f"{running.base}/health", Host="evidence.internal").status_code == 200
        assert get(f"{running.base}/health", Host="other.internal").status_code == 421
        assert get(f"{running.base}/health", Origin="https://evidence.internal").status_code == 200
        # Compared as browsers compare origins: case and the default port do not matter.
        assert get(f"{running.base}/health", Origin="HTTPS://Evidence.Internal:443").status_code == 200
        assert get(f"{running.base}/health", Origin="https://evidence.internal:8443").status_code == 403
        assert get(f"{running.base}/health", Origin="http://evidence.internal").status_code == 403
        assert get(f"{running.base}/health", Origin="http://127.0.0.1:5173").status_code == 403
        assert get(f"{running.base}/health", Origin="https://other.internal").status_code == 403
    levels.close()


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::"])
def test_a_non_loopback_bind_without_auth_is_refused(host: str) -> None:
    with pytest.raises(ConfigError, match="without authentication"):
        check_binding(HttpOptions(host=host))
    check_binding(HttpOptions(host=host, auth="tokens"))
    check_binding(HttpOptions(host=host, allow_unauthenticated=True))
    check_binding(HttpOptions(host="127.0.0.1"))


def test_one_audit_line_per_call_without_query_text(team: Team) -> None:
    token = team.issued[Classification.INTERNAL]
    query = "work from home three days per week"
    found = _search(team.running, token, query)
    with pytest.raises(ToolError):
        _call(team.running, token, "read_passage", citation_id="p-doesnotexist")
    _call(team.running, token, "list_sources")
    lines = team.audit_lines()
    assert [line["tool"] for line in lines] == ["search_documents", "read_passage", "list_sources"]
    first = lines[0]
    assert first["caller"] == "caller-internal" and first["via"] == "token"
    assert first["clearance_applied"] == "internal"
    assert first["status"] == found["status"]
    assert first["returned"] == [r["citation_id"] for r in found["results"]]
    assert {"time", "ms", "results"} <= set(first)
    assert lines[1]["status"] == "error" and lines[1]["error"] == "NotFoundError"
    text = team.audit.read_text(encoding="utf-8")
    assert query not in text and "three days" not in text
    assert token not in text


def test_queries_are_audited_only_when_the_operator_says_so(built_index: Path, tmp_path: Path) -> None:
    audit_file = tmp_path / "audit.jsonl"
    audit = AuditSink.open(str(audit_file), record_queries=True)
    levels = _levels(built_index)
    calls = Calls(levels, anonymous=Caller("anonymous", Classification.PUBLIC, "network"), audit=audit)
    with serving(build_app(calls)) as running:
        _call(running, None, "search_documents", query="train fares receipts")
    audit.close()
    levels.close()
    (line,) = [json.loads(x) for x in audit_file.read_text(encoding="utf-8").splitlines()]
    assert line["query"] == "train fares receipts"
    assert line["via"] == "network" and line["clearance_applied"] == "public"
    # Passage text never: the returned passages are named by citation id only.
    assert "standard-class" not in audit_file.read_text(encoding="utf-8")


def test_a_caller_without_clearance_is_refused_documents(built_index: Path) -> None:
    levels = _levels(built_index)
    calls = Calls(levels, anonymous=Caller("no-role", None, "network"), transport="http")
    with serving(build_app(calls)) as running, pytest.raises(ToolError, match="no clearance"):
        _call(running, None, "list_sources")
    assert levels.made() == []
    assert "no clearance" in NOT_CLEARED_MESSAGE
    levels.close()
