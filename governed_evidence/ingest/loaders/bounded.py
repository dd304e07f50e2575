"""Run a parser on one untrusted file in a child process with hard memory and CPU limits.

PDF and DOCX parsers are large libraries reading attacker-shaped input: a page can make
pypdf work for minutes and a compressed part can make the DOCX parser build gigabytes of
objects. Checks inside the parser cannot interrupt it, and it catches and carries on past
many errors (MemoryError included), so the parse runs in a forked child:

* a watchdog timer (``ITIMER_PROF``, every 50 ms of the child's processor time) compares
  the child's address space and processor time with the per-file budgets and the
  loader's pacing (:func:`limit_cpu`); over either, the child writes the rejection and
  exits on the spot, so nothing in the parser can catch it and nothing is unwound;
* the kernel limits ``RLIMIT_AS`` (a margin above the memory budget) and ``RLIMIT_CPU``
  (a grace above the processor budget, then SIGKILL) stop a parser stuck in native code
  where the watchdog cannot run.

Either way the file is refused with the reason (:class:`FileRejectedError`); the ingest
process never holds the parser's memory, so the rest of the corpus continues.

Fork, not a fresh interpreter: the child starts with the loaders and parser libraries
already imported, so it costs milliseconds rather than an interpreter start and the
imports for every file. It runs only this package's parsing code and leaves with
``os._exit`` (no exit handlers, no buffers of the parent written twice). Where fork or the
resource module does not exist, the work runs in-process, bounded only by the loaders'
own size and page limits. The forking and the reading back are shared with the SDMX-JSON
parser's child (:mod:`governed_evidence._forked`).
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import signal
import sys
import time
import traceback
from collections.abc import Callable
from types import FrameType
from typing import Any, NoReturn, ParamSpec, TypeVar

from governed_evidence._forked import address_space, fork, read_answer, write_all
from governed_evidence.errors import FileRejectedError

__all__ = [
    "PER_FILE_CPU_SECONDS",
    "PER_FILE_MEMORY_BYTES",
    "in_bounded_child",
    "limit_cpu",
    "run_bounded",
]

#: Address space a parse may add to what the ingest process already had. Real files need
#: little (the largest sample PDF about 11 MiB; a 13 MB Word body about 400 MiB); 1 GiB is
#: ample for those and a bounded share of an ingest host, where an unbounded parse was
#: seen reaching 2.28 GB from a 2 MB file.
PER_FILE_MEMORY_BYTES = 1 << 30
#: Processor seconds one file may use in total, however the loader paces it. Thirty times
#: the slowest sample (a 127-page PDF: 4 s); the loaders' page and size limits are set so
#: a legitimate file at those limits still fits (3,000 PDF pages at 32 ms a page: 96 s).
PER_FILE_CPU_SECONDS = 120
#: How often the watchdog looks, in the child's processor time: allocation between two
#: looks stays well inside the kernel margin below.
_TICK_SECONDS = 0.05
#: The kernel's address-space limit sits this far above the budget (a quarter of it, at
#: least 64 MiB), so the watchdog, not an allocation failure deep in a parser, is what
#: normally ends an oversized parse.
_MEMORY_MARGIN_FRACTION = 4
_MEMORY_MARGIN_MIN = 64 << 20
#: Processor seconds past the budget before the kernel kills a child the watchdog could
#: not stop (a parser inside one long native call).
_CPU_GRACE_SECONDS = 2
#: Wall-clock backstop for a child that is not using processor time (stuck, or starved on
#: a loaded host): generous, since processor time is the real bound.
_WALL_FACTOR = 2
_WALL_EXTRA_SECONDS = 30

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _rejection(reason: str) -> bytes:
    return pickle.dumps(("raise", FileRejectedError(reason)))


class _Child:
    """The running child's budgets, and its ways out (each writes the message and exits)."""

    def __init__(self, label: str, write_fd: int, cpu_ceiling: float, memory_budget: int, base: int | None) -> None:
        self.label = label
        self.write_fd = write_fd
        self.cpu_ceiling = cpu_ceiling
        self.cpu_allowed = cpu_ceiling
        #: What the current processor allowance was granted for, for the rejection message.
        self.basis = f"the per-file limit of {cpu_ceiling:g} s"
        #: Address space at which the parse is over budget (None where it cannot be measured).
        self.memory_limit = None if base is None else base + memory_budget
        # Made now: when the budget is reached, there may be no memory left to make them.
        self.memory_message = _rejection(f"{label} exceeded the per-file memory budget ({memory_budget >> 20} MiB)")
        self.cpu_message = _rejection(f"{label} exceeded the per-file processor budget")

    def over_memory(self) -> bool:
        if self.memory_limit is None:
            return False
        size = address_space()
        return size is None or size >= self.memory_limit

    def finish(self, data: bytes) -> NoReturn:
        """Write the message for the parent and leave, without unwinding anything."""
        status = 1
        try:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, signal.SIG_IGN)
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            write_all(self.write_fd, data)
            status = 0
        finally:
            os._exit(status)

    def stop_for_processor(self) -> NoReturn:
        try:
            used = time.process_time()
            data = _rejection(
                f"{self.label} exceeded the per-file processor budget "
                f"(stopped after {used:.1f} s of processor time, {self.basis})"
            )
        except BaseException:  # noqa: BLE001 - no memory to describe it: the plain reason
            data = self.cpu_message
        self.finish(data)

    def watch(self, signum: int, frame: FrameType | None) -> None:
        """SIGPROF: stop the child the moment it is over a budget."""
        try:
            over_memory = self.over_memory()
        except BaseException:  # noqa: BLE001 - failing to even look means memory is gone
            over_memory = True
        if over_memory:
            self.finish(self.memory_message)
        if time.process_time() >= self.cpu_allowed:
            self.stop_for_processor()


