"""Where a search's milliseconds go: a stopwatch the service marks at each stage.

Every search logs its stages (``stages_ms`` in the ``search`` event), so an operator reading
the logs, and ``benchmarks/stages.py``, see which step a slow search spent its time in.
"""

from __future__ import annotations

import time

__all__ = ["Stopwatch"]


class Stopwatch:
    """Milliseconds per named stage, each measured from the previous mark."""

    def __init__(self) -> None:
        self._last = time.perf_counter()
        self.ms: dict[str, float] = {}

    def mark(self, stage: str) -> None:
        """Close ``stage`` now (a stage marked twice adds up)."""
        now = time.perf_counter()
        self.ms[stage] = self.ms.get(stage, 0.0) + (now - self._last) * 1000
        self._last = now

    def rounded(self) -> dict[str, float]:
        return {stage: round(ms, 3) for stage, ms in self.ms.items()}
