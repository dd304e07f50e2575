"""Error mapping: governed errors keep their message, anything else is masked."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError

from governed_evidence import errors
from governed_evidence.config import Classification
from governed_evidence.mcp import build_app
from governed_evidence.mcp.errors import INTERNAL_ERROR_MESSAGE, to_tool_error
from governed_evidence.search.service import SearchService
from tests.helpers import HashEmbedder


def _all_error_classes() -> list[type[errors.GovernedEvidenceError]]:
    return [getattr(errors, name) for name in errors.__all__]


@pytest.mark.parametrize("cls", _all_error_classes())
def test_every_package_error_maps_to_a_tool_error_with_its_message(cls: type[Exception]) -> None:
    mapped = to_tool_error(cls("clear message"))
    assert isinstance(mapped, ToolError)
    assert str(mapped) == "clear message"


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
