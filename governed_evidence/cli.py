"""Command line: ingest | search | status | serve | stats | eval.

``--json`` prints exactly the structure the MCP tools return, so scripts and checks can
rely on one contract. Human output goes to stdout; logs go to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

# _threads first: it settles BLAS threads before anything below loads numpy (see its docstring).
from governed_evidence import _threads, __version__, composition  # noqa: F401  # isort: skip
from governed_evidence.config import Classification, Settings, parse_level
from governed_evidence.errors import ConfigError, GovernedEvidenceError, IndexUnavailableError, InvalidRequestError
from governed_evidence.logging import configure_logging, get_logger
from governed_evidence.search.limits import CONFIDENCE_LEVELS, DEFAULT_LIMIT, MAX_LIMIT, SEARCH_MODES

# Commands import what they use when they run: `serve` must not pay at start-up for the
# ingest parsers, the evaluation client or the statistics HTTP stack (tests/mcp/test_startup.py).
if TYPE_CHECKING:
    from collections.abc import Callable

    from governed_evidence.embeddings.base import Embedder
    from governed_evidence.embeddings.factory import BackgroundEmbedder
    from governed_evidence.ingest.report import IngestReport
    from governed_evidence.mcp.status import ServerStatus
    from governed_evidence.search.levels import LevelServices
    from governed_evidence.search.models import SearchResponse
    from governed_evidence.search.service import SearchService
    from governed_evidence.serving.http import HttpOptions

__all__ = ["build_parser", "main"]

_LEVELS = [c.label for c in Classification]
#: Exit status after Ctrl-C: what a shell reports for a command ended by SIGINT (128 + 2).
_INTERRUPTED = 130
#: Libraries whose warnings the ingest report already summarises in its own words.
_SUMMARISED_LIBRARIES = ("pypdf",)
#: What tells whether a file was replaced: device, inode, size and modification time.
_FileIdentity = tuple[int, int, int, int]


def _settings() -> Settings:
    return Settings()


def _db(args: argparse.Namespace, settings: Settings) -> Path:
    return Path(args.db) if args.db else settings.db


def _service(
    args: argparse.Namespace,
    settings: Settings,
    embedder_factory: Callable[[], Embedder] | None = None,
    *,
    serving: bool = False,
) -> SearchService:
    ceiling = parse_level(args.ceiling) if getattr(args, "ceiling", None) else settings.ceiling_level
    return composition.search_service(
        settings, db=_db(args, settings), ceiling=ceiling, embedder_factory=embedder_factory, serving=serving
    )


def _cmd_ingest(args: argparse.Namespace, settings: Settings) -> int:
    from governed_evidence.ingest.progress import IngestProgress

    db = _db(args, settings)
    progress = None if args.quiet else IngestProgress()
    try:
        if args.dry_run:
            # No embedder is made (no model loads) and the index is not opened.
            report = composition.dry_run(
                settings,
                Path(args.corpus),
                ceiling=parse_level(args.ceiling),
                default_classification=parse_level(args.default_classification),
                progress=progress,
            )
        else:
            report = composition.ingest(
                settings,
                Path(args.corpus),
                db,
                embedder_name=args.embedder,
                ceiling=parse_level(args.ceiling),
                default_classification=parse_level(args.default_classification),
                force=args.force,
                progress=progress,
            )
    finally:
        # Also on Ctrl-C or an error: the bar ends before anything else is printed.
        if progress is not None:
            progress.close()
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
        return 0
    secs = report.seconds
    if report.unchanged:
        print(
            f"Index unchanged since {report.built_at}: {report.documents_indexed} documents, "
            f"{report.passages} passages in {db} (corpus fingerprint matches); use --force to rebuild"
        )
        print(f"  checked in {secs['total']:.1f} s; rejections and warnings are listed when the index is rebuilt")
        _print_skipped(report)
        _print_stale(report)
        _print_ingest_levels(report, args.default_classification, settings.ceiling_level)
        return 0
    if report.dry_run:
        print(
            f"Dry run: {report.documents_indexed} documents, {report.passages} passages would be indexed into {db}; "
            f"nothing was embedded or written ({secs['total']:.1f} s)"
        )
    else:
        rate = report.passages / secs["total"] if secs.get("total") else 0.0
        print(f"Indexed {report.documents_indexed} documents, {report.passages} passages into {db}")
        print(
            f"  embeddings: {report.embeddings_computed} computed, {report.embeddings_reused} reused; "
            f"{secs['total']:.1f} s ({rate:.1f} passages/s; parse+chunk {secs['parse_and_chunk']:.1f} s, "
            f"embed {secs['embed']:.1f} s, write {secs['write']:.1f} s)"
        )
        if report.build == "incremental":
            print(
                f"  incremental: {report.files_reparsed} changed file(s) parsed again, {report.files_added} added, "
                f"{report.files_removed} removed, {report.files_copied} unchanged copied from the previous index"
            )
        elif report.full_build_reason:
            print(f"  full build: {report.full_build_reason}")
    _print_stale(report)
    if report.superseded_documents:
        print(f"  superseded documents (kept out of search): {report.superseded_documents}")
    if report.excluded_above_ceiling:
        print(f"  documents above the ceiling, not read: {report.excluded_above_ceiling}")
    if report.passages_refused:
        print(f"  passages refused (credential-shaped content): {report.passages_refused}")
    for path, reason in report.rejected:
        print(f"  rejected {path}: {reason}")
    _print_skipped(report)
    for path, warning in report.warnings:
        print(f"  warning {path}: {warning}")
    _print_ingest_levels(report, args.default_classification, settings.ceiling_level)
    return 0


_OUTCOME_WORDS = {
    "indexed": "indexed",
    "superseded": "superseded",
    "draft": "draft (not searched)",
    "deprecated": "deprecated (not searched)",
    "above_ceiling": "above the ceiling (not read)",
    "rejected": "rejected",
}


def _print_skipped(report: IngestReport) -> None:
    """Every file no loader reads, so none vanishes silently (those above the ceiling counted)."""
    for path, reason in report.skipped:
        print(f"  skipped {path}: {reason}")
    if report.skipped_above_ceiling:
        print(f"  skipped files above the ceiling, not named: {report.skipped_above_ceiling}")


def _print_stale(report: IngestReport) -> None:
    if report.stale_documents:
        print(f"  documents overdue for review (review_by passed): {report.stale_documents}")


def _print_ingest_levels(report: IngestReport, default: str, serving: Classification) -> None:
    """Documents per level and outcome, the rule that decided their levels, and a warning
    when none of them is visible at the ceiling search and serve use by default."""
    from governed_evidence.ingest.report import OUTCOMES, serving_notice

    print("  documents by classification:")
    for level in Classification:
        counts = report.by_classification.get(level.label, {})
        parts = ", ".join(f"{counts[o]} {_OUTCOME_WORDS[o]}" for o in OUTCOMES if counts.get(o))
        print(f"    {level.label:<10} {sum(counts.values()):>6}" + (f"  ({parts})" if parts else ""))
    if report.decided_by:
        rules = []
        for rule in ("front matter", "rule", "folder", "default"):
            levels = report.decided_by.get(rule, {})
            if levels:
                name = {"default": f"default (--default-classification {default})", "rule": "governance rule"}.get(
                    rule, rule
                )
                each = ", ".join(f"{c.label} {levels[c.label]}" for c in Classification if c.label in levels)
                rules.append(f"{name} {sum(levels.values())} ({each})")
        print("  level decided by: " + "; ".join(rules))
    print(f"  visible at ceiling {serving.label} (search and serve by default): {report.visible_at(serving)} documents")
    notice = serving_notice(report, serving)
    if notice:
        print(f"warning: {notice[0]}")
        for line in notice[1:]:
            print(f"  - {line}")


def _print_search(response: SearchResponse) -> None:
    mode: str = response.search_mode
    if response.search_mode_reason:
        mode += f" (fallback: {response.search_mode_reason})"
    print(f"mode: {mode} | confidence: {response.confidence} | ceiling: {response.ceiling}")
    if response.status == "NO_RELEVANT_CONTEXT":
        print(f"NO_RELEVANT_CONTEXT: {response.reason}")
        return
    for r in response.results:
        # A workbook's lines are its sheet's rows, a deck's pages its slides.
        suffix = r.document.lower().rpartition(".")[2]
        where = (
            f"{'rows' if suffix == 'xlsx' else 'lines'} {r.lines.start}-{r.lines.end}"
            if r.lines
            else f"{'slides' if suffix == 'pptx' else 'pages'} {r.pages.start}-{r.pages.end}"
            if r.pages
            else ""
        )
        print(f"\n[{r.rank}] {r.citation_id}")
        facts = f"{where}; {r.classification}; {r.matched_by}; confidence {r.confidence:.2f}"
        print(f"    {r.title} — {r.heading or '(top)'} ({facts})")
        snippet = " ".join(r.text.split())
        print(textwrap.indent(textwrap.fill(snippet[:400] + ("…" if len(snippet) > 400 else ""), 96), "    "))
    if response.withheld:
        print(f"\n({response.withheld} weaker candidates withheld by the confidence gate)")


@contextmanager
def _naming_the_index(db: Path) -> Iterator[None]:
    """Index errors with the file they are about. The operator's terminal may name it; the
    error a client sees never does (so the caller-facing classes are not reused here)."""
    try:
        yield
    except IndexUnavailableError as exc:
        raise GovernedEvidenceError(f"{exc} (index file: {db.absolute()})") from None


def _print_visibility(db: Path, ceiling: Classification) -> None:
    """The operator's count of what lies above the ceiling: never part of what a client is told."""
    from governed_evidence.search.visibility import visibility

    try:
        seen = visibility(db, ceiling)
    except IndexUnavailableError:
        return
    print(seen.summary())
    advice = seen.advice()
    if advice:
        print(f"  {advice}")


