"""Question suites over real corpora: per-corpus slice tables for tuning and for validation.

A suite (``evals/suites.toml``) names corpora, each with its question file. Every corpus gets
a fresh index (or one kept in a cache folder, rebuilt only when its files change), and every
retrieval question is scored three ways at once:

* as the release gate scores it: strict confidence, 8 results, distinct documents in order;
* at ``confidence normal`` with 10 results: is the right page among them (``page@10``)?
* before the gate: is the right page among the first 10 or 50 candidates of the mode's own
  ranking (``recall@10``, ``recall@50``)? No reordering of candidates can pass this bound.

A question that names ``pages`` (the PDFs) is scored by passage, not by document: a hit is a
result from its document whose page span covers one of those pages (``Question.answered_by``).

Unanswerable questions are scored by abstention at both confidence levels. Corpora missing
on this machine are skipped and said so: the corpora are not part of the repository.
"""

from __future__ import annotations

import shutil
import tempfile
import tomllib
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from governed_evidence.config import Classification, parse_level
from governed_evidence.embeddings.base import Embedder
from governed_evidence.errors import ConfigError, GovernedEvidenceError
from governed_evidence.evaluation.questions import Question, load_questions
from governed_evidence.evaluation.runner import (
    GATE_LIMIT,
    SliceReport,
    abstention_report,
    answer_rank,
    retrieval_report,
)
from governed_evidence.evaluation.tradeoff import QuestionProbe, answer_position, probe_questions
from governed_evidence.search.limits import SearchMode

# The CLI imports this module's parent on every command; the search service (and with it
# numpy and the vector code) is imported when a suite runs.
if TYPE_CHECKING:
    from governed_evidence.search.rerank import Reranker
    from governed_evidence.search.service import SearchService

__all__ = ["SUITES", "CorpusSpec", "SuiteRun", "load_suite", "run_suite", "score_corpus"]

#: The suites ``evals/suites.toml`` may define.
SUITES = ("tuning", "validation")
#: Results asked for at ``confidence normal`` (strict is scored as the release gate scores it).
_NORMAL_LIMIT = 10


@dataclass(frozen=True)
class CorpusSpec:
    name: str
    #: The folder indexed (or the root that ``folders`` are taken from).
    root: Path
    questions: Path
    #: Sub-folders of ``root`` that make up the corpus (empty: all of ``root``).
    folders: tuple[str, ...] = ()
    #: Level given to documents without a classification label.
    default_classification: Classification = Classification.PUBLIC
    #: Ceiling of the caller the questions are asked as.
    ceiling: Classification = Classification.PUBLIC
    #: Id prefixes whose questions are also scored alone (``NAME/GROUP:slice``), as the PDFs' by
    #: document: a question belongs to group ``eu`` when its id starts with ``eu-``.
    groups: tuple[str, ...] = ()


@dataclass
class SuiteRun:
    reports: list[SliceReport]
    #: Corpus name -> why it was not scored (absent on this machine).
    skipped: dict[str, str]
    #: Corpus name -> passages indexed.
    passages: dict[str, int]
    #: With ``probe``: corpus name -> mode -> each question's ranking before the gate (the report's
    #: trade-off curve and recall, evaluation.tradeoff).
    probes: dict[str, dict[str, list[QuestionProbe]]] = field(default_factory=dict)
    #: With ``probe``: corpus name -> the model and index it was measured on, at its ceiling.
    indexes: dict[str, dict[str, Any]] = field(default_factory=dict)


def load_suite(path: Path, suite: str, base: Path) -> list[CorpusSpec]:
    """The corpora of ``suite`` in the TOML file at ``path``; relative paths are from ``base``."""
    if suite not in SUITES:
        raise ConfigError(f"unknown suite {suite!r}; choose one of: {', '.join(SUITES)}")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read the suites file {path.name}: {exc}") from None
    table = raw.get(suite)
    if not isinstance(table, dict) or not table:
        raise ConfigError(f"{path.name} defines no corpora for the {suite} suite")
    specs: list[CorpusSpec] = []
    for name, entry in table.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("corpus"), str):
            raise ConfigError(f'{path.name} [{suite}.{name}] needs corpus = "folder" and questions = "file"')
        groups = entry.get("groups", [])
        if not isinstance(groups, list) or not all(isinstance(g, str) and g for g in groups):
            raise ConfigError(f'{path.name} [{suite}.{name}]: groups must be a list of id prefixes, like ["eu", "irs"]')
        try:
            specs.append(
                CorpusSpec(
                    name=name,
                    root=base / entry["corpus"],
                    questions=base / str(entry["questions"]),
                    folders=tuple(str(f) for f in entry.get("folders", ())),
                    default_classification=parse_level(str(entry.get("default_classification", "public"))),
                    ceiling=parse_level(str(entry.get("ceiling", "public"))),
                    groups=tuple(groups),
                )
            )
        except (KeyError, GovernedEvidenceError) as exc:
            raise ConfigError(f"{path.name} [{suite}.{name}]: {exc}") from None
    return specs


@contextmanager
def _corpus_folder(spec: CorpusSpec) -> Iterator[Path]:
    """The folder to ingest: ``root`` itself, or a scratch copy of the named sub-folders."""
    if not spec.folders:
        yield spec.root
        return
    with tempfile.TemporaryDirectory(prefix=f"ge-suite-{spec.name}-") as scratch:
        target = Path(scratch) / spec.name
        for folder in spec.folders:
            shutil.copytree(spec.root / folder, target / folder, symlinks=True)
        yield target


