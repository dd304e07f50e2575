"""`serve`'s HTTP flags as an operator meets them: refusals come before anything loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_cli


@pytest.mark.parametrize(
    "flags",
    [["--auth", "tokens"], ["--port", "9000"], ["--allow-unauthenticated"], ["--allowed-host", "x.example"]],
)
def test_http_flags_without_the_http_transport_are_refused(flags: list[str]) -> None:
    done = run_cli("serve", *flags)
    assert done.returncode != 0
    assert "only with --transport http" in done.stderr


def test_a_non_loopback_bind_without_credentials_is_refused() -> None:
    done = run_cli("serve", "--transport", "http", "--host", "0.0.0.0")
    assert done.returncode != 0
    assert "without authentication" in done.stderr and "--allow-unauthenticated" in done.stderr


def test_tokens_auth_needs_an_existing_tokens_file(tmp_path: Path) -> None:
    missing = tmp_path / "absent.json"
    done = run_cli(
        "serve", "--transport", "http", "--auth", "tokens", "--tokens-file", str(missing), "--db", str(tmp_path / "x")
    )
    assert done.returncode != 0
    assert "token create" in done.stderr


def test_jwt_auth_names_the_missing_setting(tmp_path: Path) -> None:
    done = run_cli(
        "serve",
        "--transport",
        "http",
        "--auth",
        "jwt",
        "--db",
        str(tmp_path / "x"),
        drop=("GOVERNED_EVIDENCE_JWT_ISSUER", "GOVERNED_EVIDENCE_JWT_AUDIENCE"),
    )
    assert done.returncode != 0
    assert "GOVERNED_EVIDENCE_JWT_ISSUER" in done.stderr


@pytest.mark.model
def test_sigterm_shuts_the_http_server_down_cleanly(tmp_path: Path) -> None:
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time

    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "GOVERNED_EVIDENCE_LOG_LEVEL": "INFO"}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "governed_evidence",
            "serve",
            "--transport",
            "http",
            "--port",
            str(port),
            "--db",
            str(tmp_path / "none.sqlite"),
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            assert server.poll() is None, server.stderr.read() if server.stderr else ""
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not answer /health"
            time.sleep(0.2)
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
    # A graceful shutdown that ran the server's own clean-up, not a death by the signal.
    assert server.returncode == 0, stderr
    assert '"event": "serving"' in stderr
