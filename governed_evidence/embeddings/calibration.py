"""Where unrelated text and a clear match sit for an embedding model, measured over a corpus.

The gate rescales a cosine similarity between a model's ``floor`` (unrelated) and ``ceiling``
(a clear match). Those depend on the model: all-MiniLM-L6-v2 puts a question about nothing in
a policy corpus near 0.15 from its best passage, multilingual-e5-small near 0.80, so thresholds
fixed for one silently let the other through (with MiniLM's, e5 answered "What is the capital
city of Australia?" from a water company's FAQ). An ingest therefore measures the index's own
model on the index's own passages, with questions as a search asks them (query side):

* ``floor``: the :data:`FLOOR_QUANTILE` quantile, over a fixed set of everyday questions no
  policy corpus answers (:data:`UNRELATED_QUESTIONS`), of each one's cosine to its nearest
  passage: what this model gives an unrelated question on this corpus;
* ``ceiling``: the floor plus :data:`CEILING_SHARE` of the way to the median cosine between a
  passage's own heading, asked as a question, and that passage (up to :data:`PSEUDO_QUERIES`
  passages evenly spread): what this model gives a question that names what a passage is about.

Both parameters were chosen on the tuning corpora with multilingual-e5-small, by the rule that
chose the strict threshold (docs/evaluation.md, with leave-one-corpus-out figures). On MiniLM's
vectors the same rule gives floors of 0.16-0.24 and ceilings of 0.32-0.48 against the (0.15,
0.55) chosen for it on the tuning questions, which it keeps (its headings are the weak half:
SOC 2's, the same in every policy, sit at 0.35 from their own passages).

A rule measured from passages alone (median passage-passage cosine as the floor) was replaced:
on template-like corpora, where every passage resembles every other, it put the floor above
most questions' similarities and the strict gate withheld nearly every paraphrase.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "CALIBRATIONS",
    "CEILING_SHARE",
    "FLOOR_QUANTILE",
    "MIN_PASSAGES",
    "MIN_SPAN",
    "PSEUDO_QUERIES",
    "UNRELATED_QUESTIONS",
    "ModelCalibration",
    "calibration_for",
    "measure_calibration",
    "pseudo_query_rows",
]

#: Fewer passages than this say too little about the model: no calibration is recorded.
MIN_PASSAGES = 20
#: Passages whose heading is asked as a question (evenly spread: the same index, the same choice).
PSEUDO_QUERIES = 32
#: The floor's quantile of the unrelated questions' nearest-passage cosines.
FLOOR_QUANTILE = 0.9
#: Where the ceiling sits between the floor (0) and the headings' median own-passage cosine (1).
CEILING_SHARE = 0.8
#: A ceiling less than this above the floor would make the rescaling a step: none is recorded.
MIN_SPAN = 0.02

#: Everyday questions about nothing an organisation's policies cover. Written once, never
#: chosen or edited on a corpus's questions; none is one of the evaluation's questions.
UNRELATED_QUESTIONS: tuple[str, ...] = (
    "How long should I boil an egg?",
    "What is the tallest mountain in Africa?",
    "Which planet has the most moons?",
    "How do you tune a guitar?",
    "What do koalas eat?",
    "When did the Roman Empire fall?",
    "How many players are on a cricket team?",
    "What is the best way to grow tomatoes?",
    "Who painted the Mona Lisa?",
    "How do I remove a red wine stain from a carpet?",
    "How far is the Moon from the Earth?",
    "What is a good recipe for banana bread?",
    "How do bees make honey?",
    "Which ocean is the deepest?",
    "How do I teach my dog to sit?",
    "How many strings does a violin have?",
    "What causes a rainbow?",
    "Who wrote Pride and Prejudice?",
    "How do I knit a scarf?",
    "How do penguins stay warm in winter?",
    "When should I plant tulip bulbs?",
    "What is the rule for castling in chess?",
    "Why is the sky blue?",
    "How many bones are in the human body?",
)


def pseudo_query_rows(count: int) -> list[int]:
    """Which of ``count`` passages (in id order) have their heading asked: evenly spread."""
    if count <= 0:
        return []
    return sorted({int(i) for i in np.linspace(0, count - 1, min(count, PSEUDO_QUERIES))})


def measure_calibration(
    nearest_unrelated: Sequence[float] | npt.NDArray[np.floating],
    heading_own: Sequence[float] | npt.NDArray[np.floating],
    passages: int,
) -> tuple[float, float] | None:
    """(floor, ceiling) of the model, or None when there are too few passages, or the two
    kinds of question sit too close, to tell.

    ``nearest_unrelated``: each of :data:`UNRELATED_QUESTIONS`' cosine to its nearest passage;
    ``heading_own``: each sampled heading's cosine, asked as a question, to its own passage;
    ``passages``: how many passages the level holds.
    """
    unrelated = np.asarray(nearest_unrelated, dtype=np.float64)
    own = np.asarray(heading_own, dtype=np.float64)
    if passages < MIN_PASSAGES or not unrelated.size or not own.size:
        return None
    floor = float(np.quantile(unrelated, FLOOR_QUANTILE))
    ceiling = floor + CEILING_SHARE * (float(np.median(own)) - floor)
    if not np.isfinite(floor) or not np.isfinite(ceiling) or ceiling - floor < MIN_SPAN:
        return None
    return round(floor, 4), round(ceiling, 4)


@dataclass(frozen=True)
class ModelCalibration:
    """Where a model's cosines mean unrelated and a clear match, and how the gate weighs the rest."""

    #: Cosine at or below which a passage is unrelated for this model.
    floor: float
    #: Cosine at or above which a passage is a clear semantic match.
    ceiling: float
    #: Similarity above the background at which a passage counts as fully distinct.
    distinct_scale: float = 0.25
    #: Share of the semantic evidence kept for a passage no more similar than the background.
    distinct_base: float = 0.5
    #: Weight of full keyword coverage in the noisy-OR.
    coverage_weight: float = 0.8


#: Measured per model on the tuning suites' questions; a model without an entry gets the
#: calibration measured over its index's corpus at ingest (:func:`measure_calibration`), and
#: an index without one (built before it was recorded) a conservative default.
CALIBRATIONS: dict[str, ModelCalibration] = {
    "sentence-transformers/all-MiniLM-L6-v2@int8-onnx": ModelCalibration(floor=0.15, ceiling=0.55),
}
_DEFAULT_CALIBRATION = ModelCalibration(floor=0.30, ceiling=0.75)


def calibration_for(model_id: str | None, measured: tuple[float, float] | None = None) -> ModelCalibration:
    """The model's calibration; ``measured``: the (floor, ceiling) its index records."""
    known = CALIBRATIONS.get(model_id or "")
    if known is not None:
        return known
    if measured is not None:
        floor, ceiling = measured
        # Distinctness is a gap between similarities, so it scales with the model's span: the
        # share of it the tuned model's distinct_scale is (0.25 of MiniLM's 0.40).
        tuned = CALIBRATIONS["sentence-transformers/all-MiniLM-L6-v2@int8-onnx"]
        share = tuned.distinct_scale / (tuned.ceiling - tuned.floor)
        return ModelCalibration(floor=floor, ceiling=ceiling, distinct_scale=share * (ceiling - floor))
    return _DEFAULT_CALIBRATION
