"""`serve` answers its first search without loading what that answer does not need.

Imports are most of the time from process start to the first answer, so the serve path
leaves out the ingest parsers, the evaluation client, the statistics HTTP stack (made on
the first statistics call) and fastmcp's docstring parser. These tests check which modules
are loaded, not how long anything takes (benchmarks/startup.py measures that).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from benchmarks.startup import rpc_request
from governed_evidence.config import Settings
from governed_evidence.embeddings import factory
from governed_evidence.embeddings.factory import BackgroundEmbedder
from governed_evidence.errors import ConfigError, EmbedderError
from governed_evidence.mcp import build_app
from governed_evidence.sdmx.deferred import DeferredSdmxService
from governed_evidence.sdmx.service import SdmxService
from governed_evidence.search.service import SearchService
from tests.helpers import HashEmbedder

#: Modules the first answer does not need; a module listed here and found loaded fails.
NOT_AT_START = (
    "httpx",
    "governed_evidence.sdmx.service",
    "governed_evidence.sdmx.client",
    "governed_evidence.ingest",
    "governed_evidence.evaluation.runner",
    "governed_evidence.evaluation.mcp_client",
    "pypdf",
    "docx2python",
    "markdown_it",
    "fastmcp.client",
    "griffe",
    # structlog's console renderer's rich tracebacks (logs here are JSON; governed_evidence/logging.py).
    "rich.traceback",
    "pygments",
    # FastMCP's session-state store: the app holds that state itself (governed_evidence/mcp/state.py).
    "key_value",
    "beartype",
)

# Runs the real `serve` command, then records what was loaded once the client hangs up.
SERVE = textwrap.dedent(
    """
    import json, sys
    from governed_evidence.cli import main
    code = main(["serve", "--db", sys.argv[1]])
    with open(sys.argv[2], "w", encoding="utf-8") as fh:
        json.dump(sorted(sys.modules), fh)
    sys.exit(code)
    """
)

# Builds the app as `serve` does (in a process that loaded the CLI first), then asks for the
# statistics status (which makes the service).
BUILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import governed_evidence.cli
    from governed_evidence.config import Settings
    from governed_evidence.mcp import build_app
    from governed_evidence.sdmx.deferred import DeferredSdmxService
    from governed_evidence.search.service import SearchService

    heavy = json.loads(sys.argv[2])
    db = Path(sys.argv[1])
    settings = Settings(db=db)
    statistics = DeferredSdmxService(settings, db=db)
    build_app(SearchService(db, ceiling=settings.ceiling_level), statistics)
    built = [m for m in heavy if m in sys.modules]
    created = statistics.created
    statistics.status()
    print(json.dumps({"built": built, "created": created, "after_status": [m for m in heavy if m in sys.modules]}))
    """
)


def _loaded(modules: list[str]) -> list[str]:
    return [m for m in NOT_AT_START if m in modules]


