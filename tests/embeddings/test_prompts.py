"""Asymmetric embedders: query and passage prompts, their presets, and the index's record of them."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from governed_evidence.config import Classification, Settings
from governed_evidence.embeddings.base import ModelIdentity, embed_queries
from governed_evidence.embeddings.factory import make_embedder
from governed_evidence.embeddings.openai import OpenAIEmbedder
from governed_evidence.embeddings.prompts import PRESETS, Prompting, resolve_prompting
from governed_evidence.errors import ConfigError
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.search.service import SearchService
from tests.helpers import HashEmbedder, meta_of, run_cli, small_corpus


def _recording(prompting: Prompting, seen: list[dict[str, object]]) -> OpenAIEmbedder:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        data = [{"index": i, "embedding": [1.0, float(len(t))]} for i, t in enumerate(body["input"])]
        return httpx.Response(200, json={"data": data})

    return OpenAIEmbedder(
        "http://127.0.0.1:9",
        "m",
        transport=httpx.MockTransport(handler),  # type: ignore[arg-type]
        prompting=prompting,
    )


def test_passages_and_queries_get_their_own_prefix_and_input_type() -> None:
    seen: list[dict[str, object]] = []
    embedder = _recording(Prompting("query: ", "passage: ", ("query", "document")), seen)
    embedder.embed(["a policy"])
    embed_queries(embedder, ["a question"])
    assert seen[0] == {"model": "m", "input": ["passage: a policy"], "input_type": "document"}
    assert seen[1] == {"model": "m", "input": ["query: a question"], "input_type": "query"}


def test_a_symmetric_embedder_sends_bare_text_and_no_input_type() -> None:
    seen: list[dict[str, object]] = []
    embedder = _recording(Prompting(), seen)
    embedder.embed(["a policy"])
    embed_queries(embedder, ["a question"])
    assert seen == [{"model": "m", "input": ["a policy"]}, {"model": "m", "input": ["a question"]}]
    assert embedder.identity.model_id == "openai-compatible:m"


def test_the_prompts_are_part_of_the_model_id() -> None:
    seen: list[dict[str, object]] = []
    e5 = _recording(resolve_prompting("e5"), seen)
    assert e5.identity.model_id == "openai-compatible:m [query_prefix='query: '; passage_prefix='passage: ']"
    typed = _recording(resolve_prompting("none", input_type="query/passage"), seen)
    typed_id = "openai-compatible:m [query_prefix=''; passage_prefix=''; input_type=query/passage]"
    assert typed.identity.model_id == typed_id
    bare = _recording(Prompting(), seen)
    reason = bare.identity.describe_mismatch(e5.identity.model_id, 2)
    assert reason is not None and "other query/passage prompts" in reason
    assert ModelIdentity("other", 2, "x").describe_mismatch(e5.identity.model_id, 2) is not None
    assert "other query/passage prompts" not in (ModelIdentity("other", 2, "x").describe_mismatch("m", 2) or "")


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_resolves_and_a_prefix_given_by_hand_wins(preset: str) -> None:
    query, passage = PRESETS[preset]
    assert resolve_prompting(preset) == Prompting(query, passage)
    assert resolve_prompting(preset, query_prefix="Q: ") == Prompting("Q: ", passage)
    assert resolve_prompting(preset, passage_prefix="") == Prompting(query, "")


def test_bad_prompt_settings_are_refused_clearly() -> None:
    with pytest.raises(ConfigError, match="unknown embedding prompt preset"):
        resolve_prompting("e6")
    with pytest.raises(ConfigError, match="QUERY_VALUE/PASSAGE_VALUE"):
        resolve_prompting("none", input_type="query")
    with pytest.raises(ValueError, match="openai_input_type"):
        Settings(openai_input_type="query/passage/extra")
    with pytest.raises(ValueError, match="openai_preset"):
        Settings(openai_preset="e6")  # type: ignore[arg-type]


def test_the_settings_reach_the_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOVERNED_EVIDENCE_OPENAI_PRESET", "nomic")
    monkeypatch.setenv("GOVERNED_EVIDENCE_OPENAI_QUERY_PREFIX", "ask: ")
    monkeypatch.setenv("GOVERNED_EVIDENCE_OPENAI_INPUT_TYPE", "query/passage")
    embedder = make_embedder(Settings(), "openai")
    assert isinstance(embedder, OpenAIEmbedder)
    assert embedder.prompting == Prompting("ask: ", "search_document: ", ("query", "passage"))


class _Prompted(HashEmbedder):
    """The hashing test model, asymmetric: a query's prefix changes its vector."""

    def __init__(self, prefix: str) -> None:
        super().__init__(model_id=f"test/hash-bow [query_prefix={prefix!r}]")
        self.prefix = prefix

    def embed_queries(self, texts: list[str]) -> object:
        return self.embed([self.prefix + t for t in texts])


def test_an_index_is_never_queried_with_other_prompts(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path / "corpus")
    db = tmp_path / "index.sqlite"
    ingest_corpus(corpus, db, _Prompted("query: "), ceiling=Classification.RESTRICTED, progress=None)
    assert meta_of(db)["embedding_model"] == "test/hash-bow [query_prefix='query: ']"

    same = SearchService(db, ceiling=Classification.RESTRICTED, embedder_factory=lambda: _Prompted("query: "))
    assert same.search("train fares", mode="hybrid").search_mode == "hybrid"
    other = SearchService(db, ceiling=Classification.RESTRICTED, embedder_factory=lambda: _Prompted("search_query: "))
    response = other.search("train fares", mode="hybrid")
    assert response.search_mode == "keyword"
    assert "other query/passage prompts" in (response.search_mode_reason or "")


def test_status_json_shows_the_prompts_the_index_was_built_with(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path / "corpus")
    db = tmp_path / "index.sqlite"
    ingest_corpus(corpus, db, _Prompted("query: "), ceiling=Classification.RESTRICTED, progress=None)
    # The configured embedder is an endpoint nobody listens on: status still reads the index.
    env = {"GOVERNED_EVIDENCE_EMBEDDER": "openai", "GOVERNED_EVIDENCE_OPENAI_BASE_URL": "http://127.0.0.1:9"}
    done = run_cli("status", "--db", str(db), "--json", env=env, log_level="WARNING")
    status = json.loads(done.stdout)
    assert status["embedding_model"] == "test/hash-bow [query_prefix='query: ']"
    assert status["semantic_search"] == "unavailable"
