"""Ingest progress on stderr: a bar on a terminal, a plain line every few seconds otherwise.

A large corpus spends minutes reading files and embedding passages; silence for that long
reads as a hang. On a terminal, rich draws one bar per stage (done/total, elapsed, time
left); when stderr is a file or a pipe (CI, a container log) a line is written when a stage
starts, at most every :data:`LINE_INTERVAL_S` seconds after, and when it ends, so the log
stays short. A build's stages: reading the files (which, as each document is embedded and
written as it is read, is the whole build: its time left is the build's), loading the model,
and embedding, whose total is known only once the last file is read. stdout is never
touched: ``ingest --json`` still prints one JSON document there. ``ingest --quiet`` passes no
progress at all.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

__all__ = ["LINE_INTERVAL_S", "STAGE_UNITS", "IngestProgress"]

#: Least time between two plain progress lines of one stage. A line is written on the first
#: progress after it, and progress comes every batch (about a second), so lines come every 4
#: to 5 s while a stage moves.
LINE_INTERVAL_S = 4.0
#: What each stage counts.
STAGE_UNITS = {"reading": "files", "embedding": "passages", "model": "model"}


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    minutes, secs = divmod(seconds, 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


class IngestProgress:
    """A :data:`~governed_evidence.ingest.report.ProgressFn`: call it with (stage, done, total).

    ``close()`` ends the bar (the CLI calls it in a ``finally``, so an interrupted ingest
    leaves the terminal clean).
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        terminal: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream or sys.stderr
        self._terminal = self._stream.isatty() if terminal is None else terminal
        self._clock = clock
        self._started: dict[str, float] = {}
        self._last_line: dict[str, float] = {}
        self._bar: Progress | None = None
        self._tasks: dict[str, TaskID] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = self._clock()
        self._started.setdefault(stage, now)
        if self._terminal:
            self._draw(stage, done, total)
        else:
            self._line(stage, done, total, now)

    def _draw(self, stage: str, done: int, total: int) -> None:
        if self._bar is None:
            # Imported on first use: the CLI imports this module for every ingest, and a
            # bar is drawn only on a terminal.
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("{task.description:<10}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[unit]}"),
                TimeElapsedColumn(),
                TextColumn("left"),
                TimeRemainingColumn(),
                console=Console(file=self._stream, force_terminal=True),
            )
            self._bar.start()
        # An unknown total (still reading) draws a pulsing bar.
        known = total if total >= 0 else None
        if stage not in self._tasks:
            self._tasks[stage] = self._bar.add_task(stage, total=known, unit=STAGE_UNITS.get(stage, "items"))
        self._bar.update(self._tasks[stage], completed=done, total=known)

    def _line(self, stage: str, done: int, total: int, now: float) -> None:
        finished = 0 <= total <= done
        last = self._last_line.get(stage)
        if not finished and last is not None and now - last < LINE_INTERVAL_S:
            return
        self._last_line[stage] = now
        elapsed = now - self._started[stage]
        if stage == "model":
            text = f"embedding model loaded in {_duration(elapsed)}" if finished else "loading the embedding model"
            print(f"ingest: {text}", file=self._stream, flush=True)
            return
        unit = STAGE_UNITS.get(stage, "items")
        rate = done / elapsed if elapsed > 0 and done > 0 else 0.0
        if total < 0:
            # Not known yet (passages to embed, while files are still read): no time left.
            text = f"ingest: {stage} {done:,} {unit} so far"
            print(text + (f" ({rate:.1f}/s)" if rate else ""), file=self._stream, flush=True)
            return
        text = f"ingest: {stage} {done:,}/{total:,} {unit}"
        if finished:
            text += f", done in {_duration(elapsed)}"
        elif rate:
            text += f" ({rate:.1f}/s, about {_duration((total - done) / rate)} left)"
        print(text, file=self._stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