def test_serve_answers_a_search_without_the_heavy_modules(sample_index: Path, tmp_path: Path) -> None:
    report = tmp_path / "modules.json"
    env = {**os.environ, "GOVERNED_EVIDENCE_CEILING": "internal", "GOVERNED_EVIDENCE_LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(sample_index), str(report)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        rpc_request(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        rpc_request(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"name": "search_documents", "arguments": {"query": "time off when a relative dies"}}
        reply = rpc_request(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    assert reply is not None and not reply["result"].get("isError"), reply
    # The model was loaded (in the background) and used: meaning search is not given up.
    assert reply["result"]["structuredContent"]["search_mode"] == "hybrid"
    modules = json.loads(report.read_text(encoding="utf-8"))
    assert "onnxruntime" in modules and "fastmcp" in modules
    assert _loaded(modules) == []


def test_statistics_stack_loads_on_first_use(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", BUILD, str(tmp_path / "absent.sqlite"), json.dumps(NOT_AT_START)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["built"] == [] and result["created"] is False
    assert {"httpx", "governed_evidence.sdmx.service"} <= set(result["after_status"])


def test_deferred_statistics_serve_the_tools(tmp_path: Path) -> None:
    settings = Settings(db=tmp_path / "absent.sqlite")
    statistics = DeferredSdmxService(settings, db=settings.db)
    app = build_app(SearchService(settings.db, ceiling=settings.ceiling_level), statistics)

    async def body() -> Any:
        async with Client(app) as client:
            return await client.call_tool(
                "search_datasets", {"query": "prices", "provider": "NOPE"}, raise_on_error=False
            )

    result = asyncio.run(body())
    # Answered by the service, made on this first call: the provider is not configured.
    assert result.is_error and "NOPE" in result.content[0].text
    assert statistics.created
    first = statistics.get()
    assert isinstance(first, SdmxService) and statistics.get() is first
    statistics.close()


def test_a_bad_providers_file_still_stops_the_start(tmp_path: Path) -> None:
    bad = tmp_path / "providers.toml"
    bad.write_text("[providers.X]\nbase_url = 42\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="SDMX provider"):
        DeferredSdmxService(Settings(sdmx_providers=bad))


def test_background_embedder_hands_over_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    model = HashEmbedder()
    monkeypatch.setattr(factory, "make_embedder", lambda settings: model)
    loading = BackgroundEmbedder(Settings())
    assert loading.result() is model
    loading.join()


def test_background_embedder_failure_surfaces_on_the_callers_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def broken(settings: Settings) -> HashEmbedder:
        import threading

        calls.append(threading.current_thread().name)
        raise EmbedderError("the embedding model file failed its checksum; reinstall it")

    monkeypatch.setattr(factory, "make_embedder", broken)
    loading = BackgroundEmbedder(Settings())
    loading.join()
    with pytest.raises(EmbedderError, match="checksum"):
        loading.result()
    assert calls == ["embedder-load", "MainThread"]


# Runs a command-line command that serves nothing, then records what was loaded.
COMMAND = textwrap.dedent(
    """
    import json, sys
    from governed_evidence.cli import main
    code = main(json.loads(sys.argv[1]))
    with open(sys.argv[2], "w", encoding="utf-8") as fh:
        json.dump(sorted(sys.modules), fh)
    """
)

#: The MCP server machinery: only `serve` (and the eval client) needs it.
SERVER_MODULES = ("fastmcp", "mcp", "governed_evidence.mcp.app", "starlette", "uvicorn")


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--db", "{missing}"],
        ["status", "--db", "{index}", "--json"],
        ["search", "vacation policy", "--db", "{index}", "--mode", "keyword", "--json"],
    ],
    ids=["status without an index", "status", "search"],
)
def test_commands_that_serve_nothing_load_no_mcp_server(built_index: Path, tmp_path: Path, argv: list[str]) -> None:
    """`status` imported the MCP package for its report model, and with it FastMCP: most of
    the command's 3.3 s. Only `serve` needs the server."""
    filled = [a.format(missing=tmp_path / "none.sqlite", index=built_index) for a in argv]
    report = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", COMMAND, json.dumps(filled), str(report)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GOVERNED_EVIDENCE_LOG_LEVEL": "WARNING"},
        cwd=Path(__file__).resolve().parents[2],
    )
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stdout, done.stderr[-2000:]
    loaded = set(json.loads(report.read_text(encoding="utf-8")))
    if argv[0] == "status":
        assert "governed_evidence.mcp.status" in loaded  # the report model is still where it was
    assert not [m for m in SERVER_MODULES if m in loaded]


# What a command's process has, once the CLI is imported: structlog loaded, rich still importable.
PROCESS = textwrap.dedent(
    """
    import json, sys
    import governed_evidence.cli
    import structlog.dev
    hidden = structlog.dev.rich is None and "rich.traceback" not in sys.modules
    import rich.console  # FastMCP logs with rich: it must still import
    print(json.dumps({"rich_hidden": hidden, "rich": "rich.console" in sys.modules}))
    """
)


def _process() -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", PROCESS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_the_commands_import_structlog_without_rich_tracebacks_and_keep_rich_importable() -> None:
    result = _process()
    assert result["rich_hidden"] is True and result["rich"] is True
