"""Generated arguments for every MCP tool: only validation errors or normal answers, never an
internal error, never a hang.

One in-memory FastMCP client talks to the real app (documents over the sample corpus at
ceiling internal; statistics over recorded SDMX responses through httpx.MockTransport, plus a
provider whose host refuses connections), so nothing touches the network. Each call is bounded
by :data:`CALL_TIMEOUT`. The default run generates a few hundred inputs per tool; the run
marked ``heavy`` generates at least :data:`HEAVY_TOTAL` across the seven tools.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastmcp import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from governed_evidence.config import Classification, Settings
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.mcp import build_app
from governed_evidence.mcp.errors import INTERNAL_ERROR_TEXT
from governed_evidence.mcp.status import ServerStatus
from governed_evidence.sdmx.models import DataResponse, DatasetDescription, DatasetSearchResponse
from governed_evidence.sdmx.service import SdmxService
from governed_evidence.sdmx.validate import DATASET_PATTERN, KEY_PATTERN, PERIOD_PATTERN, PROVIDER_PATTERN
from governed_evidence.search.models import ReadPassageResponse, SearchResponse, SourcesResponse
from governed_evidence.search.service import SearchService
from governed_evidence.store.connection import connect
from tests.hardening import figures
from tests.hardening.probes import (
    SAMPLE_CORPUS,
    SAMPLE_RESTRICTED,
    Detectors,
    canary_terms,
    corpus_vocabulary,
    detectors,
    scan,
    true_levels,
)
from tests.helpers import HashEmbedder
from tests.sdmx.helpers import CSV_CT, SS_CT, STRUCTURE_CT, FakeProviders, catalogue_of, fixture

#: No single call may take longer than this (seconds); a hang fails the test.
CALL_TIMEOUT = 10.0
DEFAULT_EXAMPLES = 120
#: Heavy examples per tool; their sum is the promised minimum of generated inputs.
HEAVY_EXAMPLES = {
    "search_documents": 2200,
    "read_passage": 1500,
    "list_sources": 400,
    "index_status": 400,
    "search_datasets": 1500,
    "describe_dataset": 1600,
    "get_data": 2400,
}
HEAVY_TOTAL = 10_000
assert sum(HEAVY_EXAMPLES.values()) >= HEAVY_TOTAL

G20 = "OECD.SDD.TPS,DSD_G20_PRICES@DF_G20_PRICES,1.0"
OUTPUT_MODELS: dict[str, type[BaseModel]] = {
    "search_documents": SearchResponse,
    "read_passage": ReadPassageResponse,
    "list_sources": SourcesResponse,
    "index_status": ServerStatus,
    "search_datasets": DatasetSearchResponse,
    "describe_dataset": DatasetDescription,
    "get_data": DataResponse,
}
PROVIDERS_TOML = """
[providers.OECD]
data_per_hour = 100000
structure_per_hour = 100000

[providers.ECB]
data_per_hour = 100000
structure_per_hour = 100000

[providers.ESTAT]
data_per_hour = 100000
structure_per_hour = 100000

