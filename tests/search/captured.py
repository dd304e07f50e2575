"""Captured responses: what the search answers on the sample corpus, recorded once, compared
on every run (tests/search/test_captured_responses.py).

The recording holds the real default model's vector for every passage and every question of
the sample corpus (``captured/vectors.npz``), so the comparison runs without the model and
is the same on any CPU: what it checks is the search (both rankings, fusion, confidence, the
gate, the ceiling, the response), not the model's arithmetic. ``captured/responses.json`` holds
each search's answer.

Record again, after a change that is meant to change answers (and say so in its commit), with
``python -m tests.search.captured``: it loads the real model, embeds the corpus and the
questions, and writes both files. A change of chunking or of passage text shows as a text
missing from the recording.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from governed_evidence.config import Classification
from governed_evidence.embeddings.base import Embedder, ModelIdentity, Vectors, embed_queries
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.search.limits import ConfidenceLevel, SearchMode
from governed_evidence.search.models import SearchResponse
from governed_evidence.search.service import SearchService
from governed_evidence.search.tuning import DEFAULT_TUNING

REPO = Path(__file__).resolve().parents[2]
SAMPLE_CORPUS = REPO / "data" / "sample_corpus"
QUESTIONS = REPO / "evals" / "questions.jsonl"
HERE = Path(__file__).resolve().parent / "captured"
VECTORS = HERE / "vectors.npz"
RESPONSES = HERE / "responses.json"

#: The day the index is built and searched on (staleness is judged against it).
TODAY = date(2026, 12, 7)

#: A confidence is served rounded to four places: a difference below 1e-6 in what is rounded
#: (another CPU's BLAS adds in another order) can move the fourth place by one.
CONFIDENCE_TOLERANCE = 1e-4 + 1e-9

#: The server's default memory for the in-memory copies (GOVERNED_EVIDENCE_VECTOR_MEMORY_MB=4096).
SHIPPED_MEMORY = 4096 * 2**20


@dataclass(frozen=True)
class Case:
    """One search: a question, a mode, a ceiling, a confidence level, the gate on or off."""

    question: str
    mode: SearchMode
    ceiling: Classification
    confidence: ConfidenceLevel
    gate: bool

    @property
    def key(self) -> str:
        gate = "gate" if self.gate else "no-gate"
        return f"{self.mode}|{self.ceiling.label}|{self.confidence}|{gate}|{self.question}"


def questions() -> list[str]:
    """Every question of the sample corpus's suite, in its order, each once."""
    seen: dict[str, None] = {}
    for line in QUESTIONS.read_text(encoding="utf-8").splitlines():
        if line.strip():
            seen.setdefault(json.loads(line)["question"], None)
    return list(seen)


def cases() -> Iterator[Case]:
    """Every mode at every ceiling at the strict gate; hybrid also at the normal gate and without
    it (the full ranking, nothing withheld), at the internal ceiling."""
    for question in questions():
        for ceiling in Classification:
            for mode in ("keyword", "semantic", "hybrid"):
                yield Case(question, mode, ceiling, "strict", True)
        yield Case(question, "hybrid", Classification.INTERNAL, "normal", True)
        yield Case(question, "hybrid", Classification.INTERNAL, "strict", False)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class RecordedEmbedder:
    """The vectors the real model gave each text when the recording was made, under its identity."""

    def __init__(self, path: Path = VECTORS) -> None:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["identity"]))
            self._identity = ModelIdentity(meta["model_id"], int(meta["dimension"]), meta["checksum"])
            self._rows = {str(d): i for i, d in enumerate(data["digests"].tolist())}
            self._vectors: Vectors = np.ascontiguousarray(data["vectors"], dtype=np.float32)

    @property
    def identity(self) -> ModelIdentity:
        return self._identity

    def embed(self, texts: Sequence[str]) -> Vectors:
        rows = []
        for text in texts:
            row = self._rows.get(_digest(text))
            if row is None:
                raise AssertionError(
                    f"a text the recording does not hold ({text[:60]!r}...): passages or questions changed; "
                    "record again with `python -m tests.search.captured` if the change is meant"
                )
            rows.append(row)
        return self._vectors[rows].copy()


