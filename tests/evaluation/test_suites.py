"""Question suites over real corpora (evals/suites.toml): loading, scoring, skipping."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest
from pypdf import PdfReader

from governed_evidence.config import Classification
from governed_evidence.errors import ConfigError
from governed_evidence.evaluation.questions import load_questions
from governed_evidence.evaluation.release_gate import load_gate
from governed_evidence.evaluation.suites import CorpusSpec, _corpus_folder, load_suite, run_suite
from governed_evidence.search.rerank import RerankPassage

REPO = Path(__file__).resolve().parents[2]
SUITES = REPO / "evals" / "suites.toml"


@pytest.mark.parametrize("suite", ["tuning", "validation"])
def test_committed_suites_load_and_their_labels_name_real_files(suite: str) -> None:
    specs = load_suite(SUITES, suite, REPO)
    assert specs, "every suite names at least one corpus"
    for spec in specs:
        questions = load_questions(spec.questions)
        assert {q.slice for q in questions} >= {"answerable", "paraphrase", "unanswerable"}
        if not spec.root.is_dir():
            continue  # the corpora live in ../shared; the labels are checked where they are present
        for q in questions:
            for path in q.expected:
                # Relative to the folder indexed, which holds the named sub-folders as they are.
                assert (spec.root / path).is_file(), f"{q.id}: {path}"
                assert not spec.folders or path.split("/")[0] in spec.folders, f"{q.id}: {path} is not indexed"
                if q.pages:
                    pages = len(PdfReader(spec.root / path).pages)
                    assert all(1 <= page <= pages for page in q.pages), f"{q.id}: pages {q.pages} of {pages}"


def test_the_tuning_gate_bounds_only_tuning_corpora() -> None:
    tuning = {s.name for s in load_suite(SUITES, "tuning", REPO)}
    validation = {s.name for s in load_suite(SUITES, "validation", REPO)}
    bounded = {name.split(":")[0] for name in load_gate(REPO / "evals" / "gate-tuning.toml") if ":" in name}
    assert bounded == tuning
    assert not bounded & validation, "nothing is thresholded on a validation corpus"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "no corpora for the tuning suite"),
        ('[tuning.x]\nquestions = "q.jsonl"\n', "needs corpus"),
        ('[tuning.x]\ncorpus = "c"\n', "questions"),
        ('[tuning.x]\ncorpus = "c"\nquestions = "q"\nceiling = "sky-high"\n', "[tuning.x]"),
        ("not toml [", "cannot read"),
        ('[tuning.x]\ncorpus = "c"\nquestions = "q"\ngroups = "eu"\n', "groups must be a list"),
        ('[tuning.x]\ncorpus = "c"\nquestions = "q"\ngroups = [""]\n', "groups must be a list"),
    ],
)
def test_a_broken_suites_file_fails_with_a_reason(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "suites.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=words.replace("[", r"\[").replace(".", r"\.")):
        load_suite(path, "tuning", tmp_path)


def test_an_unknown_suite_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown suite"):
        load_suite(SUITES, "everything", REPO)


def test_named_folders_are_the_whole_corpus(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "policies").mkdir(parents=True)
    (root / "policies" / "a.md").write_text("# A\n")
    (root / "MANIFEST.md").write_text("# not a policy\n")
    spec = CorpusSpec("x", root, tmp_path / "q.jsonl", folders=("policies",))
    with _corpus_folder(spec) as folder:
        assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == ["policies/a.md"]
    assert (root / "MANIFEST.md").is_file(), "the source is never touched"


def _sample_suite(
    tmp_path: Path, sample_index: Path, slices: tuple[str, ...], most: int | None = None
) -> tuple[Path, CorpusSpec]:
    """A cache folder holding the session's sample index, and a spec asking the sample's
    questions of ``slices`` (the first ``most``). The corpus is unchanged, so the index is
    kept as is and nothing is re-embedded."""
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copy(sample_index, cache / "sample.sqlite")
    lines = [
        line
        for line in (REPO / "evals" / "questions.jsonl").read_text().splitlines()
        if json.loads(line)["slice"] in slices
    ][:most]
    questions = tmp_path / "questions.jsonl"
    questions.write_text("\n".join(lines) + "\n")
    spec = CorpusSpec(
        "sample", REPO / "data" / "sample_corpus", questions,
        default_classification=Classification.RESTRICTED, ceiling=Classification.INTERNAL,
    )  # fmt: skip
    return cache, spec


def test_a_suite_scores_each_corpus_and_skips_an_absent_one(
    sample_index: Path,
    minilm,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    cache, present = _sample_suite(tmp_path, sample_index, ("answerable", "paraphrase", "unanswerable"))
    absent = CorpusSpec("elsewhere", tmp_path / "no-such-corpus", present.questions)
    run = run_suite([present, absent], minilm, ("hybrid",), cache_dir=cache)

    assert run.skipped == {"elsewhere": f"corpus folder {tmp_path / 'no-such-corpus'} is absent on this machine"}
    by_slice = {r.slice: r for r in run.reports}
    assert set(by_slice) == {"sample:answerable", "sample:paraphrase", "sample:unanswerable"}
    answerable = by_slice["sample:answerable"].metrics
    assert answerable["hit@3"] >= 0.96 and answerable["false_abstention"] == 0.0
    paraphrase = by_slice["sample:paraphrase"].metrics
    assert paraphrase["recall@10"] <= paraphrase["recall@50"]
    assert paraphrase["page@10"] >= 0.9 and paraphrase["hit@3"] >= 0.8
    unanswerable = by_slice["sample:unanswerable"].metrics
    # Normal keeps a superset of what strict keeps, so it can never abstain more often.
    assert unanswerable["normal_abstention_rate"] <= unanswerable["abstention_rate"]
    assert unanswerable["abstention_rate"] >= 0.5

    sabotaged = run_suite([present], minilm, ("hybrid",), cache_dir=cache, gate_enabled=False)
    off = {r.slice: r.metrics for r in sabotaged.reports}["sample:unanswerable"]
    assert off["abstention_rate"] == 0.0, "with the gate off nothing is abstained on"


class _WithholdAll:
    """A reranker scoring every passage below its own bar: every search it sees is emptied."""

    kind = "rerank-api"
    label = "rerank-api model stand-in"
    top_n = 20
    withhold_below = 1.0

    def __init__(self) -> None:
        self.queries: list[str] = []

    def score(self, query: str, passages: Sequence[RerankPassage]) -> list[float]:
        self.queries.append(query)
        return [0.0] * len(passages)


def test_a_suite_searches_through_the_reranker_it_is_given(
    sample_index: Path,
    minilm,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    cache, spec = _sample_suite(tmp_path, sample_index, ("answerable",), most=5)
    reranker = _WithholdAll()
    run = run_suite([spec], minilm, ("hybrid",), cache_dir=cache, reranker=reranker)
    metrics = {r.slice: r.metrics for r in run.reports}["sample:answerable"]
    assert reranker.queries, "the suite's searches went through the reranker"
    assert metrics["false_abstention"] == 1.0, "what the reranker withheld is what the suite scored"
    assert metrics["recall@10"] == 1.0, "recall is measured before the gate and the reranker"


def test_a_corpus_groups_are_also_scored_alone_by_id_prefix(
    sample_index: Path,
    minilm,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    cache, spec = _sample_suite(tmp_path, sample_index, ("answerable", "unanswerable"))
    grouped = dataclasses.replace(spec, groups=("ans", "una"))
    run = run_suite([grouped], minilm, ("keyword",), cache_dir=cache)
    by_slice = {r.slice: r for r in run.reports}
    assert set(by_slice) == {
        "sample:answerable", "sample:unanswerable",
        "sample/ans:answerable", "sample/una:unanswerable",
    }  # fmt: skip
    # Each group holds one slice here, so a group's figures are its slice's figures.
    assert by_slice["sample/ans:answerable"].n == by_slice["sample:answerable"].n == 26
    assert by_slice["sample/ans:answerable"].metrics == by_slice["sample:answerable"].metrics
    assert by_slice["sample/una:unanswerable"].n == 15

    typo = dataclasses.replace(spec, groups=("answer",))
    with pytest.raises(ConfigError, match="no question id starts with answer-"):
        run_suite([typo], minilm, ("keyword",), cache_dir=cache)