[providers.DEAD]
name = "A provider whose host refuses connections"
base_url = "http://127.0.0.1:9/rest"
data_per_hour = 100000
structure_per_hour = 100000
"""


@dataclass
class Outcomes:
    """What the generated calls produced, per tool."""

    ok: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)

    def total(self, tool: str) -> int:
        return self.ok.get(tool, 0) + self.refused.get(tool, 0)


@dataclass
class Harness:
    loop: asyncio.AbstractEventLoop
    client: Client
    found: Detectors
    citation_ids: list[str]
    outcomes: Outcomes

    def call(self, tool: str, args: dict[str, Any]) -> None:
        started = time.perf_counter()
        try:
            result = self.loop.run_until_complete(
                asyncio.wait_for(self.client.call_tool(tool, args, raise_on_error=False), CALL_TIMEOUT)
            )
        except TimeoutError:
            pytest.fail(f"{tool}({args!r}) did not answer within {CALL_TIMEOUT} s")
        elapsed = time.perf_counter() - started
        self.outcomes.latencies.append(elapsed)
        if result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            assert text and text != INTERNAL_ERROR_TEXT, f"internal error for {tool}({args!r})"
            self.outcomes.refused[tool] = self.outcomes.refused.get(tool, 0) + 1
        else:
            answer = OUTPUT_MODELS[tool].model_validate(result.structured_content)
            if tool in ("search_documents", "read_passage", "list_sources", "index_status"):
                dumped = answer.model_dump(mode="json")
                assert "restricted" not in {v for v in _classifications(dumped)}
                assert not scan(self.found, dumped), f"{tool}({args!r}) answered with restricted text"
            self.outcomes.ok[tool] = self.outcomes.ok.get(tool, 0) + 1


def _classifications(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "classification" and isinstance(v, str):
                yield v
            else:
                yield from _classifications(v)
    elif isinstance(value, list):
        for v in value:
            yield from _classifications(v)


def _serve(fake: FakeProviders) -> None:
    g20 = fixture("oecd_g20_prices_structure.xml")
    estat = fixture("estat_lfsa_egai2d_dataflow.xml")
    fake.add("/dataflow/all/all/latest", catalogue_of(g20, estat), STRUCTURE_CT)
    fake.add("/dataflow/OECD.SDD.TPS/", g20, STRUCTURE_CT)
    fake.add("/data/OECD.SDD.TPS,DSD_G20_PRICES@DF_G20_PRICES", fixture("oecd_g20_prices_data.csv"), CSV_CT)
    fake.add("/dataflow/ESTAT/", estat, STRUCTURE_CT)
    fake.add("/data/lfsa_egai2d", fixture("estat_nrg_bal_s_data.xml"), SS_CT)
    fake.add("/data/ECB,", fixture("fmr_error_150.xml"), "application/xml", status=400)


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    work = tmp_path_factory.mktemp("properties")
    embedder = HashEmbedder()
    db = work / "index.sqlite"
    ingest_corpus(SAMPLE_CORPUS, db, embedder, ceiling=Classification.RESTRICTED, progress=None)
    levels = true_levels(SAMPLE_CORPUS, SAMPLE_RESTRICTED)
    found = detectors(corpus_vocabulary(SAMPLE_CORPUS, levels, Classification.INTERNAL, served_db=db))
    conn = connect(db, readonly=True)
    citation_ids = [str(r[0]) for r in conn.execute("SELECT citation_id FROM passages ORDER BY id")]
    conn.close()

    fake = FakeProviders()
    _serve(fake)
    inner = fake.handler

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "127.0.0.1":
            raise httpx.ConnectError("connection refused", request=request)
        return inner(request)

    providers = work / "providers.toml"
    providers.write_text(PROVIDERS_TOML)
    statistics = SdmxService.from_settings(
        Settings(
            db=work / "no-index.sqlite",
            sdmx_cache_path=None,  # in memory: the ledger and cache work the same, without fsyncs
            sdmx_providers=providers,
            sdmx_max_retries=1,
        ),  # type: ignore[call-arg]
        transport=httpx.MockTransport(handler),
        sleep=lambda seconds: None,
    )
    service = SearchService(db, ceiling=Classification.INTERNAL, embedder_factory=lambda: embedder)
    loop = asyncio.new_event_loop()
    client = Client(build_app(service, statistics))
    loop.run_until_complete(client.__aenter__())
    outcomes = Outcomes()
    try:
        yield Harness(loop, client, found, citation_ids, outcomes)
    finally:
        loop.run_until_complete(client.__aexit__(None, None, None))
        loop.close()
        statistics.close()
        service.reader.close()
    latencies = sorted(outcomes.latencies)
    if latencies:
        figures.put("properties: slowest call (ms)", round(latencies[-1] * 1000, 1))
        figures.put("properties: p99 call (ms)", round(latencies[math.ceil(0.99 * len(latencies)) - 1] * 1000, 1))


# -- strategies --------------------------------------------------------------------------

JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=30), st.binary(max_size=10).map(str)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
)
#: Fragments that are syntax to FTS5, SQL, shells, paths or Unicode normalisation.
HOSTILE = [
    '"',
    "'",
    "NEAR(",
    "NEAR(a b, 2)",
    "*",
    "^",
    "AND",
    "OR",
    "NOT",
    ":",
    "(",
    ")",
    "-",
    "+",
    "classification:restricted",
    "title:salary",
    "O'Brien",
    "20.04",
    "multi-agent",
    "%",
    "_",
    "';--",
    "\\",
    "../../etc/passwd",
    "\x00",
    "\u200b",
    "\u202e",
    "\ufeff",
    "\ufb01",
    "İ",
    "ß",
    "🙂",
    "\n",
    "\t",
    "{{ x }}",
    "<script>",
    "$(rm -rf /)",
]
WORDS = ["leave", "water", "remote", "salary", "bittern", "password", "the", "a", "of", "expenses", "restricted"]


def _ints(low: int, high: int) -> st.SearchStrategy[int]:
    """Integers in range and just past both ends."""
    return st.integers(min_value=low - 2, max_value=high + 2)


ANY_TEXT = st.one_of(st.text(max_size=1100), st.text(alphabet=st.sampled_from([h for h in HOSTILE if len(h) == 1])))
QUERY = st.one_of(
    st.text(min_size=1, max_size=120),
    st.lists(st.sampled_from(HOSTILE + WORDS), min_size=1, max_size=30).map(" ".join),
    st.lists(st.sampled_from(HOSTILE + WORDS), min_size=1, max_size=30).map("".join),
    st.sampled_from(canary_terms()),
    st.integers(min_value=495, max_value=505).map(lambda n: "w" * n),
)
MODE = st.sampled_from(["hybrid", "keyword", "semantic", "HYBRID", "fuzzy"])
CONFIDENCE = st.sampled_from(["strict", "normal", "lax"])
EXTRA = st.dictionaries(
    st.sampled_from(["ceiling", "db", "sql", "x", "provider", "__proto__"]), JSON_VALUES, max_size=2
)
PROVIDER = st.one_of(
    st.sampled_from(["OECD", "ESTAT", "ECB", "DEAD", "oecd", "IMF", "", "https://evil.example", "../OECD"]),
    st.from_regex(PROVIDER_PATTERN, fullmatch=True),
)
DATASET = st.one_of(
    st.sampled_from(
        [
            G20,
            "DSD_G20_PRICES@DF_G20_PRICES",
            "OECD.SDD.TPS:DSD_G20_PRICES@DF_G20_PRICES(1.0)",
            "OECD.SDD.TPS,DSD_G20_PRICES@DF_G20_PRICES",
            "DSD_G20_PRICES@DF_G20_PRICES,latest",
            "lfsa_egai2d",
            "ESTAT,lfsa_egai2d,1.0",
            "ECB,EXR,1.0",
            "EXR",
        ]
    ),
    st.from_regex(DATASET_PATTERN, fullmatch=True),
)
KEY = st.one_of(
    st.sampled_from(["CHN.A.N.CPI.PA._T.N.GY", "", "all", ".......", "CHN+IND.A.N.CPI.PA._T.N.GY", "A.B.C"]),
    st.lists(st.sampled_from(["", "CHN", "IND", "A", "N", "CPI", "PA", "_T", "GY", "X+Y"]), max_size=9).map(".".join),
    st.from_regex(KEY_PATTERN, fullmatch=True),
)
PERIOD = st.one_of(
    st.none(), st.sampled_from(["2015", "2020-Q3", "", "2030"]), st.from_regex(PERIOD_PATTERN, fullmatch=True)
)
STATS_QUERY = st.one_of(
    st.sampled_from(["consumer price indices", "labour force", "gdp", "prices", "employment", "inflation"]), QUERY
)


def _args(required: dict[str, Any], optional: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(required, optional=optional)


def _anything(names: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Any JSON values under the tool's argument names (each present or not), plus stray keys."""
    values = st.one_of(JSON_VALUES, ANY_TEXT)
    own = st.fixed_dictionaries({}, optional=dict.fromkeys(names, values))
    return st.tuples(own, EXTRA).map(lambda t: {**t[0], **t[1]})


