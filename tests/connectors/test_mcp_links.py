"""Through the MCP tools: a mirrored document is cited with its source link, and neither the
tools' answers nor the audit trail carry the client secret."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fastmcp import Client

from governed_evidence.config import Classification, Settings
from governed_evidence.connectors.command import refresh
from governed_evidence.mcp import build_app
from governed_evidence.mcp.audit import AuditSink
from governed_evidence.mcp.calls import Calls, stdio_caller
from governed_evidence.search.levels import LevelServices
from governed_evidence.search.service import SearchService
from tests.connectors.conftest import INTERNAL_LABEL, PUBLIC_LABEL, SECRET, config_for, text
from tests.connectors.graph_server import GraphDrive, Server
from tests.helpers import HashEmbedder


@pytest.fixture(autouse=True)
def hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    def make(settings: Settings, name: str | None = None) -> HashEmbedder:
        return HashEmbedder()

    monkeypatch.setattr("governed_evidence.embeddings.factory.make_embedder", make)
    monkeypatch.setattr("governed_evidence.embeddings.factory.make_ingest_embedder", make)


def test_tools_cite_the_source_link_and_the_audit_trail_holds_no_secret(
    tmp_path: Path, drive: tuple[GraphDrive, Server]
) -> None:
    graph, server = drive
    graph.add("f", "Travel", "root", "folder")
    graph.add(
        "d1", "trains.md", "f", "file", text("Trains", "standard class rail fares are reimbursed"), [PUBLIC_LABEL]
    )
    graph.add("d2", "hotels.md", "f", "file", text("Hotels", "hotel nightly caps for staff"), [INTERNAL_LABEL])
    config = config_for(tmp_path, server)
    assert config.index is not None
    refresh(config, Settings(), db=config.index, ceiling=Classification.RESTRICTED)
    service = SearchService(config.index, ceiling=Classification.PUBLIC, embedder_factory=HashEmbedder)
    audit_path = tmp_path / "audit.jsonl"
    with open(audit_path, "a", encoding="utf-8") as stream:
        calls = Calls(
            LevelServices.single(service),
            anonymous=stdio_caller(Classification.PUBLIC),
            audit=AuditSink(stream, record_queries=True),
        )

        async def session() -> list[dict[str, object]]:
            async with Client(build_app(calls)) as client:
                found = await client.call_tool(
                    "search_documents", {"query": "rail fares reimbursed", "mode": "keyword", "confidence": "normal"}
                )
                citation = found.structured_content["results"][0]["citation_id"]  # type: ignore[index]
                read = await client.call_tool("read_passage", {"citation_id": citation})
                listed = await client.call_tool("list_sources", {})
                return [found.structured_content, read.structured_content, listed.structured_content]  # type: ignore[list-item]

        found, read, listed = asyncio.run(session())
    service.close()
    link = "https://contoso.sharepoint.com/sites/policies/Shared%20Documents/Travel/trains.md"
    assert found["results"][0]["source_link"] == link  # type: ignore[index]
    assert read["passage"]["source_link"] == link  # type: ignore[index]
    # The public caller's listing: the public file with its link, and nothing of the internal one.
    assert [(d["document"], d["source_link"]) for d in listed["documents"]] == [  # type: ignore[index,attr-defined]
        ("policies/Travel/trains.md", link)
    ]
    assert "hotels" not in json.dumps([found, read, listed])
    trail = audit_path.read_text(encoding="utf-8")
    assert trail.count("\n") == 3 and SECRET not in trail and SECRET not in json.dumps([found, read, listed])