class _Recorder:
    """Wraps the real model and keeps every text it embeds with its vector."""

    def __init__(self, model: Embedder) -> None:
        self.model = model
        self.kept: dict[str, np.ndarray[Any, np.dtype[np.float32]]] = {}

    @property
    def identity(self) -> ModelIdentity:
        return self.model.identity

    def embed(self, texts: Sequence[str]) -> Vectors:
        vectors = self.model.embed(texts)
        for text, vector in zip(texts, vectors, strict=True):
            self.kept[_digest(text)] = vector
        return vectors

    def record_queries(self, texts: Sequence[str]) -> None:
        for text, vector in zip(texts, embed_queries(self.model, texts), strict=True):
            self.kept[_digest(text)] = vector


def build(db: Path, embedder: Embedder) -> Path:
    """The sample corpus, built at ceiling restricted (every level searchable)."""
    ingest_corpus(SAMPLE_CORPUS, db, embedder, ceiling=Classification.RESTRICTED, progress=None, clock=lambda: TODAY)
    return db


def answer(response: SearchResponse) -> dict[str, Any]:
    """What a captured response keeps of an answer: everything but the passages' text and
    notices, which the citation id fixes."""
    return {
        "status": response.status,
        "reason": response.reason,
        "search_mode": response.search_mode,
        "search_mode_reason": response.search_mode_reason,
        "withheld": response.withheld,
        "results": [[r.citation_id, r.matched_by, r.confidence] for r in response.results],
    }


def cited(responses: Sequence[SearchResponse]) -> dict[str, list[str]]:
    """Each served passage's classification, document and heading, by citation id."""
    return {r.citation_id: [r.classification, r.document, r.heading] for resp in responses for r in resp.results}


Services = dict[tuple[Classification, bool], SearchService]


def run(services: Services, chosen: Sequence[Case]) -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    """Each case's answer from the service at its ceiling with its gate on or off, and what
    each served passage is (:func:`cited`)."""
    answers, responses = {}, []
    for case in chosen:
        response = services[case.ceiling, case.gate].search(
            case.question, mode=case.mode, confidence_level=case.confidence
        )
        answers[case.key] = answer(response)
        responses.append(response)
    return answers, cited(responses)


def _numbers_masked(text: str | None) -> tuple[str | None, list[float]]:
    """A reason with its scores taken out, and the scores (they may move in the fourth place)."""
    if text is None:
        return None, []
    numbers = [float(n) for n in re.findall(r"\d+\.\d+|\d+", text)]
    return re.sub(r"\d+\.\d+|\d+", "#", text), numbers


