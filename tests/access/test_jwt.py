"""JWTs from an identity provider become a Caller with the clearance their roles map to.

Keys are generated here and tokens signed with joserfc, as an identity provider would; the
verifier reads them from a JWKS file or from a JWKS URL served on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastmcp.server.auth import AccessToken
from joserfc import jwt
from joserfc.jwk import RSAKey
from structlog.testing import capture_logs

from governed_evidence.access.caller import CALLER_CLAIM, Caller
from governed_evidence.access.jwt import ClearanceJWTVerifier, make_jwt_verifier, parse_role_map
from governed_evidence.config import Classification, Settings
from governed_evidence.errors import ConfigError

ISSUER = "https://login.example.org/tenant/v2.0"
AUDIENCE = "api://governed-evidence"
ROLE_MAP = {
    "Evidence.Public": Classification.PUBLIC,
    "Evidence.Internal": Classification.INTERNAL,
    "Evidence.Restricted": Classification.RESTRICTED,
}


@pytest.fixture(scope="module")
def key() -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": "key-1"})


@pytest.fixture(scope="module")
def other_key() -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": "key-2"})


@pytest.fixture(autouse=True)
def _no_jwt_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings read the environment: an operator's own variables must not leak in."""
    for name in [
        "GOVERNED_EVIDENCE_JWT_ISSUER",
        "GOVERNED_EVIDENCE_JWT_AUDIENCE",
        "GOVERNED_EVIDENCE_JWT_JWKS_URL",
        "GOVERNED_EVIDENCE_JWT_JWKS_FILE",
        "GOVERNED_EVIDENCE_JWT_ALGORITHM",
        "GOVERNED_EVIDENCE_JWT_REQUIRED_SCOPE",
        "GOVERNED_EVIDENCE_JWT_ROLES_CLAIM",
        "GOVERNED_EVIDENCE_JWT_ROLE_MAP",
    ]:
        monkeypatch.delenv(name, raising=False)


def _jwks(*keys: RSAKey, **extra: str) -> dict[str, Any]:
    return {"keys": [{**k.as_dict(private=False), **extra} for k in keys]}


def _write_jwks(path: Path, *keys: RSAKey, **extra: str) -> Path:
    path.write_text(json.dumps(_jwks(*keys, **extra)), encoding="utf-8")
    return path


def _claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "3f2a-subject",
        "preferred_username": "ada@example.org",
        "iat": now,
        "exp": now + 600,
        "roles": ["Evidence.Internal"],
    }
    claims.update(overrides)
    return {k: v for k, v in claims.items() if v is not None}


def _sign(key: RSAKey, claims: dict[str, Any] | None = None, *, kid: str | None = None) -> str:
    header = {"alg": "RS256", "kid": kid or str(key.kid)}
    return jwt.encode(header, claims if claims is not None else _claims(), key, algorithms=["RS256"])


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _verifier(jwks_file: Path, **kwargs: Any) -> ClearanceJWTVerifier:
    return ClearanceJWTVerifier(issuer=ISSUER, audience=AUDIENCE, role_map=ROLE_MAP, jwks_file=jwks_file, **kwargs)


def _verify(verifier: ClearanceJWTVerifier, token: str) -> AccessToken | None:
    return asyncio.run(verifier.verify_token(token))


def _caller(verifier: ClearanceJWTVerifier, token: str) -> Caller:
    access = _verify(verifier, token)
    assert access is not None, "the token was refused"
    return Caller.from_claim(access.claims[CALLER_CLAIM])


@pytest.fixture
def jwks_file(tmp_path: Path, key: RSAKey) -> Path:
    return _write_jwks(tmp_path / "jwks.json", key)


@pytest.fixture
def verifier(jwks_file: Path) -> ClearanceJWTVerifier:
    return _verifier(jwks_file)


# --- accepted tokens and the caller they become ---------------------------------------


def test_a_mapped_role_gives_its_clearance(verifier: ClearanceJWTVerifier, key: RSAKey) -> None:
    access = _verify(verifier, _sign(key))
    assert access is not None
    assert Caller.from_claim(access.claims[CALLER_CLAIM]) == Caller("ada@example.org", Classification.INTERNAL, "jwt")
    # The token's own claims are kept beside the caller (the audit trail may want them).
    assert access.claims["sub"] == "3f2a-subject"
    assert access.expires_at is not None


