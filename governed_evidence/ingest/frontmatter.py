"""YAML front matter, read without reading the rest of the document.

Classification lives in the front matter, and a document above the ceiling must never be
parsed past its metadata, so :func:`read_front_matter` reads only up to the closing ``---``.

A label must not fail open. The front matter is parsed from the same sanitised text the
loaders read (invisible characters removed, so a zero-width space or a second byte order
mark before ``---`` cannot hide it), the opening line may carry spaces, and keys are
compared after NFKC normalisation and case folding (``Classification`` and
``CLASSIFICATION`` are the label). A key that only resembles the label (a Cyrillic letter
inside it, a typo, ``data_classification``) or a label given twice cannot be trusted
either way: :attr:`FrontMatter.doubts` says why, and the document is then restricted.

YAML aliases are refused outright (a few hundred bytes of nested aliases expand to
gigabytes), and so is nesting deeper than a parser's recursion allows.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from governed_evidence.invisible import strip_invisible

__all__ = [
    "FRONT_MATTER_LIMIT",
    "LABEL_KEY",
    "FrontMatter",
    "FrontMatterError",
    "normalise_key",
    "parse_front_matter",
    "read_front_matter",
]

#: Front matter longer than this is treated as absent (and the body as unreadable metadata).
FRONT_MATTER_LIMIT = 64 * 1024

#: The key that carries a document's classification.
LABEL_KEY = "classification"

# Letters of other scripts drawn like Latin ones (Unicode's confusables for the letters of
# the label key): NFKC leaves them alone, and a key spelt with one must not pass for plain text.
_LOOKALIKES = str.maketrans(
    {
        "а": "a", "с": "c", "е": "e", "і": "i", "ӏ": "l", "о": "o", "ѕ": "s", "т": "t", "п": "n",
        "α": "a", "ϲ": "c", "ι": "i", "ο": "o", "ѵ": "v", "ν": "v", "τ": "t", "ɩ": "i", "ı": "i",
    }
)  # fmt: skip


class FrontMatterError(ValueError):
    """Front matter is present but cannot be parsed."""


@dataclass(frozen=True)
class FrontMatter:
    #: Top-level keys normalised (:func:`normalise_key`), values as YAML gives them.
    values: dict[str, Any] = field(default_factory=dict)
    #: Lines the front matter occupies, fences included (0 when there is none).
    lines: int = 0
    #: Why the classification label cannot be trusted (then the document is restricted).
    doubts: tuple[str, ...] = ()


def normalise_key(key: object) -> str:
    """A key as it is compared: invisible characters dropped, NFKC, case folded, trimmed."""
    return unicodedata.normalize("NFKC", strip_invisible(str(key))).casefold().strip()


def _distance(a: str, b: str) -> int:
    """Levenshtein distance (keys are short: at most a few dozen characters are compared)."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def _resembles_label(key: str) -> bool:
    skeleton = key.translate(_LOOKALIKES)
    return LABEL_KEY in skeleton or (len(skeleton) < 40 and _distance(skeleton, LABEL_KEY) <= 2)


class _Loader(yaml.SafeLoader):
    """Safe YAML without aliases, remembering keys that a top-level mapping repeats."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.repeated: list[str] = []

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise FrontMatterError("front matter uses YAML aliases (*name), which are not accepted")
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    key = normalise_key(key_node.value)
                    if key in seen:
                        self.repeated.append(key)
                    seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _load(raw: str) -> tuple[Any, list[str]]:
    loader = _Loader(raw)
    try:
        return loader.get_single_data(), loader.repeated
    except FrontMatterError:
        raise
    except yaml.YAMLError as exc:
        raise FrontMatterError("front matter is not valid YAML") from exc
    except RecursionError:
        raise FrontMatterError("front matter nests too deeply") from None
    finally:
        loader.dispose()


def _opens(line: str) -> bool:
    return line.strip() == "---"


def _closes(line: str) -> bool:
    return line.strip() in ("---", "...")


def parse_front_matter(text: str) -> FrontMatter:
    """The front matter at the start of ``text``.

    Only the lines up to the closing fence are read, each sanitised here too (so any text
    will do); the loaders pass a whole document, and the rest of it costs nothing here.
    """
    lines = text.split("\n")
    if not _opens(strip_invisible(lines[0])):
        return FrontMatter()
    inside: list[str] = []
    for i in range(1, len(lines)):
        line = strip_invisible(lines[i])
        if not _closes(line):
            inside.append(line)
            continue
        raw = "\n".join(inside)
        data, repeated = _load(raw) if raw.strip() else ({}, [])
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise FrontMatterError("front matter is not a mapping")
        values: dict[str, Any] = {}
        doubts: list[str] = []
        for key, value in data.items():
            name = normalise_key(key)
            values[name] = value
            if name != LABEL_KEY and _resembles_label(name):
                doubts.append(f"front matter key {name!a} resembles '{LABEL_KEY}' but is not it")
        if LABEL_KEY in repeated:
            doubts.append(f"front matter gives '{LABEL_KEY}' more than once")
        return FrontMatter(values, i + 1, tuple(doubts))
    raise FrontMatterError("front matter is not closed with ---")


def read_front_matter(path: Path) -> FrontMatter:
    """Front matter of a text file, reading at most :data:`FRONT_MATTER_LIMIT` bytes."""
    with path.open("rb") as fh:
        head = fh.read(FRONT_MATTER_LIMIT)
    # Undecodable bytes in the window cannot hide a label: a replacement character is
    # visible, and the loader refuses a file that is not valid UTF-8 anyway.
    text = strip_invisible(head.decode("utf-8-sig", errors="replace"))
    lines = text.split("\n")
    if not _opens(lines[0]):
        return FrontMatter()
    for i in range(1, len(lines)):
        if _closes(lines[i]):
            return parse_front_matter("\n".join(lines[: i + 1]))
    raise FrontMatterError("front matter is not closed within the first 64 KiB")
