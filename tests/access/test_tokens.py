"""Server-issued tokens: the file keeps only hashes, revocation is immediate, and a broken
file refuses everyone rather than anyone."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
import structlog

from governed_evidence.access.caller import CALLER_CLAIM, Caller
from governed_evidence.access.token_command import register
from governed_evidence.access.tokens import (
    TOKEN_PREFIX,
    TokensFileVerifier,
    create,
    list_tokens,
    revoke,
)
from governed_evidence.config import Classification, Settings
from governed_evidence.errors import ConfigError


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    return tmp_path / "tokens.json"


def _verify(verifier: TokensFileVerifier, token: str) -> Any:
    return asyncio.run(verifier.verify_token(token))


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_file_keeps_a_hash_never_the_token(tokens_file: Path) -> None:
    token = create(tokens_file, "alice@example.org", Classification.INTERNAL)
    assert token.startswith(TOKEN_PREFIX) and len(token) >= len(TOKEN_PREFIX) + 43
    text = tokens_file.read_text(encoding="utf-8")
    assert token not in text
    assert token[len(TOKEN_PREFIX) :] not in text
    data = json.loads(text)
    assert data["version"] == 1
    [entry] = data["tokens"]
    assert set(entry) == {"name", "clearance", "sha256", "created_at"}
    assert entry["name"] == "alice@example.org" and entry["clearance"] == "internal"
    assert _mode(tokens_file) == 0o600


def test_tokens_are_distinct_and_listed_without_secrets(tokens_file: Path) -> None:
    a = create(tokens_file, "a", Classification.PUBLIC)
    b = create(tokens_file, "b", Classification.RESTRICTED)
    assert a != b
    entries = list_tokens(tokens_file)
    assert [(e.name, e.clearance) for e in entries] == [("a", Classification.PUBLIC), ("b", Classification.RESTRICTED)]
    assert all(set(e.as_dict()) == {"name", "clearance", "created_at"} for e in entries)
    assert list_tokens(tokens_file.with_name("absent.json")) == []


def test_a_duplicate_name_is_refused_and_points_at_revoke(tokens_file: Path) -> None:
    create(tokens_file, "alice", Classification.PUBLIC)
    before = tokens_file.read_bytes()
    with pytest.raises(ConfigError, match="token revoke"):
        create(tokens_file, "alice", Classification.RESTRICTED)
    assert tokens_file.read_bytes() == before


@pytest.mark.parametrize("name", ["", "a" * 65, "has space", "semi;colon", "ünïcode", "new\nline", TOKEN_PREFIX + "x"])
def test_invalid_names_are_refused(tokens_file: Path, name: str) -> None:
    with pytest.raises(ConfigError, match="invalid token name"):
        create(tokens_file, name, Classification.PUBLIC)
    assert not tokens_file.exists()


def test_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        create(tmp_path / "absent" / "tokens.json", "alice", Classification.PUBLIC)


def test_a_valid_token_becomes_the_caller(tokens_file: Path) -> None:
    token = create(tokens_file, "alice", Classification.INTERNAL)
    access = _verify(TokensFileVerifier(tokens_file), token)
    assert access is not None
    assert access.token == token and access.client_id == "alice"
    assert access.scopes == [] and access.expires_at is None
    assert Caller.from_claim(access.claims[CALLER_CLAIM]) == Caller("alice", Classification.INTERNAL, "token")


def test_wrong_and_near_miss_tokens_are_refused(tokens_file: Path) -> None:
    token = create(tokens_file, "alice", Classification.RESTRICTED)
    verifier = TokensFileVerifier(tokens_file)
    last = token[-1]
    near = token[:-1] + ("A" if last != "A" else "B")
    cut = len(TOKEN_PREFIX)
    first = token[:cut] + ("x" if token[cut] != "x" else "y") + token[cut + 1 :]
    others = [token + "x", token[:-1], token.upper(), "", TOKEN_PREFIX, "Bearer " + token, "x" * 10_000]
    for wrong in [near, first, *others]:
        assert _verify(verifier, wrong) is None, wrong[:20]
    # A stored hash is not a token either.
    stored = json.loads(tokens_file.read_text(encoding="utf-8"))["tokens"][0]["sha256"]
    assert _verify(verifier, stored) is None
    assert _verify(verifier, TOKEN_PREFIX + stored) is None
    assert _verify(verifier, token) is not None


def test_revoke_takes_effect_on_the_next_request_of_the_same_verifier(tokens_file: Path) -> None:
    alice = create(tokens_file, "alice", Classification.INTERNAL)
    bob = create(tokens_file, "bob", Classification.PUBLIC)
    verifier = TokensFileVerifier(tokens_file)
    assert _verify(verifier, alice) is not None and _verify(verifier, bob) is not None
    assert revoke(tokens_file, "alice") is True
    assert _verify(verifier, alice) is None
    assert _verify(verifier, bob) is not None
    assert _mode(tokens_file) == 0o600
    assert revoke(tokens_file, "alice") is False
    # A token issued after the verifier was made is accepted without a restart too.
    carol = create(tokens_file, "carol", Classification.RESTRICTED)
    access = _verify(verifier, carol)
    assert access is not None and access.client_id == "carol"


def test_recreating_a_revoked_name_issues_a_new_token(tokens_file: Path) -> None:
    old = create(tokens_file, "alice", Classification.INTERNAL)
    verifier = TokensFileVerifier(tokens_file)
    revoke(tokens_file, "alice")
    new = create(tokens_file, "alice", Classification.INTERNAL)
    assert old != new
    assert _verify(verifier, old) is None
    assert _verify(verifier, new) is not None


def _file(*entries: dict[str, str]) -> bytes:
    return json.dumps({"version": 1, "tokens": list(entries)}).encode()


def _entry(**changes: str) -> dict[str, str]:
    return {"name": "a", "clearance": "public", "sha256": "0" * 64, "created_at": "", **changes}


MALFORMED = [
    b"",
    b"not json",
    b"\xff\xfe",
    b"[]",
    b'{"version": 2, "tokens": []}',
    b'{"version": 1}',
    b'{"version": 1, "tokens": {}}',
    b'{"version": 1, "tokens": [{"name": "a"}]}',
    _file(_entry(clearance="secret")),
    _file(_entry(sha256="nothex")),
    _file(_entry(sha256="0" * 64 + "x")),
    _file(_entry(name="a b")),
    _file(_entry(name=TOKEN_PREFIX + "looks-like-a-token")),
    _file({**_entry(), "token": "ge_plaintext"}),
    _file(_entry(), _entry()),
]


@pytest.mark.parametrize("raw", MALFORMED)
def test_a_malformed_file_is_a_config_error(tokens_file: Path, raw: bytes) -> None:
    tokens_file.write_bytes(raw)
    with pytest.raises(ConfigError, match="malformed"):
        list_tokens(tokens_file)
    with pytest.raises(ConfigError, match="malformed"):
        create(tokens_file, "alice", Classification.PUBLIC)
    with pytest.raises(ConfigError, match="malformed"):
        revoke(tokens_file, "alice")
    with pytest.raises(ConfigError, match="malformed"):
        TokensFileVerifier(tokens_file)
    assert tokens_file.read_bytes() == raw


def test_a_token_pasted_into_the_file_is_never_quoted(tokens_file: Path) -> None:
    token = create(tokens_file, "alice", Classification.INTERNAL)
    verifier = TokensFileVerifier(tokens_file)
    for field in ("name", "clearance", "sha256", "created_at"):
        bad = _entry(**{field: token}) if field != "created_at" else {**_entry(), "extra": token}
        tokens_file.write_bytes(_file(bad))
        with pytest.raises(ConfigError) as raised:
            list_tokens(tokens_file)
        assert token not in str(raised.value)
        with structlog.testing.capture_logs() as logs:
            assert _verify(verifier, token) is None
        assert logs and token not in json.dumps(logs, default=str)


def test_a_missing_file_at_start_is_a_config_error(tokens_file: Path) -> None:
    with pytest.raises(ConfigError, match="token create"):
        TokensFileVerifier(tokens_file)


def test_a_file_broken_after_start_refuses_every_token_and_says_so_once(tokens_file: Path) -> None:
    token = create(tokens_file, "alice", Classification.INTERNAL)
    good = tokens_file.read_bytes()
    verifier = TokensFileVerifier(tokens_file)
    assert _verify(verifier, token) is not None
    with structlog.testing.capture_logs() as logs:
        tokens_file.write_text('{"version": 1, "tokens": [', encoding="utf-8")
        assert _verify(verifier, token) is None
        assert _verify(verifier, token) is None
        tokens_file.unlink()
        assert _verify(verifier, token) is None
        assert _verify(verifier, token) is None
        tokens_file.mkdir()
        assert _verify(verifier, token) is None
        tokens_file.rmdir()
        tokens_file.write_bytes(good)
        os.chmod(tokens_file, 0o600)
        assert _verify(verifier, token) is not None
    errors = [e for e in logs if e["log_level"] == "error"]
    # One error per reason (malformed, gone, not a file), not one per request.
    assert [e["event"] for e in errors] == ["tokens_file_unusable"] * 3
    assert "malformed" in errors[0]["reason"] and "no longer exists" in errors[1]["reason"]
    assert any(e["event"] == "tokens_file_usable_again" for e in logs)
    assert token not in json.dumps(logs, default=str)


def test_a_file_readable_by_others_is_read_with_one_warning(tokens_file: Path) -> None:
    token = create(tokens_file, "alice", Classification.PUBLIC)
    os.chmod(tokens_file, 0o644)
    with structlog.testing.capture_logs() as logs:
        assert [e.name for e in list_tokens(tokens_file)] == ["alice"]
        list_tokens(tokens_file)
        assert _verify(TokensFileVerifier(tokens_file), token) is not None
    warnings = [e for e in logs if e["event"] == "tokens_file_permissions"]
    assert len(warnings) == 1 and warnings[0]["mode"] == "0o644"
    # The next write puts the file back to 0600.
    create(tokens_file, "bob", Classification.PUBLIC)
    assert _mode(tokens_file) == 0o600


def test_concurrent_creates_keep_every_entry(tokens_file: Path) -> None:
    threads_n, each = 8, 5
    issued: dict[str, str] = {}
    failures: list[BaseException] = []
    guard = threading.Lock()
    start = threading.Barrier(threads_n)

    def work(t: int) -> None:
        try:
            start.wait(timeout=10)
            for i in range(each):
                name = f"t{t}-{i}"
                token = create(tokens_file, name, Classification.PUBLIC)
                with guard:
                    issued[name] = token
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(threads_n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not failures, failures
    assert sorted(e.name for e in list_tokens(tokens_file)) == sorted(issued)
    assert len(issued) == threads_n * each
    verifier = TokensFileVerifier(tokens_file)
    assert all(_verify(verifier, token).client_id == name for name, token in issued.items())
    # No temporary files are left behind (only the file and its lock).
    assert sorted(p.name for p in tokens_file.parent.iterdir()) == [".tokens.json.lock", "tokens.json"]


def test_nothing_logged_contains_a_token_or_its_hash(tokens_file: Path) -> None:
    with structlog.testing.capture_logs() as logs:
        token = create(tokens_file, "alice", Classification.INTERNAL)
        other = create(tokens_file, "bob", Classification.PUBLIC)
        verifier = TokensFileVerifier(tokens_file)
        _verify(verifier, token)
        _verify(verifier, token[:-1] + "?")
        revoke(tokens_file, "alice")
        _verify(verifier, token)
        os.chmod(tokens_file, 0o640)
        list_tokens(tokens_file)
        tokens_file.write_text("{", encoding="utf-8")
        _verify(verifier, other)
    # The file is broken by now: the hashes as it held them.
    hashes = [hashlib.sha256(t.encode()).hexdigest() for t in (token, other)]
    text = json.dumps(logs, default=str)
    assert logs, "the flow logs something (creation, revocation, reloads)"
    for secret in [token, other, token[len(TOKEN_PREFIX) :], other[len(TOKEN_PREFIX) :], *hashes]:
        assert secret not in text


# The command line, through this module's own parser (the main CLI adds the same one).


def _run(argv: list[str], settings: Settings | None = None) -> int:
    parser = argparse.ArgumentParser(prog="governed-evidence")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args, settings or Settings()))


@pytest.fixture(autouse=True)
def _no_tokens_file_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOVERNED_EVIDENCE_TOKENS_FILE", raising=False)


def test_cli_create_prints_the_token_once_with_how_to_use_it(
    tokens_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["token", "create", "--name", "alice", "--clearance", "internal", "--tokens-file", str(tokens_file)]
    assert _run(argv) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    token = lines[0].rsplit(" ", 1)[1]
    assert token.startswith(TOKEN_PREFIX)
    assert "not be shown again" in lines[1] and f"Authorization: Bearer {token}" in lines[1]
    assert token not in tokens_file.read_text(encoding="utf-8")
    assert token not in captured.err
    assert _verify(TokensFileVerifier(tokens_file), token) is not None


def test_cli_create_json_and_the_setting(
    tokens_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOVERNED_EVIDENCE_TOKENS_FILE", str(tokens_file))
    assert _run(["token", "create", "--name", "ci.bot", "--clearance", "public", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed) == {"name", "clearance", "token"}
    assert printed["name"] == "ci.bot" and printed["clearance"] == "public"
    access = _verify(TokensFileVerifier(tokens_file), printed["token"])
    assert access is not None and access.client_id == "ci.bot"


def test_cli_list_and_revoke(tokens_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = Settings(tokens_file=tokens_file)
    token = create(tokens_file, "alice", Classification.RESTRICTED)
    digest = json.loads(tokens_file.read_text(encoding="utf-8"))["tokens"][0]["sha256"]
    assert _run(["token", "list"], settings) == 0
    out = capsys.readouterr().out
    assert "alice" in out and "restricted" in out and digest not in out and token not in out
    assert _run(["token", "list", "--json"], settings) == 0
    [entry] = json.loads(capsys.readouterr().out)
    assert set(entry) == {"name", "clearance", "created_at"}
    assert _run(["token", "revoke", "--name", "alice"], settings) == 0
    capsys.readouterr()
    assert _run(["token", "revoke", "--name", "alice"], settings) == 1
    assert "no token named 'alice'" in capsys.readouterr().err
    assert _run(["token", "list"], settings) == 0
    assert "no tokens" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["token", "create", "--name", "alice", "--clearance", "public"],
        ["token", "revoke", "--name", "alice"],
        ["token", "list"],
    ],
)
def test_cli_without_a_tokens_file_names_both_ways_to_give_one(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(argv) == 2
    err = capsys.readouterr().err
    assert "--tokens-file" in err and "GOVERNED_EVIDENCE_TOKENS_FILE" in err


def test_cli_refuses_an_unknown_clearance(tokens_file: Path) -> None:
    with pytest.raises(SystemExit):
        _run(["token", "create", "--name", "a", "--clearance", "secret", "--tokens-file", str(tokens_file)])
    assert not tokens_file.exists()
