"""Bearer tokens this server issues, kept in a tokens file that holds only their hashes.

The tokens file is one JSON object, written only by ``governed-evidence token``::

    {"version": 1, "tokens": [{"name": ..., "clearance": ..., "sha256": ..., "created_at": ...}]}

A token is shown once, when it is created, and never stored: whoever reads the file (a
backup, a support bundle) learns names and clearances, not a credential. Writes replace the
file atomically under a lock, so a server reading it sees the old list or the new one, and
two operators creating tokens at once both keep theirs.

:class:`TokensFileVerifier` is the server's side: it stats the file on every request and
re-reads it when it changed, so ``token revoke`` takes effect on the next request without a
restart. A file that becomes unreadable or malformed while serving refuses every token
(fail closed) until it is fixed. No path here logs a token or a hash of one.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from fastmcp.server.auth.auth import AccessToken, TokenVerifier

from governed_evidence.access.caller import CALLER_CLAIM, Caller
from governed_evidence.config import Classification, parse_level
from governed_evidence.errors import ConfigError
from governed_evidence.logging import get_logger

if sys.platform != "win32":
    import fcntl

__all__ = [
    "FILE_VERSION",
    "MAX_NAME_LENGTH",
    "TOKEN_PREFIX",
    "TokenEntry",
    "TokensFileVerifier",
    "create",
    "list_tokens",
    "revoke",
]

log = get_logger("access.tokens")

#: Marks a string as one of this server's tokens, so a leaked one is recognisable (secret
#: scanners, log reviews) and cannot be mistaken for another system's credential.
TOKEN_PREFIX = "ge_"  # noqa: S105 - a prefix, not a credential
#: The tokens file format this module reads and writes.
FILE_VERSION = 1
MAX_NAME_LENGTH = 64

_NAME = re.compile(rf"[A-Za-z0-9._@-]{{1,{MAX_NAME_LENGTH}}}")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_FIELDS = frozenset({"name", "clearance", "sha256", "created_at"})
#: Far longer than any token ``create`` issues (3 + 43 characters); a longer bearer value is
#: refused before it is hashed.
_MAX_TOKEN_LENGTH = 256
#: What tells whether the file was replaced or rewritten: device, inode, size, mtime (ns).
_Identity = tuple[int, int, int, int]

# Paths whose loose permissions were already reported: one warning per file and process,
# not one per request or per command.
_warned_modes: set[str] = set()
_warned_lock = threading.Lock()
# Without fcntl (Windows, untested) writers in this process still take turns.
_process_write_lock = threading.Lock()


@dataclass(frozen=True)
class TokenEntry:
    """What may be shown about a token: never the token, never its hash."""

    name: str
    clearance: Classification
    created_at: str

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "clearance": self.clearance.label, "created_at": self.created_at}


@dataclass(frozen=True)
class _Record:
    entry: TokenEntry
    sha256: str

    def as_json(self) -> dict[str, str]:
        return {**self.entry.as_dict(), "sha256": self.sha256}


def _digest(token: str) -> str:
    # A token is 256 bits from the system's CSPRNG, so nobody can guess one by trying
    # candidates against a stolen hash: a plain SHA-256 is as safe as a slow password KDF
    # (bcrypt, scrypt, argon2) here, and costs microseconds on every request instead of
    # tens of milliseconds. The slow KDFs exist for low-entropy, human-chosen secrets.
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _valid_name(name: object) -> bool:
    # A name is logged and shown; one shaped like a token (a token pasted into --name) is
    # refused so that no log line ever carries something a scanner would take for one.
    return isinstance(name, str) and bool(_NAME.fullmatch(name)) and not name.startswith(TOKEN_PREFIX)


def _check_name(name: str) -> str:
    if not _valid_name(name):
        raise ConfigError(
            f"invalid token name: use 1-{MAX_NAME_LENGTH} characters of letters, digits and . _ @ -, "
            f"not starting with {TOKEN_PREFIX!r}"
        )
    return name


def _malformed(path: Path, problem: str) -> ConfigError:
    return ConfigError(f"tokens file {path} is malformed: {problem}")


def _parse(path: Path, raw: bytes) -> list[_Record]:
    """The records of a tokens file; anything unexpected is the operator's to fix, never guessed at."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _malformed(path, f"not JSON ({type(exc).__name__} at position {getattr(exc, 'pos', '?')})") from None
    if not isinstance(data, dict) or set(data) != {"version", "tokens"}:
        raise _malformed(path, 'expected one object with the keys "version" and "tokens"')
    if data["version"] != FILE_VERSION:
        raise _malformed(path, f"version {data['version']!r} is not {FILE_VERSION}")
    if not isinstance(data["tokens"], list):
        raise _malformed(path, '"tokens" is not a list')
    records: list[_Record] = []
    seen: set[str] = set()
    for i, item in enumerate(data["tokens"]):
        records.append(_parse_record(path, i, item))
        name = records[-1].entry.name
        if name in seen:
            raise _malformed(path, f"the name {name!r} appears twice")
        seen.add(name)
    return records


