"""The operator's ceiling: a mistyped GOVERNED_EVIDENCE_CEILING stops the server, never widens access."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from governed_evidence.config import Classification, Settings
from governed_evidence.errors import ConfigError

VARIABLE = "GOVERNED_EVIDENCE_CEILING"

MISTYPED = [
    "publik", "Internal x", "internal!", "Internal\tjunk", "", "   ", "secret", "public,internal", "0",
    "\u0131nternal",  # dotless i: str.upper() would make it INTERNAL
]  # fmt: skip
VALID = {
    "public": Classification.PUBLIC,
    "PUBLIC": Classification.PUBLIC,
    "Internal": Classification.INTERNAL,
    " internal ": Classification.INTERNAL,
    "rEsTrIcTeD": Classification.RESTRICTED,
}


@pytest.mark.parametrize("value", MISTYPED)
def test_a_mistyped_ceiling_is_refused_naming_the_variable(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VARIABLE, value)
    with pytest.raises(ConfigError) as refused:
        Settings()
    message = str(refused.value)
    assert message.startswith(f"{VARIABLE}: ")
    assert repr(value) in message
    assert "public, internal, restricted" in message


@pytest.mark.parametrize(("value", "level"), VALID.items())
def test_a_valid_ceiling_in_any_case_is_accepted(
    value: str, level: Classification, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(VARIABLE, value)
    settings = Settings()
    assert settings.ceiling_level is level
    assert settings.ceiling == level.label


def test_an_unset_ceiling_is_public(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VARIABLE, raising=False)
    assert Settings().ceiling_level is Classification.PUBLIC


def test_serve_with_a_mistyped_ceiling_exits_naming_the_variable(tmp_path: Path) -> None:
    # Only this variable may be wrong: the rest of the operator's environment is left out.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVERNED_EVIDENCE_")}
    env[VARIABLE] = "publik"
    done = subprocess.run(
        [sys.executable, "-m", "governed_evidence", "serve"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode != 0
    assert VARIABLE in done.stderr and "'publik'" in done.stderr
    # stdout carries only JSON-RPC: a refusal to start writes nothing there.
    assert done.stdout == ""
