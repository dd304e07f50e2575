"""Error mapping: caller-facing errors keep their message, everything else is masked.

The caller-facing messages are checked as the package really raises them (through the MCP
client, from settings that hold server paths): none may name a path of the server.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw
import httpx
import pytest
from fastmcp import Client, FastMCP
from fastmcp.exceptions import ToolError

from governed_evidence import composition, errors
from governed_evidence.access.caller import Caller
from governed_evidence.config import Classification, Settings
from governed_evidence.embeddings.base import Embedder
from governed_evidence.embeddings.minilm import MiniLMEmbedder
from governed_evidence.embeddings.openai import OpenAIEmbedder
from governed_evidence.mcp import build_app
from governed_evidence.mcp import errors as mcp_errors
from governed_evidence.mcp.calls import Calls
from governed_evidence.mcp.errors import CALLER_FACING, INTERNAL_ERROR_MESSAGE, to_tool_error
from governed_evidence.sdmx.providers import load_providers
from governed_evidence.sdmx.service import SdmxService
from governed_evidence.search.levels import LevelServices
from governed_evidence.search.service import SearchService
from tests.helpers import HashEmbedder

G20 = "OECD.SDD.TPS,DSD_G20_PRICES@DF_G20_PRICES,1.0"
STRUCTURE_CT = "application/vnd.sdmx.structure+xml;version=2.1"
#: Two or more path segments: what any absolute (or long relative) server path looks like.
PATH_SHAPED = re.compile(r"(/[\w.-]+){2,}")


def _all_error_classes() -> list[type[errors.GovernedEvidenceError]]:
    return [getattr(errors, name) for name in errors.__all__]


def _caller_facing(cls: type[BaseException]) -> bool:
    return issubclass(cls, CALLER_FACING)


def assert_pathless(text: str, *paths: Path) -> None:
    assert not PATH_SHAPED.search(text), text
    home = str(Path.home())
    for fragment in ("/tmp", "/work", *([home] if home != "/" else []), *map(str, paths)):
        assert fragment not in text, text


# -- the mapping and the tree drawn in errors.py agree ----------------------------------------


@pytest.mark.parametrize("cls", [c for c in _all_error_classes() if _caller_facing(c)])
def test_caller_facing_errors_keep_their_message(cls: type[Exception]) -> None:
    mapped = to_tool_error(cls("narrow the request"))
    assert isinstance(mapped, ToolError)
    assert str(mapped) == "narrow the request"


@pytest.mark.parametrize("cls", [c for c in _all_error_classes() if not _caller_facing(c)])
def test_operator_errors_are_masked(cls: type[Exception]) -> None:
    # ConfigError, IngestError, FileRejectedError and the base: written for the operator.
    mapped = to_tool_error(cls("cannot read /srv/evidence/providers.toml"))
    assert isinstance(mapped, ToolError)
    assert str(mapped) == INTERNAL_ERROR_MESSAGE


def test_the_caller_facing_set_is_the_documented_one() -> None:
    names = {cls.__name__ for cls in CALLER_FACING}
    assert names == {
        "InvalidRequestError",
        "NotFoundError",
        "NotClearedError",
        "IndexUnavailableError",
        "EmbedderError",
        "StatisticsError",
    }
    assert not _caller_facing(errors.ConfigError)
    assert not _caller_facing(errors.IngestError) and not _caller_facing(errors.FileRejectedError)


def _drawn_tree() -> dict[str, tuple[str | None, bool]]:
    """errors.py's drawing: each class's drawn parent and whether it is marked caller-facing."""
    drawn: dict[str, tuple[str | None, bool]] = {}
    stack: list[str] = []
    for line in (errors.__doc__ or "").splitlines():
        m = re.match(r"^ {4}(?P<lead>[│├└─ ]*)(?P<name>\w+Error)\b(?P<rest>.*)$", line)
        if m is None:
            continue
        depth = len(m["lead"]) // 4
        del stack[depth:]
        drawn[m["name"]] = (stack[-1] if stack else None, m["rest"].lstrip().startswith("* "))
        stack.append(m["name"])
    return drawn


def test_the_drawn_tree_matches_the_classes_and_the_mapping() -> None:
    drawn = _drawn_tree()
    assert set(drawn) == set(errors.__all__)
    for cls in _all_error_classes():
        base = cls.__bases__[0]
        parent = None if base is Exception else base.__name__
        assert drawn[cls.__name__] == (parent, _caller_facing(cls)), cls.__name__


def test_unexpected_errors_are_masked() -> None:
    mapped = to_tool_error(RuntimeError("/srv/secret/path.sqlite: SELECT text FROM passages"))
    assert str(mapped) == INTERNAL_ERROR_MESSAGE


def test_internal_fault_reaches_the_client_masked(built_index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    service = SearchService(built_index, ceiling=Classification.PUBLIC, embedder_factory=HashEmbedder)

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk I/O error at /srv/data/evidence.sqlite during SELECT text FROM passages")

    monkeypatch.setattr(service, "search", boom)

    async def body() -> None:
        async with Client(build_app(service)) as client:
            result = await client.call_tool("search_documents", {"query": "leave"}, raise_on_error=False)
            assert result.is_error
            text = result.content[0].text
            assert text == INTERNAL_ERROR_MESSAGE
            assert "/srv" not in text and "SELECT" not in text

    asyncio.run(body())


# -- no client-visible message names a server path -------------------------------------------


@dataclass
class Scenario:
    """Tool calls over one app; the last one fails, the earlier ones set it up."""

    app: FastMCP
    calls: list[tuple[str, dict[str, Any]]]
    #: Paths the settings hold, which the client must never see.
    paths: list[Path] = field(default_factory=list)


class Parts:
    """Services built from settings as the CLI builds them, closed after the test."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self._closers: list[Callable[[], None]] = []

    def documents(self, db: Path, embedder_factory: Callable[[], Embedder] = HashEmbedder) -> SearchService:
        settings = Settings(db=db)
        service = composition.search_service(
            settings, db=settings.db, ceiling=settings.ceiling_level, embedder_factory=embedder_factory
        )
        self._closers.append(service.reader.close)
        return service

    def statistics(
        self,
        respond: Callable[[httpx.Request], httpx.Response],
        *,
        providers_toml: str | None = None,
        cache: Path | None = None,
        max_bytes_catalogue: int = 64 * 1024 * 1024,
    ) -> SdmxService:
        providers = None
        if providers_toml is not None:
            providers = self.tmp / "providers.toml"
            providers.write_text(providers_toml, encoding="utf-8")
        settings = Settings(
            db=self.tmp / "no-index.sqlite",
            sdmx_cache_path=cache or self.tmp / "sdmx-cache.sqlite",
            sdmx_providers=providers,
            sdmx_max_retries=0,
            sdmx_max_bytes_catalogue=max_bytes_catalogue,
        )
        service = SdmxService.from_settings(settings, transport=httpx.MockTransport(respond), sleep=lambda _: None)
        self._closers.append(service.close)
        return service

    def statistics_app(self, service: SdmxService) -> FastMCP:
        return build_app(self.documents(self.tmp / "no-index.sqlite"), service)

    def close(self) -> None:
        for close in self._closers:
            close()