@pytest.mark.parametrize(("role", "level"), list(ROLE_MAP.items()))
def test_each_role_maps_to_its_level(
    verifier: ClearanceJWTVerifier, key: RSAKey, role: str, level: Classification
) -> None:
    # PUBLIC is the IntEnum 0: a truthiness test anywhere on the way would turn it into None.
    access = _verify(verifier, _sign(key, _claims(roles=[role])))
    assert access is not None
    assert access.claims[CALLER_CLAIM]["clearance"] == level.label
    assert Caller.from_claim(access.claims[CALLER_CLAIM]).clearance is level


def test_the_highest_mapped_role_wins(verifier: ClearanceJWTVerifier, key: RSAKey) -> None:
    roles = ["Evidence.Public", "Evidence.Restricted", "Evidence.Internal", "Unrelated.Role"]
    assert _caller(verifier, _sign(key, _claims(roles=roles))).clearance is Classification.RESTRICTED


def test_a_space_separated_roles_claim_is_read(verifier: ClearanceJWTVerifier, key: RSAKey) -> None:
    token = _sign(key, _claims(roles="Evidence.Public Evidence.Internal"))
    assert _caller(verifier, token).clearance is Classification.INTERNAL


def test_the_roles_claim_name_is_configurable(jwks_file: Path, key: RSAKey) -> None:
    verifier = _verifier(jwks_file, roles_claim="groups")
    token = _sign(key, _claims(roles=["Evidence.Restricted"], groups=["Evidence.Public"]))
    assert _caller(verifier, token).clearance is Classification.PUBLIC


@pytest.mark.parametrize("roles", [None, [], ["Evidence.Admin", "evidence.restricted"], {"Evidence.Internal": 1}, 7])
def test_no_mapped_role_is_valid_without_clearance(verifier: ClearanceJWTVerifier, key: RSAKey, roles: object) -> None:
    # Role names match exactly (a lower-case look-alike grants nothing), and a claim of an
    # unexpected shape holds no roles at all.
    caller = _caller(verifier, _sign(key, _claims(roles=roles)))
    assert caller == Caller("ada@example.org", None, "jwt")


def test_a_forged_caller_claim_is_overwritten(verifier: ClearanceJWTVerifier, key: RSAKey) -> None:
    forged = {"name": "root", "clearance": "restricted", "via": "token"}
    access = _verify(verifier, _sign(key, _claims(roles=[], **{CALLER_CLAIM: forged})))
    assert access is not None
    assert access.claims[CALLER_CLAIM] == {"name": "ada@example.org", "clearance": None, "via": "jwt"}


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        ({}, "ada@example.org"),
        ({"preferred_username": None, "email": "ada.l@example.org"}, "ada.l@example.org"),
        ({"preferred_username": "  ", "email": None}, "3f2a-subject"),
    ],
)
def test_the_caller_name_prefers_the_readable_claims(
    verifier: ClearanceJWTVerifier, key: RSAKey, names: dict[str, Any], expected: str
) -> None:
    assert _caller(verifier, _sign(key, _claims(**names))).name == expected


def test_a_token_naming_nobody_is_refused(verifier: ClearanceJWTVerifier, key: RSAKey) -> None:
    assert _verify(verifier, _sign(key, _claims(preferred_username=None, sub=None))) is None


# --- refused tokens ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({"exp": int(time.time()) - 5}, id="expired"),
        pytest.param({"nbf": int(time.time()) + 3600}, id="nbf-in-the-future"),
        pytest.param({"aud": "api://another-application"}, id="wrong-audience"),
        pytest.param({"aud": None}, id="no-audience"),
        pytest.param({"iss": "https://login.example.org/other-tenant/v2.0"}, id="wrong-issuer"),
        pytest.param({"iss": None}, id="no-issuer"),
        pytest.param({"exp": None}, id="missing-exp"),
        pytest.param({"exp": "9999999999"}, id="exp-a-string"),
        pytest.param({"exp": True}, id="exp-a-bool"),
        pytest.param({"exp": float("inf")}, id="exp-infinite"),
        pytest.param({"exp": float("nan")}, id="exp-nan"),
        pytest.param({"nbf": float("nan")}, id="nbf-nan"),
        pytest.param({"nbf": float("-inf")}, id="nbf-minus-infinity"),
        pytest.param({"nbf": "0"}, id="nbf-a-string"),
        pytest.param({"iat": float("nan")}, id="iat-nan"),
        pytest.param({"auth_time": float("nan")}, id="another-claim-nan"),
    ],
)
def test_claims_that_fail_are_refused(verifier: ClearanceJWTVerifier, key: RSAKey, overrides: dict[str, Any]) -> None:
    assert _verify(verifier, _sign(key, _claims(roles=["Evidence.Restricted"], **overrides))) is None