def _parse_record(path: Path, index: int, item: object) -> _Record:
    where = f"token {index}"
    if not isinstance(item, dict) or set(item) != _FIELDS:
        raise _malformed(path, f"{where} must be an object with exactly {', '.join(sorted(_FIELDS))}")
    name, clearance, sha256, created_at = item["name"], item["clearance"], item["sha256"], item["created_at"]
    # Values other than a valid name are never quoted: a hand-edited file may hold anything.
    if not _valid_name(name):
        raise _malformed(path, f"{where} has an invalid name")
    try:
        level = parse_level(clearance) if isinstance(clearance, str) else None
    except ConfigError:
        level = None
    if level is None:
        levels = ", ".join(c.label for c in Classification)
        raise _malformed(path, f"{where} ({name}) has no valid clearance (one of: {levels})")
    # The hash is not echoed: it is not a secret, but nothing gains from seeing it.
    if not isinstance(sha256, str) or not _SHA256_HEX.fullmatch(sha256):
        raise _malformed(path, f"{where} ({name}) has no valid sha256 (64 lowercase hex digits)")
    if not isinstance(created_at, str):
        raise _malformed(path, f"{where} ({name}) has no created_at")
    return _Record(TokenEntry(name, level, created_at), sha256)


def _warn_if_readable_by_others(path: Path, mode: int) -> None:
    if not mode & (stat.S_IRWXG | stat.S_IRWXO):
        return
    key = str(path.absolute())
    with _warned_lock:
        if key in _warned_modes:
            return
        _warned_modes.add(key)
    # Still read: the file holds hashes, not tokens, so this is hygiene, not a leak. The next
    # `token create` or `token revoke` rewrites it as 0600.
    log.warning("tokens_file_permissions", path=key, mode=oct(stat.S_IMODE(mode)), expected="0o600")


