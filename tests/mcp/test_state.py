"""The app's session state (governed_evidence/mcp/state.py): FastMCP's per-session state in a
dict, with the behaviour FastMCP relies on from the store it replaces. That a served tool call
imports neither py-key-value nor beartype is checked in test_startup.py, in a fresh process."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client, FastMCP
from fastmcp import Context as ToolContext
from fastmcp.server.server import StateValue

from governed_evidence.config import Classification
from governed_evidence.mcp import build_app
from governed_evidence.mcp.app import _App
from governed_evidence.mcp.state import SessionState
from governed_evidence.search.service import SearchService
from tests.helpers import Clock


def test_values_are_copied_in_and_out() -> None:
    store = SessionState(StateValue)
    rules = [{"enabled": False, "names": ["list_sources"]}]

    async def body() -> tuple[Any, Any]:
        await store.put("s1:rules", StateValue(value=rules))
        rules[0]["enabled"] = True  # the caller's object changes after it was stored
        first = await store.get("s1:rules")
        assert first is not None
        first.value.append({"enabled": True})  # and so does what a reader got
        return first, await store.get("s1:rules")

    first, second = asyncio.run(body())
    assert second is not None and second is not first
    assert second.value == [{"enabled": False, "names": ["list_sources"]}]


def test_collections_keep_keys_apart_and_a_missing_key_gives_the_default() -> None:
    store = SessionState(StateValue)

    async def body() -> list[Any]:
        await store.put("k", StateValue(value=1))
        await store.put("k", StateValue(value=2), collection="other")
        fallback = StateValue(value="none")
        return [
            await store.get("k"),
            await store.get("k", collection="other"),
            await store.get("absent"),
            await store.get("absent", default=fallback),
        ]

    plain, other, absent, fallback = asyncio.run(body())
    assert (plain.value, other.value, absent, fallback.value) == (1, 2, None, "none")


def test_an_entry_past_its_lifetime_is_gone() -> None:
    clock = Clock()
    store = SessionState(StateValue, clock=clock)

    async def read() -> Any:
        return await store.get("k")

    asyncio.run(store.put("k", StateValue(value="x"), ttl=60))
    asyncio.run(store.put("forever", StateValue(value="y")))
    clock.now += 59.9
    assert asyncio.run(read()).value == "x"
    clock.now += 0.1
    assert asyncio.run(read()) is None
    assert asyncio.run(store.delete("k")) is False
    clock.now += 10**9
    assert asyncio.run(store.get("forever")).value == "y"  # type: ignore[union-attr]


def test_delete_says_whether_there_was_an_entry() -> None:
    store = SessionState(StateValue)
    asyncio.run(store.put("k", StateValue(value=1)))
    assert asyncio.run(store.delete("k")) is True
    assert asyncio.run(store.delete("k")) is False
    assert asyncio.run(store.get("k")) is None


def test_a_value_that_is_not_json_fails_as_fastmcp_expects() -> None:
    store = SessionState(StateValue)
    # FastMCP turns a serialisation ValueError into its own "not serializable" TypeError.
    with pytest.raises(ValueError, match=r"(?i)serializ"):
        asyncio.run(store.put("k", StateValue(value=object())))


def _session_behaviour(app: FastMCP) -> dict[str, Any]:
    """What a client observes of the session state FastMCP keeps: a context's state across
    calls, and per-session tool visibility, in one session and then in another."""

    @app.tool
    def list_things() -> str:
        return "things"

    @app.tool
    async def remember(value: str, ctx: ToolContext) -> str:
        await ctx.set_state("remembered", value)
        return str(await ctx.get_state("remembered"))

    @app.tool
    async def recall(ctx: ToolContext) -> str:
        return str(await ctx.get_state("remembered"))

    @app.tool
    async def forget(ctx: ToolContext) -> str:
        await ctx.delete_state("remembered")
        return str(await ctx.get_state("remembered"))

    @app.tool
    async def hide_things(ctx: ToolContext) -> str:
        await ctx.disable_components(names={"list_things"})
        return "hidden"

    async def tools(client: Client[Any]) -> list[str]:
        return sorted(t.name for t in await client.list_tools())

    async def body() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with Client(app) as client:
            seen["within_a_call"] = (await client.call_tool("remember", {"value": "kept"})).data
            seen["next_call"] = (await client.call_tool("recall", {})).data
            seen["forgotten"] = (await client.call_tool("forget", {})).data
            seen["before_hiding"] = await tools(client)
            await client.call_tool("hide_things", {})
            seen["after_hiding"] = await tools(client)
        async with Client(app) as other:
            seen["another_session"] = await tools(other)
        return seen

    return asyncio.run(body())


def test_the_app_behaves_as_fastmcp_with_its_own_store() -> None:
    ours = _App("governed-evidence")
    assert isinstance(ours._state_store, SessionState)
    theirs = FastMCP("governed-evidence")
    assert not isinstance(theirs._state_store, SessionState)
    observed = _session_behaviour(ours)
    assert observed == _session_behaviour(theirs)
    # Not vacuous: the state lived through a call and the rule hid the tool.
    assert observed["within_a_call"] == "kept" and "list_things" not in observed["after_hiding"]


def test_build_app_keeps_its_session_state_in_the_dict(tmp_path: Path) -> None:
    app = build_app(SearchService(tmp_path / "absent.sqlite", ceiling=Classification.INTERNAL))
    assert isinstance(app, _App) and isinstance(app._state_store, SessionState)