Respond = Callable[[httpx.Request], httpx.Response]


def _answer(status: int, body: bytes = b"", content_type: str = STRUCTURE_CT) -> Respond:
    return lambda _request: httpx.Response(status, headers={"content-type": content_type}, content=body)


def _unreachable(request: httpx.Request) -> httpx.Response:
    # An OSError's text, path included, as a transport failure can carry it.
    raise httpx.ConnectError("[Errno 2] No such file or directory: '/var/run/proxy/socket'", request=request)


def _caller_without_clearance(parts: Parts, built_index: Path) -> Scenario:
    # A credential that maps to no clearance (a JWT without a mapped role) over HTTP.
    service = parts.documents(built_index)
    calls = Calls(LevelServices.single(service), anonymous=Caller(name="no-role", clearance=None, via="network"))
    return Scenario(build_app(calls), [("search_documents", {"query": "leave"})], [built_index])


def _index_missing(parts: Parts, built_index: Path) -> Scenario:
    db = parts.tmp / "absent" / "evidence.sqlite"
    return Scenario(build_app(parts.documents(db)), [("search_documents", {"query": "leave"})], [db])


def _index_is_a_folder(parts: Parts, built_index: Path) -> Scenario:
    db = parts.tmp / "evidence.sqlite"
    db.mkdir()
    return Scenario(build_app(parts.documents(db)), [("list_sources", {})], [db])


def _index_not_sqlite(parts: Parts, built_index: Path) -> Scenario:
    db = parts.tmp / "evidence.sqlite"
    db.write_bytes(b"this is not an SQLite database\n" * 64)
    return Scenario(build_app(parts.documents(db)), [("search_documents", {"query": "leave"})], [db])


