"""`governed-evidence stats ...` prints what the tools return (and exactly that with --json, failures included)."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from governed_evidence.config import Settings
from governed_evidence.errors import ERROR_CODES, ConfigError, ErrorCode
from governed_evidence.sdmx.cli import add_stats_parser
from governed_evidence.sdmx.models import DataResponse, DatasetDescription, DatasetSearchResponse
from governed_evidence.sdmx.service import SdmxService
from tests.sdmx.conftest import ServiceFactory
from tests.sdmx.helpers import (
    CSV_CT,
    STRUCTURE_CT,
    FakeProviders,
    LocalProvider,
    call_statistics_tools,
    catalogue_of,
    fixture,
    local_services,
)

G20 = "OECD.SDD.TPS,DSD_G20_PRICES@DF_G20_PRICES,1.0"


@pytest.fixture
def cli(make_service: ServiceFactory, fake: FakeProviders) -> Callable[..., int]:
    g20 = fixture("oecd_g20_prices_structure.xml")
    fake.add("/dataflow/all/all/latest", catalogue_of(g20, fixture("estat_lfsa_egai2d_dataflow.xml")), STRUCTURE_CT)
    fake.add("/dataflow/OECD.SDD.TPS/", g20, STRUCTURE_CT)
    fake.add("/data/", fixture("oecd_g20_prices_data.csv"), CSV_CT)

    def factory(args: argparse.Namespace, settings: Settings) -> SdmxService:
        return make_service()

    parser = argparse.ArgumentParser(prog="governed-evidence")
    sub = parser.add_subparsers(dest="command", required=True)
    add_stats_parser(sub, factory=factory)

    def run(*argv: str) -> int:
        args = parser.parse_args(argv)
        return int(args.func(args, Settings()))

    return run


def test_datasets(cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("stats", "datasets", "consumer prices") == 0
    out = capsys.readouterr().out
    assert f"[1] {G20}" in out
    assert "G20 - Consumer price indices, all items" in out
    assert "source: https://sdmx.oecd.org/public/rest/dataflow/all/all/latest" in out
    assert cli("stats", "datasets", "consumer prices", "--json") == 0
    parsed = DatasetSearchResponse.model_validate_json(capsys.readouterr().out)
    assert parsed.results[0].dataset == G20 and parsed.from_cache is True


def test_describe(cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("stats", "describe", G20, "--max-codes", "3") == 0
    out = capsys.readouterr().out
    assert "key: REF_AREA.FREQ.METHODOLOGY.MEASURE.UNIT_MEASURE.EXPENDITURE.ADJUSTMENT.TRANSFORMATION" in out
    assert "1. REF_AREA" in out
    assert cli("stats", "describe", G20, "--json") == 0
    assert DatasetDescription.model_validate_json(capsys.readouterr().out).dataset == G20


def test_data(cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("stats", "data", G20, "CHN.A.N.CPI.PA._T.N.GY", "--start", "1985", "--max-rows", "2") == 0
    out = capsys.readouterr().out
    assert "2 of 41 rows" in out
    assert "REF_AREA = CHN" in out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("TIME_PERIOD"))
    assert lines[header + 1].split() == ["1985", "9.3"]
    assert "format=csvfilewithlabels&startPeriod=1985" in out
    assert cli("stats", "data", G20, "CHN.A.N.CPI.PA._T.N.GY", "--json") == 0
    parsed = DataResponse.model_validate_json(capsys.readouterr().out)
    assert parsed.total_rows == 41 and parsed.returned_rows == 41


def test_bad_input_is_told_with_its_hint(
    cli: Callable[..., int], fake: FakeProviders, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("stats", "data", G20, "A/B") == 2
    captured = capsys.readouterr()
    error, hint = captured.err.splitlines()
    assert error.startswith("error: ") and "key" in error
    # Refused before any request: the code's default hint.
    assert hint == f"hint: {ERROR_CODES[ErrorCode.INVALID_ARGUMENT].hint}"
    assert captured.out == ""
    assert fake.requests == []


def test_a_masked_error_keeps_its_message_for_the_operator(
    make_service: ServiceFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    """A configuration error is the operator's: its text is shown, with the code a client would get."""

    def factory(args: argparse.Namespace, settings: Settings) -> SdmxService:
        raise ConfigError("providers file /srv/x/providers.toml: provider FOO has no base_url")

    parser = argparse.ArgumentParser(prog="governed-evidence")
    add_stats_parser(parser.add_subparsers(dest="command", required=True), factory=factory)
    args = parser.parse_args(["stats", "datasets", "prices", "--json"])
    assert args.func(args, Settings()) == 1
    failure = json.loads(capsys.readouterr().out)
    assert failure == {
        "error": "ConfigError",
        "message": "providers file /srv/x/providers.toml: provider FOO has no base_url",
        "code": "INTERNAL",
        "hint": ERROR_CODES[ErrorCode.INTERNAL].hint,
    }
    # Without --json the hint a client would get is left out: the message names the fix.
    args = parser.parse_args(["stats", "datasets", "prices"])
    assert args.func(args, Settings()) == 1
    assert capsys.readouterr().err == "error: providers file /srv/x/providers.toml: provider FOO has no base_url\n"


