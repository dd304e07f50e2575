"""SDMX-JSON parsed in a forked child process, one at a time, so other callers keep their turn.

Reading an SDMX-JSON message is Python work event by event (:mod:`~governed_evidence.sdmx.jsondata`
for data, :mod:`~governed_evidence.sdmx.jsonstructure` for structures and catalogues):
a hostile answer can make it seconds of processor time, and in the server's process those
seconds would be taken under the interpreter lock every other caller's search needs. In a
child they are not: the server's threads wait on a pipe, which holds no lock, and searches
run at full speed on the other processor.

* **Fork, not a fresh interpreter.** The child starts with the parser imported and the body
  already in memory (shared with the server until written to), so it costs milliseconds.
  It runs only the parse, never logs, and leaves with ``os._exit``: nothing of the server's
  (its connections, its threads' state) is touched or unwound there.
* **Bounded.** One child at a time per process (:data:`SLOTS`), so four hostile answers
  use one processor, not every one; the child's address space may grow by
  :data:`MAX_CHILD_BYTES` over what it inherited and it may use :data:`MAX_CHILD_SECONDS`
  of processor time (kernel limits; past them the answer is refused as too large), and it
  has a wall-clock backstop of one and a half times that. A child that does not start
  within :data:`START_SECONDS` (stuck in the fork itself) is killed and forked again.
* **The answer** is the parsed table (the first rows the caller asked for, constants, labels),
  structure message or catalogue rows, or the error the parse raised, pickled back through
  the pipe as it is made and unpickled here as it comes: neither process holds it whole as
  bytes beside the objects (for 275,000 kept codes, 11 MB in each).
* **In parts** (:func:`run_streamed`): a parse whose answer is large by design (a structure's
  codes, a catalogue's rows) sends it a batch at a time while it reads, each batch pickled
  alone, and the caller here assembles them. The child then holds the body and one batch,
  not the whole answer beside the body (and no pickler memo of every string in it): for
  275,000 kept codes, the child grew by some 60 MB, and grows by 1 MB.

Where fork or the resource module does not exist, the parse runs in the calling thread. The
forking and the reading back are shared with ingest's document parsers
(:mod:`governed_evidence._forked`); the limits and the errors are this module's.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import pickle
import signal
import threading
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from governed_evidence._forked import AnswerStream, address_space, fork
from governed_evidence.errors import ResponseTooLargeError, StatisticsError, UnusableResponseError

__all__ = ["MAX_CHILD_BYTES", "MAX_CHILD_SECONDS", "SLOTS", "START_SECONDS", "Send", "run_isolated", "run_streamed"]

#: Address space a parse may add to what the child inherited (the streamed reader needs a
#: few MiB; the kernel's limit stops anything that would not).
MAX_CHILD_BYTES = 512 * 1024 * 1024
#: Processor seconds one parse may use (a pass is bounded by its count of events: 16 MiB of a
#: hostile message is a few seconds on a loaded 2-core host).
MAX_CHILD_SECONDS = 30
#: Parses running at once in one server process; the others wait their turn.
SLOTS = threading.BoundedSemaphore(1)

#: Seconds a child has to reach this module's code. Python's own work in a new child can
#: hang there: it frees the other threads' thread-local objects, and one of those (a
#: per-thread SQLite connection of the index reader) waits for a lock that a thread of the
#: server held when it forked, forever. Such a child is killed and another one forked.
START_SECONDS = 5.0
_STARTS = 3
#: The first byte every child writes, once it runs this module's code.
_STARTED = b"\x01"

_T = TypeVar("_T")
#: How a streamed parse hands on one part of its answer.
Send = Callable[[Any], None]


def _too_large() -> ResponseTooLargeError:
    return ResponseTooLargeError(
        "the provider's answer needs more memory or processor time to read than this server gives one answer; "
        "narrow the key or the period"
    )


def _child(write_fd: int, fn: Callable[..., Any], args: tuple[Any, ...], *, parts: bool = False) -> NoReturn:
    """The child's whole life: parse, write the outcome, leave without unwinding anything.

    With ``parts``, ``fn`` is also given a ``send`` (last), which writes each part it is
    given to the pipe at once, as a pickle of its own, before the outcome.
    """
    try:
        os.write(write_fd, _STARTED)
        import resource

        def limit(kind: int, value: int) -> None:
            with contextlib.suppress(OSError, ValueError):
                _, hard = resource.getrlimit(kind)
                resource.setrlimit(kind, (value if hard == resource.RLIM_INFINITY else min(value, hard), hard))

        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server answers Ctrl-C, not its parsers
        limit(resource.RLIMIT_CORE, 0)
        limit(resource.RLIMIT_CPU, MAX_CHILD_SECONDS)
        size = address_space()
        if size is not None:
            limit(resource.RLIMIT_AS, size + MAX_CHILD_BYTES)
        # The inherited objects are never garbage here; collections would touch (and copy) them.
        gc.freeze()
        # Pickled straight into the pipe (the pickler writes a frame of 64 KiB at a time), not
        # pickled whole first: a large answer is not held a second time, as bytes, here.
        with open(write_fd, "wb", closefd=False) as pipe:

            def send(part: Any) -> None:
                # A pickle per part: its memo lives as long as the part, not the whole answer.
                pickle.dump(("part", part), pipe)

            try:
                outcome: tuple[str, Any] = ("ok", fn(*args, send) if parts else fn(*args))
            except MemoryError:
                outcome = ("raise", _too_large())
            except StatisticsError as exc:
                outcome = ("raise", exc)
            except Exception as exc:  # noqa: BLE001 - described, not carried: it may not pickle
                outcome = (
                    "raise",
                    UnusableResponseError(f"the provider's answer could not be read ({type(exc).__name__})"),
                )
            pickle.dump(outcome, pipe)
    finally:
        os._exit(0)


def _can_fork() -> bool:
    try:
        import resource  # noqa: F401
    except ImportError:
        return False
    return hasattr(os, "fork")


def run_isolated(fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)`` in a forked child (one at a time); what it returned, or what it raised.

    Raises
    ------
    StatisticsError
        What ``fn`` raised; ResponseTooLargeError when the child ran out of its memory or
        processor time, or died.
    """
    if not _can_fork():
        return fn(*args)
    with SLOTS:
        return _fork(fn, args, None)


