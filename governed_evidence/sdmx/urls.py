"""SDMX 2.1 REST URLs, built as strings from validated parts (and tested as strings).

Every function takes a :class:`Provider` (the only source of a host) and identifiers that
already passed :mod:`governed_evidence.sdmx.validate`; the segment check and quoting here
are a second fence, not the first. Query parameters are sorted so one request always has
one spelling, which is also its cache key.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from typing import Literal

from governed_evidence.errors import UnusableResponseError
from governed_evidence.sdmx.providers import Provider
from governed_evidence.sdmx.validate import DatasetRef

__all__ = [
    "STRUCTURE_ACCEPT",
    "Kind",
    "SdmxRequest",
    "availability_request",
    "catalogue_request",
    "data_request",
    "flow_ref",
    "structure_request",
]

Kind = Literal["catalogue", "structure", "data"]
STRUCTURE_ACCEPT = "application/vnd.sdmx.structure+xml;version=2.1"
#: Characters validated identifiers may contain; nothing else survives unquoted.
_SAFE = "@$-_.+,"


@dataclass(frozen=True)
class SdmxRequest:
    """One GET to one provider: what the cache, the budget and the HTTP client act on."""

    provider: str
    kind: Kind
    url: str
    accept: str

    @property
    def cache_key(self) -> str:
        """The normalised request: kind, exact URL (sorted query) and the format asked for."""
        return f"{self.kind} {self.url} accept={self.accept}"

    @property
    def bucket(self) -> Literal["data", "structure"]:
        """Which rate budget a request spends: data downloads or structure calls."""
        return "data" if self.kind == "data" else "structure"


#: A path segment made only of what validated identifiers and keys contain.
_SEGMENT_RE = re.compile(r"[A-Za-z0-9@$\-_.+,]+")


def _checked(value: str) -> str:
    # Dots alone would move the request up the provider's path (``..``) or nowhere (``.``),
    # and an empty part changes which resource is named.
    if value in (".", "..") or not _SEGMENT_RE.fullmatch(value):
        raise UnusableResponseError("a dataset reference part is not a valid SDMX identifier; no request was sent")
    return value


def _seg(value: str) -> str:
    return urllib.parse.quote(_checked(value), safe=_SAFE)


def _url(provider: Provider, *segments: str, params: dict[str, str | None] | None = None) -> str:
    url = provider.base_url + "/" + "/".join(_seg(s) for s in segments)
    query = sorted((k, v) for k, v in (params or {}).items() if v is not None)
    if query:
        url += "?" + urllib.parse.urlencode(query, safe=_SAFE)
    return url


def _agency(provider: Provider, ref: DatasetRef) -> str:
    return ref.agency or provider.default_agency or "all"


def flow_ref(provider: Provider, ref: DatasetRef) -> str:
    """The flow as the data path names it: ``AGENCY,ID,VERSION`` or, where the provider wants it, the id."""
    if provider.data_flow_ref == "id":
        return _checked(ref.id)
    return ",".join(_checked(part) for part in (_agency(provider, ref), ref.id, ref.version))


def catalogue_request(provider: Provider) -> SdmxRequest:
    """All dataflows of the provider's catalogue agency (``all`` for the OECD)."""
    url = _url(provider, "dataflow", provider.catalogue_agency, "all", "latest")
    return SdmxRequest(provider.id, "catalogue", url, provider.structure_accept)


def structure_request(provider: Provider, ref: DatasetRef) -> SdmxRequest:
    """One dataflow with its DSD, codelists, concepts and constraints, as far as the provider allows."""
    params: dict[str, str | None] = {
        "references": None if provider.structure_references == "none" else provider.structure_references,
        "detail": None if provider.structure_detail == "full" else provider.structure_detail,
    }
    url = _url(provider, "dataflow", _agency(provider, ref), ref.id, ref.version, params=params)
    return SdmxRequest(provider.id, "structure", url, provider.structure_accept)


def availability_request(provider: Provider, ref: DatasetRef) -> SdmxRequest:
    """The codes that have data for the whole flow (key, provider and component all ``all``)."""
    url = _url(provider, "availableconstraint", flow_ref(provider, ref), "all", "all", "all", params={"mode": "exact"})
    return SdmxRequest(provider.id, "structure", url, provider.structure_accept)


def data_request(
    provider: Provider, ref: DatasetRef, key: str, start_period: str | None, end_period: str | None
) -> SdmxRequest:
    """Observations for ``key``; the URL doubles as the citable source of every figure."""
    params: dict[str, str | None] = {
        "startPeriod": start_period,
        "endPeriod": end_period,
        "format": provider.data_format,
    }
    # A key of two or three empty positions ("." or "..") selects everything, as "all"
    # does; sent as is it would be a dot segment that moves the request up the path.
    path_key = "all" if key in (".", "..") else key
    url = _url(provider, "data", flow_ref(provider, ref), path_key, params=params)
    return SdmxRequest(provider.id, "data", url, provider.data_accept)
