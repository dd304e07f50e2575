"""What the text one structure message keeps costs in memory, bounded whatever its characters.

The readers bound what they keep by counts (``MAX_CODES``, ``MAX_DATAFLOWS``), and a 16 MiB
answer by its bytes; neither bounds the memory of the text kept. Python holds a string at
1, 2 or 4 bytes a character, by its widest one: names that each hold one character outside
Latin-1 take twice the memory of their UTF-8 bytes, one outside the Basic Multilingual
Plane four times, and a catalogue of distinct words holds its descriptions again in its
search index. So each string kept (ids, names, descriptions, constraint values, the
index's words) is counted at its size in memory against one budget per message,
:data:`MAX_KEPT_TEXT`, and a message past it is refused as it is read.
"""

from __future__ import annotations

import sys

from governed_evidence.errors import ResponseTooLargeError
from governed_evidence.sdmx.artefacts import Constraint, Dataflow, DataStructure

__all__ = ["MAX_KEPT_TEXT", "TextBudget", "keep_constraint", "keep_dataflow", "keep_structure"]

#: Bytes of text one message may keep as Python strings (headers apart). The largest
#: recorded message (Eurostat's lfsa_egai2d structure) keeps 0.2 MiB. At the limit, 97,541
#: codes (just under ``MAX_CODES``) with wide names cost 2.81 times a 16 MiB answer above
#: the server's baseline; at 16 MiB they cost 3.1. 16 MiB of ASCII codes keep 13.4 MiB, and
#: a catalogue just under ``MAX_DATAFLOWS`` 15.6 with its index words: both are refused.
MAX_KEPT_TEXT = 12 * 1024 * 1024
#: What an empty string weighs: the header every string has, whatever its text.
_EMPTY = sys.getsizeof("")


class TextBudget:
    """The bytes of text kept so far from one message, as Python holds them (bounded by MAX_KEPT_TEXT)."""

    def __init__(self) -> None:
        self.text = 0

    def keep(self, *texts: str) -> None:
        """Count ``texts`` at their size in memory less a string's header (``getsizeof`` reads it, no scan)."""
        self.add(sum(sys.getsizeof(t) for t in texts) - _EMPTY * len(texts))

    def add(self, size: int) -> None:
        """Count ``size`` bytes kept beside the strings (a catalogue's index words).

        Raises
        ------
        ResponseTooLargeError
            Past :data:`MAX_KEPT_TEXT`.
        """
        self.text += size
        if self.text > MAX_KEPT_TEXT:
            raise ResponseTooLargeError(
                "the provider's answer keeps names and descriptions that take more memory than this server holds "
                f"({MAX_KEPT_TEXT // (1024 * 1024)} MiB)"
            )


def keep_constraint(budget: TextBudget, constraint: Constraint) -> None:
    """Count a constraint's values: a region can list every code of a codelist, each any length."""
    for values in (*constraint.key_values.values(), *constraint.attribute_values.values()):
        budget.keep(*values)
    for key in constraint.keys:
        budget.keep(*key.values())


def keep_dataflow(budget: TextBudget, flow: Dataflow) -> None:
    """Count a dataflow's id, name, description and annotations, as the JSON and ML readers keep them."""
    budget.keep(flow.id, flow.name, flow.description, *flow.annotations, *flow.annotations.values())


def keep_structure(budget: TextBudget, dsd: DataStructure) -> None:
    """Count a data structure's id, name and its components' ids."""
    budget.keep(dsd.id, dsd.name, *(c.id for c in (*dsd.dimensions, *dsd.attributes)))
