"""Counts the hardening tests record, printed in the terminal summary ("hardening figures").

Each test adds what it tried (probes, calls, inputs, faults, crashes) and asserts the
promised minimum itself, so the suite cannot silently shrink.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

FIGURES: dict[str, float] = {}


def add(name: str, value: float) -> None:
    FIGURES[name] = FIGURES.get(name, 0) + value
    _dump()


def put(name: str, value: float) -> None:
    FIGURES[name] = value
    _dump()


def lines() -> list[str]:
    return [f"{name}: {_fmt(value)}" for name, value in sorted(FIGURES.items())]


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def _dump() -> None:
    # Optional machine-readable copy for reports: HARDENING_FIGURES=path/to/figures.json.
    target = os.environ.get("HARDENING_FIGURES")
    if target:
        Path(target).write_text(json.dumps(FIGURES, indent=2, sort_keys=True) + "\n")
