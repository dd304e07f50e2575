"""YAML front matter, read without reading the rest of the document.

Classification lives in the front matter, and a document above the ceiling must never be
parsed past its metadata, so this reads only up to the closing ``---``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

__all__ = ["FRONT_MATTER_LIMIT", "parse_front_matter", "read_front_matter"]

#: Front matter longer than this is treated as absent (and the body as unreadable metadata).
FRONT_MATTER_LIMIT = 64 * 1024


class FrontMatterError(ValueError):
    """Front matter is present but cannot be parsed."""


def parse_front_matter(text: str) -> tuple[dict[str, Any], int]:
    """Return (front matter, number of lines it occupies) from the start of ``text``."""
    if not text.startswith("---"):
        return {}, 0
    lines = text.split("\n")
    if lines[0].strip() != "---":
        return {}, 0
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            raw = "\n".join(lines[1:i])
            try:
                data = yaml.safe_load(raw) if raw.strip() else {}
            except yaml.YAMLError as exc:
                raise FrontMatterError("front matter is not valid YAML") from exc
            if data is None:
                data = {}
            if not isinstance(data, dict):
                raise FrontMatterError("front matter is not a mapping")
            return {str(k): v for k, v in data.items()}, i + 1
    raise FrontMatterError("front matter is not closed with ---")


def read_front_matter(path: Path) -> dict[str, Any]:
    """Front matter of a text file, reading at most :data:`FRONT_MATTER_LIMIT` bytes."""
    with path.open("rb") as fh:
        head = fh.read(FRONT_MATTER_LIMIT)
    text = head.decode("utf-8-sig", errors="replace").replace("\r\n", "\n")
    if not text.startswith("---"):
        return {}
    lines = text.split("\n")
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            return parse_front_matter("\n".join(lines[: i + 1]))[0]
    raise FrontMatterError("front matter is not closed within the first 64 KiB")
