"""``governed-evidence stats datasets|describe|data|providers``: the statistics tools for people.

``--json`` prints exactly what the MCP tool returns, and on failure one JSON object too
(``error``: the error's class, ``message``: its text, ``code`` and ``hint``: the stable code
and recovery hint the MCP tools give for the same error, ``retry_after_s`` when the wait is
known; exit code 2 for a bad argument, 1 otherwise), so a script reading stdout never has to
parse a traceback or stderr. Without ``--json`` the message and the hint go to stderr, with
the same exit codes (a masked error, the operator's own to fix, without the hint a client
would get). Handlers take ``(args, settings)`` and return an exit code, like the other
commands. ``stats providers`` lists the configured providers (no MCP tool lists them; a
client learns their ids from the tools' descriptions and ``index_status``).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from governed_evidence.config import Settings
from governed_evidence.errors import ErrorCode, GovernedEvidenceError, InvalidRequestError, report_of
from governed_evidence.sdmx.models import DataResponse, DatasetDescription, DatasetSearchResponse
from governed_evidence.sdmx.validate import MAX_CODES_LIMIT, MAX_ROWS_LIMIT, MAX_SEARCH_LIMIT

# The main CLI adds this parser on every command, `serve` included: the service (httpx,
# the parsers) is imported when a `stats` command runs, not to build the parser.
if TYPE_CHECKING:
    from governed_evidence.sdmx.service import SdmxService

__all__ = [
    "ProviderSummary",
    "ProvidersListing",
    "ServiceFactory",
    "add_stats_parser",
    "list_providers",
    "print_data",
    "print_datasets",
    "print_description",
    "print_providers",
]

#: Where the service comes from; tests substitute one with a local transport.
ServiceFactory = Callable[[argparse.Namespace, Settings], "SdmxService"]


def _default_factory(args: argparse.Namespace, settings: Settings) -> SdmxService:
    from governed_evidence.sdmx.service import SdmxService

    return SdmxService.from_settings(settings, db=Path(args.db) if args.db else None)


class ProviderSummary(BaseModel):
    """One configured provider as ``stats providers`` lists it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str
    base_url: str
    data_per_hour: int
    structure_per_hour: int


