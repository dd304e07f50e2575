"""Question-set evaluation: slices, metrics and a scorecard."""

from governed_evidence.evaluation.questions import Question, load_questions
from governed_evidence.evaluation.runner import SliceReport, run_slices

__all__ = ["Question", "SliceReport", "load_questions", "run_slices"]