def _cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    service = _service(args, settings)
    db = service.db
    with _naming_the_index(db):
        response = service.search(args.query, limit=args.limit, mode=args.mode, confidence_level=args.confidence)
    if args.json:
        print(response.model_dump_json(indent=2))
    else:
        _print_search(response)
        if response.status == "NO_RELEVANT_CONTEXT":
            _print_visibility(db, service.ceiling)
    return 0


def _print_status(status: ServerStatus, db: Path) -> None:
    print(f"index file: {db.absolute()}")
    print(f"index ok: {status.ok}" + (f" ({status.problem})" if status.problem else ""))
    # An index that cannot be opened has no schema, build time or model to show.
    if status.schema_version is not None:
        print(f"integrity: {status.integrity} | schema: {status.schema_version} | built: {status.built_at}")
    if status.embedding_model is not None:
        print(f"embedding model: {status.embedding_model} ({status.embedding_dimension}-d)")
    print(
        f"meaning search: {status.semantic_search}"
        + (f" ({status.semantic_search_reason})" if status.semantic_search_reason else "")
    )
    print(f"ceiling: {status.ceiling} | visible documents: {status.documents} | passages: {status.passages}")
    for c in status.by_classification:
        counts = f"{c.documents:>6} documents {c.passages:>8} passages"
        print(f"  {c.classification:<10} {counts} ({c.superseded_documents} superseded)")
    if status.schema_version is not None:
        _print_visibility(db, parse_level(status.ceiling))
    cache = status.statistics_cache
    if cache is not None:
        where = cache.location + (f" ({cache.reason})" if cache.reason else "")
        print(f"statistics cache: {where}")


