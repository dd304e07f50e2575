"""One service per level, one vector budget shared between them."""

from __future__ import annotations

from pathlib import Path

from governed_evidence.config import Classification
from governed_evidence.search.copies import MemoryBudget
from governed_evidence.search.levels import LevelServices
from governed_evidence.search.service import SearchService
from governed_evidence.search.sql import count_searchable
from governed_evidence.search.vectors import matrix_bytes
from governed_evidence.store.connection import connect
from tests.helpers import HashEmbedder


def _levels(db: Path, budget: MemoryBudget) -> LevelServices:
    embedder = HashEmbedder()
    return LevelServices(
        lambda level: SearchService(db, ceiling=level, embedder_factory=lambda: embedder, vector_memory_bytes=budget),
        Classification.RESTRICTED,
    )


def _needed(db: Path, level: Classification) -> int:
    """The level's vectors (the impact lists of this index do not fit the budgets here)."""
    conn = connect(db, readonly=True)
    try:
        rows = count_searchable(conn, level)
        return matrix_bytes(rows, HashEmbedder().identity.dimension)
    finally:
        conn.close()


def test_the_budget_holds_for_every_level_together() -> None:
    budget = MemoryBudget(100)
    a, b = object(), object()
    assert budget.reserve(a, 60)
    assert not budget.reserve(b, 50)
    assert budget.reserve(b, 40)
    assert not budget.reserve(object(), 1)  # the 100 bytes are held
    assert budget.reserve(a, 10)  # replacing its own share
    budget.release(b)
    assert budget.reserve(object(), 90)  # 10 held: 90 left


def test_levels_are_copied_from_public_upward_until_the_budget_is_spent(built_index: Path) -> None:
    public, internal = _needed(built_index, Classification.PUBLIC), _needed(built_index, Classification.INTERNAL)
    # Room for public's copy and internal's, not for restricted's beside them.
    budget = MemoryBudget(public + internal)
    levels = _levels(built_index, budget)
    levels.warm_all()
    levels.wait()
    held = {service.ceiling: service.vectors.copy for service in levels.made()}
    assert held[Classification.PUBLIC] is not None and held[Classification.INTERNAL] is not None
    assert held[Classification.RESTRICTED] is None
    # A level's copy holds nothing above it.
    for level, matrix in held.items():
        if matrix is not None:
            assert matrix.level == level
    # The level without a copy answers all the same (the vec0 KNN).
    response = levels.at(Classification.RESTRICTED).search(
        "acquisition of Quillmoor Analytics", confidence_level="normal"
    )
    assert response.results
    for service in levels.made():
        service.reader.close()


def test_a_caller_above_the_ceiling_gets_the_ceiling(built_index: Path) -> None:
    embedder = HashEmbedder()
    levels = LevelServices(
        lambda level: SearchService(built_index, ceiling=level, embedder_factory=lambda: embedder),
        Classification.INTERNAL,
    )
    assert levels.at(Classification.RESTRICTED).ceiling == Classification.INTERNAL
    assert levels.at(Classification.PUBLIC).ceiling == Classification.PUBLIC
    assert len(levels.made()) == 2
    for service in levels.made():
        service.reader.close()