def _absent(spec: CorpusSpec) -> str | None:
    if not spec.root.is_dir():
        return f"corpus folder {spec.root} is absent on this machine"
    missing = [f for f in spec.folders if not (spec.root / f).is_dir()]
    if missing:
        return f"corpus sub-folder {missing[0]} is absent under {spec.root}"
    if not spec.questions.is_file():
        return f"question file {spec.questions} is absent"
    return None


def score_corpus(
    name: str,
    questions: list[Question],
    service: SearchService,
    mode: SearchMode,
) -> list[SliceReport]:
    """The retrieval and abstention slices of one corpus, named ``name:slice``."""
    reports: list[SliceReport] = []
    for slice_name in ("answerable", "paraphrase", "crosslingual"):
        chosen = [q for q in questions if q.slice == slice_name]
        if chosen:
            reports.append(_retrieval(f"{name}:{slice_name}", chosen, service, mode))
    unanswerable = [q for q in questions if q.slice == "unanswerable"]
    if unanswerable:
        reports.append(_abstention(f"{name}:unanswerable", unanswerable, service, mode))
    return reports


def _retrieval(label: str, questions: list[Question], service: SearchService, mode: SearchMode) -> SliceReport:
    # Strict, as the release gate scores a slice; then normal and recall, question by question.
    report = retrieval_report(questions, service, mode, label)
    totals = dict.fromkeys(("normal_hit@3", "page@10", "recall@10", "recall@50"), 0.0)
    for q in questions:
        normal = service.search(q.question, limit=_NORMAL_LIMIT, mode=mode, confidence_level="normal")
        rank = answer_rank(q, normal.results)
        totals["normal_hit@3"] += rank is not None and rank <= 3
        totals["page@10"] += rank is not None
        found = answer_position(q, service.rank(q.question, mode), 50)
        totals["recall@10"] += found is not None and found < 10
        totals["recall@50"] += found is not None
    n = max(report.n, 1)
    report.metrics.update({k: v / n for k, v in totals.items()})
    return report


def _abstention(label: str, questions: list[Question], service: SearchService, mode: SearchMode) -> SliceReport:
    report = abstention_report(questions, service, mode, label)
    normal_abstained = sum(
        service.search(q.question, limit=GATE_LIMIT, mode=mode, confidence_level="normal").status
        == "NO_RELEVANT_CONTEXT"
        for q in questions
    )
    report.metrics["normal_abstention_rate"] = normal_abstained / max(report.n, 1)
    return report


def run_suite(
    specs: list[CorpusSpec],
    embedder: Embedder,
    modes: tuple[SearchMode, ...],
    *,
    cache_dir: Path | None = None,
    gate_enabled: bool = True,
    reranker: Reranker | None = None,
    progress: Callable[[str], None] = lambda line: None,
    probe: bool = False,
) -> SuiteRun:
    """Index every corpus present (in ``cache_dir`` when given) and score its questions.

    ``reranker``: searched as a server with that reranker configured would search, so an
    endpoint can be measured on the same questions (off unless given). ``probe``: also rank
    each question once per mode for the report (``SuiteRun.probes`` and ``indexes``).
    """
    from governed_evidence.ingest.pipeline import ingest_corpus
    from governed_evidence.search.service import SearchService

    run = SuiteRun([], {}, {})
    with ExitStack() as stack:
        folder = cache_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ge-suite-")))
        folder.mkdir(parents=True, exist_ok=True)
        for spec in specs:
            reason = _absent(spec)
            if reason is not None:
                run.skipped[spec.name] = reason
                progress(f"{spec.name}: skipped ({reason})")
                continue
            db = folder / f"{spec.name}.sqlite"
            with _corpus_folder(spec) as corpus:
                built = ingest_corpus(
                    corpus,
                    db,
                    embedder,
                    ceiling=Classification.RESTRICTED,
                    default_classification=spec.default_classification,
                    progress=None,
                )
            run.passages[spec.name] = built.passages
            done = "index kept (corpus unchanged)" if built.unchanged else f"{built.passages} passages indexed"
            progress(f"{spec.name}: {done}")
            # As the server searches: the vectors held in memory.
            service = SearchService(
                db, ceiling=spec.ceiling, embedder_factory=lambda: embedder, gate_enabled=gate_enabled,
                vector_memory_bytes=1 << 30, reranker=reranker,
            )  # fmt: skip
            questions = load_questions(spec.questions)
            if probe:
                from governed_evidence.evaluation.report import index_figures

                # Named as the suite names the corpus (the index records its folder's name).
                run.indexes[spec.name] = {**index_figures(db, spec.ceiling), "corpus": spec.name}
            for mode in modes:
                run.reports.extend(score_corpus(spec.name, questions, service, mode))
                if probe:
                    run.probes.setdefault(spec.name, {})[mode] = probe_questions(questions, service, mode)
                for group in spec.groups:
                    members = [q for q in questions if q.id.startswith(f"{group}-")]
                    if not members:
                        raise ConfigError(f"{spec.name}: no question id starts with {group}- (its groups)")
                    run.reports.extend(score_corpus(f"{spec.name}/{group}", members, service, mode))
            service.close()
    return run
