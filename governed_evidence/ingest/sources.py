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


def _walk(corpus: Path) -> Iterator[str]:
    """Corpus-relative POSIX names of the files under ``corpus``, skipping hidden files and
    folders, in the order sorting their paths part by part gives (a folder's files before
    the next name beside it). A link to a folder is a file here: it is never followed.

    Names are yielded as each folder is read, never held as paths: the build keeps one short
    name a file (docs/performance.md, "Ingest memory").
    """

    def names(folder: str, prefix: str) -> Iterator[str]:
        try:
            with os.scandir(folder) as found:
                entries = sorted((e.name, e.is_dir(follow_symlinks=False)) for e in found if not e.name.startswith("."))
        except (PermissionError, FileNotFoundError, NotADirectoryError):
            return  # a folder that cannot be listed (or is gone) holds nothing to consider
        for name, is_folder in entries:
            if is_folder:
                yield from names(os.path.join(folder, name), f"{prefix}{name}/")
            else:
                yield prefix + name

    return names(str(corpus), "")


@dataclass(frozen=True, slots=True)
class Source:
    """One file an ingest considers: the corpus folder (one object for all) and its name.

    Its paths are made when asked for, not held: a corpus of many files costs one short
    name each for the whole build.
    """

    corpus: Path
    #: Its corpus-relative POSIX path, as the index names it.
    name: str
    #: Why a file no loader reads is skipped ("unsupported format .rtf"); None when a loader
    #: reads it. Skipped files are listed in the report, never read.
    skip_reason: str | None = None

    @property
    def supported(self) -> bool:
        return self.skip_reason is None

    @property
    def rel(self) -> PurePosixPath:
        return PurePosixPath(self.name)

    @property
    def path(self) -> Path:
        return self.corpus / self.name


def sources(corpus: Path) -> list[Source]:
    """Every file an ingest considers. The fingerprint and the build both iterate this one
    list, so what is fingerprinted is exactly what is built. The root's governance file is
    not among them: it is read as rules (and fingerprinted as such)."""
    # Hidden files and folders (.DS_Store, .git/) are not considered at all (see _walk);
    # every other file is, and one no loader reads carries the reason it is skipped.
    return [
        Source(corpus, name, skip_reason(name.rsplit("/", 1)[-1])) for name in _walk(corpus) if name != GOVERNANCE_FILE
    ]


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
    if not by_inode:
        return {}
    # Only the names that have others are looked up: no set of the whole corpus is made.
    linked = {str(name) for names in by_inode.values() for name in names}
    indexable = {s.rel for s in sources if s.supported and s.name in linked}
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