def _cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    db = _db(args, settings)
    status = composition.server_status(_service(args, settings), composition.statistics_service(settings, db=db))
    if args.json:
        print(status.model_dump_json(indent=2))
    else:
        _print_status(status, db)
    return 0 if status.ok else 1


def _cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    from governed_evidence._heap import pause_collection, resume_collection

    # Until the heap is frozen, once the app is built: the imports below allocate a few hundred
    # thousand objects that live as long as the process, and collecting among them while they
    # are made cost start-up about 0.1 s (governed_evidence/_heap.py).
    pause_collection()
    try:
        return _serve(args, settings)
    finally:
        resume_collection()


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    from governed_evidence.embeddings.factory import BackgroundEmbedder

    http = args.transport == "http"
    if not http:
        given = [flag for flag, value in _http_flags(args).items() if value]
        if given:
            raise ConfigError(f"{', '.join(given)}: only with --transport http")
    else:
        from governed_evidence.serving.auth import make_auth
        from governed_evidence.serving.http import check_binding

        # Before the model loads: a refused binding or credential setting costs nothing.
        options = _http_options(args)
        check_binding(options)
        auth = make_auth(options.auth, settings, tokens_file=Path(args.tokens_file) if args.tokens_file else None)
    # The model is the longest part of start-up after the MCP imports, and most of it runs
    # in native code without the GIL: start it first, so it loads while fastmcp is imported
    # and the client initialises, and the first search does not wait for it.
    model = BackgroundEmbedder(settings)
    levels: LevelServices | None = None
    audit = None
    try:
        from governed_evidence._heap import freeze_startup_heap
        from governed_evidence.logging import route_library_loggers
        from governed_evidence.mcp import build_app
        from governed_evidence.mcp.calls import Calls, stdio_caller
        from governed_evidence.telemetry import configure_tracing

        configure_tracing()
        audit = composition.audit_sink(settings)
        db = _db(args, settings)
        ceiling = parse_level(args.ceiling) if args.ceiling else settings.ceiling_level
        # The statistics service (httpx, parsers, the cache connection) is made on the first
        # statistics call; only the providers file is read now.
        statistics = composition.deferred_statistics(settings, db=db)
        route_library_loggers("fastmcp", "mcp", "httpx", "uvicorn", "uvicorn.error")
        if not http:
            levels = _stdio_levels(args, settings, model)
            calls = Calls(levels, anonymous=stdio_caller(ceiling), audit=audit)
            app = build_app(calls, statistics)
            freeze_startup_heap()
            app.run(transport="stdio", show_banner=False)
            return 0
        from governed_evidence.access.caller import Caller
        from governed_evidence.serving.http import run_http

        levels = composition.level_services(settings, db=db, ceiling=ceiling, embedder_factory=model.result)
        # Without credentials every caller is at the server's ceiling: only that level is
        # served. With credentials every level up to the ceiling is made now, its vectors
        # copied in a fixed order (search/levels.py).
        anonymous = Caller(name="anonymous", clearance=ceiling, via="network") if auth is None else None
        if anonymous is not None:
            levels.warm_in_background(levels.top)
        else:
            levels.warm_all()
        _warn_if_index_writable(db)
        calls = Calls(levels, anonymous=anonymous, audit=audit, transport="http")
        app = build_app(calls, statistics, auth=auth)
        freeze_startup_heap()
        run_http(app, options)
    finally:
        # A client that disconnects (or a configuration error) while the model is loading
        # must not tear the runtime down under the loading thread: onnxruntime aborts the
        # process if it does. A copy of the vectors in progress stops at its next block.
        if levels is not None:
            levels.close()
        model.join()
        if audit is not None:
            audit.close()
        from governed_evidence.telemetry import shutdown_tracing

        # Spans still queued are sent now (bounded by the exporter's timeout).
        shutdown_tracing()
    return 0


