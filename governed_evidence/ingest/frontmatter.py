"""Front matter, read without reading the rest of the document.

Three forms are recognised at the very start of a file: YAML between ``---`` fences (closed
by ``---`` or ``...``), TOML between ``+++`` fences (Hugo), and bare YAML, which some policy
tools write without the opening fence (``name: Password Policy`` ... ``---``). A bare block
is only front matter when it cannot be anything else: its first line is a top-level
``key: value`` line, every line up to the closing ``---`` is a key line, an indented line or
a ``-`` list item (no blank line, no prose), there are at least two of them (one line above
``---`` is a Markdown heading), it closes within :data:`FRONT_MATTER_LIMIT` bytes, and it is
valid YAML. Anything else is the document's text, as it always was.

Classification lives in the front matter, and a document above the ceiling must never be
parsed past its metadata, so :func:`read_front_matter` reads only up to the closing fence.

A label must not fail open. The front matter is parsed from the same sanitised text the
loaders read (invisible characters removed, so a zero-width space or a second byte order
mark before ``---`` cannot hide it), the opening line may carry spaces, and keys are
compared after NFKC normalisation and case folding (``Classification`` and
``CLASSIFICATION`` are the label). A key that only resembles the label (a Cyrillic letter
inside it, a typo, ``data_classification``) or a label given twice cannot be trusted
either way: :attr:`FrontMatter.doubts` says why, and the document is then restricted.

A bare block is read exactly like a fenced one, and doubt about it fails closed too: when
the first lines carry a key that is or resembles the label but are not recognised as front
matter (no closing ``---``, a blank or prose line first, one line only, not valid YAML), the
label was written but cannot be read, which is a doubt. In TOML, where a key given twice is
invalid (and the document restricted as unreadable), two spellings of the label
(``classification`` and ``Classification``) count as given twice.

YAML aliases are refused outright (a few hundred bytes of nested aliases expand to
gigabytes), and so is nesting deeper than a parser's recursion allows.
"""

from __future__ import annotations

import re
import tomllib
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
    "front_matter_title",
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

#: Opening fence -> (format, the lines that close it).
_FENCES = {"---": ("yaml", ("---", "...")), "+++": ("toml", ("+++",))}

# A top-level YAML key line of a bare block: a plain key (a letter first; letters, digits,
# `_`, `.`, `-`; no spaces, so "In short: ..." prose does not qualify), a colon, then
# whitespace or the end of the line. `\w` is Unicode-aware, so a key spelt with a look-alike
# letter still matches and is checked as the label would be.
_KEY_LINE = re.compile(r"(?P<key>[^\W\d][\w.-]*)[ \t]*:(?:\s|$)")

#: A bare block needs at least this many lines: one ``key: value`` line above ``---`` is a
#: Markdown (setext) heading as much as it is metadata.
_BARE_MIN_LINES = 2


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


def front_matter_title(values: dict[str, Any]) -> str | None:
    """The title the front matter gives: ``title:``, else ``name:`` (policy tools and Jekyll
    collections name documents so), when it is a string with text in it."""
    for key in ("title", "name"):
        value = values.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


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


def _is_label_like(key: str) -> bool:
    name = normalise_key(key)
    return name == LABEL_KEY or _resembles_label(name)


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


def _load_yaml(raw: str) -> tuple[Any, list[str]]:
    loader = _Loader(raw)
    try:
        return loader.get_single_data(), loader.repeated
    except FrontMatterError:
        raise
    except yaml.YAMLError as exc:
        raise FrontMatterError("front matter is not valid YAML") from exc
    except ValueError as exc:
        # A scalar YAML resolves but cannot build, such as the date 2024-02-30: without this
        # one document's typo would stop the whole ingest.
        raise FrontMatterError(
            "front matter is not valid YAML (a value cannot be read, e.g. a date that does not exist)"
        ) from exc
    except RecursionError:
        raise FrontMatterError("front matter nests too deeply") from None
    finally:
        loader.dispose()


def _load_toml(raw: str) -> tuple[Any, list[str]]:
    try:
        data = tomllib.loads(raw)
    except tomllib.TOMLDecodeError as exc:
        raise FrontMatterError("front matter is not valid TOML") from exc
    except RecursionError:
        raise FrontMatterError("front matter nests too deeply") from None
    # TOML refuses a key given twice, but not two spellings that normalise alike.
    seen: set[str] = set()
    repeated: list[str] = []
    for key in data:
        name = normalise_key(key)
        if name in seen:
            repeated.append(name)
        seen.add(name)
    return data, repeated


