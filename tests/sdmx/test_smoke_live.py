"""scripts/smoke_live.py, its logic run against recorded responses on 127.0.0.1 (never the network)."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.helpers import load_script
from tests.sdmx.helpers import (
    CSV_CT,
    ECB_DATA,
    ECB_STRUCTURE_FULL,
    GENERIC_CT,
    STRUCTURE_CT,
    FakeProviders,
    LocalProvider,
    catalogue_of,
    fixture,
    sdmx_test_data,
)

smoke = load_script("smoke_live")


def _run(tmp_path: Path, fake: FakeProviders, *providers: str) -> tuple[int, list[str]]:
    lines: list[str] = []
    with LocalProvider(fake) as local:
        mirror = tmp_path / "providers.toml"
        origin = f"http://127.0.0.1:{local.port}"
        mirror.write_text(
            f'[providers.OECD]\nbase_url = "{origin}/public/rest"\n'
            f'[providers.ECB]\nbase_url = "{origin}/service"\n'
            f'[providers.ESTAT]\nbase_url = "{origin}/eurostat"\n'
        )
        argv = ["--providers-file", str(mirror), "--timeout", "5"]
        for provider in providers:
            argv += ["--provider", provider]
        code = smoke.main(argv, out=lines.append)
    return code, lines


def _oecd(fake: FakeProviders) -> None:
    g20 = fixture("oecd_g20_prices_structure.xml")
    fake.add("/public/rest/dataflow/all/all/latest", catalogue_of(g20), STRUCTURE_CT)
    fake.add("/public/rest/dataflow/OECD.SDD.TPS/DSD_G20_PRICES@DF_G20_PRICES/1.0", g20, STRUCTURE_CT)
    fake.add("/public/rest/data/OECD.SDD.TPS,DSD_G20_PRICES@DF_G20_PRICES,1.0/", fixture("oecd_g20_prices_data.csv"),
             CSV_CT)  # fmt: skip


def test_a_provider_that_answers_passes_every_check(tmp_path: Path) -> None:
    fake = FakeProviders()
    _oecd(fake)
    code, lines = _run(tmp_path, fake, "OECD")
    assert code == 0, lines
    assert lines[0].startswith("OECD (http://127.0.0.1:")
    assert [line.split("(")[0].strip() for line in lines[1:4]] == [
        "ok  search_datasets",
        "ok  describe_dataset",
        "ok  get_data",
    ]
    assert "cite: http://127.0.0.1:" in lines[4] and "CHN.A.N.CPI.PA._T.N.GY" in lines[4]
    assert lines[-1] == "1 of 1 providers passed"


def test_the_ecb_recording_passes(tmp_path: Path) -> None:
    fake = FakeProviders()
    structure = sdmx_test_data("ECB", ECB_STRUCTURE_FULL.split("/sdmx-test-data/", 1)[1])
    fake.add("/service/dataflow/ECB/all/latest", catalogue_of(structure), STRUCTURE_CT)
    fake.add("/service/dataflow/ECB/EXR/1.0", structure, STRUCTURE_CT)
    fake.add("/service/data/ECB,EXR,1.0/M.USD.EUR.SP00.A",
             sdmx_test_data("ECB", ECB_DATA.split("/sdmx-test-data/", 1)[1]), GENERIC_CT)  # fmt: skip
    code, lines = _run(tmp_path, fake, "ECB")
    assert code == 0, lines
    assert "constant labels" in lines[3] and " 0 constant labels" not in lines[3]


def test_each_failing_provider_gets_one_clear_line_and_the_exit_is_non_zero(tmp_path: Path) -> None:
    fake = FakeProviders()
    _oecd(fake)
    fake.add("/eurostat/", b"maintenance", "text/plain", status=503)
    code, lines = _run(tmp_path, fake, "OECD", "ESTAT")
    assert code == 1
    fails = [line for line in lines if "FAIL" in line]
    assert len(fails) == 1 and fails[0].startswith("  FAIL ESTAT: [UPSTREAM_UNAVAILABLE] provider ESTAT ")
    assert lines[-1] == "1 of 2 providers passed"


def test_offline_says_so(tmp_path: Path) -> None:
    # A port nothing listens on stands in for a machine without a network.
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    mirror = tmp_path / "providers.toml"
    mirror.write_text(
        "".join(f'[providers.{p}]\nbase_url = "http://127.0.0.1:{port}/rest"\n' for p in ("OECD", "ECB", "ESTAT"))
    )
    lines: list[str] = []
    code = smoke.main(["--providers-file", str(mirror), "--timeout", "2"], out=lines.append)
    assert code == 1
    assert sum(line.startswith("  FAIL ") and "could not be reached" in line for line in lines) == 3
    assert lines[-2] == "0 of 3 providers passed"
    assert "looks offline" in lines[-1]