_child: _Child | None = None


def in_bounded_child() -> bool:
    """True inside a child started by :func:`run_bounded`."""
    return _child is not None


def limit_cpu(total_seconds: float, basis: str = "") -> None:
    """Pace the work: from here on the child may have used at most ``total_seconds`` of
    processor time since it started (never more than the per-file budget).

    A loader calls this as it learns how much work the file legitimately needs (pages
    read, bytes parsed), so a small file cannot spend the whole per-file budget. ``basis``
    says what the allowance is for, in the rejection message. Outside a bounded child
    this does nothing.
    """
    state = _child
    if state is None:
        return
    state.cpu_allowed = min(total_seconds, state.cpu_ceiling)
    if total_seconds >= state.cpu_ceiling:
        state.basis = f"the per-file limit of {state.cpu_ceiling:g} s"
    else:
        state.basis = basis or f"an allowance of {total_seconds:g} s"
    if time.process_time() >= state.cpu_allowed:
        state.stop_for_processor()


def _enter_child(label: str, write_fd: int) -> _Child:
    """Set the child's limits and start its watchdog."""
    import resource

    global _child
    # The parent answers Ctrl-C (it reaches the whole process group) by stopping the child.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def set_limit(kind: int, value: int) -> None:
        # Best effort: where the kernel refuses a limit, the watchdog still applies.
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(kind, (value, value))

    def capped(wanted: int, limit: int) -> int:
        return wanted if limit == resource.RLIM_INFINITY else min(wanted, limit)

    # A parser that crashes or is killed must not leave a core image of the ingest process.
    set_limit(resource.RLIMIT_CORE, 0)
    _, cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)
    kill_at = capped(PER_FILE_CPU_SECONDS + _CPU_GRACE_SECONDS, cpu_hard)
    set_limit(resource.RLIMIT_CPU, kill_at)
    ceiling = max(0.1, min(float(PER_FILE_CPU_SECONDS), kill_at - _CPU_GRACE_SECONDS / 2))

    # Relative to what the child inherited: the ingest process's mappings (its model, its
    # libraries) are already in the child's address space and are not the parse's.
    base = address_space()
    budget = PER_FILE_MEMORY_BYTES
    if base is not None:
        _, as_hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = base + budget + max(budget // _MEMORY_MARGIN_FRACTION, _MEMORY_MARGIN_MIN)
        if as_hard != resource.RLIM_INFINITY and as_hard < limit:
            # A tighter limit from outside: the budget is what fits below it, margin kept.
            limit = as_hard
            budget = min(budget, max(0, as_hard - base) * _MEMORY_MARGIN_FRACTION // (_MEMORY_MARGIN_FRACTION + 1))
        set_limit(resource.RLIMIT_AS, limit)
    _child = _Child(label, write_fd, ceiling, budget, base)
    # The objects inherited from the parent are never garbage here; leaving them out of
    # collections keeps the child from touching (and so copying) every page of them.
    gc.freeze()
    signal.signal(signal.SIGPROF, _child.watch)
    signal.setitimer(signal.ITIMER_PROF, _TICK_SECONDS, _TICK_SECONDS)
    return _child


def _raised(label: str, exc: Exception) -> bytes:
    if not isinstance(exc, FileRejectedError):
        exc.add_note(f"raised in the {label} parser process:\n{traceback.format_exc()}")
    try:
        return pickle.dumps(("raise", exc))
    except Exception:  # noqa: BLE001 - an exception that cannot be pickled is described instead
        return pickle.dumps(("raise", RuntimeError(f"{type(exc).__name__} in the {label} parser process")))


def _run_child(
    write_fd: int, label: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> NoReturn:
    """The child's whole life: it never returns into the parent's frames."""
    try:
        child = _enter_child(label, write_fd)
        try:
            result = fn(*args, **kwargs)
        except MemoryError:
            child.finish(child.memory_message)
        except Exception as exc:  # noqa: BLE001 - every outcome goes back to the parent to be raised there
            # A parser failing for want of memory says so in its own words (lxml: "unknown
            # error"), or turns it into a different error altogether.
            child.finish(child.memory_message if child.over_memory() else _raised(label, exc))
        if child.over_memory():
            # The parser caught a MemoryError and carried on: what it returns is incomplete.
            child.finish(child.memory_message)
        try:
            data = pickle.dumps(("ok", result))
        except MemoryError:
            child.finish(child.memory_message)
        child.finish(data)
    finally:
        os._exit(1)


def _stopped_reason(label: str, status: int | None) -> str:
    if status is None:
        how = "ended without a result"
    elif os.WIFSIGNALED(status):
        try:
            how = f"stopped by {signal.Signals(os.WTERMSIG(status)).name}"
        except ValueError:
            how = f"stopped by signal {os.WTERMSIG(status)}"
    else:
        how = f"exited with status {os.waitstatus_to_exitcode(status)}"
    return f"{label} exceeded the per-file memory/processor budget (the parser process {how})"


def _can_fork() -> bool:
    try:
        import resource  # noqa: F401
    except ImportError:
        return False
    return hasattr(os, "fork") and hasattr(signal, "setitimer")


def run_bounded(label: str, fn: Callable[_P, _R], /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
    """``fn(*args, **kwargs)`` in a child under the per-file memory and processor budgets.

    Returns what ``fn`` returned (it must pickle) or raises what it raised; a child that
    exceeds a budget, dies or hangs becomes a :class:`FileRejectedError` whose message
    starts with ``label`` (the format, e.g. "PDF"). Called inside a bounded child, or where
    fork is unavailable, ``fn`` simply runs here.
    """
    if _child is not None or not _can_fork():
        return fn(*args, **kwargs)
    wall_seconds = PER_FILE_CPU_SECONDS * _WALL_FACTOR + _WALL_EXTRA_SECONDS
    pid, read_fd = fork(lambda write_fd: _run_child(write_fd, label, fn, args, kwargs))
    outcome = read_answer(pid, read_fd, wall_seconds)
    finished, status = outcome.finished, outcome.status
    if not finished:
        raise FileRejectedError(f"{label} parser did not finish within {wall_seconds} s (the per-file time budget)")
    if status is not None and not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        raise FileRejectedError(_stopped_reason(label, status))
    try:
        # The bytes come from a fork of this process running this module's code: a parser
        # able to forge them could already do anything this process can, so unpickling
        # them adds no risk.
        kind, value = pickle.loads(outcome.answer)  # noqa: S301
    except Exception:  # noqa: BLE001 - a message cut short: the child did not finish
        raise FileRejectedError(_stopped_reason(label, status)) from None
    if kind == "ok":
        return value  # type: ignore[no-any-return]
    raise value
