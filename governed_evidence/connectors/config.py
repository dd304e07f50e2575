"""The connectors' configuration: a TOML file naming the mirror, the sources and their label mappings.

Secrets are never in the file: a source names the environment variable that holds its client
secret or private key (``client_secret_env``, ``private_key_env``), read when the sync runs.
The file is the operator's, so it is read strictly: an unknown key, a missing setting, a level
that is not one, or a secret written into the file stops the command before anything is fetched.

::

    mirror = "/srv/evidence/mirror"       # the folder ingest reads (one subfolder per source)
    index = "/srv/evidence/evidence.sqlite"  # what refresh builds (default: GOVERNED_EVIDENCE_DB)

    [[source]]
    name = "policies"
    kind = "sharepoint"
    tenant_id = "..."
    client_id = "..."
    client_secret_env = "POLICIES_GRAPH_SECRET"
    drive_id = "b!..."                    # or site_id = "contoso.sharepoint.com,...,..." (its default library)

    [source.labels]                       # Purview sensitivity label id -> level
    "5feba255-812e-446a-ac59-a7044ef827b5" = "public"
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from governed_evidence.config import Classification, parse_level
from governed_evidence.errors import ConfigError

__all__ = [
    "ConnectorConfig",
    "DriveSource",
    "GraphSource",
    "SourceConfig",
    "load_config",
    "secret_from_env",
]

Kind = Literal["sharepoint", "google_drive"]
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
#: Keys that would put a secret into the file itself: refused, with the key to use instead.
_SECRET_KEYS = {"client_secret": "client_secret_env", "private_key": "private_key_env", "secret": "client_secret_env"}
_COMMON = {"name", "kind", "labels", "timeout_seconds", "deadline_seconds"}
_GRAPH_KEYS = _COMMON | {"tenant_id", "client_id", "client_secret_env", "drive_id", "site_id", "graph_url", "login_url"}
_DRIVE_KEYS = _COMMON | {
    "service_account_email",
    "private_key_env",
    "drive_id",
    "folder_id",
    "folders",
    "drive_url",
    "token_url",
}


@dataclass(frozen=True)
class SourceConfig:
    name: str
    #: Source label (a Purview label id, a Drive ``labelId/fieldId=choiceId``) -> level.
    labels: dict[str, Classification]
    #: Each request's socket timeout, and the whole sync's deadline (throttling waits included).
    timeout_seconds: float = 30.0
    deadline_seconds: float = 1800.0

    def level_of(self, labels: list[str]) -> tuple[Classification, str | None]:
        """The level ``labels`` give, and the label that decided it (None: unlabelled).

        No label, or any label the mapping does not know, gives the most sensitive level: a
        labelling gap can only narrow access. Several labels give the most sensitive of theirs.
        """
        if not labels:
            return max(Classification), None
        levels = [(self.labels.get(label, max(Classification)), label) for label in labels]
        return max(levels)


@dataclass(frozen=True)
class GraphSource(SourceConfig):
    tenant_id: str = ""
    client_id: str = ""
    client_secret_env: str = ""
    drive_id: str | None = None
    site_id: str | None = None
    graph_url: str = "https://graph.microsoft.com/v1.0"
    login_url: str = "https://login.microsoftonline.com"


@dataclass(frozen=True)
class DriveSource(SourceConfig):
    service_account_email: str = ""
    private_key_env: str = ""
    #: A shared drive's id; without one, the files the service account can see (under ``folder_id``).
    drive_id: str | None = None
    folder_id: str | None = None
    #: Folder path (as mirrored, e.g. ``"HR/"``) -> level, for files without a mapped Drive label.
    folders: dict[str, Classification] = field(default_factory=dict)
    drive_url: str = "https://www.googleapis.com/drive/v3"
    token_url: str = "https://oauth2.googleapis.com/token"  # noqa: S105 - an endpoint, not a secret


@dataclass(frozen=True)
class ConnectorConfig:
    path: Path
    mirror: Path
    index: Path | None
    sources: tuple[SourceConfig, ...]


def secret_from_env(variable: str, source: str) -> str:
    """The secret in ``variable``; the error names the variable, never a value."""
    value = os.environ.get(variable, "")
    if not value.strip():
        raise ConfigError(f"source {source!a}: the environment variable {variable} (its secret) is not set")
    return value


def _url(value: object, key: str, where: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where}: {key} must be a URL")
    parts = urlsplit(value)
    # Plain http only to this machine (a test server, a local proxy): a token must not cross a network in clear.
    local = parts.hostname in ("127.0.0.1", "localhost", "::1")
    if parts.scheme != "https" and not (parts.scheme == "http" and local):
        raise ConfigError(f"{where}: {key} must be an https URL (http only to 127.0.0.1)")
    return value.rstrip("/")


def _text(table: dict[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
    value = table.get(key)
    if value is None:
        if required:
            raise ConfigError(f"{where}: {key} is required")
        return None
    if not isinstance(value, str) or not value.strip() or any(ord(c) < 32 for c in value):
        raise ConfigError(f"{where}: {key} must be one line of text")
    return value.strip()


def _levels(value: object, key: str, where: str) -> dict[str, Classification]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: [{key}] must be a table of label = level")
    out: dict[str, Classification] = {}
    for label, level in value.items():
        if not isinstance(level, str):
            raise ConfigError(f"{where}: {key} {label!a} must map to a level (public, internal, restricted)")
        try:
            out[str(label).strip()] = parse_level(level)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {key} {label!a}: {exc}") from None
    return out


def _seconds(table: dict[str, Any], key: str, default: float, where: str) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 86400:
        raise ConfigError(f"{where}: {key} must be a number of seconds between 0 and 86400")
    return float(value)


def _env_name(table: dict[str, Any], key: str, where: str) -> str:
    value = _text(table, key, where)
    assert value is not None
    if not _ENV_NAME.fullmatch(value):
        raise ConfigError(f"{where}: {key} must name an environment variable (letters, digits, _)")
    return value


def _source(number: int, table: object) -> SourceConfig:
    where = f"source {number}"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a [[source]] table")
    for key, instead in _SECRET_KEYS.items():
        if key in table:
            # Named without its value: the value is the secret that must not be in the file, nor in a log.
            raise ConfigError(
                f"{where}: {key} must not be in the file; put it in an environment variable named by {instead}"
            )
    name = _text(table, "name", where)
    assert name is not None
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"{where}: name must be lower-case letters, digits, '-' or '_' (it names the mirror's folder)"
        )
    where = f"source {number} ({name})"
    kind = table.get("kind")
    keys = {"sharepoint": _GRAPH_KEYS, "google_drive": _DRIVE_KEYS}.get(kind) if isinstance(kind, str) else None
    if keys is None:
        raise ConfigError(f"{where}: kind must be 'sharepoint' or 'google_drive'")
    unknown = sorted(set(table) - keys)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!a} for kind {kind}")
    common: dict[str, Any] = {
        "name": name,
        "labels": _levels(table.get("labels"), "labels", where),
        "timeout_seconds": _seconds(table, "timeout_seconds", 30.0, where),
        "deadline_seconds": _seconds(table, "deadline_seconds", 1800.0, where),
    }
    if kind == "sharepoint":
        drive_id = _text(table, "drive_id", where, required=False)
        site_id = _text(table, "site_id", where, required=False)
        if (drive_id is None) == (site_id is None):
            raise ConfigError(f"{where}: give exactly one of drive_id and site_id")
        return GraphSource(
            **common,
            tenant_id=_text(table, "tenant_id", where) or "",
            client_id=_text(table, "client_id", where) or "",
            client_secret_env=_env_name(table, "client_secret_env", where),
            drive_id=drive_id,
            site_id=site_id,
            graph_url=_url(table.get("graph_url", GraphSource.graph_url), "graph_url", where),
            login_url=_url(table.get("login_url", GraphSource.login_url), "login_url", where),
        )
    return DriveSource(
        **common,
        service_account_email=_text(table, "service_account_email", where) or "",
        private_key_env=_env_name(table, "private_key_env", where),
        drive_id=_text(table, "drive_id", where, required=False),
        folder_id=_text(table, "folder_id", where, required=False),
        folders=_levels(table.get("folders"), "folders", where),
        drive_url=_url(table.get("drive_url", DriveSource.drive_url), "drive_url", where),
        token_url=_url(table.get("token_url", DriveSource.token_url), "token_url", where),
    )


def load_config(path: Path) -> ConnectorConfig:
    """The configuration at ``path``; :class:`ConfigError` names the file and the problem."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such configuration file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({type(exc).__name__})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: is not valid TOML ({exc})") from None
    try:
        unknown = sorted(set(data) - {"mirror", "index", "source"})
        if unknown:
            raise ConfigError(f"unknown key {unknown[0]!a} at the top level (mirror, index, [[source]])")
        mirror = data.get("mirror")
        if not isinstance(mirror, str) or not mirror.strip():
            raise ConfigError("mirror (the folder ingest reads) is required")
        index = data.get("index")
        if index is not None and not isinstance(index, str):
            raise ConfigError("index must be a file path")
        tables = data.get("source", [])
        if not isinstance(tables, list) or not tables:
            raise ConfigError("give at least one [[source]]")
        sources = tuple(_source(number, table) for number, table in enumerate(tables, 1))
        names = [s.name for s in sources]
        if len(set(names)) != len(names):
            raise ConfigError("two sources have the same name; each names its own folder of the mirror")
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    base = path.parent
    return ConnectorConfig(
        path=path,
        mirror=(base / mirror).absolute(),
        index=None if index is None else (base / index).absolute(),
        sources=sources,
    )
