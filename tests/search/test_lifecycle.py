"""Lifecycle in search and reading: only current documents are searched, every result and
passage says its status, owner and dates, and ``stale`` follows the service's clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Protocol

import pytest

from governed_evidence.config import Classification
from governed_evidence.errors import NotFoundError
from governed_evidence.ingest.governance import GOVERNANCE_FILE
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.search.limits import SearchMode
from governed_evidence.search.service import SearchService
from governed_evidence.store.connection import connect
from governed_evidence.store.lifecycle import Clock
from tests.helpers import HashEmbedder, write

PUBLIC, RESTRICTED = Classification.PUBLIC, Classification.RESTRICTED
QUERY = "how are train fares claimed"


@pytest.fixture
def index(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    write(
        corpus,
        GOVERNANCE_FILE,
        """
        [[rule]]
        path = "policies/"
        classification = "public"
        owner = "Policy Office"
        review_by = 2026-06-30
        effective = 2024-04-01

        [[rule]]
        path = "policies/old/"
        status = "deprecated"

        [[rule]]
        path = "policies/drafts/"
        status = "draft"

        [[rule]]
        path = "public/board/"
        classification = "restricted"
        """,
    )
    write(corpus, "policies/travel.md", "# Travel\n\nTrain fares are claimed through the expenses portal.\n")
    write(corpus, "policies/old/travel-2019.md", "# Travel 2019\n\nTrain fares are claimed on paper forms.\n")
    write(corpus, "policies/drafts/travel-2027.md", "# Travel 2027\n\nTrain fares are claimed in the mobile app.\n")
    write(
        corpus,
        "policies/travel-2023.md",
        "---\nsuperseded_by: policies/travel.md\n---\n# Travel 2023\n\nTrain fares are claimed by email.\n",
    )
    write(corpus, "public/board/minutes.md", "# Board minutes\n\nThe board approved the Quillmoor acquisition.\n")
    write(
        corpus,
        "public/faq.md",
        "---\nowner: Customer Services\nreview_by: 2027-01-31\n---\n# FAQ\n\nTrain tickets are sold at stations.\n",
    )
    db = tmp_path / "index.sqlite"
    ingest_corpus(corpus, db, HashEmbedder(), ceiling=RESTRICTED, progress=None)
    return db


class MakeService(Protocol):
    def __call__(self, ceiling: Classification = ..., clock: Clock = ..., vectors: int = ...) -> SearchService: ...


@pytest.fixture
def services(index: Path) -> Iterator[MakeService]:
    made: list[SearchService] = []

    def make(
        ceiling: Classification = PUBLIC, clock: Clock = lambda: date(2026, 1, 1), vectors: int = 0
    ) -> SearchService:
        service = SearchService(
            index,
            ceiling=ceiling,
            embedder_factory=HashEmbedder,
            gate_enabled=False,
            clock=clock,
            vector_memory_bytes=vectors,
        )
        if vectors:
            service.warm()
        made.append(service)
        return service

    yield make
    for service in made:
        service.close()
        service.reader.close()


def citation(db: Path, path: str) -> str:
    conn = connect(db, readonly=True)
    try:
        row = conn.execute(
            "SELECT p.citation_id FROM passages p JOIN documents d ON d.id = p.document_id WHERE d.path = ?", (path,)
        ).fetchone()
        assert row is not None
        return str(row[0])
    finally:
        conn.close()


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
@pytest.mark.parametrize("vectors", [0, 1 << 20], ids=["vec0", "in-memory"])
def test_only_current_documents_are_searched(services: MakeService, mode: SearchMode, vectors: int) -> None:
    response = services(vectors=vectors).search(QUERY, limit=20, mode=mode)
    found = {r.document for r in response.results}
    assert "policies/travel.md" in found
    assert found <= {"policies/travel.md", "public/faq.md"}


def test_every_result_carries_status_owner_and_dates(services: MakeService) -> None:
    results = {r.document: r for r in services().search(QUERY, limit=20).results}
    travel = results["policies/travel.md"]
    assert (travel.status, travel.owner, travel.review_by, travel.effective, travel.stale) == (
        "current",
        "Policy Office",
        date(2026, 6, 30),
        date(2024, 4, 1),
        False,
    )
    faq = results["public/faq.md"]
    # No rule for it: its front matter alone.
    assert (faq.status, faq.owner, faq.review_by, faq.effective) == (
        "current",
        "Customer Services",
        date(2027, 1, 31),
        None,
    )
    dumped = travel.model_dump(mode="json")
    assert dumped["review_by"] == "2026-06-30" and dumped["stale"] is False


@pytest.mark.parametrize(
    ("today", "stale"),
    [(date(2026, 6, 29), False), (date(2026, 6, 30), False), (date(2026, 7, 1), True), (date(2031, 1, 1), True)],
)
def test_stale_once_review_by_has_passed_on_the_service_s_clock(
    services: MakeService,
    index: Path,
    today: date,
    stale: bool,
) -> None:
    service = services(clock=lambda: today)
    result = next(r for r in service.search(QUERY, limit=20).results if r.document == "policies/travel.md")
    assert result.stale is stale
    page = service.read_passage(citation(index, "policies/travel.md"))
    assert page.passage.stale is stale
    listed = {d.document: d for d in service.list_sources().documents}
    assert listed["policies/travel.md"].stale is stale
    # The same index, another day: nothing about staleness is stored.
    assert listed["public/faq.md"].stale is (today > date(2027, 1, 31))


def test_the_clock_is_read_per_request(services: MakeService, index: Path) -> None:
    days = iter([date(2026, 6, 30), date(2026, 7, 1)])
    service = services(clock=lambda: next(days))
    cid = citation(index, "policies/travel.md")
    assert service.read_passage(cid).passage.stale is False
    assert service.read_passage(cid).passage.stale is True


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("policies/old/travel-2019.md", "deprecated"),
        ("policies/drafts/travel-2027.md", "draft"),
        # Superseded documents are served as deprecated: no longer policy.
        ("policies/travel-2023.md", "deprecated"),
    ],
)
def test_documents_kept_out_of_search_are_readable_and_flagged(
    services: MakeService,
    index: Path,
    path: str,
    status: str,
) -> None:
    service = services(clock=lambda: date(2026, 7, 1))
    page = service.read_passage(citation(index, path))
    assert (page.passage.document, page.passage.status, page.passage.owner, page.passage.stale) == (
        path,
        status,
        "Policy Office",
        True,
    )
    assert page.superseded_by == ("policies/travel.md" if path.endswith("2023.md") else None)
    listed = {d.document: d for d in service.list_sources().documents}
    assert listed[path].status == status
    # Not searched, whatever the query: the words of the passage itself find nothing of it.
    words = page.passage.text.split("\n")[-1]
    assert path not in {r.document for r in service.search(words, limit=20).results}


def test_a_document_a_rule_restricts_is_never_visible_at_the_public_ceiling(services: MakeService, index: Path) -> None:
    cid = citation(index, "public/board/minutes.md")
    public = services(PUBLIC)
    for mode in ("hybrid", "keyword", "semantic"):
        response = public.search("board approved the Quillmoor acquisition", limit=20, mode=mode)
        assert "public/board/minutes.md" not in {r.document for r in response.results}
        assert "quillmoor" not in response.model_dump_json().lower()
    with pytest.raises(NotFoundError):
        public.read_passage(cid)
    assert "public/board/minutes.md" not in {d.document for d in public.list_sources().documents}
    restricted = services(RESTRICTED)
    page = restricted.read_passage(cid)
    assert (page.passage.classification, page.passage.status, page.passage.owner) == ("restricted", "current", None)
    hits = restricted.search("board approved the Quillmoor acquisition", limit=20).results
    assert "public/board/minutes.md" in {r.document for r in hits}
