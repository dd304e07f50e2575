"""Which files an ingest considers, and which of them are one file under several names.

The fingerprint and the build both iterate the one list :func:`sources` returns, so what is
fingerprinted is exactly what is built.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from governed_evidence.config import Classification
from governed_evidence.ingest.classify import Classified, classify, classify_path
from governed_evidence.ingest.governance import GOVERNANCE_FILE, NO_GOVERNANCE, Governance
from governed_evidence.ingest.loaders import skip_reason

__all__ = ["Names", "Source", "classify_names", "hard_link_groups", "sources"]


def _walk(corpus: Path) -> Iterator[Path]:
    """Files under ``corpus`` in a stable order, skipping hidden files and folders."""
    for path in sorted(corpus.rglob("*")):
        rel = path.relative_to(corpus)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if path.is_dir() and not path.is_symlink():
            continue
        yield path


@dataclass(frozen=True)
class Source:
    path: Path
    rel: PurePosixPath
    #: A format a loader reads; other files are listed in the report as skipped, never read.
    supported: bool
    #: Why an unsupported file is skipped ("unsupported format .rtf"); None when supported.
    skip_reason: str | None = None


#: The governance file at the corpus root: the rules, not a document (nor a skipped file).
_GOVERNANCE = PurePosixPath(GOVERNANCE_FILE)


def sources(corpus: Path) -> list[Source]:
    """Every file an ingest considers. The fingerprint and the build both iterate this one
    list, so what is fingerprinted is exactly what is built. The root's governance file is
    not among them: it is read as rules (and fingerprinted as such)."""
    # Hidden files and folders (.DS_Store, .git/) are not considered at all (see _walk);
    # every other file is, and one no loader reads carries the reason it is skipped.
    found = [
        Source(path, PurePosixPath(path.relative_to(corpus).as_posix()), reason is None, reason)
        for path in _walk(corpus)
        for reason in (skip_reason(path.name),)
    ]
    return [s for s in found if s.rel != _GOVERNANCE]


@dataclass(frozen=True)
class Names:
    """Every name one file has inside the corpus."""

    #: Names the walk ingests (supported, not hidden), sorted: the file is indexed under one.
    indexable: tuple[PurePosixPath, ...]
    #: Its other names in the corpus (hidden, or of another format): never indexed, but
    #: their folders still say how sensitive the file is.
    other: tuple[PurePosixPath, ...]
    #: Names outside the corpus, by the link count (their folders mean nothing here).
    outside: int


def hard_link_groups(corpus: Path, sources: list[Source]) -> dict[PurePosixPath, Names]:
    """Every supported file that has another name in the corpus: all its names.

    One file reached by two names is one document with two claims to a level (a hard link
    in public/ to a file in restricted/ must not publish it), so the names are classified
    together and the file is indexed once. Hidden names and names of other formats count
    too: a hard link public/copy.md of restricted/.draft.md is the restricted draft.
    """
    by_inode: dict[tuple[int, int], list[PurePosixPath]] = {}
    links: dict[tuple[int, int], int] = {}
    # Every regular file under the corpus, hidden ones included, without following links.
    for folder, _, files in os.walk(corpus):
        for name in files:
            path = Path(folder, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                key = (info.st_dev, info.st_ino)
                by_inode.setdefault(key, []).append(PurePosixPath(path.relative_to(corpus).as_posix()))
                links[key] = info.st_nlink
    indexable = {s.rel for s in sources if s.supported}
    groups: dict[PurePosixPath, Names] = {}
    for key, names in by_inode.items():
        found = [n for n in sorted(names) if n in indexable]
        if not found:
            continue
        group = Names(tuple(found), tuple(n for n in sorted(names) if n not in indexable), links[key] - len(names))
        for member in found:
            groups[member] = group
    return groups


def classify_names(
    corpus: Path,
    rel: PurePosixPath,
    names: Names | None,
    default: Classification,
    governance: Governance = NO_GOVERNANCE,
) -> tuple[Classified, PurePosixPath]:
    """The classification of the file at ``rel`` over every name it has here, and the name
    it is indexed under.

    Each indexable name is classified on its own (front matter, else its rule or folder),
    each other name by its path (rule or folder); the file takes the most restrictive result, and is indexed
    under the first indexable name whose own level that is, so a hard link elsewhere
    neither lowers its level nor moves it.
    """
    if names is None:
        return classify(corpus / rel, rel, default, governance), rel
    results = {name: classify(corpus / name, name, default, governance) for name in names.indexable}
    others = [classify_path(name, default, governance) for name in names.other]
    level = max(
        max(result.level for result in results.values()),
        max((other.level for other in others), default=Classification.PUBLIC),
    )
    home = next((name for name in names.indexable if results[name].level == level), names.indexable[0])
    decided = results[home]
    # When no indexable name reaches the level, the rule or folder of another name set it.
    decided_by = (
        decided.decided_by
        if decided.level == level
        else next(other.decided_by for other in others if other.level == level)
    )
    return Classified(level, decided.front, decided.doubts, decided_by), home
