"""The mirror folder: each source's files under its own folder, their levels and links beside them.

A sync asks each source for its listing (the source keeps its own cursor: a delta link, a
page token), decides each file's path (:mod:`names`) and then either keeps the mirror as it is
(nothing changed: only the sources' cursors are saved) or builds a complete new mirror in a
staging folder beside it, hard-linking the unchanged files from the current one and
downloading the rest, and puts it in place in one step (:mod:`swap`). A sync that fails or is
interrupted before that step leaves the last good mirror exactly as it was.

The mirror's ``_governance.toml`` gives every file its level (one rule per file, under a rule
making anything else the most sensitive level), which ingest reads as the operator's word
about a path; the state file (``.connector/state.json``, hidden, so never indexed) holds each
file's id, version, level, label and source link, and each source's cursor.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Protocol

from governed_evidence.config import Classification
from governed_evidence.connectors.names import UnsafeNameError, fold, safe_path
from governed_evidence.connectors.swap import recover, replace_folder, staging_prefix
from governed_evidence.errors import ConnectorError
from governed_evidence.ingest.classify import TEXT_SUFFIXES, level_from_front_matter
from governed_evidence.ingest.frontmatter import FrontMatterError, read_front_matter
from governed_evidence.ingest.governance import GOVERNANCE_FILE, parse_link
from governed_evidence.logging import get_logger

__all__ = [
    "STATE_FILE",
    "Listing",
    "MirrorSource",
    "RemoteFile",
    "SourceReport",
    "SyncReport",
    "governance_text",
    "read_state",
    "sync_mirror",
]

STATE_FILE = PurePosixPath(".connector/state.json")
_STATE_VERSION = 1
_log = get_logger(__name__)


@dataclass(frozen=True)
class RemoteFile:
    """One file a source lists: what to mirror, where, at which level."""

    id: str
    #: Folder names then the file's name, as the source names them (not yet made safe).
    parts: tuple[str, ...]
    #: Changes whenever the content does (a content hash, else the source's version tag).
    version: str
    level: Classification
    #: The source label that decided the level (None: unlabelled, so the most sensitive level).
    label: str | None
    #: The file's web link at the source, cited by results.
    link: str | None
    size: int | None = None
    #: What the source needs to download it (an id, an export format); never a credential.
    fetch: dict[str, str] = field(default_factory=dict)


@dataclass
class Listing:
    files: list[RemoteFile]
    #: The source's cursor and what it remembers, saved only with a successful sync.
    state: dict[str, Any]
    #: True when the source enumerated everything (first sync, or an expired cursor).
    full: bool = False
    #: (item, why) for what the source lists but cannot be mirrored (e.g. a Google form).
    skipped: list[tuple[str, str]] = field(default_factory=list)


class MirrorSource(Protocol):
    name: str

    def listing(self, state: dict[str, Any] | None) -> Listing: ...

    def download(self, file: RemoteFile, out: BinaryIO, limit: int) -> None:
        """Write the file's bytes to ``out``; :class:`ConnectorError` when it cannot (or past ``limit``)."""
        ...


@dataclass
class SourceReport:
    name: str
    files: int = 0
    downloaded: int = 0
    kept: int = 0
    removed: int = 0
    full: bool = False
    #: (what: a safe path or an item id, why), for the operator.
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "files": self.files,
            "downloaded": self.downloaded,
            "kept": self.kept,
            "removed": self.removed,
            "full_enumeration": self.full,
            "skipped": [{"item": what, "reason": why} for what, why in self.skipped],
        }


@dataclass
class SyncReport:
    mirror: Path
    changed: bool = False
    sources: list[SourceReport] = field(default_factory=list)

    @property
    def downloaded(self) -> int:
        return sum(s.downloaded for s in self.sources)

    def as_dict(self) -> dict[str, Any]:
        return {
            "mirror": str(self.mirror),
            "changed": self.changed,
            "downloaded": self.downloaded,
            "sources": [s.as_dict() for s in self.sources],
        }


