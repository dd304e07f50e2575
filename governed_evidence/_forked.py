"""A function run in a forked child, its answer read back through a pipe: what the bounded parsers share.

Two parts of the package run untrusted input through a parser in a child process: ingest's
document loaders (:mod:`governed_evidence.ingest.loaders.bounded`) and the SDMX-JSON readers
(:mod:`governed_evidence.sdmx.isolated`). Each sets its own limits in the child and speaks
its own errors; what they share is here: forking with the parent's buffered output written
first, the child's address space read from ``/proc``, the answer written whole, and the
answer read back under a wall-clock deadline past which the child is killed, either whole
(:func:`read_answer`) or as a stream its reader takes as it comes (:class:`AnswerStream`).
"""

from __future__ import annotations

import contextlib
import io
import os
import selectors
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

__all__ = ["AnswerStream", "Outcome", "address_space", "fork", "read_answer", "write_all"]


def address_space() -> int | None:
    """This process's virtual size in bytes (Linux), or None when it cannot be read.

    Raw ``os`` calls: a child's watchdog calls this, possibly with its memory exhausted.
    """
    try:
        fd = os.open("/proc/self/statm", os.O_RDONLY)
        try:
            raw = os.read(fd, 64)
        finally:
            os.close(fd)
        return int(raw.split(maxsplit=1)[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def write_all(fd: int, data: bytes) -> None:
    """``data`` written whole to ``fd`` (a pipe takes it a buffer at a time)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def fork(child: Callable[[int], NoReturn]) -> tuple[int, int]:
    """A child running ``child(write_fd)``; here, its pid and the pipe's end to read its answer from.

    ``child`` must leave with ``os._exit``: it never returns into the parent's frames.
    """
    with contextlib.suppress(Exception):
        # Buffered output would otherwise be written once by each process.
        sys.stdout.flush()
        sys.stderr.flush()
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except BaseException:
        os.close(read_fd)
        os.close(write_fd)
        raise
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        try:
            os.close(read_fd)
            child(write_fd)
        finally:
            os._exit(1)
    os.close(write_fd)
    return pid, read_fd


@dataclass
class Outcome:
    """What a child wrote, whether it closed the pipe (``finished``), and how it ended."""

    answer: bytearray
    finished: bool
    #: ``os.waitpid``'s status; None when the child was reaped elsewhere (SIGCHLD ignored).
    status: int | None


class AnswerStream(io.RawIOBase):
    """What the child writes, read as it comes, until it closes the pipe or a deadline passes.

    A reader (``pickle.load``) may take the answer from here as it arrives, so the answer
    is never held whole as bytes beside what is made of it. Past a deadline the stream
    ends, as if cut off. A child that has written nothing within ``start_seconds``, or not
    finished within ``wall_seconds``, or that has not finished when the stream is closed,
    is killed; closing reaps it and closes ``read_fd``.
    """

    def __init__(self, pid: int, read_fd: int, wall_seconds: float, *, start_seconds: float | None = None) -> None:
        super().__init__()
        self.pid = pid
        self.read_fd = read_fd
        now = time.monotonic()
        self.deadline = now + wall_seconds
        self.start_by = self.deadline if start_seconds is None else min(self.deadline, now + start_seconds)
        self.started = False
        #: The child closed the pipe.
        self.finished = False
        #: ``os.waitpid``'s status once closed; None when reaped elsewhere (SIGCHLD ignored).
        self.status: int | None = None
        self._selector = selectors.DefaultSelector()
        self._selector.register(read_fd, selectors.EVENT_READ)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.finished and (left := (self.deadline if self.started else self.start_by) - time.monotonic()) > 0:
            if not self._selector.select(left):
                continue
            chunk = os.read(self.read_fd, len(buffer))
            if not chunk:
                self.finished = True
                break
            self.started = True
            buffer[: len(chunk)] = chunk
            return len(chunk)
        return 0

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._selector.close()
            os.close(self.read_fd)
        finally:
            if not self.finished:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                _, self.status = os.waitpid(self.pid, 0)
            super().close()


def read_answer(pid: int, read_fd: int, wall_seconds: float, *, start_seconds: float | None = None) -> Outcome:
    """Everything the child writes until it closes the pipe, or until a deadline; the child reaped.

    A child that has written nothing within ``start_seconds``, or not finished within
    ``wall_seconds``, or whose reading is interrupted, is killed. ``read_fd`` is closed.
    """
    # One buffer, not a list joined at the end: a large answer is held once, not twice.
    answer = bytearray()
    with AnswerStream(pid, read_fd, wall_seconds, start_seconds=start_seconds) as stream:
        while chunk := stream.read(1 << 20):
            answer += chunk
    return Outcome(answer, stream.finished, stream.status)
