"""Which passages and which provider response each citing answer served, for its receipt.

The receipt itself is built and signed in :mod:`governed_evidence.receipts`; this module
only names what an answer served: every passage view a caller received (a search's
results, a read's passage and its neighbours) with its text exactly as served, or the
provider response a ``get_data`` answer's values were read from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from governed_evidence.receipts.model import DataSource
from governed_evidence.sdmx.models import DataResponse
from governed_evidence.search.models import ReadPassageResponse, SearchResponse

if TYPE_CHECKING:
    from governed_evidence.config import Classification
    from governed_evidence.receipts.issue import ReceiptIssuer
    from governed_evidence.search.service import SearchService

__all__ = ["with_data_receipt", "with_passage_receipt"]

T = TypeVar("T")


def _served(result: object) -> list[tuple[str, str]] | None:
    if isinstance(result, SearchResponse):
        return [(r.citation_id, r.text) for r in result.results]
    if isinstance(result, ReadPassageResponse):
        return [(v.citation_id, v.text) for v in (*result.before, result.passage, *result.after)]
    return None


def with_passage_receipt(
    issuer: ReceiptIssuer, tool: str, arguments: dict[str, Any], service: SearchService, result: T
) -> T:
    """``result`` with its receipt, when it is an answer that cites passages."""
    served = _served(result)
    if served is None or not isinstance(result, SearchResponse | ReadPassageResponse):
        return result
    receipt = issuer.for_passages(
        tool=tool, arguments=arguments, clearance=service.ceiling, reader=service.reader, served=served
    )
    return result.model_copy(update={"receipt": receipt})  # type: ignore[return-value]


def with_data_receipt(
    issuer: ReceiptIssuer, tool: str, arguments: dict[str, Any], clearance: Classification | None, result: T
) -> T:
    """``result`` with its receipt, when it is a statistics answer read from one provider response."""
    if not isinstance(result, DataResponse) or result._body_sha256 is None:
        return result
    source = DataSource(
        provider=result.provider,
        url=result.source_url,
        retrieved_at=result.retrieved_at,
        from_cache=result.from_cache,
        body=result._body_sha256,
    )
    receipt = issuer.for_data(tool=tool, arguments=arguments, clearance=clearance, source=source)
    return result.model_copy(update={"receipt": receipt})
