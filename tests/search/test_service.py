"""SearchService behaviour on the small three-level corpus (hash embedder)."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from governed_evidence.config import Classification
from governed_evidence.embeddings.base import Vectors
from governed_evidence.errors import (
    EmbedderError,
    IndexCorruptError,
    IndexMissingError,
    InvalidRequestError,
    NotFoundError,
)
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.search.lookup import NOT_FOUND_MESSAGE
from governed_evidence.search.service import SearchService
from governed_evidence.search.tuning import SearchTuning
from tests.helpers import HashEmbedder, write

Factory = Callable[..., SearchService]

RESTRICTED_WORDS = ["Quillmoor", "Zephyr", "acquisition", "41.7 million", "cost centre 9931", "Brackenfield", "88,000"]


def _all_text(svc: SearchService, query: str, **kw: object) -> str:
    return svc.search(query, limit=20, **kw).model_dump_json()  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
def test_restricted_never_returned_below_its_level_even_with_gate_off(service_factory: Factory, mode: str) -> None:
    for ceiling in (Classification.PUBLIC, Classification.INTERNAL):
        svc = service_factory(ceiling, gate=False)
        for query in [*RESTRICTED_WORDS, "travel expenses due diligence", "confidential dispute invoices"]:
            response = svc.search(query, limit=20, mode=mode, confidence_level="normal")
            dumped = response.model_dump_json()
            for word in ("Quillmoor", "Zephyr", "Brackenfield", "9931", "restricted/"):
                assert word not in dumped
            assert all(r.classification != "restricted" for r in response.results)
            if ceiling is Classification.PUBLIC:
                assert all(r.classification == "public" for r in response.results)


def test_restricted_is_found_at_its_own_level(service_factory: Factory) -> None:
    svc = service_factory(Classification.RESTRICTED, gate=False)
    response = svc.search("Quillmoor acquisition", limit=5)
    assert response.results[0].document == "restricted/zephyr.md"
    assert response.results[0].classification == "restricted"


def test_unknown_label_counts_as_restricted(service_factory: Factory) -> None:
    public = service_factory(Classification.INTERNAL, gate=False)
    assert "Brackenfield" not in _all_text(public, "Brackenfield vendor dispute invoices")
    restricted = service_factory(Classification.RESTRICTED, gate=False)
    hit = restricted.search("Brackenfield vendor dispute", limit=3).results[0]
    assert hit.document == "public/labelled-secret.md"
    assert hit.classification == "restricted"


def test_denied_equals_missing(service_factory: Factory) -> None:
    top = service_factory(Classification.RESTRICTED, gate=False)
    restricted_id = top.search("Quillmoor", limit=1).results[0].citation_id
    svc = service_factory(Classification.PUBLIC)
    with pytest.raises(NotFoundError) as denied:
        svc.read_passage(restricted_id)
    with pytest.raises(NotFoundError) as missing:
        svc.read_passage("restricted/zephyr.md#nothing-here:L1-2")
    assert str(denied.value) == str(missing.value) == NOT_FOUND_MESSAGE
    assert "zephyr" not in str(denied.value).lower()


def test_read_passage_with_context(service_factory: Factory) -> None:
    svc = service_factory(Classification.PUBLIC, gate=False)
    hit = svc.search("hotel nightly cap", limit=1).results[0]
    assert hit.document == "public/expenses.md"
    page = svc.read_passage(hit.citation_id, context=3)
    assert page.passage.citation_id == hit.citation_id
    assert page.passage.position == 0
    neighbours = [p.position for p in page.before + page.after]
    assert neighbours and all(p != 0 and abs(p) <= 3 for p in neighbours)
    assert all(p.document == "public/expenses.md" for p in page.before + page.after)
    with pytest.raises(InvalidRequestError):
        svc.read_passage(hit.citation_id, context=4)


def test_superseded_is_out_of_search_but_readable_and_flagged(service_factory: Factory, built_index: Path) -> None:
    svc = service_factory(Classification.INTERNAL, gate=False)
    response = svc.search("work from home days per week approval", limit=20)
    documents = [r.document for r in response.results]
    assert "internal/remote-2024.md" in documents
    assert "internal/remote-2022.md" not in documents
    from governed_evidence.store.connection import connect

    conn = connect(built_index, readonly=True)
    (old_id,) = conn.execute(
        "SELECT citation_id FROM passages p JOIN documents d ON d.id = p.document_id WHERE d.path = ?",
        ("internal/remote-2022.md",),
    ).fetchone()
    conn.close()
    page = svc.read_passage(old_id)
    assert page.superseded_by == "internal/remote-2024.md"


def test_seeded_credential_is_never_served(service_factory: Factory) -> None:
    svc = service_factory(Classification.RESTRICTED, gate=False)
    for query in ["service account password", "hunter2", "vault credentials", "deployment runbook"]:
        assert "hunter2" not in _all_text(svc, query)
    # The rest of the runbook is still indexed.
    assert svc.search("release pipeline change board", limit=3).results[0].document == "internal/runbook.md"


def test_model_mismatch_falls_back_to_keywords(built_index: Path) -> None:
    other = HashEmbedder(model_id="test/other-model")
    svc = SearchService(built_index, ceiling=Classification.PUBLIC, embedder_factory=lambda: other, gate_enabled=False)
    response = svc.search("train fares", mode="semantic")
    assert response.requested_mode == "semantic"
    assert response.search_mode == "keyword"
    assert response.search_mode_reason is not None and "test/other-model" in response.search_mode_reason
    assert response.results and all(r.matched_by == "keyword" for r in response.results)
    assert svc.status().semantic_search == "unavailable"


def test_dimension_mismatch_falls_back_to_keywords(built_index: Path) -> None:
    wider = HashEmbedder(dimension=32)
    svc = SearchService(built_index, ceiling=Classification.PUBLIC, embedder_factory=lambda: wider)
    response = svc.search("train fares receipts")
    assert response.search_mode == "keyword"
    assert "32-d" in (response.search_mode_reason or "")


def test_unreachable_embedder_falls_back_to_keywords(built_index: Path) -> None:
    def broken() -> HashEmbedder:
        raise EmbedderError("embedding endpoint unreachable (ConnectError)")

    svc = SearchService(built_index, ceiling=Classification.PUBLIC, embedder_factory=broken, gate_enabled=False)
    response = svc.search("train fares")
    assert response.search_mode == "keyword"
    assert "unreachable" in (response.search_mode_reason or "")
    status = svc.status()
    assert status.ok and status.semantic_search == "unavailable"


def test_matched_by_reports_the_rankings(service_factory: Factory) -> None:
    svc = service_factory(Classification.PUBLIC, gate=False)
    assert {r.matched_by for r in svc.search("train fares", mode="keyword").results} == {"keyword"}
    assert {r.matched_by for r in svc.search("train fares", mode="semantic").results} == {"semantic"}
    hybrid = svc.search("claim train fares receipts", mode="hybrid").results
    assert hybrid[0].matched_by == "both"


def test_abstention_is_a_normal_result(service_factory: Factory) -> None:
    svc = service_factory(Classification.PUBLIC)
    response = svc.search("zyxxy qwertz frobnicate")
    assert response.status == "NO_RELEVANT_CONTEXT"
    assert response.results == []
    assert response.reason


def test_gate_withholds_what_gate_off_returns(service_factory: Factory) -> None:
    on = service_factory(Classification.PUBLIC).search("annual holidays staff", limit=20)
    off = service_factory(Classification.PUBLIC, gate=False).search("annual holidays staff", limit=20)
    assert len(off.results) >= len(on.results)
    assert off.withheld == 0
    assert len(on.results) + on.withheld == len(off.results)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"query": "   "}, "empty"),
        ({"query": "x" * 501}, "limit is 500"),
        ({"query": "ok", "limit": 0}, "limit"),
        ({"query": "ok", "limit": 21}, "limit"),
        ({"query": "ok", "mode": "fuzzy"}, "mode"),
        ({"query": "ok", "confidence_level": "lax"}, "confidence"),
    ],
)
def test_invalid_arguments_say_what_is_accepted(
    service_factory: Factory, kwargs: dict[str, object], message: str
) -> None:
    svc = service_factory()
    with pytest.raises(InvalidRequestError, match=message):
        svc.search(**kwargs)  # type: ignore[arg-type]


def test_list_sources_and_status_show_only_what_the_caller_may_see(service_factory: Factory) -> None:
    public = service_factory(Classification.PUBLIC)
    sources = public.list_sources()
    assert [t.classification for t in sources.totals] == ["public"]
    assert {d.classification for d in sources.documents} == {"public"}
    dumped = sources.model_dump_json() + public.status().model_dump_json()
    for word in ("restricted", "internal", "labelled-secret", "zephyr", "runbook"):
        assert word not in dumped.lower()
    status = public.status()
    assert status.documents == 2
    assert status.passages == sum(d.passages for d in sources.documents)
    everyone = service_factory(Classification.RESTRICTED)
    assert everyone.status().documents == 7
    assert [t.classification for t in everyone.list_sources().totals] == ["public", "internal", "restricted"]


def test_missing_and_corrupt_index_are_clear_errors(tmp_path: Path, hash_embedder: HashEmbedder) -> None:
    svc = SearchService(
        tmp_path / "absent.sqlite", ceiling=Classification.PUBLIC, embedder_factory=lambda: hash_embedder
    )
    with pytest.raises(IndexMissingError):
        svc.search("anything")
    status = svc.status()
    assert not status.ok and status.problem and "ingest" in status.problem
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    svc = SearchService(bad, ceiling=Classification.PUBLIC, embedder_factory=lambda: hash_embedder)
    with pytest.raises(IndexCorruptError):
        svc.search("anything")
    assert svc.status().ok is False


def test_ranks_do_not_move_when_restricted_documents_exist(tmp_path: Path, corpus: Path) -> None:
    """Same public answers whether or not higher-level documents are in the index."""
    without = tmp_path / "without"
    shutil.copytree(corpus, without)
    shutil.rmtree(without / "restricted")
    (without / "public" / "labelled-secret.md").unlink()
    # Extra restricted documents that share many words with public ones.
    for i in range(5):
        write(
            corpus,
            f"restricted/extra-{i}.md",
            f"# Train fares {i}\n\nTrain fares hotel leave annual staff claim {i}.\n",
        )
    emb = HashEmbedder()
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    ingest_corpus(without, a, emb, ceiling=Classification.RESTRICTED, progress=None)
    ingest_corpus(corpus, b, emb, ceiling=Classification.RESTRICTED, progress=None)
    for ceiling in (Classification.PUBLIC, Classification.INTERNAL):
        sa = SearchService(a, ceiling=ceiling, embedder_factory=lambda: emb, gate_enabled=False)
        sb = SearchService(b, ceiling=ceiling, embedder_factory=lambda: emb, gate_enabled=False)
        for query in ["train fares", "annual leave staff", "hotel claim", "work from home", "leave"]:
            for mode in ("hybrid", "keyword", "semantic"):
                ra = sa.search(query, limit=20, mode=mode)  # type: ignore[arg-type]
                rb = sb.search(query, limit=20, mode=mode)  # type: ignore[arg-type]
                assert [(r.citation_id, r.confidence) for r in ra.results] == [
                    (r.citation_id, r.confidence) for r in rb.results
                ]
                assert ra.withheld == rb.withheld


def test_index_built_at_public_served_at_restricted(tmp_path: Path, corpus: Path, hash_embedder: HashEmbedder) -> None:
    db = tmp_path / "public-only.sqlite"
    report = ingest_corpus(corpus, db, hash_embedder, ceiling=Classification.PUBLIC, progress=None)
    assert report.excluded_above_ceiling == 5
    svc = SearchService(
        db, ceiling=Classification.RESTRICTED, embedder_factory=lambda: hash_embedder, gate_enabled=False
    )
    assert {r.classification for r in svc.search("train fares leave", limit=20).results} == {"public"}


def test_every_search_logs_where_its_time_went(service_factory: Factory) -> None:
    import structlog.testing

    svc = service_factory(Classification.INTERNAL)
    with structlog.testing.capture_logs() as logs:
        svc.search("travel expenses receipts")
        svc.search("travel expenses receipts", mode="keyword")
    events = [e for e in logs if e.get("event") == "search"]
    assert len(events) == 2
    for event in events:
        stages = event["stages_ms"]
        assert list(stages) == ["plan", "keyword", "embedding_wait", "semantic", "candidates", "gate", "response"]
        assert set(event["strategy"]) == {"keyword", "semantic", "embedding"}
        assert all(ms >= 0 for ms in stages.values())
        # The stages are parts of the search, never more than the whole.
        assert sum(stages.values()) <= event["ms"] + 0.01


def test_abstention_reason_reads_threshold_and_best_score_as_the_gate_compared_them(service_factory: Factory) -> None:
    # A query with candidates whose best is below the strict threshold: the reason must name
    # the threshold exactly (0.365, once printed 0.36) and the best confidence as results carry it.
    query = "staff parking bicycles"
    off = service_factory(Classification.PUBLIC, gate=False).search(query, limit=20)
    best = max(r.confidence for r in off.results)
    on = service_factory(Classification.PUBLIC).search(query, limit=20)
    assert on.status == "NO_RELEVANT_CONTEXT" and best > 0
    assert on.reason is not None
    assert "strict confidence threshold (0.365)" in on.reason
    printed = on.reason.rsplit("scored ", 1)[1]
    assert float(printed) == pytest.approx(best, abs=5e-5)
    assert float(printed) < 0.365


class _ThreadRecordingEmbedder(HashEmbedder):
    """Records the thread each embedding ran on."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.threads.append(threading.current_thread().name)
        return super().embed(texts)


