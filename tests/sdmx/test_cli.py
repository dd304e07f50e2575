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

import pytest

from governed_evidence.config import Settings
from governed_evidence.sdmx.cli import add_stats_parser
from governed_evidence.sdmx.models import DataResponse, DatasetDescription, DatasetSearchResponse
from governed_evidence.sdmx.service import SdmxService
from tests.sdmx.conftest import ServiceFactory
from tests.sdmx.helpers import CSV_CT, STRUCTURE_CT, FakeProviders, catalogue_of, fixture

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


def test_bad_input_raises_the_package_error(cli: Callable[..., int], fake: FakeProviders) -> None:
    from governed_evidence.errors import InvalidRequestError

    with pytest.raises(InvalidRequestError):
        cli("stats", "data", G20, "A/B")
    assert fake.requests == []


def test_json_failures_are_one_json_object(
    cli: Callable[..., int], fake: FakeProviders, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.add("/dataflow/all/all/latest", b"slow down", "text/plain", status=429, **{"retry-after": "3600"})
    assert cli("stats", "datasets", "consumer prices", "--json") == 1
    failure = json.loads(capsys.readouterr().out)
    assert failure == {
        "error": "ProviderUnavailableError",
        "message": "provider OECD is busy (HTTP 429) and asks to retry in 3600 s",
        "retry_after_s": 3600.0,
    }
    # A bad argument: exit code 2, as the main CLI gives it; nothing was asked of the provider.
    asked = len(fake.requests)
    assert cli("stats", "data", G20, "A/B", "--json") == 2
    failure = json.loads(capsys.readouterr().out)
    assert failure["error"] == "InvalidRequestError" and failure["message"] and "retry_after_s" not in failure
    assert len(fake.requests) == asked


def test_json_failure_from_the_real_command_line(tmp_path: Path) -> None:
    """`governed-evidence stats ... --json` as a script runs it, with the provider unreachable."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    providers = tmp_path / "providers.toml"
    providers.write_text(f'[providers.MIRROR]\nbase_url = "http://127.0.0.1:{port}/rest"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVERNED_EVIDENCE_") and "proxy" not in k.lower()}
    env.update(
        GOVERNED_EVIDENCE_DB=str(tmp_path / "none.sqlite"),
        GOVERNED_EVIDENCE_SDMX_CACHE_PATH=str(tmp_path / "cache.sqlite"),
        GOVERNED_EVIDENCE_SDMX_PROVIDERS=str(providers),
        GOVERNED_EVIDENCE_SDMX_MAX_RETRIES="0",
        GOVERNED_EVIDENCE_SDMX_DEADLINE_S="5",
    )
    done = subprocess.run(
        [sys.executable, "-m", "governed_evidence", "stats", "datasets", "prices", "--provider", "MIRROR", "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    failure = json.loads(done.stdout)
    assert failure == {
        "error": "ProviderUnavailableError",
        "message": "provider MIRROR could not be reached (ConnectError); try again later",
    }
    assert "Traceback" not in done.stderr