def _warn_if_index_writable(db: Path) -> None:
    """Replicas serve one immutable file: one the server may write takes the statistics cache
    into it (ADR 0006), and the file then changes under every replica reading it."""
    if db.exists() and os.access(db, os.W_OK) and os.access(db.parent, os.W_OK):
        get_logger("serving").warning(
            "index_writable",
            advice="serve the index read-only (a read-only mount, or a file the server's user cannot write) "
            "and set GOVERNED_EVIDENCE_SDMX_CACHE_PATH for the statistics cache",
        )


def _stdio_levels(args: argparse.Namespace, settings: Settings, model: BackgroundEmbedder) -> LevelServices:
    """The one service of a stdio server, its vectors copied in the background at start."""
    from governed_evidence.search.levels import LevelServices

    service = _service(args, settings, embedder_factory=model.result, serving=True)
    levels = LevelServices.single(service)
    # The searchable vectors are copied into memory in the background (after the model is
    # ready); until then the vec0 KNN answers (exact, slower).
    levels.warm_in_background(service)
    return levels


def _http_flags(args: argparse.Namespace) -> dict[str, object]:
    return {
        "--host": args.host,
        "--port": args.port,
        "--auth": args.auth,
        "--tokens-file": args.tokens_file,
        "--allowed-host": args.allowed_host,
        "--allowed-origin": args.allowed_origin,
        "--allow-unauthenticated": args.allow_unauthenticated,
    }