def test_a_token_signed_by_another_key_is_refused(
    verifier: ClearanceJWTVerifier, key: RSAKey, other_key: RSAKey
) -> None:
    # Claiming the trusted key's kid, and naming a kid the key set does not have.
    assert _verify(verifier, _sign(other_key, kid=str(key.kid))) is None
    assert _verify(verifier, _sign(other_key)) is None


def test_hs256_with_the_public_key_as_secret_is_refused(verifier: ClearanceJWTVerifier, key: RSAKey) -> None:
    """Algorithm confusion: a verifier that let the token pick HS256 would check the HMAC
    with the public key, which anyone has."""
    payload = _b64(json.dumps(_claims(roles=["Evidence.Restricted"])).encode())
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": key.kid}).encode())
    for secret in (key.as_pem(private=False), json.dumps(key.as_dict(private=False)).encode()):
        mac = hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest()
        assert _verify(verifier, f"{header}.{payload}.{_b64(mac)}") is None


@pytest.mark.parametrize("alg", ["none", "None", "NONE"])
def test_an_unsigned_token_is_refused(verifier: ClearanceJWTVerifier, key: RSAKey, alg: str) -> None:
    header = _b64(json.dumps({"alg": alg, "typ": "JWT", "kid": key.kid}).encode())
    payload = _b64(json.dumps(_claims(roles=["Evidence.Restricted"])).encode())
    assert _verify(verifier, f"{header}.{payload}.") is None


@pytest.mark.parametrize("token", ["", "not-a-jwt", "a.b.c", "a.b", "...."])
def test_garbage_is_refused(verifier: ClearanceJWTVerifier, token: str) -> None:
    assert _verify(verifier, token) is None


def test_a_key_published_for_encryption_verifies_nothing(tmp_path: Path, key: RSAKey) -> None:
    verifier = _verifier(_write_jwks(tmp_path / "jwks.json", key, use="enc"))
    assert _verify(verifier, _sign(key)) is None


def test_the_required_scope_is_enforced(jwks_file: Path, key: RSAKey) -> None:
    verifier = _verifier(jwks_file, required_scope="Evidence.Read")
    assert _verify(verifier, _sign(key, _claims(scp="Evidence.Read Other.Scope"))) is not None
    assert _verify(verifier, _sign(key, _claims(scope="Evidence.Read"))) is not None
    assert _verify(verifier, _sign(key, _claims(scp="Other.Scope"))) is None
    assert _verify(verifier, _sign(key)) is None


def test_no_token_reaches_a_log(verifier: ClearanceJWTVerifier, key: RSAKey) -> None:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(level=logging.DEBUG)
    library = logging.getLogger("fastmcp")
    previous = library.level
    library.addHandler(handler)
    library.setLevel(logging.DEBUG)
    tokens = [
        _sign(key, _claims(exp=None)),
        _sign(key, _claims(exp=int(time.time()) - 5)),
        _sign(key, _claims(aud="api://another-application")),
        _sign(key, _claims(preferred_username=None, sub=None)),
        _sign(key),
    ]
    try:
        with capture_logs() as events:
            for token in tokens:
                _verify(verifier, token)
    finally:
        library.removeHandler(handler)
        library.setLevel(previous)
    logged = json.dumps([e for e in events], default=str) + "\n".join(r.getMessage() for r in records)
    assert events or records, "nothing was logged: the test proves nothing"
    for token in tokens:
        for part in token.split("."):
            assert part not in logged


# --- key sources --------------------------------------------------------------------------


def test_a_rotated_jwks_file_is_honoured_without_a_new_verifier(tmp_path: Path, key: RSAKey, other_key: RSAKey) -> None:
    path = _write_jwks(tmp_path / "jwks.json", key)
    verifier = _verifier(path)
    assert _verify(verifier, _sign(key)) is not None

    _write_jwks(path, key, other_key)  # the new key is published beside the old one
    assert _verify(verifier, _sign(other_key)) is not None
    assert _verify(verifier, _sign(key)) is not None

    _write_jwks(path, other_key)  # the old key is withdrawn: its tokens stop at once
    assert _verify(verifier, _sign(key)) is None
    assert _verify(verifier, _sign(other_key)) is not None