def _front_matter(data: Any, repeated: list[str], lines: int) -> FrontMatter:
    """The parsed block as :class:`FrontMatter`, with every doubt about its label."""
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
    return FrontMatter(values, lines, tuple(doubts))


def _fence(line: str) -> tuple[str, tuple[str, ...]] | None:
    return _FENCES.get(line.strip())


@dataclass(frozen=True)
class _Bare:
    #: Index of the closing ``---`` when the lines above it qualify as a bare block.
    close: int | None
    #: Top-level keys of the leading key lines, recognised or not (checked for the label).
    keys: tuple[str, ...]


def _bare_block(lines: list[str]) -> _Bare | None:
    """Where a bare YAML block at the start of ``lines`` closes; None when line one is no key line.

    Lines are sanitised here, one at a time, and no more than :data:`FRONT_MATTER_LIMIT`
    bytes of them are looked at, so the loaders (the whole text) and the classification
    window (its first 64 KiB) decide alike.
    """
    keys: list[str] = []
    size = 0
    for i, raw in enumerate(lines):
        line = strip_invisible(raw)
        size += len(line.encode()) + 1
        if size > FRONT_MATTER_LIMIT:
            break
        if i > 0 and line.strip() == "---":
            return _Bare(i if i >= _BARE_MIN_LINES else None, tuple(keys))
        match = _KEY_LINE.match(line)
        if match:
            keys.append(match["key"])
        elif i == 0:
            return None
        elif not (line[:1] == " " and line.strip()) and not (line.startswith("- ") or line.rstrip() == "-"):
            # A blank line, prose, a heading or a tab-indented line: not a bare block.
            break
    return _Bare(None, tuple(keys))


def _unread_label(keys: tuple[str, ...]) -> FrontMatter:
    """No front matter; restricted when the first lines name the label all the same."""
    doubts = tuple(
        f"{normalise_key(key)!a} on the first lines reads like a classification label, but they are "
        "not front matter (enclose them in --- lines)"
        for key in keys
        if _is_label_like(key)
    )
    return FrontMatter(doubts=doubts[:1])


def _parse_bare(lines: list[str], bare: _Bare) -> FrontMatter:
    if bare.close is None:
        return _unread_label(bare.keys)
    raw = "\n".join(strip_invisible(line) for line in lines[: bare.close])
    try:
        data, repeated = _load_yaml(raw)
        return _front_matter(data, repeated, bare.close + 1)
    except FrontMatterError:
        # Fenced front matter that does not parse fails the document; lines that only might
        # be front matter are text, unless they carry the label, which must not be dropped.
        if any(_is_label_like(key) for key in bare.keys):
            raise
        return FrontMatter()


def parse_front_matter(text: str) -> FrontMatter:
    """The front matter at the start of ``text``.

    Only the lines up to the closing fence are read, each sanitised here too (so any text
    will do); the loaders pass a whole document, and the rest of it costs nothing here.
    """
    lines = text.split("\n")
    fence = _fence(strip_invisible(lines[0]))
    if fence is None:
        bare = _bare_block(lines)
        return FrontMatter() if bare is None else _parse_bare(lines, bare)
    form, closers = fence
    inside: list[str] = []
    for i in range(1, len(lines)):
        line = strip_invisible(lines[i])
        if line.strip() not in closers:
            inside.append(line)
            continue
        raw = "\n".join(inside)
        if not raw.strip():
            return _front_matter({}, [], i + 1)
        data, repeated = _load_yaml(raw) if form == "yaml" else _load_toml(raw)
        return _front_matter(data, repeated, i + 1)
    raise FrontMatterError(f"front matter is not closed with {closers[0]}")


def read_front_matter(path: Path) -> FrontMatter:
    """Front matter of a text file, reading at most :data:`FRONT_MATTER_LIMIT` bytes."""
    with path.open("rb") as fh:
        head = fh.read(FRONT_MATTER_LIMIT)
    # Undecodable bytes in the window cannot hide a label: a replacement character is
    # visible, and the loader refuses a file that is not valid UTF-8 anyway.
    text = strip_invisible(head.decode("utf-8-sig", errors="replace"))
    lines = text.split("\n")
    if len(head) == FRONT_MATTER_LIMIT and len(lines) > 1:
        # The window may end inside a line; a cut "---x" must not read as a fence.
        lines = lines[:-1]
    fence = _fence(lines[0])
    if fence is None:
        return parse_front_matter("\n".join(lines))
    closers = fence[1]
    for i in range(1, len(lines)):
        if lines[i].strip() in closers:
            return parse_front_matter("\n".join(lines[: i + 1]))
    raise FrontMatterError("front matter is not closed within the first 64 KiB")
