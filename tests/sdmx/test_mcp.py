"""The statistics tools over MCP: names, read-only annotations, published limits, mapped errors."""

from __future__ import annotations

import asyncio
import json
import re
from types import SimpleNamespace
from typing import Any

import pytest
from fastmcp import Client, FastMCP
from fastmcp.exceptions import ToolError

from governed_evidence import errors
from governed_evidence.config import Classification
from governed_evidence.mcp.calls import Calls, stdio_caller
from governed_evidence.mcp.errors import INTERNAL_ERROR_TEXT, to_tool_error
from governed_evidence.mcp.statistics import STATISTICS_TOOLS, register_statistics_tools
from governed_evidence.sdmx.models import DataResponse, DatasetDescription, DatasetSearchResponse
from governed_evidence.sdmx.service import SdmxService
from tests.sdmx.conftest import ServiceFactory
from tests.sdmx.helpers import CSV_CT, STRUCTURE_CT, FakeProviders, catalogue_of, fixture

G20 = "OECD.SDD.TPS,DSD_G20_PRICES@DF_G20_PRICES,1.0"


def _app(service: SdmxService) -> FastMCP:
    app = FastMCP("test", mask_error_details=True)
    # Statistics calls read only the caller and the ceiling; no document service is needed.
    levels = SimpleNamespace(ceiling=Classification.PUBLIC)
    calls = Calls(levels, anonymous=stdio_caller(Classification.PUBLIC))  # type: ignore[arg-type]
    register_statistics_tools(app, service, calls)
    return app


def _serve(fake: FakeProviders) -> None:
    g20 = fixture("oecd_g20_prices_structure.xml")
    fake.add("/dataflow/all/all/latest", catalogue_of(g20, fixture("estat_lfsa_egai2d_dataflow.xml")), STRUCTURE_CT)
    fake.add("/dataflow/OECD.SDD.TPS/", g20, STRUCTURE_CT)
    fake.add("/data/", fixture("oecd_g20_prices_data.csv"), CSV_CT)


def run(body: Any) -> Any:
    return asyncio.run(body)


def test_tools_are_registered_read_only_with_published_limits(make_service: ServiceFactory) -> None:
    async def body() -> dict[str, Any]:
        async with Client(_app(make_service())) as client:
            return {t.name: t for t in await client.list_tools()}

    tools = run(body())
    assert set(tools) == set(STATISTICS_TOOLS)
    for tool in tools.values():
        assert tool.annotations.read_only_hint is True
        assert tool.annotations.destructive_hint is False
        assert tool.annotations.idempotent_hint is True
    search = tools["search_datasets"].input_schema["properties"]
    assert search["limit"]["maximum"] == 50 and search["limit"]["default"] == 10
    assert search["provider"]["default"] == "OECD" and "pattern" in search["provider"]
    assert search["query"]["maxLength"] == 500
    data = tools["get_data"].input_schema
    assert data["required"] == ["dataset", "key"]
    assert data["properties"]["max_rows"]["default"] == 200 and data["properties"]["max_rows"]["maximum"] == 1000
    assert "pattern" in data["properties"]["key"] and "pattern" in data["properties"]["dataset"]
    describe = tools["describe_dataset"].input_schema["properties"]
    assert describe["max_codes"]["default"] == 30
    assert set(tools["get_data"].output_schema["properties"]) >= {
        "columns", "rows", "constant_columns", "total_rows", "returned_rows", "source_url", "retrieved_at",
        "from_cache", "stale",
    }  # fmt: skip


def test_search_describe_get_data_over_mcp(make_service: ServiceFactory, fake: FakeProviders) -> None:
    _serve(fake)

    async def body() -> tuple[Any, Any, Any]:
        async with Client(_app(make_service())) as client:
            found = await client.call_tool("search_datasets", {"query": "consumer price indices"})
            described = await client.call_tool("describe_dataset", {"dataset": G20})
            data = await client.call_tool(
                "get_data", {"dataset": G20, "key": "CHN.A.N.CPI.PA._T.N.GY", "start_period": "2020", "max_rows": 3}
            )
            return found, described, data

    found, described, data = run(body())
    search = DatasetSearchResponse.model_validate(found.structured_content)
    assert search.results[0].dataset == G20
    description = DatasetDescription.model_validate(described.structured_content)
    assert description.key_template.startswith("REF_AREA.FREQ")
    table = DataResponse.model_validate(data.structured_content)
    assert table.returned_rows == 3 and table.constant_columns["REF_AREA"] == "CHN"
    assert table.source_url.endswith("/CHN.A.N.CPI.PA._T.N.GY?format=csvfilewithlabels&startPeriod=2020")


@pytest.mark.parametrize(
    "arguments",
    [
        {"dataset": "EXR/../../admin", "key": "A"},
        {"dataset": G20, "key": "A/B"},
        {"dataset": G20, "key": "A", "start_period": "last year"},
        {"dataset": G20, "key": "A", "max_rows": 100000},
        {"dataset": G20, "key": "A", "provider": "https://evil.example"},
    ],
)
def test_schema_limits_reject_before_any_request(
    make_service: ServiceFactory, fake: FakeProviders, arguments: dict[str, Any]
) -> None:
    async def body() -> Any:
        async with Client(_app(make_service())) as client:
            return await client.call_tool("get_data", arguments, raise_on_error=False)

    result = run(body())
    assert result.is_error
    assert fake.requests == []


