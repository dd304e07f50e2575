"""SDMX providers as data: the bundled ``providers.toml`` plus an operator's overrides.

A provider's quirks (which agency to ask for the catalogue, which ``references`` value it
accepts, whether it has ``availableconstraint``) are fields, so adding a provider is a
TOML table, not a code branch. The caller of a tool only ever names a provider id; the
base URL, and so the host, always comes from here.
"""

from __future__ import annotations

import tomllib
import urllib.parse
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from governed_evidence.errors import ConfigError, InvalidRequestError
from governed_evidence.sdmx.validate import is_agency, validate_provider_id

__all__ = ["Provider", "Providers", "check_base_url", "load_providers"]

_LOOPBACK_HOST = "127.0.0.1"


def check_base_url(url: str) -> str:
    """Accept ``https://host[:port]/path`` or ``http://127.0.0.1:PORT/path``; return it without a trailing slash.

    Raises
    ------
    ValueError
        For any other scheme, user info, query, fragment, or a non-loopback http host.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError("base_url must not contain credentials, a query or a fragment")
    if not parts.hostname:
        raise ValueError("base_url needs a host")
    try:
        port = parts.port
    except ValueError:
        raise ValueError("base_url has an invalid port") from None
    if parts.scheme == "https":
        pass
    elif parts.scheme == "http":
        # Plain http only to this machine's loopback, where nothing crosses a network.
        if parts.hostname != _LOOPBACK_HOST or port is None:
            raise ValueError("plain http is allowed only for http://127.0.0.1:PORT")
    else:
        raise ValueError("base_url must use https (or http://127.0.0.1:PORT)")
    return url.rstrip("/")


class Provider(BaseModel):
    """One SDMX 2.1 REST endpoint and how to talk to it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Configured id callers use (upper case), e.g. ``OECD``.
    id: str
    #: Human name shown in results.
    name: str
    #: REST base, e.g. ``https://sdmx.oecd.org/public/rest``; every request stays on its origin.
    base_url: str
    #: Agency asked for the dataflow catalogue (``all`` where flows live under sub-agencies).
    catalogue_agency: str = "all"
    #: Agency assumed for a bare dataset id when the catalogue does not know it.
    default_agency: str | None = None
    #: ``references`` value for a dataflow structure query.
    structure_references: Literal["all", "descendants", "children", "none"] = "all"
    #: ``detail`` value for a dataflow structure query.
    structure_detail: Literal["full", "referencepartial"] = "full"
    #: Whether ``/availableconstraint`` exists (asked when the structure carries no Actual constraint).
    availableconstraint: bool = False
    #: How the data path names the flow: ``AGENCY,ID,VERSION`` or the bare id.
    data_flow_ref: Literal["full", "id"] = "full"
    #: ``format`` query parameter for data requests, when the provider wants one.
    data_format: str | None = None
    #: Accept header for data requests (the response is parsed by what comes back, not this).
    data_accept: str = "application/vnd.sdmx.data+csv;version=1.0.0"
    #: Data downloads this server allows itself per hour against this provider.
    data_per_hour: int = Field(default=60, ge=1, le=100_000)
    #: Structure and catalogue requests allowed per hour.
    structure_per_hour: int = Field(default=120, ge=1, le=100_000)
    #: Why the fields above are set as they are.
    notes: str = ""
    #: False removes a bundled provider.
    enabled: bool = True

    @field_validator("base_url")
    @classmethod
    def _safe_base(cls, value: str) -> str:
        return check_base_url(value)

    @field_validator("catalogue_agency", "default_agency")
    @classmethod
    def _agency(cls, value: str | None) -> str | None:
        if value is not None and value != "all" and not is_agency(value):
            raise ValueError("not an SDMX agency id")
        return value

    @field_validator("data_format")
    @classmethod
    def _format(cls, value: str | None) -> str | None:
        if value is not None and not value.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise ValueError("data_format must be a plain word such as csvfilewithlabels")
        return value

    @property
    def origin(self) -> tuple[str, str, int]:
        """(scheme, host, port) every request to this provider must go to."""
        parts = urllib.parse.urlsplit(self.base_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return parts.scheme, (parts.hostname or "").lower(), port


class Providers:
    """The configured providers, looked up by id."""

    def __init__(self, providers: dict[str, Provider]) -> None:
        self._providers = {pid: p for pid, p in providers.items() if p.enabled}

    def get(self, provider_id: str) -> Provider:
        pid = validate_provider_id(provider_id)
        try:
            return self._providers[pid]
        except KeyError:
            known = ", ".join(sorted(self._providers)) or "none"
            raise InvalidRequestError(f"unknown provider {pid!r}; configured providers: {known}") from None

    def ids(self) -> list[str]:
        return sorted(self._providers)

    def __iter__(self) -> Any:
        return iter(self._providers[pid] for pid in self.ids())


def _tables(raw: dict[str, Any], source: str) -> dict[str, dict[str, Any]]:
    providers = raw.get("providers", {})
    extra = set(raw) - {"providers"}
    if extra or not isinstance(providers, dict):
        raise ConfigError(f"{source}: expected only [providers.ID] tables")
    out: dict[str, dict[str, Any]] = {}
    for pid, table in providers.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{source}: providers.{pid} must be a table")
        try:
            key = validate_provider_id(pid)
        except InvalidRequestError:
            raise ConfigError(f"{source}: {pid!r} is not a valid provider id") from None
        out[key] = dict(table)
    return out


def load_providers(override: Path | None = None) -> Providers:
    """Bundled providers, with ``override``'s tables merged field by field on top.

    Raises
    ------
    ConfigError
        When the override file is unreadable or a provider's settings are invalid.
    """
    bundled = tomllib.loads(resources.files("governed_evidence.sdmx").joinpath("providers.toml").read_text("utf-8"))
    tables = _tables(bundled, "bundled providers.toml")
    if override is not None:
        try:
            raw = tomllib.loads(override.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read the SDMX providers file: {type(exc).__name__}: {exc}") from None
        for pid, table in _tables(raw, "SDMX providers file").items():
            tables[pid] = {**tables.get(pid, {}), **table}
    providers: dict[str, Provider] = {}
    for pid, table in tables.items():
        table.setdefault("name", pid)
        try:
            providers[pid] = Provider(id=pid, **table)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"SDMX provider {pid}: {problems}") from None
    return Providers(providers)
