"""Dataset references completed before they are asked for, and cached structures peeked at.

A caller may name a dataset by its bare id; the agency (and version) then come from the
provider's ``default_agency`` or, failing that, its catalogue. Catalogue text is provider
text, so its parts go into URLs only if a caller could have sent them. A structure
already in the cache (even expired) can be peeked at without touching the network, which
is how ``get_data`` checks a key's length before it spends download budget.
"""

from __future__ import annotations

from governed_evidence.errors import NotFoundError, StatisticsError, UnusableResponseError
from governed_evidence.sdmx.artefacts import Dataflow, StructureMessage
from governed_evidence.sdmx.catalogue import CatalogueIndex
from governed_evidence.sdmx.fetch import FIND_DATASET_HINT, Fetched, Fetcher
from governed_evidence.sdmx.parsed import ParsedResponses
from governed_evidence.sdmx.providers import Provider
from governed_evidence.sdmx.urls import catalogue_request, structure_request
from governed_evidence.sdmx.validate import DatasetRef, provider_dataset_ref

__all__ = ["catalogue_for", "peek_structure", "resolve"]


def catalogue_for(fetcher: Fetcher, parsed: ParsedResponses, provider: Provider) -> tuple[CatalogueIndex, Fetched]:
    """The provider's dataflow catalogue, through the fetch path."""
    return fetcher.fetch(provider, catalogue_request(provider), parsed.catalogue)


def resolve(fetcher: Fetcher, parsed: ParsedResponses, provider: Provider, ref: DatasetRef) -> DatasetRef:
    """Fill in a missing agency (and version) from the provider's default or its catalogue.

    Raises
    ------
    NotFoundError
        When the catalogue has no dataset of that id.
    UnusableResponseError
        When the catalogue names it with identifiers a caller could not have sent.
    """
    if ref.agency is not None:
        return ref
    if provider.default_agency is not None:
        return DatasetRef(provider.default_agency, ref.id, ref.version)
    index, _ = catalogue_for(fetcher, parsed, provider)
    for row in index.rows:
        if row.dataset_id.upper() == ref.id.upper():
            version = row.version if ref.version == "latest" else ref.version
            # The catalogue is provider text: its parts go into URLs only if a caller
            # could have sent them (no "..", no slash), whatever the cache holds.
            resolved = provider_dataset_ref(row.agency, row.dataset_id, version)
            if resolved is None:
                raise UnusableResponseError(
                    f"the {provider.id} catalogue names this dataset with identifiers this server does not accept"
                )
            return resolved
    raise NotFoundError(
        f"no dataset {ref.id!r} in the {provider.id} catalogue; use search_datasets to find a dataset reference",
        hint=FIND_DATASET_HINT,
    )


def peek_structure(
    fetcher: Fetcher, parsed: ParsedResponses, provider: Provider, ref: DatasetRef
) -> tuple[StructureMessage, Dataflow | None] | None:
    """A cached structure for ``ref`` (even expired), without touching the network."""
    entry = fetcher.cache.get(structure_request(provider, ref))
    if entry is None and ref.version != "latest":
        # describe_dataset may have been asked for the latest version of the same flow.
        entry = fetcher.cache.get(structure_request(provider, DatasetRef(ref.agency, ref.id)))
    if entry is None:
        return None
    try:
        message = parsed.structure(entry)
    except StatisticsError:
        return None
    return message, message.dataflow(ref.id, ref.agency)