def test_rate_limit_message_reaches_the_client(make_service: ServiceFactory, fake: FakeProviders) -> None:
    _serve(fake)
    service = make_service("[providers.OECD]\ndata_per_hour = 1\n")

    async def body() -> Any:
        async with Client(_app(service)) as client:
            await client.call_tool("get_data", {"dataset": G20, "key": "CHN.A.N.CPI.PA._T.N.GY"})
            return await client.call_tool(
                "get_data", {"dataset": G20, "key": "IND.A.N.CPI.PA._T.N.GY"}, raise_on_error=False
            )

    result = run(body())
    assert result.is_error
    text = result.content[0].text
    assert text.startswith("[RATE_LIMITED] this server's budget of 1 data requests per hour to OECD is spent")
    assert re.search(r"\nhint: Wait \d+ s, then make the same call again\..*\nretry_after_s: \d+$", text), text


def test_internal_faults_are_masked(make_service: ServiceFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    service = make_service()

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("/srv/secret/cache.sqlite: SELECT body FROM sdmx_cache")

    monkeypatch.setattr(service, "search_datasets", boom)

    async def body() -> Any:
        async with Client(_app(service)) as client:
            return await client.call_tool("search_datasets", {"query": "gdp"}, raise_on_error=False)

    result = run(body())
    assert result.content[0].text == INTERNAL_ERROR_TEXT


@pytest.mark.parametrize(
    "cls",
    [
        errors.StatisticsError,
        errors.ProviderUnavailableError,
        errors.RateLimitedError,
        errors.RateLedgerError,
        errors.ResponseTooLargeError,
        errors.UnusableResponseError,
    ],
)
def test_statistics_errors_keep_their_message(cls: type[errors.StatisticsError]) -> None:
    mapped = to_tool_error(cls("narrow the key"))
    assert isinstance(mapped, ToolError)
    assert str(mapped) == f"[{cls.code}] narrow the key\nhint: {cls('narrow the key').hint}"
    assert issubclass(cls, errors.GovernedEvidenceError)


def test_lower_level_errors_never_escape_unmapped() -> None:
    import httpx

    assert str(to_tool_error(httpx.ConnectError("10.0.0.1 refused"))) == INTERNAL_ERROR_TEXT
    assert json.dumps(str(to_tool_error(KeyError("x")))) == json.dumps(INTERNAL_ERROR_TEXT)


def test_a_caller_without_clearance_may_use_the_statistics_tools(
    make_service: ServiceFactory, fake: FakeProviders
) -> None:
    # A valid credential that maps to no clearance (a JWT without a mapped role): documents
    # are refused, statistics (public data, no classification) are served.
    from governed_evidence.access.caller import Caller

    _serve(fake)
    app = FastMCP("test", mask_error_details=True)
    levels = SimpleNamespace(ceiling=Classification.RESTRICTED)
    calls = Calls(levels, anonymous=Caller("no-role", None, "jwt"))  # type: ignore[arg-type]
    register_statistics_tools(app, make_service(), calls)

    async def body() -> Any:
        async with Client(app) as client:
            return await client.call_tool("search_datasets", {"query": "consumer price indices"})

    found = run(body())
    assert found.structured_content["results"]


def test_get_data_carries_a_signed_receipt_of_the_provider_response(
    make_service: ServiceFactory, fake: FakeProviders
) -> None:
    import hashlib

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from governed_evidence.receipts.canonical import digest
    from governed_evidence.receipts.check import check_signature, parse_answer
    from governed_evidence.receipts.issue import ReceiptIssuer
    from governed_evidence.receipts.keys import Signer

    _serve(fake)
    signer = Signer(Ed25519PrivateKey.generate())
    app = FastMCP("test", mask_error_details=True)
    levels = SimpleNamespace(ceiling=Classification.PUBLIC)
    calls = Calls(levels, anonymous=stdio_caller(Classification.PUBLIC), receipts=ReceiptIssuer(signer))  # type: ignore[arg-type]
    register_statistics_tools(app, make_service(), calls)
    arguments = {"dataset": G20, "key": "CHN.A.N.CPI.PA._T.N.GY", "start_period": "2020", "max_rows": 3}

    async def body() -> list[Any]:
        async with Client(app) as client:
            found = await client.call_tool("search_datasets", {"query": "consumer price indices"})
            return [found] + [await client.call_tool("get_data", arguments) for _ in range(2)]

    found, first, again = run(body())
    assert "receipt" not in found.structured_content  # only the answer read from one response cites
    for result, cached in ((first, False), (again, True)):
        answer = result.structured_content
        receipt = answer["receipt"]
        assert receipt["data"] == {
            "provider": "OECD",
            "url": answer["source_url"],
            "retrieved_at": answer["retrieved_at"],
            "from_cache": cached,
            "body": hashlib.sha256(fixture("oecd_g20_prices_data.csv")).hexdigest(),
        }
        assert receipt["tool"] == "get_data" and receipt["clearance"] == "public"
        assert receipt["index"] is None and receipt["cited"] == [] and receipt["ids"] is None
        full = {"provider": "OECD", "end_period": None, "labels": False, **arguments}
        assert receipt["args"] == digest(full)
        assert check_signature(parse_answer(json.dumps(answer)), [signer.public]) == "valid"
    assert first.structured_content["receipt"]["id"] != again.structured_content["receipt"]["id"]
