"""The served process leaves its start-up heap out of garbage collection (governed_evidence/_heap.py)."""

from __future__ import annotations

import gc
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from governed_evidence import cli
from governed_evidence._heap import freeze_startup_heap
from governed_evidence.errors import ConfigError


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_what_exists_is_frozen_and_what_comes_after_is_still_collected(unfrozen: None) -> None:
    before = _Cycle()
    frozen = freeze_startup_heap()
    assert frozen >= 1 and frozen == gc.get_freeze_count()
    after = _Cycle()
    gone, kept = weakref.ref(after), weakref.ref(before)
    del after, before
    gc.collect()
    assert gone() is None  # a cycle made after the freeze is collected as before
    assert kept() is not None  # one from before is left alone


def test_serve_freezes_the_heap_once_the_app_is_built_and_before_it_runs(
    unfrozen: None, built_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, int | bool] = {}

    class App:
        def run(self, **_kwargs: Any) -> None:
            seen["frozen_at_run"] = gc.get_freeze_count()
            seen["collecting_at_run"] = gc.isenabled()
            # What fastmcp imports on its first request was imported before the freeze.
            seen["state_store_imported"] = "key_value.aio.stores.memory" in sys.modules

    def build_app(*_args: Any, **_kwargs: Any) -> App:
        seen["frozen_at_build"] = gc.get_freeze_count()
        seen["collecting_at_build"] = gc.isenabled()
        return App()

    monkeypatch.setattr("governed_evidence.mcp.build_app", build_app)
    assert cli.main(["serve", "--db", str(built_index)]) == 0
    assert seen["frozen_at_build"] == 0
    # The collector is paused while the server starts and runs again once the heap is frozen.
    assert seen["collecting_at_build"] is False
    assert seen["collecting_at_run"] is True
    assert seen["state_store_imported"] is True
    assert seen["frozen_at_run"] > 10_000  # the imports of fastmcp, the MCP SDK and pydantic
    assert gc.isenabled()


def test_a_serve_that_fails_while_starting_collects_again(
    unfrozen: None, built_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def build_app(*_args: Any, **_kwargs: Any) -> None:
        assert not gc.isenabled()
        raise ConfigError("refused while starting")

    monkeypatch.setattr("governed_evidence.mcp.build_app", build_app)
    assert cli.main(["serve", "--db", str(built_index)]) == 1
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
