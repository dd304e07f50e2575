"""``status``: index integrity, model and the counts visible at a ceiling."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from governed_evidence import composition
from governed_evidence.commands.common import LEVELS, index_path, print_visibility, search_service
from governed_evidence.config import Settings, parse_level

if TYPE_CHECKING:
    from governed_evidence.mcp.status import ServerStatus

__all__ = ["print_status", "register", "run_status"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("status", help="index integrity, model and visible counts")
    p.add_argument("--db")
    p.add_argument("--ceiling", choices=LEVELS)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run_status)


def run_status(args: argparse.Namespace, settings: Settings) -> int:
    db = index_path(args, settings)
    status = composition.server_status(search_service(args, settings), composition.statistics_service(settings, db=db))
    if args.json:
        print(status.model_dump_json(indent=2))
    else:
        print_status(status, db)
    return 0 if status.ok else 1


def print_status(status: ServerStatus, db: Path) -> None:
    print(f"index file: {db.absolute()}")
    _print_corpus(db)
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
        print_visibility(db, parse_level(status.ceiling))
    cache = status.statistics_cache
    if cache is not None:
        where = cache.location + (f" ({cache.reason})" if cache.reason else "")
        print(f"statistics cache: {where}")


def _print_corpus(db: Path) -> None:
    """The corpus folder the index was built from: the operator's to see, never a client's
    (``index_status`` does not carry it)."""
    from governed_evidence.store.previous import built_from

    source = built_from(db)
    if source is None:
        return
    gone = "" if Path(source.corpus_path).is_dir() else " (no longer exists)"
    print(f"corpus folder: {source.corpus_path}{gone}")
