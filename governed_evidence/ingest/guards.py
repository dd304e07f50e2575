"""What ingest refuses or cleans before anything is stored.

Files: NUL bytes, invalid UTF-8, symbolic links, names that are not plain visible text
and oversized files are refused with a reason. Text: invisible characters are stripped,
because they hide instructions from human reviewers while still reaching a model.
Passages: anything credential-shaped is refused, so a secret pasted into a policy is never
served; a private key's whole armoured run is refused, not only its marker lines.
"""

from __future__ import annotations

import re
from pathlib import Path

from governed_evidence.errors import FileRejectedError
from governed_evidence.invisible import find_invisible, strip_invisible

__all__ = [
    "check_name",
    "check_source_file",
    "check_source_location",
    "check_source_size",
    "decode_text",
    "find_credentials",
    "key_block_spans",
    "printable_name",
    "redact_credentials",
    "sanitize",
]

_CREDENTIAL_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # Every repetition is bounded or anchored: these run over untrusted text, and an
    # unbounded run before a literal that never comes rescans the text from every start
    # (a 100 KB file took 14 s on the connection-string shape alone).
    # Armour of three to five dashes: PEM writes five, but a key pasted with one dash lost
    # or added is still a key (readers such as OpenSSL's are not the only consumers).
    ("private key block", re.compile(r"-{3,5}(?:BEGIN|END) [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-{3,5}")),
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
    (
        "connection string with password",
        re.compile(r"\b[a-z][a-z0-9+.-]{0,30}://[^\s:/@]{1,256}:[^\s@/]{4,256}@[\w.-]"),
    ),
    # Prefixes their issuers publish so that scanners can find them.
    ("payment API key", re.compile(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("source-hosting token", re.compile(r"\b(?:glpat-[A-Za-z0-9_\-]{20,}|github_pat_[A-Za-z0-9_]{40,})")),
    (
        "signed token (JWT)",
        # Not inside a URL: link trackers put signed, public tokens in their paths.
        re.compile(r"(?<![/=?&])\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{16,}"),
    ),
    ("storage account key", re.compile(r"(?i)\bAccountKey=[A-Za-z0-9+/]{40,}={0,2}")),
)

#: Where a private key's armour opens and closes: everything between is key material.
_KEY_BEGIN = re.compile(r"-{3,5}BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-{3,5}")
_KEY_END = re.compile(r"-{3,5}END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-{3,5}")


def sanitize(text: str) -> str:
    """Normalise newlines and drop invisible characters (:mod:`governed_evidence.invisible`)."""
    return strip_invisible(text)


def find_credentials(text: str) -> list[str]:
    """Names of the credential shapes found in ``text`` (never the matched strings)."""
    return [name for name, pattern in _CREDENTIAL_PATTERNS if pattern.search(text)]


def redact_credentials(text: str) -> str:
    """``text`` with every credential-shaped match replaced by ``[credential]`` (for reports)."""
    for _, pattern in _CREDENTIAL_PATTERNS:
        text = pattern.sub("[credential]", text)
    return text


def key_block_spans(texts: list[str]) -> list[tuple[int, int]]:
    """Inclusive index ranges of ``texts`` (blocks in document order) inside a private key's armour.

    A key whose BEGIN and END lines are separate paragraphs from its body would otherwise
    lose only its marker lines to the per-block guard while its body is served. A BEGIN
    without an END refuses everything after it: the rest may be the key.
    """
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(texts):
        begin = _KEY_BEGIN.search(texts[i])
        if begin is None:
            i += 1
            continue
        j = i
        # The END may sit in the same block, after its BEGIN.
        while j < len(texts) and not _KEY_END.search(texts[j], begin.end() if j == i else 0):
            j += 1
        spans.append((i, min(j, len(texts) - 1)))
        i = j + 1
    return spans


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
    if path.is_symlink():
        # A link is classified by its own folder but reads its target's bytes: followed, it
        # would publish a restricted file under a public name (and past the ingest ceiling).
        raise FileRejectedError(
            "symbolic link: not followed (the file it points to is indexed under its own name, at its own level)"
        )
    if not resolved.is_file():
        raise FileRejectedError("not a regular file")


def check_name(relative: str) -> None:
    """Refuse a file whose path cannot be served as it is.

    The path becomes the document name and the start of every citation id, so it must be
    text a reader sees as it is: valid UTF-8 (an undecodable name once aborted the whole
    ingest), no invisible characters (a right-to-left override makes a name read
    backwards), nothing credential-shaped. The reason names what was found, never the name.
    """
    if any("\udc80" <= ch <= "\udcff" for ch in relative):
        raise FileRejectedError("file name is not valid UTF-8")
    hidden = find_invisible(relative)
    if hidden:
        raise FileRejectedError(f"file name contains invisible or control characters ({', '.join(hidden)})")
    kinds = find_credentials(relative)
    if kinds:
        raise FileRejectedError(f"file name is credential-shaped ({', '.join(kinds)})")


def printable_name(relative: str) -> str:
    """A rejected file's path as the report shows it: undecodable bytes as ``\\xNN``,
    invisible characters as ``\\uXXXX``, credential shapes as ``[credential]``."""
    shown = relative.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    hidden = set(find_invisible(shown))
    if hidden:
        shown = "".join(
            ch.encode("unicode_escape").decode("ascii") if f"U+{ord(ch):04X}" in hidden else ch for ch in shown
        )
    return redact_credentials(shown)


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
