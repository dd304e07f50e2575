"""JWTs from an identity provider over real HTTP: a key the test makes signs the tokens, the
server reads its JWKS file, and the roles in a token decide what its caller sees."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastmcp.exceptions import ToolError
from joserfc import jwt
from joserfc.jwk import RSAKey

from governed_evidence.config import Classification, Settings
from governed_evidence.mcp import build_app
from governed_evidence.mcp.calls import Calls
from governed_evidence.serving.auth import make_auth
from tests.serving.server import Running, serving
from tests.serving.test_http import PHRASES, _call, _levels

ISSUER = "https://login.example.org/tenant/v2.0"
AUDIENCE = "api://governed-evidence"
PUBLIC_URL = "https://evidence.example.org"


@pytest.fixture(scope="module")
def key() -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": "idp-1"})


def _token(key: RSAKey, **overrides: Any) -> str:
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "subject-1",
        "preferred_username": "ada@example.org",
        "iat": now,
        "nbf": now - 5,
        "exp": now + 600,
        "roles": ["Evidence.Internal"],
        **overrides,
    }
    claims = {k: v for k, v in claims.items() if v is not None}
    return jwt.encode({"alg": "RS256", "kid": str(key.kid)}, claims, key, algorithms=["RS256"])


@pytest.fixture
def running(built_index: Path, tmp_path: Path, key: RSAKey) -> Iterator[Running]:
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [key.as_dict(private=False)]}), encoding="utf-8")
    settings = Settings(
        jwt_issuer=ISSUER, jwt_audience=AUDIENCE, jwt_jwks_file=jwks, jwt_jwks_url="", public_url=PUBLIC_URL
    )
    levels = _levels(built_index)
    app = build_app(Calls(levels, anonymous=None, transport="http"), auth=make_auth("jwt", settings, tokens_file=None))
    with serving(app) as server:
        yield server
    levels.close()


def _post(running: Running, token: str | None) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    return httpx.post(running.mcp_url, json=body, headers=headers, timeout=10)


def test_a_mapped_role_decides_what_the_caller_sees(running: Running, key: RSAKey) -> None:
    internal = _token(key)
    sources = _call(running, internal, "list_sources")
    assert {d["classification"] for d in sources["documents"]} == {"public", "internal"}
    found = _call(running, internal, "search_documents", query=PHRASES[Classification.RESTRICTED], confidence="normal")
    assert all(r["classification"] != "restricted" for r in found["results"])
    highest = _token(key, roles=["Evidence.Public", "Evidence.Restricted"])
    sources = _call(running, highest, "list_sources")
    assert "restricted" in {d["classification"] for d in sources["documents"]}


def test_a_token_without_a_mapped_role_is_refused_documents(running: Running, key: RSAKey) -> None:
    no_role = _token(key, roles=["Finance.Reader"])
    assert _post(running, no_role).status_code == 200  # a valid caller ...
    with pytest.raises(ToolError, match="no clearance"):  # ... holding no clearance
        _call(running, no_role, "search_documents", query="leave")


@pytest.mark.parametrize(
    "overrides",
    [
        {"exp": int(time.time()) - 60},
        {"nbf": int(time.time()) + 3600},
        {"aud": "api://another-application"},
        {"iss": "https://login.example.org/other-tenant/v2.0"},
        {"exp": None},
    ],
    ids=["expired", "not yet valid", "wrong audience", "wrong issuer", "no expiry"],
)
def test_invalid_tokens_get_401(running: Running, key: RSAKey, overrides: dict[str, Any]) -> None:
    answer = _post(running, _token(key, **overrides))
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].lower().startswith("bearer")


def test_a_token_signed_by_another_key_gets_401(running: Running) -> None:
    forger = RSAKey.generate_key(2048, parameters={"kid": "idp-1"})
    assert _post(running, _token(forger)).status_code == 401


def test_the_challenge_and_metadata_name_where_to_get_a_token(running: Running) -> None:
    answer = _post(running, None)
    assert answer.status_code == 401
    assert "resource_metadata=" in answer.headers["www-authenticate"]
    metadata = httpx.get(f"{running.base}/.well-known/oauth-protected-resource/mcp", timeout=10)
    assert metadata.status_code == 200
    document = metadata.json()
    assert document["resource"].rstrip("/") == f"{PUBLIC_URL}/mcp"
    assert [s.rstrip("/") for s in document["authorization_servers"]] == [ISSUER]
