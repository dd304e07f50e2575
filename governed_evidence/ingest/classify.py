"""Which classification a document carries.

Order: front matter ``classification:`` wins; else the first path component named after
a level; else the operator's default. Unknown labels are most sensitive (fail closed).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from governed_evidence.config import Classification, parse_label
from governed_evidence.ingest.frontmatter import FrontMatterError, read_front_matter

__all__ = ["TEXT_SUFFIXES", "classify", "level_from_path"]

TEXT_SUFFIXES = frozenset({".md", ".markdown", ".txt"})
_LEVEL_NAMES = {c.label: c for c in Classification}


def classify(path: Path, relative: PurePosixPath, default: Classification) -> tuple[Classification, dict[str, Any]]:
    """The document's level and its front matter (empty for binary formats)."""
    front: dict[str, Any] = {}
    if path.suffix.lower() in TEXT_SUFFIXES:
        try:
            front = read_front_matter(path)
        except (FrontMatterError, OSError):
            # Metadata we cannot read cannot prove the document is safe to serve.
            return Classification.RESTRICTED, {}
        if "classification" in front:
            return parse_label(front["classification"]), front
    return level_from_path(relative, default), front


def level_from_path(relative: PurePosixPath, default: Classification) -> Classification:
    """The level the path alone gives: the first folder named after a level, else ``default``."""
    for part in relative.parts[:-1]:
        level = _LEVEL_NAMES.get(part.lower())
        if level is not None:
            return level
    return default
