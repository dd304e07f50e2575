"""SDMX-JSON data parsed in a forked child: the same table, the same errors, and limits of its own."""

from __future__ import annotations

import os

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
