"""SDMX-JSON data parsed in a forked child: the same table, the same errors, and limits of its own."""

from __future__ import annotations

import os
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import pytest

from governed_evidence.errors import ResponseTooLargeError, UnusableResponseError
from governed_evidence.sdmx import isolated
from governed_evidence.sdmx.data import parse_data
from governed_evidence.sdmx.isolated import run_isolated
from tests.sdmx.conftest import ServiceFactory
from tests.sdmx.helpers import FakeProviders, shared

PART2 = "OECD/sdmx-test-data/OECD/data-PART2-all-all.json"


def _pid(_: int) -> int:
    return os.getpid()


def _table(body: bytes) -> object:
    return parse_data("json", body, keep=10, max_rows=100)


def _grow(_: int) -> bytes:
    return b"x" * (isolated.MAX_CHILD_BYTES * 2)


def _fails(kind: str) -> None:
    if kind == "statistics":
        raise UnusableResponseError("the provider's JSON is not an SDMX-JSON message")
    raise KeyError("a bug, described rather than carried")


def _texts(count: int) -> list[str]:
    return [f"{i:07d} " + "x" * 200 for i in range(count)]


def test_the_answer_is_unpickled_as_it_arrives_not_held_whole_first() -> None:
    # 10 MB pickled: read whole into bytes before unpickling, it sat beside the list it
    # made at the peak; read from the pipe as it comes, only the unpickler's frames do.
    tracemalloc.start()
    try:
        texts = run_isolated(_texts, 50_000)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert texts == _texts(50_000)
    assert peak - held < 3_000_000


def test_the_parse_runs_in_another_process_and_gives_the_same_table() -> None:
    assert run_isolated(_pid, 0) != os.getpid()
    body = shared(PART2)
    assert run_isolated(_table, body) == parse_data("json", body, keep=10, max_rows=100)


def test_errors_come_back_as_statistics_errors() -> None:
    with pytest.raises(UnusableResponseError, match="not an SDMX-JSON message"):
        run_isolated(_fails, "statistics")
    with pytest.raises(UnusableResponseError, match=r"could not be read \(KeyError\)"):
        run_isolated(_fails, "bug")


def test_a_child_past_its_memory_limit_is_refused_as_too_large() -> None:
    with pytest.raises(ResponseTooLargeError, match="more memory or processor time"):
        run_isolated(_grow, 0)


def test_a_json_data_answer_is_parsed_in_the_child(
    make_service: ServiceFactory, fake: FakeProviders, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids: list[int] = []
    fork = os.fork

    def counted() -> int:
        pid = fork()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(isolated.os, "fork", counted)
    fake.add("/data/", shared(PART2), "application/json")
    data = make_service().get_data("OECD,PART2,1.0", "all", max_rows=3)
    assert (data.total_rows, data.returned_rows) == (7, 3)
    assert len(pids) == 1


def _stuck_once(flag: str) -> Callable[[int, Callable[..., Any], tuple[Any, ...]], NoReturn]:
    """A child's life that never starts (as a fork stuck in Python's own work does) the first time."""
    real = isolated._child

    def child(write_fd: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> NoReturn:
        if not os.path.exists(flag):
            with open(flag, "w"):
                pass
            time.sleep(60)
            os._exit(0)
        real(write_fd, fn, args)

    return child


def test_a_child_that_never_starts_is_replaced(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # A fork taken while another thread holds a native lock can hang before the child runs
    # any of this module's code; the parse is not lost to the wall-clock backstop for it.
    monkeypatch.setattr(isolated, "START_SECONDS", 0.5)
    monkeypatch.setattr(isolated, "_child", _stuck_once(str(tmp_path / "stuck")))
    started = time.monotonic()
    assert run_isolated(_table, shared(PART2)).total_rows == 7  # type: ignore[attr-defined]
    assert (tmp_path / "stuck").exists()
    assert time.monotonic() - started < isolated.MAX_CHILD_SECONDS


def test_children_that_never_start_are_refused_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    def never(write_fd: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> NoReturn:
        time.sleep(60)
        os._exit(0)

    monkeypatch.setattr(isolated, "START_SECONDS", 0.2)
    monkeypatch.setattr(isolated, "_child", never)
    with pytest.raises(UnusableResponseError, match="parsing process did not start"):
        run_isolated(_pid, 0)
