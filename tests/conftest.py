from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from governed_evidence.config import Classification
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.search.service import SearchService
from tests.helpers import HashEmbedder, logging_restored, small_corpus


@pytest.fixture
def hash_embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture(scope="session")
def minilm():  # type: ignore[no-untyped-def]
    """The real default model, loaded once per test session."""
    from governed_evidence.embeddings.minilm import MiniLMEmbedder

    return MiniLMEmbedder()


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return small_corpus(tmp_path / "corpus")


@pytest.fixture
def built_index(tmp_path: Path, corpus: Path, hash_embedder: HashEmbedder) -> Path:
    """The small corpus built at ceiling restricted with the hash embedder."""
    db = tmp_path / "index.sqlite"
    ingest_corpus(corpus, db, hash_embedder, ceiling=Classification.RESTRICTED, progress=None)
    return db


@pytest.fixture
def service_factory(built_index: Path, hash_embedder: HashEmbedder) -> Iterator[object]:
    services: list[SearchService] = []

    def make(ceiling: Classification = Classification.PUBLIC, gate: bool = True) -> SearchService:
        svc = SearchService(built_index, ceiling=ceiling, embedder_factory=lambda: hash_embedder, gate_enabled=gate)
        services.append(svc)
        return svc

    yield make
    for svc in services:
        svc.reader.close()


REPO = Path(__file__).resolve().parents[1]
SAMPLE_CORPUS = REPO / "data" / "sample_corpus"


@pytest.fixture(scope="session")
def sample_index(tmp_path_factory: pytest.TempPathFactory, minilm) -> Path:  # type: ignore[no-untyped-def]
    """The sample corpus built once at ceiling restricted with the real default model."""
    db = tmp_path_factory.mktemp("sample") / "evidence.sqlite"
    ingest_corpus(SAMPLE_CORPUS, db, minilm, ceiling=Classification.RESTRICTED, progress=None)
    return db


# `make test-fast` (`pytest --fast`): the contributor's loop without the real model. Deselects
# every test that loads the default embedder in-process (it asks for one of these fixtures),
# every test marked `model` (it starts the CLI or the server, which load the real model, as a
# subprocess), and the `slow` and `heavy` runs. `make test` (the full suite) is what CI runs.
REAL_MODEL_FIXTURES = frozenset({"minilm", "sample_index"})
FAST_DESELECTED_MARKERS = ("model", "slow", "heavy")
# The suites CONTRIBUTING.md lists as slow by design (run them before you push): the hardening
# probes and load, and the command line (tests/test_cli*.py) and `eval` run as subprocesses,
# which load the real model. Also the hostile files parsed in CPU- and memory-limited children
# (test_loader_bounds.py: half a minute spent waiting for budgets to trip); run it by name when
# you touch a loader or ingest/loaders/bounded.py.
FAST_DESELECTED_PATHS = (
    "tests/hardening/",
    "tests/test_cli",
    "tests/evaluation/test_eval_command.py",
    "tests/ingest/test_loader_bounds.py",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        default=False,
        help="skip the tests that use the real embedding model, and the slow and heavy ones (make test-fast)",
    )


def uses_real_model_or_is_slow(item: pytest.Item) -> bool:
    if item.nodeid.startswith(FAST_DESELECTED_PATHS):
        return True
    if REAL_MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    return any(item.get_closest_marker(name) is not None for name in FAST_DESELECTED_MARKERS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--fast"):
        return
    kept, dropped = [], []
    for item in items:
        (dropped if uses_real_model_or_is_slow(item) else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """A command run in-process (``main``) sets logging up on the captured stderr: put it back
    afterwards, so later tests do not write to a closed capture (a fixture of a wider scope that
    runs a command wraps it in :func:`tests.helpers.logging_restored` itself)."""
    with logging_restored():
        yield