def differences(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """How one answer departs from its capture, beyond what the contract allows: confidences
    within one step of the fourth place, and any order among results whose confidences tie."""
    problems = []
    for field in ("status", "search_mode", "search_mode_reason", "withheld"):
        if expected[field] != actual[field]:
            problems.append(f"{field}: {expected[field]!r} != {actual[field]!r}")
    reason_e, numbers_e = _numbers_masked(expected["reason"])
    reason_a, numbers_a = _numbers_masked(actual["reason"])
    if reason_e != reason_a or len(numbers_e) != len(numbers_a):
        problems.append(f"reason: {expected['reason']!r} != {actual['reason']!r}")
    elif any(not math.isclose(e, a, abs_tol=CONFIDENCE_TOLERANCE) for e, a in zip(numbers_e, numbers_a, strict=True)):
        problems.append(f"reason's scores: {expected['reason']!r} != {actual['reason']!r}")
    got, want = actual["results"], expected["results"]
    if len(got) != len(want):
        return [*problems, f"{len(got)} results, captured {len(want)}"]
    for i, (e, a) in enumerate(zip(want, got, strict=True)):
        if not math.isclose(e[2], a[2], abs_tol=CONFIDENCE_TOLERANCE):
            problems.append(f"rank {i + 1}: confidence {a[2]} against {e[2]}")
        elif e[:2] != a[:2] and not _tied_elsewhere(want, i, a):
            problems.append(f"rank {i + 1}: {a[:2]} against {e[:2]}")
    return problems


def _tied_elsewhere(want: list[list[Any]], i: int, served: list[Any]) -> bool:
    """Whether a result other than the captured one may stand at rank ``i + 1``: the captured
    answer has another result of the same confidence (their order was a tie), and what is served
    there is one of those, or, when they end the list, one the limit may have cut between equals."""
    tied = [j for j, e in enumerate(want) if j != i and math.isclose(e[2], want[i][2], abs_tol=CONFIDENCE_TOLERANCE)]
    if not tied:
        return False
    if any(want[j][:2] == served[:2] for j in tied):
        return True
    return max(tied) == len(want) - 1 or i == len(want) - 1


def save(path: Path, answers: dict[str, dict[str, Any]], passages: dict[str, list[str]]) -> None:
    """The capture as JSON, each answer on one line; results name passages by their place in
    one table of passages (a citation id is long, and served many times)."""
    ids = sorted(passages)
    where = {cid: i for i, cid in enumerate(ids)}
    lines = ["{", '"passages": [']
    lines += [json.dumps([cid, *passages[cid]], ensure_ascii=False) + "," for cid in ids]
    lines[-1] = lines[-1].rstrip(",")
    lines += ["],", '"answers": {']
    for key in sorted(answers):
        one = dict(answers[key], results=[[where[r[0]], *r[1:]] for r in answers[key]["results"]])
        lines.append(f"{json.dumps(key, ensure_ascii=False)}: {json.dumps(one, ensure_ascii=False, sort_keys=True)},")
    lines[-1] = lines[-1].rstrip(",")
    lines += ["}", "}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def load(path: Path = RESPONSES) -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    """The captured answers (results naming passages by citation id) and the passages' table."""
    data = json.loads(path.read_text(encoding="utf-8"))
    table = data["passages"]
    answers = {
        key: dict(one, results=[[table[r[0]][0], *r[1:]] for r in one["results"]])
        for key, one in data["answers"].items()
    }
    return answers, {row[0]: row[1:] for row in table}


def record() -> None:
    """Record the vectors with the real default model, then each case's answer."""
    import tempfile

    from governed_evidence.embeddings.minilm import MiniLMEmbedder

    recorder = _Recorder(MiniLMEmbedder())
    chosen = list(cases())
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp) / "index.sqlite", recorder)
        recorder.record_queries(questions())
        digests = sorted(recorder.kept)
        identity = recorder.identity
        HERE.mkdir(exist_ok=True)
        np.savez_compressed(
            VECTORS,
            identity=np.asarray(
                json.dumps(
                    {"model_id": identity.model_id, "dimension": identity.dimension, "checksum": identity.checksum}
                )
            ),
            digests=np.asarray(digests),
            vectors=np.stack([recorder.kept[d] for d in digests]).astype(np.float32),
        )
        embedder = RecordedEmbedder()
        db = build(Path(tmp) / "recorded.sqlite", embedder)
        services = searchers(db, embedder, SHIPPED_MEMORY)
        answers, passages = run(services, chosen)
        for service in services.values():
            service.reader.close()
    save(RESPONSES, answers, passages)
    print(f"recorded {len(digests)} vectors and {len(answers)} answers in {HERE}", file=sys.stderr)


def searchers(db: Path, embedder: Embedder, memory: int, **tuning: Any) -> Services:
    """A service over ``db`` at each ceiling, gate on and off; ``memory`` bytes for the
    in-memory copies (0: SQL alone), loaded before it answers; ``tuning``: thresholds that
    differ from the shipped ones."""
    services = {}
    for ceiling in Classification:
        for gate in (True, False):
            service = SearchService(
                db,
                ceiling=ceiling,
                embedder_factory=lambda: embedder,
                gate_enabled=gate,
                vector_memory_bytes=memory,
                tuning=replace(DEFAULT_TUNING, **tuning),
                clock=lambda: TODAY,
            )
            if memory:
                service.warm()
            services[ceiling, gate] = service
    return services


if __name__ == "__main__":
    record()