def _http_options(args: argparse.Namespace) -> HttpOptions:
    from governed_evidence.serving.http import HttpOptions

    return HttpOptions(
        host=args.host or "127.0.0.1",
        port=args.port if args.port is not None else 8000,
        auth=args.auth or "none",
        allowed_hosts=tuple(args.allowed_host or ()),
        allowed_origins=tuple(args.allowed_origin or ()),
        allow_unauthenticated=args.allow_unauthenticated,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="governed-evidence", description="Governed, cited evidence for AI assistants."
    )
    parser.add_argument("--version", action="version", version=f"governed-evidence {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", help="build the index from a corpus folder (atomic)")
    p.add_argument(
        "--corpus",
        required=True,
        help="folder of .md, .txt, .pdf, .docx, .html, .xlsx and .pptx files (others are listed as skipped)",
    )
    p.add_argument("--db", help="index file (default: $GOVERNED_EVIDENCE_DB or data/evidence.sqlite)")
    p.add_argument(
        "--ceiling", choices=_LEVELS, default="restricted", help="highest level to index (default: restricted)"
    )
    p.add_argument(
        "--default-classification",
        choices=_LEVELS,
        default="restricted",
        help="level of documents with no label and no level folder (default: restricted)",
    )
    p.add_argument(
        "--embedder", choices=["default", "openai"], help="embedder (default: $GOVERNED_EVIDENCE_EMBEDDER or default)"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help=(
            "parse every file again (without it, a file unchanged since the last build is copied from "
            "the index, and an unchanged corpus keeps the index as it is), "
            "and replace an index built from another corpus folder (refused without it)"
        ),
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help=(
            "read and classify every file and report what would be indexed, refused and skipped, by classification "
            "and status, without loading the model, embedding or writing the index"
        ),
    )
    p.add_argument("--json", action="store_true", help="print the ingest report as JSON")
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no progress on stderr (by default: a bar on a terminal, a line every few seconds otherwise)",
    )
    p.set_defaults(func=_cmd_ingest)

    p = sub.add_parser("search", help="search the policy documents")
    p.add_argument("query")
    p.add_argument("--db")
    p.add_argument("--ceiling", choices=_LEVELS, help="caller ceiling (default: $GOVERNED_EVIDENCE_CEILING or public)")
    p.add_argument("--mode", choices=SEARCH_MODES, default=SEARCH_MODES[0])
    p.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help=f"1-{MAX_LIMIT} (default {DEFAULT_LIMIT})")
    p.add_argument("--confidence", choices=CONFIDENCE_LEVELS, default=CONFIDENCE_LEVELS[0])
    p.add_argument("--json", action="store_true", help="print exactly what the MCP tool returns")
    p.set_defaults(func=_cmd_search)

    p = sub.add_parser("status", help="index integrity, model and visible counts")
    p.add_argument("--db")
    p.add_argument("--ceiling", choices=_LEVELS)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_status)

    from governed_evidence.evaluation.command import add_eval_parser

    add_eval_parser(sub)

    from governed_evidence.sdmx.cli import add_stats_parser

    add_stats_parser(sub)

    p = sub.add_parser(
        "serve", help="run the MCP server: over stdio (stdout carries only JSON-RPC) or streamable HTTP at /mcp"
    )
    p.add_argument("--db")
    p.add_argument(
        "--ceiling",
        choices=_LEVELS,
        help="server ceiling (default: $GOVERNED_EVIDENCE_CEILING or public); over HTTP each caller sees up to "
        "the lower of it and their own clearance",
    )
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="default: stdio")
    p.add_argument("--host", help="HTTP: address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="HTTP: port (default 8000)")
    p.add_argument(
        "--auth",
        choices=["none", "tokens", "jwt"],
        help="HTTP: callers' credentials: tokens from 'token create', or JWTs from the identity provider "
        "(GOVERNED_EVIDENCE_JWT_*); default none, loopback only",
    )
    p.add_argument("--tokens-file", help="HTTP with --auth tokens (default: $GOVERNED_EVIDENCE_TOKENS_FILE)")
    p.add_argument(
        "--allowed-host",
        action="append",
        metavar="NAME",
        help="HTTP: a Host name requests may use besides loopback and the bound address (repeatable)",
    )
    p.add_argument(
        "--allowed-origin",
        action="append",
        metavar="ORIGIN",
        help="HTTP: a browser Origin allowed besides the server's own, e.g. https://evidence.example.org (repeatable)",
    )
    p.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        help="HTTP: serve a non-loopback address without credentials (a private network is the boundary; "
        "every caller gets the server ceiling)",
    )
    p.set_defaults(func=_cmd_serve)

    from governed_evidence.access.token_command import register as register_token_command

    register_token_command(sub)

    from governed_evidence.connectors.command import register as register_connector_commands

    register_connector_commands(sub)
    _add_verbose(parser)
    return parser