@pytest.mark.parametrize(
    ("memory", "caller_rows", "expected"),
    [
        # The keyword impact lists held, and few rows: embedded where the search runs.
        (64 << 20, SearchTuning().caller_thread_rows, "caller"),
        # Held but more rows than the threshold: on a worker, while the keyword side runs.
        (64 << 20, 0, "worker"),
        # No memory for the copies (the keyword side is FTS5's): on a worker.
        (0, SearchTuning().caller_thread_rows, "worker"),
    ],
)
def test_the_query_is_embedded_on_the_caller_thread_only_when_the_keyword_side_is_short(
    built_index: Path, memory: int, caller_rows: int, expected: str
) -> None:
    queries = ["train fares", "annual leave staff", "hotel claim receipts"]
    modes = ("hybrid", "keyword", "semantic")

    def service(embedder: HashEmbedder, tuning: SearchTuning) -> SearchService:
        made = SearchService(
            built_index,
            ceiling=Classification.INTERNAL,
            embedder_factory=lambda: embedder,
            gate_enabled=False,
            vector_memory_bytes=memory,
            tuning=tuning,
        )
        made.warm()
        return made

    # The answers with the shipped thresholds, then with the threshold set for this case.
    reference = service(HashEmbedder(), SearchTuning())
    want = [reference.search(q, limit=20, mode=m).model_dump() for q in queries for m in modes]  # type: ignore[arg-type]
    reference.close()
    reference.reader.close()
    embedder = _ThreadRecordingEmbedder()
    svc = service(embedder, SearchTuning(caller_thread_rows=caller_rows))
    assert (svc.impacts.copy is not None) == (memory > 0)
    got = [svc.search(q, limit=20, mode=m).model_dump() for q in queries for m in modes]  # type: ignore[arg-type]
    # Wherever the query is embedded, the answers are the same.
    assert got == want
    caller = threading.current_thread().name
    # Every mode embeds the query (keyword mode for the candidates' similarity).
    assert len(embedder.threads) == 3 * len(queries)
    if expected == "caller":
        assert set(embedder.threads) == {caller}
    else:
        assert all(name.startswith("query-embed") for name in embedder.threads)
    svc.close()
    svc.reader.close()
