from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from governed_evidence.config import Classification
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.search.service import SearchService
from tests.helpers import HashEmbedder, small_corpus


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