@dataclass(frozen=True)
class ToolInputs:
    #: Right names and types, values in range, hostile text and near-boundary numbers.
    shaped: st.SearchStrategy[dict[str, Any]]
    #: Wrong types, missing and unexpected keys, arbitrary JSON.
    anything: st.SearchStrategy[dict[str, Any]]


def strategies(ids: list[str]) -> dict[str, ToolInputs]:
    real = st.sampled_from(ids)
    citation = st.one_of(
        real,
        real,
        st.tuples(real, st.sampled_from(["~2", " ", "%", "'", ":L1-2", "\x00", "#"])).map("".join),
        st.text(min_size=1, max_size=200),
    )
    return {
        "search_documents": ToolInputs(
            _args({"query": QUERY}, {"limit": _ints(1, 20), "mode": MODE, "confidence": CONFIDENCE}),
            _anything(["query", "limit", "mode", "confidence"]),
        ),
        "read_passage": ToolInputs(
            _args({"citation_id": citation}, {"context": _ints(0, 3)}), _anything(["citation_id", "context"])
        ),
        "list_sources": ToolInputs(st.just({}), EXTRA),
        "index_status": ToolInputs(st.just({}), EXTRA),
        "search_datasets": ToolInputs(
            _args({"query": STATS_QUERY}, {"provider": PROVIDER, "limit": _ints(1, 50)}),
            _anything(["query", "provider", "limit"]),
        ),
        "describe_dataset": ToolInputs(
            _args({"dataset": DATASET}, {"provider": PROVIDER, "max_codes": _ints(1, 500)}),
            _anything(["dataset", "provider", "max_codes"]),
        ),
        "get_data": ToolInputs(
            _args(
                {"dataset": DATASET, "key": KEY},
                {"provider": PROVIDER, "start_period": PERIOD, "end_period": PERIOD, "max_rows": _ints(1, 1000)},
            ),
            _anything(["dataset", "key", "provider", "start_period", "end_period", "max_rows"]),
        ),
    }


