"""``governed-evidence sync CONFIG`` and ``governed-evidence refresh CONFIG``.

``sync`` brings the mirror folder up to date with every configured source; ``refresh`` runs
sync and then an incremental ingest of the mirror into the index, which a running server
picks up at its next request without a restart (it watches the index file). Both exit 1 with
the reason when a source fails, with the last good mirror (and index) kept; nothing printed
or logged holds a secret: errors name environment variables, hosts and statuses only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from governed_evidence.config import Classification, Settings, parse_level
from governed_evidence.errors import ConfigError, ConnectorError

# What a sync runs on is imported when one runs: every command registers these, and `serve`
# must not pay for httpx or the ingest modules at start-up (tests/mcp/test_startup.py).
if TYPE_CHECKING:
    from governed_evidence.connectors.config import ConnectorConfig, SourceConfig
    from governed_evidence.connectors.http import Http
    from governed_evidence.connectors.mirror import MirrorSource, SyncReport
    from governed_evidence.ingest.report import IngestReport

__all__ = ["make_source", "refresh", "register", "sync"]

_LEVELS = [c.label for c in Classification]


def make_source(config: SourceConfig, http: Http) -> MirrorSource:
    from governed_evidence.connectors.config import DriveSource, GraphSource

    if isinstance(config, GraphSource):
        from governed_evidence.connectors.graph import GraphDrive

        return GraphDrive(config, http)
    if isinstance(config, DriveSource):
        from governed_evidence.connectors.gdrive import GoogleDrive

        return GoogleDrive(config, http)
    raise ConfigError(f"source {config.name!a}: unknown kind")


def sync(config: ConnectorConfig, settings: Settings) -> SyncReport:
    """Mirror every source of ``config``; :class:`ConnectorError` keeps the last good mirror."""
    from governed_evidence.connectors.http import Http
    from governed_evidence.connectors.mirror import sync_mirror

    clients = [Http(timeout=s.timeout_seconds, deadline_seconds=s.deadline_seconds) for s in config.sources]
    try:
        sources = [make_source(s, http) for s, http in zip(config.sources, clients, strict=True)]
        return sync_mirror(config.mirror, sources, max_file_bytes=settings.max_file_bytes)
    except ConnectorError as exc:
        raise ConnectorError(f"{exc}; the last good mirror ({config.mirror}) is kept") from None
    finally:
        for http in clients:
            http.close()


def refresh(
    config: ConnectorConfig,
    settings: Settings,
    *,
    db: Path,
    ceiling: Classification,
    embedder_name: str | None = None,
    force: bool = False,
) -> tuple[SyncReport, IngestReport]:
    """Sync, then ingest the mirror into ``db`` (incrementally: only changed files are parsed)."""
    from governed_evidence import composition

    report = sync(config, settings)
    built = composition.ingest(
        settings,
        config.mirror,
        db,
        embedder_name=embedder_name,
        ceiling=ceiling,
        # The mirror's governance file gives every file its level; anything else is the most sensitive.
        default_classification=max(Classification),
        force=force,
    )
    return report, built


def _print_sync(report: SyncReport) -> None:
    state = "updated" if report.changed else "unchanged"
    print(f"Mirror {state}: {report.mirror}")
    for s in report.sources:
        full = " (full enumeration)" if s.full else ""
        print(f"  {s.name}: {s.files} files; {s.downloaded} downloaded, {s.kept} unchanged, {s.removed} removed{full}")
        for what, why in s.skipped:
            print(f"  skipped {what}: {why}")


def _cmd_sync(args: argparse.Namespace, settings: Settings) -> int:
    from governed_evidence.connectors.config import load_config

    report = sync(load_config(Path(args.config)), settings)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        _print_sync(report)
    return 0


def _cmd_refresh(args: argparse.Namespace, settings: Settings) -> int:
    from governed_evidence.connectors.config import load_config

    config = load_config(Path(args.config))
    db = Path(args.db) if args.db else config.index or settings.db
    report, built = refresh(
        config, settings, db=db, ceiling=parse_level(args.ceiling), embedder_name=args.embedder, force=args.force
    )
    if args.json:
        out: dict[str, Any] = {"sync": report.as_dict(), "ingest": built.as_dict()}
        print(json.dumps(out, indent=2))
        return 0
    _print_sync(report)
    if built.unchanged:
        print(f"Index unchanged: {built.documents_indexed} documents in {db}")
    else:
        how = (
            f"incremental: {built.files_reparsed} parsed again, {built.files_added} added, "
            f"{built.files_removed} removed, {built.files_copied} copied"
            if built.build == "incremental"
            else "full build"
        )
        print(f"Indexed {built.documents_indexed} documents, {built.passages} passages into {db} ({how})")
    for path, reason in built.rejected:
        print(f"  rejected {path}: {reason}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``sync`` and ``refresh`` to the program's sub-parsers."""
    p = sub.add_parser("sync", help="mirror SharePoint / OneDrive / Google Drive into the folder ingest reads")
    p.add_argument("config", help="the connectors' TOML configuration (secrets come from the variables it names)")
    p.add_argument("--json", action="store_true", help="print the sync report as JSON")
    p.set_defaults(func=_cmd_sync)

    p = sub.add_parser("refresh", help="sync, then ingest the mirror incrementally (a running server picks it up)")
    p.add_argument("config", help="the connectors' TOML configuration")
    p.add_argument("--db", help="index file (default: the configuration's index, else $GOVERNED_EVIDENCE_DB)")
    p.add_argument(
        "--ceiling", choices=_LEVELS, default="restricted", help="highest level to index (default: restricted)"
    )
    p.add_argument("--embedder", choices=["default", "openai"], help="embedder (default: $GOVERNED_EVIDENCE_EMBEDDER)")
    p.add_argument("--force", action="store_true", help="parse every mirrored file again")
    p.add_argument("--json", action="store_true", help='print {"sync": ..., "ingest": ...} as JSON')
    p.set_defaults(func=_cmd_refresh)