def _index_of_another_version(parts: Parts, built_index: Path) -> Scenario:
    conn = apsw.Connection(str(built_index))
    conn.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    conn.close()
    return Scenario(
        build_app(parts.documents(built_index)), [("read_passage", {"citation_id": "any#1"})], [built_index]
    )


def _index_under_a_file(parts: Parts, built_index: Path) -> Scenario:
    # os.stat raises NotADirectoryError (path in its text): read as "no index there".
    (parts.tmp / "file").write_text("x")
    db = parts.tmp / "file" / "evidence.sqlite"
    return Scenario(build_app(parts.documents(db)), [("search_documents", {"query": "leave"})], [db])


def _passage_not_found(parts: Parts, built_index: Path) -> Scenario:
    app = build_app(parts.documents(built_index))
    return Scenario(app, [("read_passage", {"citation_id": "no-such-document#3"})], [built_index])


def _statistics_call(respond: Respond, tool: str = "search_datasets", **arguments: Any) -> Callable[..., Scenario]:
    def build(parts: Parts, built_index: Path) -> Scenario:
        args = arguments or ({"query": "gdp"} if tool == "search_datasets" else {"dataset": G20})
        return Scenario(parts.statistics_app(parts.statistics(respond)), [(tool, args)])

    return build


def _budget_spent(parts: Parts, built_index: Path) -> Scenario:
    service = parts.statistics(_answer(503), providers_toml="[providers.OECD]\nstructure_per_hour = 1\n")
    call = ("search_datasets", {"query": "gdp"})
    return Scenario(parts.statistics_app(service), [call, call], [parts.tmp / "providers.toml"])


def _ledger_damaged(parts: Parts, built_index: Path) -> Scenario:
    cache = parts.tmp / "sdmx-cache.sqlite"
    cache.write_bytes(b"not a cache\n" * 64)
    app = parts.statistics_app(parts.statistics(_answer(200), cache=cache))
    return Scenario(app, [("search_datasets", {"query": "gdp"})], [cache])


def _body_over_the_cap(parts: Parts, built_index: Path) -> Scenario:
    app = parts.statistics_app(parts.statistics(_answer(200, b"<x/>" * 1000), max_bytes_catalogue=256))
    return Scenario(app, [("search_datasets", {"query": "gdp"})])


def _providers_file_unreadable(parts: Parts, built_index: Path) -> Scenario:
    # The server reads this file at start-up (a mistake stops it there); were its
    # ConfigError raised during a call, the text names the file, so it must arrive masked.
    folder = parts.tmp / "providers.toml"
    folder.mkdir()
    service = parts.statistics(_answer(200))

    def read_providers(*args: object, **kwargs: object) -> None:
        load_providers(folder)

    service.search_datasets = read_providers  # type: ignore[method-assign, assignment]
    return Scenario(parts.statistics_app(service), [("search_datasets", {"query": "gdp"})], [folder])


#: name -> (the exception the last call raises inside the server, how to set it up).
SCENARIOS: dict[str, tuple[type[BaseException], Callable[[Parts, Path], Scenario]]] = {
    "index missing": (errors.IndexMissingError, _index_missing),
    "index path is a folder": (errors.IndexMissingError, _index_is_a_folder),
    "index file is not SQLite": (errors.IndexCorruptError, _index_not_sqlite),
    "index of another schema version": (errors.IndexCorruptError, _index_of_another_version),
    "index path under a regular file": (errors.IndexMissingError, _index_under_a_file),
    "passage not found": (errors.NotFoundError, _passage_not_found),
    "caller without clearance": (errors.NotClearedError, _caller_without_clearance),
    "unknown provider": (
        errors.InvalidRequestError,
        _statistics_call(_answer(200), "search_datasets", query="gdp", provider="NOPE"),
    ),
    "provider rejects the request": (
        errors.InvalidRequestError,
        _statistics_call(_answer(400, b"<error>/srv/app/handler.py</error>"), "describe_dataset"),
    ),
    "provider has no such dataset": (
        errors.NotFoundError,
        _statistics_call(_answer(404, b"/var/www/not-found.html", "text/plain"), "describe_dataset"),
    ),
    "provider unreachable": (errors.ProviderUnavailableError, _statistics_call(_unreachable)),
    "provider failing": (
        errors.ProviderUnavailableError,
        _statistics_call(_answer(503, b"/opt/upstream/trace.log", "text/plain")),
    ),
    "request budget spent": (errors.RateLimitedError, _budget_spent),
    "budget ledger damaged": (errors.RateLedgerError, _ledger_damaged),
    "provider refuses the size": (errors.ResponseTooLargeError, _statistics_call(_answer(413), "describe_dataset")),
    "body over the byte cap": (errors.ResponseTooLargeError, _body_over_the_cap),
    "body not XML": (errors.UnusableResponseError, _statistics_call(_answer(200, b"<not xml /usr/lib/x"))),
    "providers file unreadable": (errors.ConfigError, _providers_file_unreadable),
}
#: Caller-facing classes no tool call raises: only their subclasses are raised, the search
#: turns an EmbedderError into ``search_mode_reason`` (checked below), and nothing in the
#: package raises ModelMismatchError.
NOT_RAISED_IN_A_TOOL_CALL = {
    errors.IndexUnavailableError,
    errors.StatisticsError,
    errors.EmbedderError,
    errors.ModelMismatchError,
}