@pytest.mark.parametrize("uptime_s", [5.0, 10 * 24 * 3600.0])
def test_a_withdrawn_key_stops_at_once_however_long_the_host_has_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, key: RSAKey, other_key: RSAKey, uptime_s: float
) -> None:
    # time.monotonic() counts from the host's boot: seconds after it, as days. fastmcp's key
    # cache compares its refresh time with it, so a reset that only works long after a boot
    # (a cache time of 0) let a withdrawn key verify for the first hour on a fresh host.
    real = time.monotonic
    start = real()
    monkeypatch.setattr(time, "monotonic", lambda: uptime_s + (real() - start))
    path = _write_jwks(tmp_path / "jwks.json", key, other_key)
    verifier = _verifier(path)
    assert _verify(verifier, _sign(key)) is not None
    _write_jwks(path, other_key)
    assert _verify(verifier, _sign(key)) is None
    assert _verify(verifier, _sign(other_key)) is not None


def test_a_key_replaced_under_the_same_kid_is_honoured(tmp_path: Path, key: RSAKey) -> None:
    replacement = RSAKey.generate_key(2048, parameters={"kid": str(key.kid)})
    path = _write_jwks(tmp_path / "jwks.json", key)
    verifier = _verifier(path)
    assert _verify(verifier, _sign(key)) is not None
    _write_jwks(path, replacement)
    assert _verify(verifier, _sign(key)) is None
    assert _verify(verifier, _sign(replacement)) is not None


def test_an_unusable_jwks_file_refuses_every_token_until_fixed(tmp_path: Path, key: RSAKey) -> None:
    path = _write_jwks(tmp_path / "jwks.json", key)
    verifier = _verifier(path)
    assert _verify(verifier, _sign(key)) is not None
    path.write_text('{"keys": [', encoding="utf-8")  # a half-written rotation
    assert _verify(verifier, _sign(key)) is None
    path.unlink()
    with capture_logs() as events:
        assert _verify(verifier, _sign(key)) is None
    assert [e["event"] for e in events] == ["jwt_jwks_file_unusable"]
    _write_jwks(path, key)
    assert _verify(verifier, _sign(key)) is not None


class _JWKSHandler(BaseHTTPRequestHandler):
    body = b""
    requests = 0

    def do_GET(self) -> None:
        type(self).requests += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: pytest shows stderr of failures
        pass


@pytest.fixture
def jwks_handler(key: RSAKey) -> type[_JWKSHandler]:
    return type("Handler", (_JWKSHandler,), {"body": json.dumps(_jwks(key)).encode(), "requests": 0})


@pytest.fixture
def jwks_server(jwks_handler: type[_JWKSHandler], monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    # fastmcp's JWKS client follows the proxy variables; this server is on loopback.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    server = ThreadingHTTPServer(("127.0.0.1", 0), jwks_handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/discovery/keys"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_jwks_url_is_fetched_and_cached(
    jwks_server: str, jwks_handler: type[_JWKSHandler], key: RSAKey, other_key: RSAKey
) -> None:
    verifier = ClearanceJWTVerifier(issuer=ISSUER, audience=AUDIENCE, role_map=ROLE_MAP, jwks_url=jwks_server)
    assert _caller(verifier, _sign(key)).clearance is Classification.INTERNAL
    assert _caller(verifier, _sign(key, _claims(roles=["Evidence.Public"]))).clearance is Classification.PUBLIC
    assert _verify(verifier, _sign(other_key, kid=str(key.kid))) is None
    # Unknown kids refetch at most once per refresh interval (fastmcp's 30 s, counted from the
    # first fetch): tokens naming made-up keys cannot turn into a fetch each.
    for _ in range(3):
        assert _verify(verifier, _sign(other_key)) is None
    assert jwks_handler.requests == 1


def test_make_jwt_verifier_builds_from_settings(jwks_server: str, key: RSAKey) -> None:
    settings = Settings(
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
        jwt_jwks_url=jwks_server,
        jwt_required_scope="Evidence.Read",
        jwt_role_map="Evidence.Internal=internal, Evidence.Analyst = restricted",
    )
    verifier = make_jwt_verifier(settings, base_url="https://evidence.example.org")
    assert verifier.required_scopes == ["Evidence.Read"]
    token = _sign(key, _claims(roles=["Evidence.Analyst"], scp="Evidence.Read"))
    assert _caller(verifier, token).clearance is Classification.RESTRICTED
    assert _verify(verifier, _sign(key, _claims(roles=["Evidence.Restricted"], scp="Evidence.Read"))) is not None


# --- configuration errors --------------------------------------------------------------


