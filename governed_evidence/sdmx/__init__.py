"""Official statistics from SDMX 2.1 REST providers: providers as data, a bounded httpx
client, a response cache and rate ledger in the SQLite file, parsers, and SdmxService.

``SdmxService`` is resolved on first access: importing the models (as the documents'
status model does) must not pull in httpx and the parsers, which the server only needs
once a statistics tool is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from governed_evidence.sdmx.models import (
    DataResponse,
    DatasetDescription,
    DatasetSearchResponse,
    StatisticsCacheStatus,
)
from governed_evidence.sdmx.providers import Provider, Providers, load_providers

if TYPE_CHECKING:
    from governed_evidence.sdmx.service import SdmxService

__all__ = [
    "DataResponse",
    "DatasetDescription",
    "DatasetSearchResponse",
    "Provider",
    "Providers",
    "SdmxService",
    "StatisticsCacheStatus",
    "load_providers",
]


def __getattr__(name: str) -> Any:
    if name == "SdmxService":
        from governed_evidence.sdmx.service import SdmxService

        return SdmxService
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