def _add_verbose(parser: argparse.ArgumentParser, *, top: bool = True) -> None:
    """``--verbose`` on the program and on every command and sub-command, so it may come
    before or after the command's name."""
    parser.add_argument(
        "--verbose",
        action="store_true",
        # Only the top level has a default: a command's own default would overwrite a
        # --verbose given before the command's name.
        default=False if top else argparse.SUPPRESS,
        help="also log progress as JSON lines on stderr (INFO); by default only warnings are logged, "
        "except by serve, which always logs at INFO unless $GOVERNED_EVIDENCE_LOG_LEVEL says otherwise",
    )
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                _add_verbose(command, top=False)


def _log_level(args: argparse.Namespace, settings: Settings) -> str:
    """INFO for ``serve`` (its stderr is a log stream); warnings only for the human commands,
    whose results are their own output, unless the operator asked for more."""
    if "log_level" in settings.model_fields_set:
        level = settings.log_level
    else:
        level = "INFO" if args.command == "serve" else "WARNING"
    if getattr(args, "verbose", False) and _level_number(level) > logging.INFO:
        level = "INFO"
    return level


def _level_number(level: str) -> int:
    number = logging.getLevelName(level.upper())
    return number if isinstance(number, int) else logging.INFO


def _set_up_logging(args: argparse.Namespace, settings: Settings) -> None:
    level = _log_level(args, settings)
    configure_logging(level)
    if _level_number(level) > logging.INFO:
        # pypdf warns per object it repairs; the PDF loader already reports what matters as
        # one warning per file in the ingest report. Its own lines only with the detail asked for.
        for name in _SUMMARISED_LIBRARIES:
            logging.getLogger(name).setLevel(logging.ERROR)


def _file_identity(path: Path) -> _FileIdentity | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _interrupted(args: argparse.Namespace | None, index_before: _FileIdentity | None, db: Path | None) -> int:
    """Ctrl-C: one line instead of a traceback, and the shell's code for SIGINT (128 + 2)."""
    if args is not None and args.command == "serve":
        # stderr is the server's log stream: the notice is a log line like the others.
        get_logger("cli").info("interrupted")
        return _INTERRUPTED
    if db is None:
        notice = "interrupted"
    elif _file_identity(db) != index_before:
        # The new index was renamed into place just before the interrupt arrived.
        notice = "interrupted after the new index was written"
    elif index_before is None:
        notice = "interrupted; no index was written"
    else:
        # Ingest writes a shadow file and renames it over the index only at the end; the
        # shadow is removed on the way out (store/build.py).
        notice = "interrupted; the previous index is unchanged"
    # After the terminal's "^C" (or a progress line) rather than glued to it.
    print(("\n" if sys.stderr.isatty() else "") + notice, file=sys.stderr)
    return _INTERRUPTED


def main(argv: Sequence[str] | None = None) -> int:
    args: argparse.Namespace | None = None
    db: Path | None = None
    index_before: _FileIdentity | None = None
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        try:
            settings = _settings()
        except Exception as exc:  # noqa: BLE001 - pydantic's message names the bad variable
            print(f"error: invalid configuration: {exc}", file=sys.stderr)
            return 2
        _set_up_logging(args, settings)
        if args.command == "ingest":
            db = _db(args, settings)
            index_before = _file_identity(db)
        return int(args.func(args, settings))
    except KeyboardInterrupt:
        return _interrupted(args, index_before, db)
    except InvalidRequestError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except GovernedEvidenceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