def test_json_failures_are_one_json_object(
    cli: Callable[..., int], fake: FakeProviders, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.add("/dataflow/all/all/latest", b"slow down", "text/plain", status=429, **{"retry-after": "3600"})
    assert cli("stats", "datasets", "consumer prices", "--json") == 1
    failure = json.loads(capsys.readouterr().out)
    assert failure == {
        "error": "ProviderUnavailableError",
        "message": "provider OECD is busy (HTTP 429) and asks to retry in 3600 s",
        "code": "UPSTREAM_UNAVAILABLE",
        "hint": "Wait 3600 s, then make the same call again. Or try another provider.",
        "retry_after_s": 3600.0,
    }
    # A bad argument: exit code 2, as the main CLI gives it; nothing was asked of the provider.
    asked = len(fake.requests)
    assert cli("stats", "data", G20, "A/B", "--json") == 2
    failure = json.loads(capsys.readouterr().out)
    assert failure["error"] == "InvalidRequestError" and failure["message"] and "retry_after_s" not in failure
    assert (failure["code"], failure["hint"]) == ("INVALID_ARGUMENT", ERROR_CODES[ErrorCode.INVALID_ARGUMENT].hint)
    assert len(fake.requests) == asked


def _closed_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = int(probe.getsockname()[1])
    probe.close()
    return port


def _command_line(tmp_path: Path, base_url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """`governed-evidence stats ...` as a script runs it, with provider MIRROR at ``base_url``."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    providers = tmp_path / "providers.toml"
    providers.write_text(f'[providers.MIRROR]\nbase_url = "{base_url}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVERNED_EVIDENCE_") and "proxy" not in k.lower()}
    env.update(
        GOVERNED_EVIDENCE_DB=str(tmp_path / "none.sqlite"),
        GOVERNED_EVIDENCE_SDMX_CACHE_PATH=str(tmp_path / "cache.sqlite"),
        GOVERNED_EVIDENCE_SDMX_PROVIDERS=str(providers),
        GOVERNED_EVIDENCE_SDMX_MAX_RETRIES="0",
        GOVERNED_EVIDENCE_SDMX_DEADLINE_S="5",
    )
    return subprocess.run(
        [sys.executable, "-m", "governed_evidence", "stats", *argv, "--provider", "MIRROR"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_json_failure_from_the_real_command_line(tmp_path: Path) -> None:
    """The provider unreachable: a port on 127.0.0.1 nothing listens on."""
    base = f"http://127.0.0.1:{_closed_port()}/rest"
    done = _command_line(tmp_path, base, "datasets", "prices", "--json")
    assert done.returncode == 1, done.stderr[-2000:]
    failure = json.loads(done.stdout)
    assert failure == {
        "error": "ProviderUnavailableError",
        "message": f"provider MIRROR could not be reached at {base.split('/')[2]} (ConnectError); try again later. "
        "If this network reaches the internet only through a proxy, set GOVERNED_EVIDENCE_SDMX_PROXY",
        "code": "UPSTREAM_UNAVAILABLE",
        "hint": ERROR_CODES[ErrorCode.UPSTREAM_UNAVAILABLE].hint,
    }
    assert "Traceback" not in done.stderr


def test_an_unreachable_provider_is_one_error_naming_its_host_and_what_to_try(tmp_path: Path) -> None:
    """Offline at the default log level: no JSON log line per attempt before the error, and
    the error names the host, the proxy setting and where the other providers are listed."""
    port = _closed_port()
    done = _command_line(tmp_path, f"http://127.0.0.1:{port}/rest", "datasets", "prices")
    assert done.returncode == 1
    lines = done.stderr.strip().split("\n")
    assert len(lines) == 2, done.stderr
    assert lines[0].startswith(f"error: provider MIRROR could not be reached at 127.0.0.1:{port} (ConnectError)")
    assert "GOVERNED_EVIDENCE_SDMX_PROXY" in lines[0]
    assert lines[1].startswith("hint: ") and "governed-evidence stats providers" in lines[1]
    assert done.stdout == ""


#: (name, CLI arguments, the same call as a tool, exit code, code, what the message says; and
#: whether the local server is the provider, else a port nothing listens on)
_FAILURES = [
    # Nothing matches: the local server answers 404 (FakeProviders' default).
    ("not-found", ("describe", "MIRROR,NOPE,1.0"), ("describe_dataset", {"dataset": "MIRROR,NOPE,1.0"}), 1,
     "NOT_FOUND", "(HTTP 404)", True),
    # The provider refuses the request: HTTP 400 with a real Fusion Metadata Registry error body.
    ("invalid", ("data", "MIRROR,FLOW,1.0", "A.B"), ("get_data", {"dataset": "MIRROR,FLOW,1.0", "key": "A.B"}), 2,
     "INVALID_ARGUMENT", "(HTTP 400, SDMX error 150)", True),
    ("unreachable", ("datasets", "prices"), ("search_datasets", {"query": "prices"}), 1, "UPSTREAM_UNAVAILABLE",
     "could not be reached at 127.0.0.1:", False),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "tool", "exit_code", "code", "said", "listening"),
                         [f[1:] for f in _FAILURES], ids=[f[0] for f in _FAILURES])  # fmt: skip
def test_the_command_line_gives_the_tools_code_and_hint(
    tmp_path: Path,
    fake: FakeProviders,
    argv: tuple[str, ...],
    tool: tuple[str, dict[str, Any]],
    exit_code: int,
    code: str,
    said: str,
    listening: bool,
) -> None:
    """Each failure, run as a script runs it, against the code, message and hint the MCP tool gives."""
    fake.add("/rest/data/", fixture("fmr_error_150.xml"), "application/xml", status=400)
    with LocalProvider(fake) as local:
        base = local.base_url if listening else f"http://127.0.0.1:{_closed_port()}/rest"
        as_json = _command_line(tmp_path / "json", base, *argv, "--json")
        as_text = _command_line(tmp_path / "text", base, *argv)
        (tmp_path / "tool").mkdir()
        with local_services(tmp_path / "tool", local, lambda _: f'[providers.MIRROR]\nbase_url = "{base}"\n') as make:
            name, arguments = tool
            (result,) = call_statistics_tools(make(), (name, {**arguments, "provider": "MIRROR"}), raise_on_error=False)
    # Three answers from the local server (CLI twice, the tool once), or none.
    assert len(fake.requests) == (3 if listening else 0)
    assert result.is_error
    tool_text = result.content[0].text
    tool_head, tool_hint = tool_text.split("\n")[:2]

    assert as_json.returncode == exit_code, as_json.stderr[-2000:]
    failure = json.loads(as_json.stdout)
    assert failure["code"] == code and said in failure["message"] and "retry_after_s" not in failure
    assert tool_head == f"[{failure['code']}] {failure['message']}"
    assert tool_hint == f"hint: {failure['hint']}"

    assert as_text.returncode == exit_code and as_text.stdout == ""
    error, hint = as_text.stderr.splitlines()[-2:]
    assert error == f"error: {failure['message']}"
    if code == "UPSTREAM_UNAVAILABLE":
        # The person at the terminal is told where the other providers are listed.
        assert hint.startswith("hint: ") and "governed-evidence stats providers" in hint
    else:
        assert hint == tool_hint
    for done in (as_json, as_text):
        assert "Traceback" not in done.stderr
        assert str(tmp_path) not in done.stdout + done.stderr
