"""A source's names made safe as paths of the mirror, or refused with the reason.

Names come from a remote service anyone with write access to the site can edit, so none is
trusted: a path must stay inside the mirror (no ``..``, no absolute path, no separator inside
a name), must be readable by ingest and by the governance file (no invisible or control
characters, no backslash), must be creatable on any file system (no reserved device name,
no trailing dot or space, at most 255 bytes a component and 1,024 a path), must not hide a
file from ingest (a leading dot), and must not carry a credential into the index or a log
(a credential-shaped name is refused, and the reason never repeats the name).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import PurePosixPath

from governed_evidence.ingest.guards import find_credentials
from governed_evidence.invisible import find_invisible

__all__ = ["MAX_COMPONENT_BYTES", "MAX_PATH_BYTES", "UnsafeNameError", "fold", "safe_path"]

MAX_COMPONENT_BYTES = 255
MAX_PATH_BYTES = 1024
_RESERVED = re.compile(r"(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³])(\..*)?", re.IGNORECASE)


class UnsafeNameError(ValueError):
    """A name that cannot be mirrored; the message is the reason, safe to report (no name in it)."""


def _component(name: str) -> str:
    if name in ("", ".", ".."):
        raise UnsafeNameError("a folder or file name is empty, '.' or '..'")
    if "/" in name or "\\" in name:
        raise UnsafeNameError("a name holds a path separator ('/' or '\\')")
    if any(unicodedata.category(c) == "Cc" for c in name):
        raise UnsafeNameError("a name holds control characters")
    if find_invisible(name):
        raise UnsafeNameError(f"a name holds invisible characters ({', '.join(find_invisible(name))})")
    if name.startswith("."):
        raise UnsafeNameError("a name starts with '.' (a hidden file ingest would not read)")
    if name.endswith((".", " ")) or name != name.strip():
        raise UnsafeNameError("a name starts or ends with a space, or ends with '.'")
    if _RESERVED.fullmatch(name):
        raise UnsafeNameError("a name is a reserved device name (CON, NUL, COM1, ...)")
    if len(name.encode("utf-8")) > MAX_COMPONENT_BYTES:
        raise UnsafeNameError(f"a name is longer than {MAX_COMPONENT_BYTES} bytes")
    return unicodedata.normalize("NFC", name)


def safe_path(parts: tuple[str, ...]) -> PurePosixPath:
    """``parts`` (folder names, then the file's) as a relative path, or :class:`UnsafeNameError`."""
    if not parts:
        raise UnsafeNameError("the item has no name")
    clean = tuple(_component(part) for part in parts)
    path = PurePosixPath(*clean)
    if len(str(path).encode("utf-8")) > MAX_PATH_BYTES:
        raise UnsafeNameError(f"the path is longer than {MAX_PATH_BYTES} bytes")
    if find_credentials(str(path)) or any(find_credentials(part) for part in clean):
        raise UnsafeNameError("the name is credential-shaped; not mirrored, so it never reaches the index or a log")
    return path


def fold(path: PurePosixPath) -> str:
    """How the governance file and case-insensitive file systems compare ``path``: two items
    folding alike would be one file there, so only the first is mirrored."""
    return unicodedata.normalize("NFC", str(path)).casefold()
