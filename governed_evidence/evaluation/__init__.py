"""Question-set evaluation: slices, metrics and a scorecard.

The exports are resolved on first access: the CLI imports ``evaluation.command`` for its
argument parser on every command, and the runner imports the ingest package (and with it
the PDF and Word parsers), which ``serve`` must not load.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from governed_evidence.evaluation.questions import Question, load_questions
    from governed_evidence.evaluation.runner import SliceReport, run_slices

__all__ = ["Question", "SliceReport", "load_questions", "run_slices"]

_EXPORTS = {
    "Question": "governed_evidence.evaluation.questions",
    "load_questions": "governed_evidence.evaluation.questions",
    "SliceReport": "governed_evidence.evaluation.runner",
    "run_slices": "governed_evidence.evaluation.runner",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
