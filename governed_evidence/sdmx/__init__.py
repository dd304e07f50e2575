"""Official statistics from SDMX 2.1 REST providers: providers as data, a bounded httpx
client, a response cache and rate ledger in the SQLite file, parsers, and SdmxService."""

from governed_evidence.sdmx.models import (
    DataResponse,
    DatasetDescription,
    DatasetSearchResponse,
    StatisticsCacheStatus,
)
from governed_evidence.sdmx.providers import Provider, Providers, load_providers
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
