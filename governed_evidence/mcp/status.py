"""The status a server reports: the documents index, and the statistics cache beside it.

Composed here, where both services meet, so neither the search side nor the statistics
side needs to know of the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from governed_evidence.receipts.model import ReceiptKey
from governed_evidence.sdmx.models import StatisticsCacheStatus
from governed_evidence.search.models import IndexStatus

if TYPE_CHECKING:
    from governed_evidence.sdmx.deferred import DeferredSdmxService
    from governed_evidence.sdmx.service import SdmxService
    from governed_evidence.search.service import SearchService

__all__ = ["ServerStatus", "combined_status"]


class ServerStatus(IndexStatus):
    statistics_cache: StatisticsCacheStatus | None = Field(
        default=None, description="Where the SDMX cache lives, whether it persists, and each provider's budget."
    )
    receipts: ReceiptKey | None = Field(
        default=None, description="The key that signs the receipts of cited answers (its public key, to verify them)."
    )


def combined_status(
    service: SearchService,
    statistics: SdmxService | DeferredSdmxService | None,
    receipts: ReceiptKey | None = None,
) -> ServerStatus:
    """The documents index status, with the statistics cache's when statistics are served and
    the receipt key's when receipts are issued."""
    status = service.status()
    cache = statistics.status() if statistics is not None else None
    return ServerStatus.model_validate({**dict(status), "statistics_cache": cache, "receipts": receipts})
