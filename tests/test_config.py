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


# -- statistics: the proxy and the per-call deadline ------------------------------------------

PROXY = "GOVERNED_EVIDENCE_SDMX_PROXY"
#: A password that must never be repeated by a message or a representation of the settings.
PROXY_SECRET = "pr0xy-s3cret-9f2c"


@pytest.mark.parametrize(
    "value",
    [
        "http://proxy.example:3128",
        "https://proxy.example",
        "http://10.0.0.5:8080/",
        f"http://alice:{PROXY_SECRET}@proxy.example:3128",
        f"https://alice:{PROXY_SECRET}@[2001:db8::1]:443",
    ],
)
def test_an_http_proxy_is_accepted_and_its_credentials_stay_hidden(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROXY, value)
    settings = Settings()
    assert settings.sdmx_proxy is not None and settings.sdmx_proxy.get_secret_value() == value
    assert PROXY_SECRET not in repr(settings) and PROXY_SECRET not in str(settings)
    assert PROXY_SECRET not in settings.model_dump_json()


@pytest.mark.parametrize(
    "value",
    [
        f"socks5://alice:{PROXY_SECRET}@proxy.example:1080",
        f"ftp://alice:{PROXY_SECRET}@proxy.example",
        f"alice:{PROXY_SECRET}@proxy.example:3128",
        f"http://alice:{PROXY_SECRET}@:3128",
        f"http://alice:{PROXY_SECRET}@proxy.example:99999",
        f"http://alice:{PROXY_SECRET}@proxy.example:port",
        f"http://alice:{PROXY_SECRET}@proxy.example:3128/path",
        f"http://alice:{PROXY_SECRET}@proxy.example:3128?{PROXY_SECRET}",
        f"http://alice:{PROXY_SECRET}@proxy.example:3128#{PROXY_SECRET}",
    ],
)
def test_a_bad_proxy_is_refused_without_repeating_it(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROXY, value)
    with pytest.raises(ConfigError) as refused:
        Settings()
    message = str(refused.value)
    assert message.startswith(f"{PROXY}: ")
    assert PROXY_SECRET not in message and "proxy.example:3128/" not in message and "alice" not in message


def test_an_empty_proxy_means_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROXY, "  ")
    assert Settings().sdmx_proxy is None


def test_the_statistics_deadline_defaults_to_20_s_and_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOVERNED_EVIDENCE_SDMX_DEADLINE_S", raising=False)
    assert Settings().sdmx_deadline_s == 20.0
    monkeypatch.setenv("GOVERNED_EVIDENCE_SDMX_DEADLINE_S", "2.5")
    assert Settings().sdmx_deadline_s == 2.5
    for bad in ("0", "-1", "301", "nan", "soon"):
        monkeypatch.setenv("GOVERNED_EVIDENCE_SDMX_DEADLINE_S", bad)
        with pytest.raises(ValueError, match="sdmx_deadline_s"):
            Settings()
