"""What the commands share: the settings, the index a command names, its search service,
and the operator's view of what lies above a ceiling."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from governed_evidence import composition
from governed_evidence.config import Classification, Settings, parse_level
from governed_evidence.errors import GovernedEvidenceError, IndexUnavailableError

# Commands import what they use when they run: `serve` must not pay at start-up for the
# ingest parsers, the evaluation client or the statistics HTTP stack (tests/mcp/test_startup.py).
if TYPE_CHECKING:
    from collections.abc import Callable

    from governed_evidence.embeddings.base import Embedder
    from governed_evidence.search.service import SearchService

__all__ = ["LEVELS", "index_path", "load_settings", "naming_the_index", "print_visibility", "search_service"]

#: The classification labels, lowest first, as the commands' ``--ceiling`` choices.
LEVELS = [c.label for c in Classification]


def load_settings() -> Settings:
    return Settings()


def index_path(args: argparse.Namespace, settings: Settings) -> Path:
    return Path(args.db) if args.db else settings.db


def search_service(
    args: argparse.Namespace,
    settings: Settings,
    embedder_factory: Callable[[], Embedder] | None = None,
    *,
    serving: bool = False,
) -> SearchService:
    ceiling = parse_level(args.ceiling) if getattr(args, "ceiling", None) else settings.ceiling_level
    return composition.search_service(
        settings, db=index_path(args, settings), ceiling=ceiling, embedder_factory=embedder_factory, serving=serving
    )


@contextmanager
def naming_the_index(db: Path) -> Iterator[None]:
    """Index errors with the file they are about. The operator's terminal may name it; the
    error a client sees never does (so the caller-facing classes are not reused here)."""
    try:
        yield
    except IndexUnavailableError as exc:
        raise GovernedEvidenceError(f"{exc} (index file: {db.absolute()})") from None


def print_visibility(db: Path, ceiling: Classification) -> None:
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
