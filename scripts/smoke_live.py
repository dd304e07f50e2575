"""Live smoke test of the statistics tools: a few real requests to the OECD, the ECB and Eurostat.

For a machine with internet access, outside CI (the test suite never touches the network):
each provider is asked what an assistant asks through the MCP tools — ``search_datasets``,
``describe_dataset``, then ``get_data`` with labels for one well-known series — through the
same ``SdmxService`` the server uses (bounded requests, rate budgets, parsing). Every check
prints one line; a provider that cannot be used prints one ``FAIL`` line with the error's
code and message. The exit status is 0 when every provider passed, 1 otherwise.

The cache goes into a temporary folder, so the operator's statistics cache and rate ledger
are left alone. A proxy is taken from ``GOVERNED_EVIDENCE_SDMX_PROXY``, as the server takes
it; ``--providers-file`` points providers elsewhere (a mirror, or a local test server).

    .venv/bin/python scripts/smoke_live.py                 # all three
    .venv/bin/python scripts/smoke_live.py --provider ECB  # one
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from governed_evidence.config import Settings
from governed_evidence.errors import GovernedEvidenceError, ProviderUnavailableError
from governed_evidence.sdmx.service import SdmxService


@dataclass(frozen=True)
class Check:
    """What one provider is asked: catalogue words, a dataset, a series key and a first period."""

    query: str
    dataset: str
    key: str
    start_period: str


#: One well-known series per provider (stable dataflows, published for years).
CHECKS: dict[str, Check] = {
    "OECD": Check(
        "consumer price indices", "OECD.SDD.TPS,DSD_G20_PRICES@DF_G20_PRICES,1.0", "CHN.A.N.CPI.PA._T.N.GY", "2015"
    ),
    "ECB": Check("exchange rates", "ECB,EXR,1.0", "M.USD.EUR.SP00.A", "2020-01"),
    "ESTAT": Check("gross domestic product", "ESTAT,NAMA_10_GDP,1.0", "A.CP_MEUR.B1GQ.FR", "2015"),
}


class CheckFailedError(Exception):
    """A provider answered, but not what the check expects."""


def _short(text: str, width: int = 70) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "\u2026"


def run_provider(service: SdmxService, provider: str, check: Check, say: Callable[[str], None]) -> None:
    """The three tool calls for ``provider``, one line each; raises on the first failure."""
    started = time.monotonic()
    found = service.search_datasets(check.query, provider=provider, limit=5)
    if not found.results:
        raise CheckFailedError(f"search_datasets({check.query!r}) found nothing in {found.catalogue_size} dataflows")
    say(
        f"  ok  search_datasets({check.query!r}): {found.total_matches} of {found.catalogue_size} dataflows match; "
        f"first: {found.results[0].dataset} ({_short(found.results[0].name, 40)})"
    )
    described = service.describe_dataset(check.dataset, provider=provider, max_codes=5)
    if not described.dimensions:
        raise CheckFailedError(f"describe_dataset({check.dataset!r}) listed no dimensions")
    say(
        f"  ok  describe_dataset({check.dataset!r}): {len(described.dimensions)} dimensions "
        f"({described.key_template}), codes from {described.codes_source}"
    )
    data = service.get_data(
        check.dataset, check.key, provider=provider, start_period=check.start_period, max_rows=5, labels=True
    )
    if not data.rows:
        raise CheckFailedError(f"get_data({check.key!r}) returned no rows: {' '.join(data.hints)[:200]}")
    labelled = [k for k in data.constant_columns if k.endswith("_label")]
    say(
        f"  ok  get_data({check.key!r}, start_period={check.start_period!r}, labels=True): "
        f"{data.total_rows} rows ({data.format}); first {dict(zip(data.columns, data.rows[0], strict=False))}; "
        f"{len(labelled)} constant labels"
    )
    say(f"      cite: {data.source_url}  retrieved {data.retrieved_at}  ({time.monotonic() - started:.1f} s)")


def main(argv: Sequence[str] | None = None, *, out: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    parser.add_argument(
        "--provider", action="append", choices=sorted(CHECKS), help="provider to check (repeatable; default: all)"
    )
    parser.add_argument(
        "--providers-file", type=Path, help="a providers.toml with overrides (e.g. a mirror's base_url)"
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request attempt (default 30)")
    args = parser.parse_args(argv)
    providers = args.provider or list(CHECKS)

    failures: dict[str, GovernedEvidenceError | CheckFailedError] = {}
    with tempfile.TemporaryDirectory(prefix="ge-smoke-") as tmp:
        settings = Settings(
            db=Path(tmp) / "no-index.sqlite",
            sdmx_cache_path=Path(tmp) / "sdmx-cache.sqlite",
            sdmx_providers=args.providers_file,
            sdmx_timeout_s=args.timeout,
            sdmx_max_retries=1,
        )
        service = SdmxService.from_settings(settings)
        try:
            for provider in providers:
                out(f"{provider} ({service.providers.get(provider).base_url})")
                try:
                    run_provider(service, provider, CHECKS[provider], out)
                except (GovernedEvidenceError, CheckFailedError) as exc:
                    failures[provider] = exc
                    code = getattr(exc, "code", "CHECK_FAILED")
                    out(f"  FAIL {provider}: [{code}] {exc}")
        finally:
            service.close()

    passed = len(providers) - len(failures)
    out(f"{passed} of {len(providers)} providers passed")
    if failures and all(isinstance(e, ProviderUnavailableError) for e in failures.values()) and not passed:
        out(
            "No provider could be reached: this machine looks offline, or needs a proxy "
            "(set GOVERNED_EVIDENCE_SDMX_PROXY). This script needs internet access; the test suite does not."
        )
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
