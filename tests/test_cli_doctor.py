"""``doctor``: the effective settings with their sources (secrets never shown), and checks of
the index, the model and the providers, each problem with what to do."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from governed_evidence.cli import main
from governed_evidence.config import Settings
from governed_evidence.store.schema import SCHEMA_VERSION
from tests.helpers import HashEmbedder

PROVIDERS = ("OECD", "ECB", "ESTAT", "IMF", "BIS", "UNICEF", "ILO", "ISTAT", "INSEE")


@pytest.fixture
def hash_model(monkeypatch: pytest.MonkeyPatch) -> None:
    def make(settings: Settings, name: str | None = None) -> HashEmbedder:
        return HashEmbedder()

    monkeypatch.setattr("governed_evidence.embeddings.factory.make_embedder", make)


def _doctor(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    code = main(["doctor", *argv, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert main(["doctor", *argv]) == code
    return code, report, capsys.readouterr().out


def _check(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in report["checks"] if c["check"] == name)


def test_settings_say_where_each_came_from_and_never_show_a_secret(
    built_index: Path, hash_model: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GOVERNED_EVIDENCE_CEILING", "internal")
    monkeypatch.setenv("GOVERNED_EVIDENCE_SDMX_PROXY", "http://alice:hunter2secret@127.0.0.1:3128")
    monkeypatch.delenv("GOVERNED_EVIDENCE_GATE", raising=False)
    code, report, text = _doctor(capsys, "--db", str(built_index))
    assert code == 0, report["checks"]
    rows = {r["setting"]: r for r in report["settings"]}
    assert rows["GOVERNED_EVIDENCE_CEILING"] == {
        "setting": "GOVERNED_EVIDENCE_CEILING",
        "value": "internal",
        "source": "environment (GOVERNED_EVIDENCE_CEILING)",
    }
    assert rows["GOVERNED_EVIDENCE_GATE"]["source"] == "default"
    assert rows["GOVERNED_EVIDENCE_SDMX_PROXY"]["value"] == "(set, not shown)"
    for shown in (json.dumps(report), text):
        assert "hunter2secret" not in shown and "alice" not in shown
    assert _check(report, "index")["ok"] and f"schema {SCHEMA_VERSION}" in _check(report, "index")["detail"]
    assert _check(report, "embedding model") == {
        "check": "embedding model",
        "ok": True,
        "detail": "test/hash-bow loads and embeds",
        "advice": None,
    }
    assert "GOVERNED_EVIDENCE_CEILING" in text and "[environment (GOVERNED_EVIDENCE_CEILING)]" in text


def test_a_missing_index_is_a_problem_with_what_to_do(
    tmp_path: Path, hash_model: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, text = _doctor(capsys, "--db", str(tmp_path / "none.sqlite"))
    assert code == 1
    index = _check(report, "index")
    assert not index["ok"] and "governed-evidence ingest --corpus DIR" in index["advice"]
    assert "PROBLEM index:" in text and "what to do: build it with" in text


def test_a_model_other_than_the_indexs_is_a_problem(
    built_index: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def other(settings: Settings, name: str | None = None) -> HashEmbedder:
        return HashEmbedder(model_id="test/other-model")

    monkeypatch.setattr("governed_evidence.embeddings.factory.make_embedder", other)
    code, report, _ = _doctor(capsys, "--db", str(built_index))
    assert code == 1
    model = _check(report, "embedding model")
    assert not model["ok"] and "built with test/hash-bow" in model["detail"]
    assert "rebuild the index" in model["advice"]


@pytest.fixture
def answering() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/rest"
    finally:
        server.shutdown()
        server.server_close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_providers_are_checked_when_asked_and_an_unreachable_one_is_named(
    built_index: Path,
    hash_model: None,
    answering: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    providers = tmp_path / "providers.toml"
    off = "".join(f"[providers.{pid}]\nenabled = false\n" for pid in PROVIDERS)
    dead = f"http://127.0.0.1:{_closed_port()}/rest"
    providers.write_text(
        off + f'[providers.MIRROR]\nbase_url = "{answering}"\n[providers.DEAD]\nbase_url = "{dead}"\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("GOVERNED_EVIDENCE_SDMX_PROVIDERS", str(providers))
    code, report, _ = _doctor(capsys, "--db", str(built_index))
    assert code == 0 and not [c for c in report["checks"] if c["check"].startswith("provider")]
    code, report, text = _doctor(capsys, "--db", str(built_index), "--providers")
    assert code == 1
    assert _check(report, "provider MIRROR")["ok"]
    assert "answered (HTTP 404)" in _check(report, "provider MIRROR")["detail"]
    dead_check = _check(report, "provider DEAD")
    assert not dead_check["ok"] and dead.split("/")[2] in dead_check["detail"]
    assert "GOVERNED_EVIDENCE_SDMX_PROXY" in dead_check["advice"]
    assert "PROBLEM provider DEAD" in text
