"""The corpus's governance file: classification and lifecycle by path, without moving files.

An organisation's shared drive is laid out by department, not by sensitivity, and its
documents rarely say who owns them or when they are due for review. ``_governance.toml`` at
the corpus root says so by path::

    [[rule]]
    path = "hr/"                 # a folder or one file, relative to the corpus folder
    classification = "internal"
    status = "current"           # draft | current | deprecated
    owner = "HR Policy Team"
    review_by = 2026-06-30
    effective = 2024-04-01

Each setting of a document comes from the longest matching path that sets it (so
``hr/archive/`` can deprecate a folder without restating its classification, and an
archive below an internal folder never falls back to the default level). Paths are compared
by whole components, case-insensitively, as level folders are: ``hr/`` does not match
``hr-old/``. A document's own front matter still wins (see :func:`document_lifecycle` and
:mod:`classify`).

The file is the operator's, so it is read strictly: bad TOML, an unknown key, an unknown
level or status, a bad date or two rules for one path fail the whole ingest with
:class:`IngestError` naming the file, the rule and the problem, before anything is built,
so the previous index keeps serving. Its bytes are part of the corpus fingerprint, so
editing a rule rebuilds. It is never indexed as a document.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tomllib
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from governed_evidence.config import Classification
from governed_evidence.errors import FileRejectedError, IngestError
from governed_evidence.ingest.guards import find_credentials
from governed_evidence.invisible import find_invisible, strip_invisible
from governed_evidence.store.lifecycle import STATUSES, Lifecycle, Status

__all__ = [
    "GOVERNANCE_FILE",
    "MAX_GOVERNANCE_BYTES",
    "MAX_LINK_CHARS",
    "MAX_OWNER_CHARS",
    "NO_GOVERNANCE",
    "RULE_SETTINGS",
    "Governance",
    "Rule",
    "document_lifecycle",
    "load_governance",
    "parse_link",
]

#: The governance file's name, at the corpus root only.
GOVERNANCE_FILE = "_governance.toml"
#: Larger than any hand-written rule file; a bigger one is refused, not read.
MAX_GOVERNANCE_BYTES = 1024 * 1024
#: An owner is a name or a team, served with every passage: a line, not a document.
MAX_OWNER_CHARS = 200

Setting = Literal["classification", "status", "owner", "review_by", "effective", "link"]
#: What a rule may set (besides its ``path``), in the order messages list them.
RULE_SETTINGS: tuple[Setting, ...] = ("classification", "status", "owner", "review_by", "effective", "link")
_LIFECYCLE_SETTINGS: tuple[Setting, ...] = RULE_SETTINGS[1:]
_LEVELS = {c.label: c for c in Classification}
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
#: Said after every problem with the file: what the operator most needs to know.
_STOPPED = "the ingest stopped before building anything, and the existing index is unchanged"


@dataclass(frozen=True)
class Rule:
    #: 1-based position in the file, as messages name it.
    number: int
    #: As written, for messages.
    path: str
    #: The path's components, normalised as :func:`_fold` compares them (empty: the whole corpus).
    parts: tuple[str, ...]
    classification: Classification | None = None
    status: Status | None = None
    owner: str | None = None
    review_by: date | None = None
    effective: date | None = None
    #: The document's web link at its source (written by ``governed-evidence sync``), cited with it.
    link: str | None = None

    def sets(self, setting: Setting) -> bool:
        return getattr(self, setting) is not None

    def describe(self) -> str:
        return f"rule {self.number} (path {self.path!a})"


@dataclass(frozen=True)
class Governance:
    """The rules of one corpus (none when it has no governance file)."""

    rules: tuple[Rule, ...] = ()
    #: SHA-256 of the file's bytes, for the corpus fingerprint; None when there is no file.
    digest: str | None = None
    _by_parts: dict[tuple[str, ...], Rule] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_parts.update({rule.parts: rule for rule in self.rules})

    def deciding(self, relative: PurePosixPath, setting: Setting) -> Rule | None:
        """The rule that gives ``relative`` its ``setting``: the longest matching path that sets it."""
        if not self.rules:
            return None
        parts = _folded(relative)
        for length in range(len(parts), -1, -1):
            rule = self._by_parts.get(parts[:length])
            if rule is not None and rule.sets(setting):
                return rule
        return None

    def classification(self, relative: PurePosixPath) -> Classification | None:
        rule = self.deciding(relative, "classification")
        return None if rule is None else rule.classification

    def lifecycle(self, relative: PurePosixPath) -> Lifecycle:
        """The lifecycle the rules alone give ``relative`` (``current``, no owner, no dates without any)."""
        values: dict[str, Any] = {}
        for setting in _LIFECYCLE_SETTINGS:
            rule = self.deciding(relative, setting)
            if rule is not None:
                values[setting] = getattr(rule, setting)
        return Lifecycle(**values)

    def unmatched(self, relatives: Iterable[PurePosixPath]) -> list[Rule]:
        """Rules whose path names no file of ``relatives``: most likely a typo a reviewer should see."""
        if not self.rules:
            return []
        prefixes: set[tuple[str, ...]] = set()
        for relative in relatives:
            parts = _folded(relative)
            prefixes.update(parts[:length] for length in range(len(parts) + 1))
        return [rule for rule in self.rules if rule.parts not in prefixes]


NO_GOVERNANCE = Governance()


def _fold(part: str) -> str:
    """A path component as rules compare it: NFC, case folded (level folders ignore case too)."""
    return unicodedata.normalize("NFC", part).casefold()


def _folded(relative: PurePosixPath) -> tuple[str, ...]:
    return tuple(_fold(part) for part in relative.parts)


# -- values, shared by the rule file and front matter ------------------------------------
# Each raises ValueError with the problem in words; the caller says where it was found.


def _parse_classification(value: object) -> Classification:
    level = _LEVELS.get(value.strip().lower()) if isinstance(value, str) and value.isascii() else None
    if level is None:
        raise ValueError(f"classification {value!a} is not one of: {', '.join(_LEVELS)}")
    return level


def _parse_status(value: object) -> Status:
    text = value.strip().lower() if isinstance(value, str) and value.isascii() else None
    for status in STATUSES:
        if text == status:
            return status
    raise ValueError(f"status {value!a} is not one of: {', '.join(STATUSES)}")


def _parse_owner(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"owner must be text (a name or a team), got {type(value).__name__}")
    text = " ".join(strip_invisible(value).split())
    if not text:
        raise ValueError("owner is empty")
    if len(text) > MAX_OWNER_CHARS:
        raise ValueError(f"owner is longer than {MAX_OWNER_CHARS} characters")
    kinds = find_credentials(text)
    if kinds:
        raise ValueError(f"owner is credential-shaped ({', '.join(kinds)})")
    return text


#: A link is served to every caller who may see its document: one line, a web address.
MAX_LINK_CHARS = 2048


def parse_link(value: object) -> str:
    if not isinstance(value, str) or not value.startswith(("https://", "http://")):
        raise ValueError("link must be a web address (https://...)")
    if len(value) > MAX_LINK_CHARS or any(c.isspace() for c in value) or find_invisible(value):
        raise ValueError(f"link must be one address of at most {MAX_LINK_CHARS} characters, without spaces")
    if find_credentials(value):
        raise ValueError("link is credential-shaped")
    return value


def _parse_date(value: object, key: str) -> date:
    # A datetime is a date too (a subclass): a time of day would be silently dropped.
    if isinstance(value, datetime):
        raise ValueError(f"{key} must be a date without a time (YYYY-MM-DD)")
    if isinstance(value, date):
        return value
    if isinstance(value, str) and _ISO_DATE.fullmatch(value.strip()):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise ValueError(f"{key} {value!a} is not a date (YYYY-MM-DD)")


def _given(values: Mapping[str, Any], key: str) -> bool:
    """Whether front matter sets ``key``: an empty value (``review_by:``) sets nothing."""
    value = values.get(key)
    return value is not None and value != ""


def document_lifecycle(relative: PurePosixPath, front: Mapping[str, Any], governance: Governance) -> Lifecycle:
    """A document's lifecycle: each setting from its front matter, else from its rule.

    Front matter keys are the rule's (``status``, ``owner``, ``review_by``, ``effective``).
    A value that cannot be used rejects the document (:class:`FileRejectedError`) rather
    than guessing: an unknown status might mean withdrawn, and a withdrawn policy must not
    be served as current.
    """
    ruled = governance.lifecycle(relative)
    try:
        return Lifecycle(
            status=_parse_status(front["status"]) if _given(front, "status") else ruled.status,
            owner=_parse_owner(front["owner"]) if _given(front, "owner") else ruled.owner,
            review_by=_parse_date(front["review_by"], "review_by") if _given(front, "review_by") else ruled.review_by,
            effective=_parse_date(front["effective"], "effective") if _given(front, "effective") else ruled.effective,
            # Only the operator's rules (the connector's mirror) give a link: a document cannot point elsewhere.
            link=ruled.link,
        )
    except ValueError as exc:
        raise FileRejectedError(f"front matter {exc}") from None


# -- the file ------------------------------------------------------------------------------


def _fail(path: Path, problem: str, rule: str | None = None) -> IngestError:
    where = f"{path}: {rule}: " if rule else f"{path}: "
    return IngestError(f"{where}{problem}; {_STOPPED}")


def _read(path: Path) -> bytes | None:
    """The file's bytes; None when there is none. Not followed when it is a link (documents
    are not either), never blocking on a pipe, never read past the size limit."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        if path.is_symlink():
            raise _fail(path, "is a symbolic link; the governance file must be a regular file") from None
        raise _fail(path, f"cannot be read ({type(exc).__name__})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _fail(path, "is not a regular file")
        data = os.read(fd, MAX_GOVERNANCE_BYTES + 1)
        while data and len(data) <= MAX_GOVERNANCE_BYTES:
            more = os.read(fd, MAX_GOVERNANCE_BYTES + 1 - len(data))
            if not more:
                break
            data += more
    except OSError as exc:
        raise _fail(path, f"cannot be read ({type(exc).__name__})") from None
    finally:
        os.close(fd)
    if len(data) > MAX_GOVERNANCE_BYTES:
        raise _fail(path, f"is larger than {MAX_GOVERNANCE_BYTES // 1024} KiB")
    return data


def _rule_parts(value: object) -> tuple[str, ...]:
    if not isinstance(value, str) or not value.strip():
        raise ValueError('path must name a folder or file of the corpus, e.g. "hr/" ("/" for all of it)')
    if find_invisible(value):
        raise ValueError("path holds invisible characters")
    if "\\" in value:
        raise ValueError("path uses '\\'; separate folders with '/'")
    parts = [part for part in value.strip().split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ValueError("path must stay inside the corpus folder (no '..')")
    return tuple(_fold(part) for part in parts)


def _parse_rule(number: int, table: object) -> Rule:
    if not isinstance(table, dict):
        raise ValueError("is not a table of settings")
    unknown = sorted(set(table) - {"path", *RULE_SETTINGS})
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!a} (a rule has: path, {', '.join(RULE_SETTINGS)})")
    if "path" not in table:
        raise ValueError("has no path")
    parts = _rule_parts(table["path"])
    if not any(key in table for key in RULE_SETTINGS):
        raise ValueError(f"sets nothing (give at least one of: {', '.join(RULE_SETTINGS)})")
    return Rule(
        number=number,
        path=table["path"],
        parts=parts,
        classification=_parse_classification(table["classification"]) if "classification" in table else None,
        status=_parse_status(table["status"]) if "status" in table else None,
        owner=_parse_owner(table["owner"]) if "owner" in table else None,
        review_by=_parse_date(table["review_by"], "review_by") if "review_by" in table else None,
        effective=_parse_date(table["effective"], "effective") if "effective" in table else None,
        link=parse_link(table["link"]) if "link" in table else None,
    )


def _where(number: int, table: object) -> str:
    """How a message names a rule: its number, and its path when it has a readable one."""
    path = table.get("path") if isinstance(table, dict) else None
    return f"rule {number} (path {path!a})" if isinstance(path, str) else f"rule {number}"


def load_governance(corpus: Path) -> Governance:
    """The rules of ``corpus``'s governance file, or :data:`NO_GOVERNANCE` when it has none.

    Raises :class:`IngestError` for any problem with the file (see the module docstring).
    """
    path = corpus / GOVERNANCE_FILE
    data = _read(path)
    if data is None:
        return NO_GOVERNANCE
    try:
        parsed = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise _fail(path, "is not valid UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise _fail(path, f"is not valid TOML ({exc})") from None
    unknown = sorted(set(parsed) - {"rule"})
    if unknown:
        raise _fail(path, f"unknown key {unknown[0]!a} at the top level (write each rule as a [[rule]] table)")
    tables = parsed.get("rule", [])
    if not isinstance(tables, list):
        raise _fail(path, "'rule' must be an array of tables: write each rule as [[rule]], not [rule]")
    rules: list[Rule] = []
    seen: dict[tuple[str, ...], Rule] = {}
    for number, table in enumerate(tables, 1):
        try:
            rule = _parse_rule(number, table)
        except ValueError as exc:
            raise _fail(path, str(exc), _where(number, table)) from None
        earlier = seen.get(rule.parts)
        if earlier is not None:
            raise _fail(path, f"names the same path as {earlier.describe()}; give each path one rule", rule.describe())
        seen[rule.parts] = rule
        rules.append(rule)
    return Governance(tuple(rules), hashlib.sha256(data).hexdigest())