@pytest.fixture
def parts(tmp_path: Path) -> Iterator[Parts]:
    made = Parts(tmp_path)
    yield made
    made.close()


@pytest.fixture
def mapped(monkeypatch: pytest.MonkeyPatch) -> list[BaseException]:
    """Every exception the tool layer maps, in order (the client sees only the result)."""
    seen: list[BaseException] = []
    real = mcp_errors.to_tool_error

    def recording(exc: BaseException) -> ToolError:
        seen.append(exc)
        return real(exc)

    monkeypatch.setattr(mcp_errors, "to_tool_error", recording)
    return seen


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_no_client_visible_error_names_a_server_path(
    name: str, parts: Parts, built_index: Path, mapped: list[BaseException]
) -> None:
    expected, build = SCENARIOS[name]
    scenario = build(parts, built_index)

    async def body() -> list[str]:
        texts: list[str] = []
        async with Client(scenario.app) as client:
            for tool, arguments in scenario.calls:
                result = await client.call_tool(tool, arguments, raise_on_error=False)
                assert result.is_error
                texts.append(result.content[0].text)
        return texts

    texts = asyncio.run(body())
    raised = mapped[-1]
    assert type(raised) is expected, repr(raised)
    for text in texts:
        assert_pathless(text, parts.tmp, *scenario.paths)
    if _caller_facing(expected):
        assert texts[-1] == str(raised) != INTERNAL_ERROR_MESSAGE
    else:
        assert texts[-1] == INTERNAL_ERROR_MESSAGE


def test_every_caller_facing_error_a_tool_call_raises_is_checked_for_paths() -> None:
    checked = {expected for expected, _ in SCENARIOS.values()}
    raised = {cls for cls in _all_error_classes() if _caller_facing(cls)} - NOT_RAISED_IN_A_TOOL_CALL
    assert raised <= checked, raised - checked


def _unreachable_endpoint() -> Embedder:
    return OpenAIEmbedder("http://127.0.0.1:9", "m", retries=0, transport=httpx.MockTransport(_unreachable))


@pytest.mark.parametrize("case", ["model file missing", "model file damaged", "endpoint unreachable"])
def test_embedder_errors_reach_the_client_without_paths(case: str, parts: Parts, built_index: Path) -> None:
    model = parts.tmp / "model.onnx"
    if case == "model file damaged":
        model.write_bytes(b"not a model")
    factories: dict[str, Callable[[], Embedder]] = {
        "model file missing": lambda: MiniLMEmbedder(model),
        "model file damaged": lambda: MiniLMEmbedder(model),
        "endpoint unreachable": _unreachable_endpoint,
    }
    with pytest.raises(errors.EmbedderError) as raised:
        _ = factories[case]().identity
    assert str(to_tool_error(raised.value)) == str(raised.value)
    service = parts.documents(built_index, factories[case])

    async def body() -> tuple[Any, Any]:
        async with Client(build_app(service)) as client:
            found = await client.call_tool("search_documents", {"query": "annual leave", "mode": "semantic"})
            status = await client.call_tool("index_status", {})
            return found.structured_content, status.structured_content

    found, status = asyncio.run(body())
    # The search falls back to keywords and says why, in the EmbedderError's own words.
    assert found["search_mode"] == "keyword"
    reason = found["search_mode_reason"]
    assert str(raised.value) in reason
    assert_pathless(reason, parts.tmp, model, built_index)
    assert_pathless(status["semantic_search_reason"], parts.tmp, model, built_index)
