"""Which classification a document carries.

Order: front matter ``classification:`` wins; else the corpus's governance rule for the
path (:mod:`governed_evidence.ingest.governance`); else the first path component named after
a level; else the operator's default. A rule is the operator's explicit word about a path,
so it outranks the folder naming convention, and only a document's own label outranks it.
Unknown labels are most sensitive (fail closed), and so is a label that cannot be trusted (a
near-miss key, a repeated key: see :mod:`governed_evidence.ingest.frontmatter`).

Every name a file is reached by counts: files that are hard links of each other take the
most restrictive level of all their names (the pipeline groups them), and symbolic links
inside the corpus are not followed at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from governed_evidence.config import Classification, parse_label
from governed_evidence.ingest.frontmatter import LABEL_KEY, FrontMatter, FrontMatterError, read_front_matter
from governed_evidence.ingest.governance import NO_GOVERNANCE, Governance

__all__ = [
    "TEXT_SUFFIXES",
    "Classified",
    "DecidedBy",
    "classify",
    "classify_path",
    "level_from_front_matter",
    "level_from_path",
]

TEXT_SUFFIXES = frozenset({".md", ".markdown", ".txt"})
_LEVEL_NAMES = {c.label: c for c in Classification}

#: What decided a level, for the ingest report: an operator who finds everything restricted
#: needs to know which rule to change.
DecidedBy = Literal["front matter", "rule", "folder", "default"]


@dataclass(frozen=True)
class Classified:
    level: Classification
    #: The front matter read to decide (empty for binary formats and unreadable metadata).
    front: FrontMatter
    #: Why the label was not trusted and the document made restricted (for the report).
    doubts: tuple[str, ...] = ()
    #: Which rule gave the level (unreadable or doubtful front matter counts as front matter).
    decided_by: DecidedBy = "default"


def classify(
    path: Path, relative: PurePosixPath, default: Classification, governance: Governance = NO_GOVERNANCE
) -> Classified:
    """The document's level and the front matter it was decided from."""
    if path.suffix.lower() in TEXT_SUFFIXES:
        try:
            front = read_front_matter(path)
        except (FrontMatterError, OSError):
            # Metadata we cannot read cannot prove the document is safe to serve.
            return Classified(Classification.RESTRICTED, FrontMatter(), decided_by="front matter")
        level = level_from_front_matter(front)
        if level is not None:
            return Classified(level, front, front.doubts, "front matter")
        by_path = classify_path(relative, default, governance)
        return Classified(by_path.level, front, decided_by=by_path.decided_by)
    return classify_path(relative, default, governance)


def classify_path(
    relative: PurePosixPath, default: Classification, governance: Governance = NO_GOVERNANCE
) -> Classified:
    """The level the path alone gives (see :func:`level_from_path`), and which rule gave it."""
    level = governance.classification(relative)
    if level is not None:
        return Classified(level, FrontMatter(), decided_by="rule")
    level = _folder_level(relative)
    if level is None:
        return Classified(default, FrontMatter(), decided_by="default")
    return Classified(level, FrontMatter(), decided_by="folder")


def level_from_front_matter(front: FrontMatter) -> Classification | None:
    """The level the front matter sets, or None when it sets none.

    A label that cannot be trusted sets the most restrictive level.
    """
    if front.doubts:
        return Classification.RESTRICTED
    if LABEL_KEY in front.values:
        return parse_label(front.values[LABEL_KEY])
    return None


def level_from_path(
    relative: PurePosixPath, default: Classification, governance: Governance = NO_GOVERNANCE
) -> Classification:
    """The level the path alone gives: its governance rule, else the first folder named after
    a level, else ``default``."""
    return classify_path(relative, default, governance).level


def _folder_level(relative: PurePosixPath) -> Classification | None:
    for part in relative.parts[:-1]:
        level = _LEVEL_NAMES.get(part.lower())
        if level is not None:
            return level
    return None