#: Share of a tool's examples given to well-shaped arguments (the rest are arbitrary).
SHAPED_SHARE = 0.7


def _run(harness: Harness, tool: str, examples: int) -> int:
    before = harness.outcomes.total(tool)
    inputs = strategies(harness.citation_ids)[tool]
    shaped = 1 if tool in ("list_sources", "index_status") else round(examples * SHAPED_SHARE)
    for strategy, count in ((inputs.shaped, shaped), (inputs.anything, examples - shaped)):

        @settings(
            max_examples=count,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        )
        @given(args=strategy)
        def check(args: dict[str, Any]) -> None:
            harness.call(tool, args)

        check()
    return harness.outcomes.total(tool) - before


@pytest.mark.parametrize("tool", list(HEAVY_EXAMPLES))
def test_generated_arguments_get_answers_or_validation_errors(harness: Harness, tool: str) -> None:
    made = _run(harness, tool, DEFAULT_EXAMPLES)
    figures.add("properties: generated inputs", made)
    assert made >= DEFAULT_EXAMPLES


@pytest.mark.heavy
@pytest.mark.parametrize("tool", list(HEAVY_EXAMPLES))
def test_many_generated_arguments_get_answers_or_validation_errors(harness: Harness, tool: str) -> None:
    made = _run(harness, tool, HEAVY_EXAMPLES[tool])
    figures.add("properties: generated inputs", made)
    figures.add("properties: generated inputs (heavy run)", made)
    ok, refused = harness.outcomes.ok.get(tool, 0), harness.outcomes.refused.get(tool, 0)
    figures.put(f"properties: {tool} answered", ok)
    figures.put(f"properties: {tool} refused (validation or governed error)", refused)
    assert made >= HEAVY_EXAMPLES[tool], f"{tool}: only {made} inputs were generated"
    # The strategies reach both sides: real answers and refusals.
    if tool not in ("list_sources", "index_status"):
        assert ok > 0 and refused > 0, f"{tool}: {ok} answered, {refused} refused"