def run_streamed(fn: Callable[..., _T], take: Send, *args: Any) -> _T:
    """``fn(*args, send)`` in a forked child, each part it sends given to ``take`` here as it comes.

    The parts come in the order they were sent and all before what ``fn`` returned; when
    ``fn`` raises, what was taken is the caller's to drop. Where there is no fork, ``fn``
    sends straight to ``take``.

    Raises
    ------
    StatisticsError
        As :func:`run_isolated`.
    """
    if not _can_fork():
        return fn(*args, take)
    with SLOTS:
        return _fork(fn, args, take)


def _fork(fn: Callable[..., _T], args: tuple[Any, ...], take: Send | None) -> _T:
    for _ in range(_STARTS):
        outcome = _attempt(fn, args, take)
        if outcome is not None:
            break
    else:
        raise UnusableResponseError(
            "the provider's answer could not be read now (its parsing process did not start); try again"
        )
    kind, value = outcome
    if kind == "ok":
        return value  # type: ignore[no-any-return]
    raise value


def _attempt(fn: Callable[..., Any], args: tuple[Any, ...], take: Send | None) -> tuple[str, Any] | None:
    """One child's outcome (its parts given to ``take`` on the way), or None when it never started.

    The outcome is unpickled as it comes through the pipe, so a large one is never held
    whole as bytes beside the objects made of it.
    """
    if take is None:
        pid, read_fd = fork(lambda write_fd: _child(write_fd, fn, args))
    else:
        pid, read_fd = fork(lambda write_fd: _child(write_fd, fn, args, parts=True))
    with AnswerStream(pid, read_fd, MAX_CHILD_SECONDS * 3 / 2, start_seconds=START_SECONDS) as stream:
        if stream.read(len(_STARTED)) != _STARTED:
            return None
        reader = io.BufferedReader(stream)
        try:
            while True:
                outcome: tuple[str, Any] = pickle.load(reader)  # noqa: S301 - this process's own child
                if outcome[0] != "part" or take is None:
                    break
                take(outcome[1])
        except (pickle.UnpicklingError, EOFError, ValueError):
            # Nothing written (killed by the kernel's processor limit, the wall-clock
            # backstop, or out of memory), or cut off while writing.
            raise _too_large() from None
    return outcome
