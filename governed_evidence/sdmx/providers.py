"""SDMX providers as data: the bundled ``providers.toml`` plus an operator's overrides.

A provider's quirks (which agency to ask for the catalogue, which ``references`` value it
accepts, whether it has ``availableconstraint``) are fields, so adding a provider is a
TOML table, not a code branch. The caller of a tool only ever names a provider id; the
base URL, and so the host, always comes from here.

Bases are public by default: an https base whose host is a loopback, private, link-local
or otherwise non-global address (in any literal form a resolver accepts, such as
``127.1`` or ``2130706433``), or a ``localhost`` name, is refused unless the provider
sets ``allow_private_network = true``. The plain ``http://127.0.0.1:PORT`` form is the
explicit local-mirror form and implies it. Host *names* are not resolved here; the client
checks the addresses a name resolves to when it connects (see
:mod:`governed_evidence.sdmx.origin`).

How a provider says "no results" is data too: ``no_results_markers`` lists the words its
plain-text error body uses for an empty selection (the OECD's ``NoResultsFound``), read
by :meth:`Provider.says_no_results`; SDMX error 100 means the same from any provider.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import tomllib
import urllib.parse
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from governed_evidence.errors import ConfigError, InvalidRequestError
from governed_evidence.sdmx.validate import is_agency, validate_provider_id

__all__ = [
    "DEFAULT_NO_RESULTS_MARKERS",
    "MAX_NO_RESULTS_MARKERS",
    "NO_RESULTS_HEAD_BYTES",
    "PRIVATE_OPT_IN",
    "Provider",
    "Providers",
    "check_base_url",
    "is_public_address",
    "load_providers",
    "url_origin",
]

_LOOPBACK_HOST = "127.0.0.1"
_FORMAT_RE = re.compile(r"[A-Za-z0-9._\-]{1,40}")
#: NAT64 (RFC 6052): a gateway turns these into the IPv4 address in their last 32 bits.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
PRIVATE_OPT_IN = "allow_private_network"
#: How much of an error body is searched for a no-results marker.
NO_RESULTS_HEAD_BYTES = 4096
#: Markers one provider may list, and what one may look like (printable ASCII words).
MAX_NO_RESULTS_MARKERS = 16
#: What a provider that does not say otherwise is taken to mean by an empty selection: the
#: words the OECD's plain-text 404 uses, which this client has always recognised from any
#: provider. A provider sets ``no_results_markers = []`` to have none.
DEFAULT_NO_RESULTS_MARKERS = ("noresultsfound", "no results found", "norecordsfound", "no records found")
_MARKER_RE = re.compile(r"[ -~]{1,64}")
_ACCEPT_RE = re.compile(r"[A-Za-z0-9!#$&^_.+\-]{1,60}/[A-Za-z0-9!#$&^_.+\-]{1,80}(?: ?;[ -~]{1,80}){0,4}")


def is_public_address(address: str | ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """True for a globally routable unicast address; False for loopback, private, link-local,
    shared, reserved, unspecified and multicast ones, and for what is not an address at all.

    IPv6 forms that carry an IPv4 address (mapped, NAT64) are judged by that address.
    """
    try:
        ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            return False
        if ip.ipv4_mapped is not None:
            return is_public_address(ip.ipv4_mapped)
        if ip in _NAT64:
            return is_public_address(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return bool(ip.is_global and not ip.is_multicast)


def url_origin(url: str) -> tuple[str, str, int]:
    """``url``'s (scheme, lower-case host, port), the port defaulted by scheme.

    Raises
    ------
    ValueError
        When the port cannot be read.
    """
    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, (parts.hostname or "").lower(), port


def _literal_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address ``host`` names literally, in any form a resolver reads as one."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        # inet_aton reads the forms getaddrinfo does: 127.1, 0x7f.1, 0177.0.0.1, 2130706433.
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def _private_host(hostname: str) -> bool:
    host = hostname.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    literal = _literal_address(host)
    return literal is not None and not is_public_address(literal)


def check_base_url(url: str, *, allow_private_network: bool = False) -> str:
    """Accept ``https://host[:port]/path`` or ``http://127.0.0.1:PORT/path``; return it without a trailing slash.

    Raises
    ------
    ValueError
        For any other scheme, user info, query, fragment, a non-loopback http host, or an
        https host that is a loopback, private or link-local address (unless allowed).
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
        if not allow_private_network and _private_host(parts.hostname):
            raise ValueError(
                "base_url must not point at a loopback, private or link-local address; for a trusted "
                f"internal mirror set {PRIVATE_OPT_IN} = true in the providers file"
            )
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
    #: Accept header for data requests (the response is parsed by what comes back, not this):
    #: SDMX-CSV, SDMX-ML generic or structure-specific, or SDMX-JSON
    #: (``application/vnd.sdmx.data+json;version=1.0.0``) for a provider that speaks only JSON.
    data_accept: str = "application/vnd.sdmx.data+csv;version=1.0.0"
    #: Accept header for catalogue, structure and availability requests; SDMX-ML 2.1 unless a
    #: provider serves only SDMX-JSON (``application/vnd.sdmx.structure+json;version=2.0.0``)
    #: or SDMX-ML 3.0. Every one of these is read, whatever was asked for.
    structure_accept: str = "application/vnd.sdmx.structure+xml;version=2.1"
    #: Data downloads this server allows itself per hour against this provider.
    data_per_hour: int = Field(default=60, ge=1, le=100_000)
    #: Structure and catalogue requests allowed per hour.
    structure_per_hour: int = Field(default=120, ge=1, le=100_000)
    #: Words by which this provider's error body says a data query matched nothing (e.g. the
    #: OECD's plain-text 404 ``NoResultsFound``); matched case-insensitively, kept lower-case.
    no_results_markers: tuple[str, ...] = DEFAULT_NO_RESULTS_MARKERS
    #: Why the fields above are set as they are.
    notes: str = ""
    #: False removes a bundled provider.
    enabled: bool = True
    #: True lets an https base point at a loopback, private or link-local address (an
    #: internal mirror the operator trusts); requests may then reach this network.
    allow_private_network: bool = False

    @field_validator("base_url")
    @classmethod
    def _safe_base(cls, value: str) -> str:
        # The shape only; whether the host may be private depends on another field.
        return check_base_url(value, allow_private_network=True)

    @model_validator(mode="after")
    def _public_base(self) -> Provider:
        check_base_url(self.base_url, allow_private_network=self.allow_private_network)
        return self

    @field_validator("catalogue_agency", "default_agency")
    @classmethod
    def _agency(cls, value: str | None) -> str | None:
        if value is not None and value != "all" and not is_agency(value):
            raise ValueError("not an SDMX agency id")
        return value

    @field_validator("data_format")
    @classmethod
    def _format(cls, value: str | None) -> str | None:
        # ASCII only: str.isalnum() would accept any script's letters and digits.
        if value is not None and not _FORMAT_RE.fullmatch(value):
            raise ValueError("data_format must be a plain word such as csvfilewithlabels")
        return value

    @field_validator("data_accept", "structure_accept")
    @classmethod
    def _accept(cls, value: str) -> str:
        # A header value: printable ASCII, no line breaks, short.
        if not _ACCEPT_RE.fullmatch(value):
            raise ValueError("must be a media type such as application/vnd.sdmx.data+csv;version=1.0.0")
        return value

    @field_validator("no_results_markers")
    @classmethod
    def _markers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(value) > MAX_NO_RESULTS_MARKERS:
            raise ValueError(f"at most {MAX_NO_RESULTS_MARKERS} no_results_markers")
        # ASCII only: the body is lower-cased byte by byte, which folds nothing else.
        if not all(_MARKER_RE.fullmatch(m) and m.strip() for m in value):
            raise ValueError("each no_results_marker must be 1-64 printable ASCII characters")
        return tuple(m.lower() for m in value)

    def says_no_results(self, body: bytes) -> bool:
        """Whether the start of ``body`` carries one of this provider's no-results markers."""
        head = body[:NO_RESULTS_HEAD_BYTES].lower()
        return any(marker.encode("ascii") in head for marker in self.no_results_markers)

    @property
    def origin(self) -> tuple[str, str, int]:
        """(scheme, host, port) every request to this provider must go to."""
        return url_origin(self.base_url)

    @property
    def private_network_allowed(self) -> bool:
        """Whether connections may go to non-public addresses (the opt-in, or the loopback http form)."""
        return self.allow_private_network or self.base_url.startswith("http://")


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
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'base_url'}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"SDMX provider {pid}: {problems}") from None
    return Providers(providers)
