"""The three statistics tools over SdmxService (registration and logging only, no logic).

Input limits are annotated types, so the published schemas carry the same patterns the
service enforces; the service validates again because the CLI calls it directly.

Nothing here imports the service module: the server registers these tools over a
``DeferredSdmxService``, so httpx and the parsers load on the first statistics call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from mcp.types import ToolAnnotations
from pydantic import Field

from governed_evidence.mcp.calls import Calls
from governed_evidence.mcp.registration import tool
from governed_evidence.sdmx.deferred import DeferredSdmxService
from governed_evidence.sdmx.models import DataResponse, DatasetDescription, DatasetSearchResponse
from governed_evidence.sdmx.validate import (
    DATASET_PATTERN,
    KEY_PATTERN,
    MAX_CODES_LIMIT,
    MAX_ROWS_LIMIT,
    MAX_SEARCH_LIMIT,
    PERIOD_PATTERN,
    PROVIDER_PATTERN,
)

if TYPE_CHECKING:
    from fastmcp import FastMCP

    from governed_evidence.sdmx.service import SdmxService

__all__ = [
    "STATISTICS_TOOLS",
    "DatasetArg",
    "KeyArg",
    "LabelsArg",
    "MaxCodes",
    "MaxRows",
    "PeriodArg",
    "ProviderArg",
    "StatsLimit",
    "StatsQuery",
    "register_statistics_tools",
]

STATISTICS_TOOLS = ("search_datasets", "describe_dataset", "get_data")
#: Read-only and idempotent; open-world because the answer comes from an outside provider.
_STATISTICS_READ_ONLY = ToolAnnotations(
    read_only_hint=True, idempotent_hint=True, destructive_hint=False, open_world_hint=True
)

StatsQuery = Annotated[
    str,
    Field(
        min_length=1,
        max_length=500,
        pattern=r"\S",
        description="Words naming the statistic, e.g. 'research and development expenditure' (1-500 characters).",
    ),
]
ProviderArg = Annotated[
    str,
    Field(
        pattern=PROVIDER_PATTERN,
        description=(
            "A configured provider id: OECD (default), ECB, ESTAT, IMF, BIS, UNICEF, ILO, ISTAT, INSEE, "
            "or one the operator added."
        ),
    ),
]
StatsLimit = Annotated[
    int, Field(ge=1, le=MAX_SEARCH_LIMIT, description=f"Most datasets to return (1-{MAX_SEARCH_LIMIT}).")
]
DatasetArg = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        pattern=DATASET_PATTERN,
        description="The `dataset` value from search_datasets, e.g. OECD.SDD.NAD,DSD_NAMAIN1@DF_QNA,1.0.",
    ),
]
MaxCodes = Annotated[
    int, Field(ge=1, le=MAX_CODES_LIMIT, description=f"Most codes listed per dimension (1-{MAX_CODES_LIMIT}).")
]
KeyArg = Annotated[
    str,
    Field(
        max_length=1000,
        pattern=KEY_PATTERN,
        description="Series key: one position per dimension in describe_dataset's order, separated by '.'; "
        "codes joined by '+'; an empty position selects all codes (e.g. Q.FRA+DEU..B1GQ).",
    ),
]
PeriodArg = Annotated[
    str | None,
    Field(pattern=PERIOD_PATTERN, description="A period such as 2020, 2020-Q3, 2020-07 or 2020-07-31."),
]
MaxRows = Annotated[int, Field(ge=1, le=MAX_ROWS_LIMIT, description=f"Most rows to return (1-{MAX_ROWS_LIMIT}).")]
LabelsArg = Annotated[
    bool,
    Field(
        description="Put each code's label beside it (REF_AREA: AUS, REF_AREA_label: Australia) in rows and "
        "constant_columns; may cost one cached structure request."
    ),
]


def register_statistics_tools(app: FastMCP, statistics: SdmxService | DeferredSdmxService, calls: Calls) -> None:
    """Add search_datasets, describe_dataset and get_data to ``app``, each call made through ``calls``."""
    _call = calls.statistics

    def service() -> SdmxService:
        return statistics.get() if isinstance(statistics, DeferredSdmxService) else statistics

    @tool(app, _STATISTICS_READ_ONLY)
    def search_datasets(
        query: StatsQuery, provider: ProviderArg = "OECD", limit: StatsLimit = 10
    ) -> DatasetSearchResponse:
        """Find official-statistics datasets (SDMX dataflows) whose names match the query.

        Search for the statistic, not for countries or years (those are chosen in the key).
        Pass a result's `dataset` to describe_dataset.
        """
        return _call(
            "search_datasets",
            provider,
            lambda: service().search_datasets(query, provider=provider, limit=limit),
            lambda r: len(r.results),
        )

    @tool(app, _STATISTICS_READ_ONLY)
    def describe_dataset(
        dataset: DatasetArg, provider: ProviderArg = "OECD", max_codes: MaxCodes = 30
    ) -> DatasetDescription:
        """A dataset's dimensions in key order with their codes (codes that have data first), its time
        coverage and an example key to pass to get_data."""
        return _call(
            "describe_dataset",
            provider,
            lambda: service().describe_dataset(dataset, provider=provider, max_codes=max_codes),
            lambda r: len(r.dimensions),
        )

    @tool(app, _STATISTICS_READ_ONLY)
    def get_data(
        dataset: DatasetArg,
        key: KeyArg,
        provider: ProviderArg = "OECD",
        start_period: PeriodArg = None,
        end_period: PeriodArg = None,
        max_rows: MaxRows = 200,
        labels: LabelsArg = False,
    ) -> DataResponse:
        """Observations for a series key, with constant columns lifted out and the exact provider URL to cite.

        Cite `source_url` for every figure. An empty result carries a hint, not an error. Set labels to
        have each code's name beside it when you will write about the codes.
        """
        return _call(
            "get_data",
            provider,
            lambda: service().get_data(
                dataset,
                key,
                provider=provider,
                start_period=start_period,
                end_period=end_period,
                max_rows=max_rows,
                labels=labels,
            ),
            lambda r: r.returned_rows,
            arguments={
                "dataset": dataset,
                "key": key,
                "provider": provider,
                "start_period": start_period,
                "end_period": end_period,
                "max_rows": max_rows,
                "labels": labels,
            },
        )
