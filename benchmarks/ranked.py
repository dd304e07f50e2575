"""A search's candidates with their documents' paths, as the tuning benchmarks read them.

The product's candidates carry a document id (the gate needs no more); the benchmarks score
rankings by the documents a question expects, so they read every candidate's path at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from governed_evidence.search.candidates import Candidate, Ranking
from governed_evidence.search.confidence import Signals
from governed_evidence.search.fusion import Fused

__all__ = ["Documented", "documented"]


@dataclass(frozen=True)
class Documented:
    """One candidate of a ranking, with its document's path."""

    document: str
    confidence: float
    fused: Fused
    signals: Signals
    candidate: Candidate


def documented(ranking: Ranking) -> list[Documented]:
    """``ranking``'s candidates in order, each with its document's path."""
    paths = ranking.document_paths()
    return [Documented(p, c.confidence, c.fused, c.signals, c) for c, p in zip(ranking.candidates, paths, strict=True)]