def _read(path: Path) -> tuple[list[_Record], _Identity] | None:
    """The file's records and the identity of what was read; None when there is no file."""
    try:
        # O_NONBLOCK: a FIFO put in the file's place must not hang the server (no effect on a file).
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"tokens file {path} cannot be read: {exc.strerror or type(exc).__name__}") from None
    # Identity from the open descriptor, so it describes exactly the bytes parsed even if the
    # file is replaced meanwhile (the next stat then differs, and the file is read again).
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"tokens file {path} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read()
    except OSError as exc:
        raise ConfigError(f"tokens file {path} cannot be read: {exc.strerror or type(exc).__name__}") from None
    finally:
        os.close(fd)
    _warn_if_readable_by_others(path, st.st_mode)
    return _parse(path, raw), (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _write(path: Path, records: list[_Record]) -> None:
    """Replace the file atomically: a reader sees the whole old list or the whole new one."""
    body = json.dumps({"version": FILE_VERSION, "tokens": [r.as_json() for r in records]}, indent=2) + "\n"
    # mkstemp creates the file 0600 in the same directory, so os.replace is a rename on one
    # file system and the tokens file is never readable by others, not even for a moment.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(body.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename is durable once the directory is synced
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One writer at a time, across processes: read, change and write back under the lock.

    The lock is a sidecar file, not the tokens file itself, which each write replaces.
    """
    if not path.parent.is_dir():
        raise ConfigError(f"tokens file {path}: the directory {path.parent} does not exist")
    lock_path = path.with_name(f".{path.name}.lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise ConfigError(f"tokens file {path}: cannot open the lock {lock_path}: {exc.strerror}") from None
    try:
        if sys.platform == "win32":  # pragma: no cover - untested platform
            with _process_write_lock:
                yield
        else:
            # flock belongs to the open file description, so threads of one process that each
            # open the lock file exclude one another as separate processes do.
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _records(path: Path) -> list[_Record]:
    read = _read(path)
    return read[0] if read is not None else []


def create(path: Path, name: str, clearance: Classification) -> str:
    """Issue a token for ``name`` at ``clearance`` and return it; only its hash is kept."""
    _check_name(name)
    with _locked(path):
        records = _records(path)
        if any(r.entry.name == name for r in records):
            raise ConfigError(
                f"a token named {name!r} already exists in {path}; "
                f"run `governed-evidence token revoke --name {name}` first, or choose another name"
            )
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        created_at = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        records.append(_Record(TokenEntry(name, clearance, created_at), _digest(token)))
        _write(path, records)
    log.info("token_created", name=name, clearance=clearance.label)
    return token


def revoke(path: Path, name: str) -> bool:
    """Remove the token named ``name``; False when there is none (nothing is written)."""
    _check_name(name)
    with _locked(path):
        records = _records(path)
        kept = [r for r in records if r.entry.name != name]
        if len(kept) == len(records):
            return False
        _write(path, kept)
    log.info("token_revoked", name=name)
    return True


def list_tokens(path: Path) -> list[TokenEntry]:
    """The tokens in the file (none when it does not exist), in the order they were created."""
    return [r.entry for r in _records(path)]


class TokensFileVerifier(TokenVerifier):
    """fastmcp's bearer check against the tokens file, re-read whenever it changes.

    The file must be readable and well formed when the verifier is made (a ConfigError
    otherwise, before the server listens). Afterwards a broken or missing file refuses every
    token rather than keeping a list the operator may have meant to change.
    """

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._path = path
        self._lock = threading.Lock()
        read = _read(path)
        if read is None:
            raise ConfigError(
                f"tokens file {path} does not exist; create a token with `governed-evidence token create`"
            )
        self._by_hash = self._index(read[0])
        self._identity: _Identity | None = read[1]
        #: Why every token is refused, while the file is unusable; None when serving normally.
        self._failure: str | None = None

    @staticmethod
    def _index(records: list[_Record]) -> dict[str, TokenEntry]:
        return {r.sha256: r.entry for r in records}

    def _current(self) -> dict[str, TokenEntry] | None:
        """The tokens to check against, re-read if the file changed; None: refuse all."""
        try:
            st = os.stat(self._path)
            identity: _Identity | None = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            identity = None
        with self._lock:
            if identity is not None and identity == self._identity:
                return None if self._failure else self._by_hash
            try:
                read = _read(self._path)
                if read is None:
                    raise ConfigError(f"tokens file {self._path} no longer exists")
            except ConfigError as exc:
                self._fail(str(exc), identity)
                return None
            self._by_hash = self._index(read[0])
            self._identity = read[1]
            event = "tokens_file_usable_again" if self._failure is not None else "tokens_file_reloaded"
            self._failure = None
            log.info(event, path=str(self._path), tokens=len(self._by_hash))
            return self._by_hash

    def _fail(self, reason: str, identity: _Identity | None) -> None:
        # One error per distinct reason, not one per request; the identity is remembered so
        # an unchanged broken file is not parsed again on every request.
        if reason != self._failure:
            log.error("tokens_file_unusable", reason=reason, effect="every token is refused until it is fixed")
        self._failure = reason
        self._by_hash = {}
        self._identity = identity

    async def verify_token(self, token: str) -> AccessToken | None:
        tokens = self._current()
        if not tokens or not token.startswith(TOKEN_PREFIX) or len(token) > _MAX_TOKEN_LENGTH:
            return None
        presented = _digest(token)
        found: TokenEntry | None = None
        # Every stored hash is compared, in constant time each: how long the check takes says
        # nothing about which entry, if any, a guess came close to.
        for stored, entry in tokens.items():
            if hmac.compare_digest(presented, stored):
                found = entry
        if found is None:
            return None
        caller = Caller(found.name, found.clearance, "token")
        return AccessToken(
            token=token, client_id=found.name, scopes=[], expires_at=None, claims={CALLER_CLAIM: caller.claim()}
        )
