"""What ingest refuses or cleans before anything is stored.

Files: NUL bytes, invalid UTF-8, symlinks leaving the corpus and oversized files are
refused with a reason. Text: control and zero-width characters are stripped, because they
hide instructions from human reviewers while still reaching a model. Passages: anything
credential-shaped is refused, so a secret pasted into a policy is never served.
"""

from __future__ import annotations

import re
from pathlib import Path

from governed_evidence.errors import FileRejectedError

__all__ = [
    "check_source_file",
    "check_source_location",
    "check_source_size",
    "decode_text",
    "find_credentials",
    "sanitize",
]

# C0/C1 controls except tab and newline; zero-width and bidirectional formatting marks.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\u00ad]"
)

_CREDENTIAL_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private key block", re.compile(r"-----(?:BEGIN|END) [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")),
    ("cloud access key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}\b")),
    ("cloud secret key", re.compile(r"(?i)aws_?secret_?access_?key\s*[:=]\s*\S{16,}")),
    (
        "API token",
        re.compile(
            r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|xox[abprs]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_\-]{35}|sk-[A-Za-z0-9_\-]{20,})"
        ),
    ),
    (
        "password assignment",
        re.compile(
            r"""(?ix)\b(?:password|passwd|pwd|passphrase|secret|api[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret)
            \s*[:=]\s*["'][^"'\s]{4,}["']"""
        ),
    ),
    ("connection string with password", re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s:/@]+:[^\s@/]{4,}@[\w.-]+")),
)


def sanitize(text: str) -> str:
    """Normalise newlines and drop invisible characters."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _INVISIBLE.sub("", text)


def find_credentials(text: str) -> list[str]:
    """Names of the credential shapes found in ``text`` (never the matched strings)."""
    return [name for name, pattern in _CREDENTIAL_PATTERNS if pattern.search(text)]


def check_source_file(path: Path, corpus_root: Path, max_bytes: int) -> None:
    """Refuse files that must not be opened: escaping links, oversized, not regular."""
    check_source_location(path, corpus_root)
    check_source_size(path, max_bytes)


def check_source_location(path: Path, corpus_root: Path, *, root_resolved: bool = False) -> None:
    """Refuse links leaving the corpus and anything but a regular file, without opening it.

    ``root_resolved`` says ``corpus_root`` is already resolved: a caller checking thousands
    of files resolves it once instead of once per file.
    """
    try:
        resolved = path.resolve()
    except (RuntimeError, OSError):
        # A symlink loop (RuntimeError before Python 3.13, OSError from 3.13 on).
        raise FileRejectedError("symbolic link loop or unresolvable path") from None
    try:
        resolved.relative_to(corpus_root if root_resolved else corpus_root.resolve())
    except ValueError:
        raise FileRejectedError("symbolic link points outside the corpus") from None
    if not resolved.is_file():
        raise FileRejectedError("not a regular file")


def check_source_size(path: Path, max_bytes: int) -> None:
    """Refuse empty and oversized files (the size comes from ``stat``; nothing is read)."""
    size = path.resolve().stat().st_size
    if size > max_bytes:
        raise FileRejectedError(f"file is {size} bytes, over the {max_bytes}-byte limit")
    if size == 0:
        raise FileRejectedError("file is empty")


def decode_text(data: bytes) -> str:
    """Strict UTF-8 (a BOM is allowed); NUL bytes mean binary, not text."""
    if b"\x00" in data:
        raise FileRejectedError("file contains NUL bytes (binary data, not text)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FileRejectedError(f"file is not valid UTF-8 (first bad byte at offset {exc.start})") from None
    return sanitize(text)