def _settings(jwks_file: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {"jwt_issuer": ISSUER, "jwt_audience": AUDIENCE, "jwt_jwks_file": jwks_file}
    values.update(overrides)
    return Settings(**values)


def test_the_default_role_map_is_the_documented_one(jwks_file: Path) -> None:
    assert make_jwt_verifier(_settings(jwks_file)).role_map == ROLE_MAP


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"jwt_issuer": ""}, "GOVERNED_EVIDENCE_JWT_ISSUER"),
        ({"jwt_issuer": "  "}, "GOVERNED_EVIDENCE_JWT_ISSUER"),
        ({"jwt_audience": ""}, "GOVERNED_EVIDENCE_JWT_AUDIENCE"),
        ({"jwt_jwks_file": None}, "GOVERNED_EVIDENCE_JWT_JWKS_URL or GOVERNED_EVIDENCE_JWT_JWKS_FILE"),
        ({"jwt_jwks_url": "https://login.example.org/keys"}, "only one of GOVERNED_EVIDENCE_JWT_JWKS_URL"),
        ({"jwt_jwks_file": None, "jwt_jwks_url": "http://login.example.org/keys"}, "GOVERNED_EVIDENCE_JWT_JWKS_URL"),
        ({"jwt_jwks_file": None, "jwt_jwks_url": "https://u:p@login.example.org/k"}, "GOVERNED_EVIDENCE_JWT_JWKS_URL"),
        ({"jwt_jwks_file": None, "jwt_jwks_url": "file:///etc/jwks.json"}, "GOVERNED_EVIDENCE_JWT_JWKS_URL"),
        ({"jwt_jwks_file": Path("/nonexistent/jwks.json")}, "GOVERNED_EVIDENCE_JWT_JWKS_FILE"),
        ({"jwt_algorithm": "HS256"}, "GOVERNED_EVIDENCE_JWT_ALGORITHM"),
        ({"jwt_algorithm": "none"}, "GOVERNED_EVIDENCE_JWT_ALGORITHM"),
        ({"jwt_roles_claim": " "}, "GOVERNED_EVIDENCE_JWT_ROLES_CLAIM"),
        ({"jwt_role_map": "Evidence.Internal=internl"}, "GOVERNED_EVIDENCE_JWT_ROLE_MAP"),
        ({"jwt_role_map": ""}, "GOVERNED_EVIDENCE_JWT_ROLE_MAP"),
    ],
)
def test_make_jwt_verifier_names_the_setting_to_fix(jwks_file: Path, overrides: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        make_jwt_verifier(_settings(jwks_file, **overrides))


def test_a_jwks_file_that_is_not_a_key_set_is_a_config_error(tmp_path: Path) -> None:
    for content in ("not json", '["keys"]', '{"keys": {}}', "\xff"):
        path = tmp_path / "jwks.json"
        path.write_text(content, encoding="latin-1")
        with pytest.raises(ConfigError, match="GOVERNED_EVIDENCE_JWT_JWKS_FILE"):
            make_jwt_verifier(_settings(path))


def test_the_verifier_itself_refuses_an_unchecked_configuration(jwks_file: Path) -> None:
    with pytest.raises(ConfigError, match="issuer and an audience"):
        ClearanceJWTVerifier(issuer=ISSUER, audience="", role_map=ROLE_MAP, jwks_file=jwks_file)
    with pytest.raises(ConfigError, match="exactly one"):
        ClearanceJWTVerifier(issuer=ISSUER, audience=AUDIENCE, role_map=ROLE_MAP)
    with pytest.raises(ConfigError, match="algorithm"):
        ClearanceJWTVerifier(
            issuer=ISSUER, audience=AUDIENCE, role_map=ROLE_MAP, jwks_file=jwks_file, algorithm="HS256"
        )


def test_the_loopback_jwks_urls_are_accepted(jwks_file: Path) -> None:
    for url in ("http://127.0.0.1:8080/keys", "http://[::1]:8080/keys", "http://localhost/keys", "https://10.0.0.5/k"):
        make_jwt_verifier(_settings(jwks_file, jwt_jwks_file=None, jwt_jwks_url=url))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A=public", {"A": Classification.PUBLIC}),
        (" A = internal ,B=restricted", {"A": Classification.INTERNAL, "B": Classification.RESTRICTED}),
    ],
)
def test_parse_role_map(text: str, expected: dict[str, Classification]) -> None:
    assert parse_role_map(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "A",
        "A=",
        "=public",
        "A=public,",
        "A=public,,B=internal",
        "A=public,A=public",
        "A=b=public",
        "A=secret",
        "A=ınternal",
    ],
)
def test_parse_role_map_is_strict(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_role_map(text)