class ProvidersListing(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    default: str
    providers: list[ProviderSummary]
    #: The operator's providers file merged over the bundled list, when one is set.
    providers_file: str | None = None


def list_providers(settings: Settings) -> ProvidersListing:
    """The enabled providers: the bundled ones with the operator's file merged on top."""
    from governed_evidence.sdmx.providers import load_providers

    providers = load_providers(settings.sdmx_providers)
    return ProvidersListing(
        default="OECD",
        providers=[
            ProviderSummary(
                id=p.id,
                name=p.name,
                base_url=p.base_url,
                data_per_hour=p.data_per_hour,
                structure_per_hour=p.structure_per_hour,
            )
            for p in providers
        ],
        providers_file=str(settings.sdmx_providers) if settings.sdmx_providers else None,
    )


def print_providers(listing: ProvidersListing) -> None:
    width = max((len(p.id) for p in listing.providers), default=0)
    for p in listing.providers:
        default = " (default)" if p.id == listing.default else ""
        print(f"{p.id:<{width}}  {p.name}{default}")
        print(
            f"{'':<{width}}  {p.base_url}; {p.data_per_hour} data and {p.structure_per_hour} structure requests an hour"
        )
    if listing.providers_file:
        print(f"\nproviders file: {listing.providers_file} (merged over the bundled list)")
    print("\nUse one with --provider ID; the operator adds or removes providers with GOVERNED_EVIDENCE_SDMX_PROVIDERS.")


def _run_providers(args: argparse.Namespace, settings: Settings) -> int:
    try:
        listing = list_providers(settings)
    except GovernedEvidenceError as exc:
        _report_failure(exc, as_json=args.json)
        return 1
    if args.json:
        print(listing.model_dump_json(indent=2))
    else:
        print_providers(listing)
    return 0


def _provenance(r: DatasetSearchResponse | DatasetDescription | DataResponse) -> None:
    state = "stale cache" if r.stale else "cache" if r.from_cache else "provider"
    print(f"\nsource: {r.source_url}")
    print(f"retrieved: {r.retrieved_at} (from {state})")
    for hint in r.hints:
        print(textwrap.fill(f"hint: {hint}", 100, subsequent_indent="      "))


def print_datasets(r: DatasetSearchResponse) -> None:
    print(f"{r.provider_name} ({r.provider}): {r.total_matches} of {r.catalogue_size} dataflows match")
    for hit in r.results:
        print(f"\n[{hit.rank}] {hit.dataset}")
        print(f"    {hit.name}")
        if hit.description:
            print(textwrap.indent(textwrap.fill(hit.description[:240], 96), "    "))
    _provenance(r)


def print_description(r: DatasetDescription) -> None:
    print(f"{r.name}\n{r.dataset} ({r.provider})")
    if r.time_coverage is not None:
        print(f"time coverage: {r.time_coverage.start or '?'} to {r.time_coverage.end or '?'}")
    print(f"key: {r.key_template}\nexample key: {r.example_key}\ncodes with data from: {r.codes_source}")
    for d in r.dimensions:
        counts = (
            f"{d.codes_with_data} of {d.total_codes} codes have data"
            if d.codes_with_data is not None
            else (f"{d.total_codes} codes")
        )
        print(f"\n{d.position}. {d.id} — {d.name or ''} ({counts})")
        shown = ", ".join(f"{c.id} {c.name}" if c.name else c.id for c in d.codes)
        more = f" (+{d.total_codes - len(d.codes)} more)" if d.truncated else ""
        print(textwrap.indent(textwrap.fill(shown + more, 96), "    "))
    if r.attributes:
        print("\nattributes: " + ", ".join(a.id for a in r.attributes))
    _provenance(r)


def _cell(value: str | float | None) -> str:
    if value is None:
        return ""
    # The shortest exact form: a figure people may cite must not be rounded by the display.
    return repr(value) if isinstance(value, float) else value


def print_data(r: DataResponse) -> None:
    print(f"{r.dataset} {r.key} ({r.provider}): {r.returned_rows} of {r.total_rows} rows")
    for column, value in r.constant_columns.items():
        label = r.labels.get(column, {}).get(value)
        print(f"  {column} = {value}" + (f" ({label})" if label else ""))
    if r.rows:
        cells = [r.columns] + [
            ["" if v is None else f"{v:g}" if isinstance(v, float) else v for v in row] for row in r.rows
        ]
        widths = [max(len(str(row[i])) for row in cells) for i in range(len(r.columns))]
        print()
        for row in cells:
            print("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    _provenance(r)


#: Hints for the person at the terminal where the tools' hint speaks to a client.
_OPERATOR_HINTS = {
    ErrorCode.UPSTREAM_UNAVAILABLE: "try again later or use another provider (--provider ID): "
    "`governed-evidence stats providers` lists them; answers already cached are still served",
}


def _report_failure(exc: GovernedEvidenceError, *, as_json: bool) -> None:
    """The failure with the code and hint the MCP tools give for it; the message stays the
    error's own, as the operator's command line always showed it."""
    report = report_of(exc)
    if not as_json:
        # A masked error's hint speaks of a server to a client; the operator's message names the fix.
        hint = "" if report.code is ErrorCode.INTERNAL else f"\nhint: {_OPERATOR_HINTS.get(report.code, report.hint)}"
        print(f"error: {exc}{hint}", file=sys.stderr)
        return
    failure: dict[str, object] = {
        "error": type(exc).__name__,
        "message": str(exc),
        "code": str(report.code),
        "hint": report.hint,
    }
    if report.retry_after_s is not None:
        failure["retry_after_s"] = report.retry_after_s
    print(json.dumps(failure, indent=2))


def _run(
    factory: ServiceFactory,
    call: Callable[[SdmxService, argparse.Namespace], Any],
    show: Callable[[Any], None],
) -> Callable[[argparse.Namespace, Settings], int]:
    def handler(args: argparse.Namespace, settings: Settings) -> int:
        try:
            service = factory(args, settings)
            try:
                result = call(service, args)
            finally:
                service.close()
        except GovernedEvidenceError as exc:
            _report_failure(exc, as_json=args.json)
            # The exit codes of the main CLI's error path.
            return 2 if isinstance(exc, InvalidRequestError) else 1
        if args.json:
            print(result.model_dump_json(indent=2))
        else:
            show(result)
        return 0

    return handler


def add_stats_parser(subparsers: Any, factory: ServiceFactory = _default_factory) -> argparse.ArgumentParser:
    """Add ``stats`` with ``datasets``, ``describe``, ``data`` and ``providers`` to the main CLI's subparsers."""
    stats = subparsers.add_parser(
        "stats", help="official statistics from SDMX providers (OECD, ECB, Eurostat and more: stats providers)"
    )
    sub = stats.add_subparsers(dest="stats_command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--provider", default="OECD", help="configured provider id (default: OECD)")
        p.add_argument("--db", help="index file holding the cache (default: $GOVERNED_EVIDENCE_DB)")
        p.add_argument("--json", action="store_true", help="print exactly what the MCP tool returns")

    p = sub.add_parser("datasets", help="search a provider's dataflow catalogue")
    p.add_argument("query")
    p.add_argument("--limit", type=int, default=10, help=f"1-{MAX_SEARCH_LIMIT} (default 10)")
    common(p)
    p.set_defaults(
        func=_run(factory, lambda s, a: s.search_datasets(a.query, provider=a.provider, limit=a.limit), print_datasets)
    )

    p = sub.add_parser("describe", help="a dataset's dimensions, codes with data and an example key")
    p.add_argument("dataset", help="AGENCY,ID,VERSION as search results give it")
    p.add_argument("--max-codes", type=int, default=30, help=f"1-{MAX_CODES_LIMIT} (default 30)")
    common(p)
    p.set_defaults(
        func=_run(
            factory,
            lambda s, a: s.describe_dataset(a.dataset, provider=a.provider, max_codes=a.max_codes),
            print_description,
        )
    )

    p = sub.add_parser("data", help="observations for a series key, with the source URL to cite")
    p.add_argument("dataset")
    p.add_argument("key", help="e.g. Q.FRA+DEU..B1GQ (empty position = all codes)")
    p.add_argument("--start", dest="start_period", help="first period, e.g. 2015 or 2015-Q1")
    p.add_argument("--end", dest="end_period", help="last period")
    p.add_argument("--max-rows", type=int, default=200, help=f"1-{MAX_ROWS_LIMIT} (default 200)")
    common(p)
    p.set_defaults(
        func=_run(
            factory,
            lambda s, a: s.get_data(
                a.dataset,
                a.key,
                provider=a.provider,
                start_period=a.start_period,
                end_period=a.end_period,
                max_rows=a.max_rows,
            ),
            print_data,
        )
    )
    p = sub.add_parser("providers", help="the configured providers: ids, names, addresses and hourly budgets")
    p.add_argument("--json", action="store_true", help="print the listing as JSON")
    p.set_defaults(func=_run_providers)
    parser: argparse.ArgumentParser = stats
    return parser