def read_state(mirror: Path) -> dict[str, Any]:
    """The mirror's state (an empty one when there is no mirror yet or it cannot be read)."""
    try:
        state = json.loads((mirror / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"version": _STATE_VERSION, "sources": {}}
    if not isinstance(state, dict) or state.get("version") != _STATE_VERSION:
        return {"version": _STATE_VERSION, "sources": {}}
    return state


def _write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        json.dump(value, out, ensure_ascii=False, sort_keys=True, indent=1)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def _toml_string(value: str) -> str:
    # A JSON string is a TOML basic string once non-ASCII is left as is (names are already free
    # of control and invisible characters): both escape only '"', '\' and control characters.
    return json.dumps(value, ensure_ascii=False)


def _servable_link(link: object) -> bool:
    """Whether the governance file would take ``link`` (else the file is cited without one)."""
    try:
        parse_link(link)
    except ValueError:
        return False
    return True


def governance_text(entries: dict[str, dict[str, Any]]) -> str:
    """The mirror's governance file: the most sensitive level for the whole mirror, then each file's."""
    lines = [
        "# Written by `governed-evidence sync` from each source's labels: edit the configuration's",
        "# label mapping, not this file (the next sync replaces it).",
        "[[rule]]",
        'path = "/"',
        f'classification = "{max(Classification).label}"',
    ]
    for entry in sorted(entries.values(), key=lambda e: str(e["path"])):
        lines += ["", "[[rule]]", f"path = {_toml_string(entry['path'])}", f'classification = "{entry["level"]}"']
        if _servable_link(entry.get("link")):
            lines.append(f"link = {_toml_string(entry['link'])}")
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def _locked(mirror: Path) -> Iterator[None]:
    mirror.parent.mkdir(parents=True, exist_ok=True)
    with open(mirror.parent / f".{mirror.name}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConnectorError(f"another sync of {mirror} is running; try again when it has finished") from None
        yield


def _entry(file: RemoteFile, path: PurePosixPath) -> dict[str, Any]:
    return {
        "id": file.id,
        "path": str(path),
        "version": file.version,
        "level": file.level.label,
        "label": file.label,
        "link": file.link,
    }


def _plan(source: MirrorSource, listing: Listing, report: SourceReport) -> dict[str, tuple[RemoteFile, dict[str, Any]]]:
    """Each listed file's entry at its safe path; unsafe and colliding names skipped with the reason."""
    planned: dict[str, tuple[RemoteFile, dict[str, Any]]] = {}
    taken: dict[str, str] = {}
    report.skipped.extend(listing.skipped)
    for file in sorted(listing.files, key=lambda f: (f.parts, f.id)):
        try:
            path = PurePosixPath(source.name) / safe_path(file.parts)
        except UnsafeNameError as exc:
            report.skipped.append((f"item {file.id}", str(exc)))
            continue
        folded = fold(path)
        if folded in taken:
            report.skipped.append((str(path), f"another item (id {taken[folded]}) has the same name, ignoring case"))
            continue
        taken[folded] = file.id
        planned[file.id] = (file, _entry(file, path))
    return planned


def _front_matter_below(path: Path, level: Classification) -> str | None:
    """Why a downloaded text file cannot be mirrored: its own front matter would lower its level."""
    if path.suffix.lower() not in TEXT_SUFFIXES:
        return None
    try:
        own = level_from_front_matter(read_front_matter(path))
    except (FrontMatterError, OSError):
        return None  # ingest then classifies it restricted itself
    if own is not None and own < level:
        # Ingest lets front matter win; here the source's label is the authority, so a lower one is refused.
        return f"its front matter says {own.label}, below {level.label} from its label at the source"
    return None


def _fill(
    staging: Path,
    mirror: Path,
    source: MirrorSource,
    planned: dict[str, tuple[RemoteFile, dict[str, Any]]],
    old: dict[str, dict[str, Any]],
    report: SourceReport,
    max_file_bytes: int,
) -> dict[str, dict[str, Any]]:
    kept: dict[str, dict[str, Any]] = {}
    for file_id, (file, entry) in planned.items():
        target = staging / entry["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        before = old.get(file_id)
        current = mirror / before["path"] if before else None
        if before and before["version"] == file.version and current is not None and current.is_file():
            try:
                os.link(current, target)
            except OSError:
                shutil.copy2(current, target)
            report.kept += 1
        else:
            part = target.with_name(target.name + ".part")
            try:
                with open(part, "wb") as out:
                    source.download(file, out, max_file_bytes)
            except ConnectorError as exc:
                part.unlink(missing_ok=True)
                report.skipped.append((entry["path"], f"download failed: {exc}"))
                continue
            os.replace(part, target)
            report.downloaded += 1
        why = _front_matter_below(target, file.level)
        if why is not None:
            target.unlink()
            report.skipped.append((entry["path"], why))
            continue
        kept[file_id] = entry
    report.removed = len(set(old) - set(kept))
    report.files = len(kept)
    return kept


def sync_mirror(mirror: Path, sources: Sequence[MirrorSource], *, max_file_bytes: int) -> SyncReport:
    """Bring ``mirror`` up to date with ``sources``; :class:`ConnectorError` keeps the last good one."""
    report = SyncReport(mirror)
    with _locked(mirror):
        recover(mirror)
        state = read_state(mirror) if mirror.is_dir() else read_state(mirror / "missing")
        old_sources: dict[str, Any] = state.get("sources", {})
        listings: list[tuple[MirrorSource, Listing, SourceReport]] = []
        for source in sources:
            before = old_sources.get(source.name, {})
            # Every listing before any file is fetched: a source that fails fails the sync whole.
            listing = source.listing(before.get("source"))
            listings.append((source, listing, SourceReport(source.name, full=listing.full)))
        plans = [(_plan(s, listing, r), s, listing, r) for s, listing, r in listings]
        changed = set(old_sources) != {s.name for s in sources}
        for planned, source, _, _ in plans:
            old_files = old_sources.get(source.name, {}).get("files", {})
            wanted = {file_id: entry for file_id, (_, entry) in planned.items()}
            present = all((mirror / e["path"]).is_file() for e in old_files.values())
            if wanted != old_files or not present:
                changed = True
        new_state: dict[str, Any] = {"version": _STATE_VERSION, "sources": {}}
        if not changed and mirror.is_dir():
            for _, source, listing, source_report in plans:
                files = old_sources[source.name]["files"]
                new_state["sources"][source.name] = {"source": listing.state, "files": files}
                source_report.files = source_report.kept = len(files)
                report.sources.append(source_report)
            # Only the cursors move on: the governance file and every document stay as they are.
            _write_json(mirror / STATE_FILE, new_state)
            return report
        staging = Path(tempfile.mkdtemp(prefix=staging_prefix(mirror), dir=mirror.parent))
        try:
            entries: dict[str, dict[str, Any]] = {}
            for planned, source, listing, source_report in plans:
                old_files = old_sources.get(source.name, {}).get("files", {})
                kept = _fill(staging, mirror, source, planned, old_files, source_report, max_file_bytes)
                new_state["sources"][source.name] = {"source": listing.state, "files": kept}
                entries.update({f"{source.name}/{k}": v for k, v in kept.items()})
                report.sources.append(source_report)
            (staging / GOVERNANCE_FILE).write_text(governance_text(entries), encoding="utf-8")
            _write_json(staging / STATE_FILE, new_state)
            replace_folder(staging, mirror)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        report.changed = True
        for r in report.sources:
            _log.info(
                "connector_synced",
                source=r.name,
                files=r.files,
                downloaded=r.downloaded,
                kept=r.kept,
                removed=r.removed,
                skipped=len(r.skipped),
                full=r.full,
            )
        return report
