"""Command line: ingest | search | read | sources | status | serve | doctor | stats | eval | token.

This module wires the commands into one parser and runs the one asked for: logging, exit
codes, Ctrl-C. Each command lives in its own module (governed_evidence/commands/, and
``eval``, ``stats`` and ``token`` with their parts). ``--json`` prints exactly the structure
the MCP tools return, so scripts and checks can rely on one contract. Human output goes to
stdout; logs go to stderr.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

# _threads first: it settles BLAS threads before anything below loads numpy (see its docstring).
from governed_evidence import _threads, __version__  # noqa: F401  # isort: skip
from governed_evidence.commands import doctor, documents, ingest, search, serve, status
from governed_evidence.commands.common import index_path, load_settings
from governed_evidence.config import Settings
from governed_evidence.errors import GovernedEvidenceError, InvalidRequestError
from governed_evidence.logging import configure_logging, get_logger

__all__ = ["build_parser", "main"]

#: Exit status after Ctrl-C: what a shell reports for a command ended by SIGINT (128 + 2).
_INTERRUPTED = 130
#: Libraries whose warnings the ingest report already summarises in its own words.
_SUMMARISED_LIBRARIES = ("pypdf",)
#: What tells whether a file was replaced: device, inode, size and modification time.
_FileIdentity = tuple[int, int, int, int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="governed-evidence", description="Governed, cited evidence for AI assistants."
    )
    parser.add_argument("--version", action="version", version=f"governed-evidence {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    # The order of `--help`: the commands' own, then those that live with their part.
    ingest.register(sub)
    search.register(sub)
    documents.register(sub)
    status.register(sub)

    from governed_evidence.evaluation.command import add_eval_parser

    add_eval_parser(sub)

    from governed_evidence.sdmx.cli import add_stats_parser

    add_stats_parser(sub)
    serve.register(sub)
    doctor.register(sub)

    from governed_evidence.access.token_command import register as register_token_command

    register_token_command(sub)

    from governed_evidence.receipts.command import register as register_verify_command

    register_verify_command(sub)

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
            settings = load_settings()
        except Exception as exc:  # noqa: BLE001 - pydantic's message names the bad variable
            print(f"error: invalid configuration: {exc}", file=sys.stderr)
            return 2
        _set_up_logging(args, settings)
        if args.command == "ingest":
            db = index_path(args, settings)
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
