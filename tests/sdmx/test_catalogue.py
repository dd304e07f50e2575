"""Catalogue parsing (streamed) and ranking, over dataflows from real responses."""

from __future__ import annotations

import math
import random
import re
import tracemalloc

import pytest

from governed_evidence.errors import ResponseTooLargeError, UnusableResponseError
from governed_evidence.sdmx import catalogue as catalogue_module
from governed_evidence.sdmx.catalogue import CatalogueIndex, CatalogueRow, parse_catalogue, query_terms
from tests.sdmx.helpers import (
    ECB_STRUCTURE_FULL,
    ESTAT_GOV,
    ESTAT_NRG_STRUCTURE,
    OECD_HOUSE_STRUCTURE,
    catalogue_of,
    fixture,
    shared,
)


def test_eurostat_dataflow_message_parses() -> None:
    (row,) = parse_catalogue(fixture("estat_lfsa_egai2d_dataflow.xml"))
    assert row == CatalogueRow(
        agency="ESTAT",
        dataset_id="LFSA_EGAI2D",
        version="1.0",
        name="Employed persons by detailed occupation (ISCO-08 two digit level)",
        description="",
    )
    assert row.dataset == "ESTAT,LFSA_EGAI2D,1.0"


def test_references_inside_constraints_are_not_catalogue_entries() -> None:
    rows = parse_catalogue(shared(OECD_HOUSE_STRUCTURE))
    assert [r.dataset for r in rows] == ["OECD.ECO.MPD,DSD_AN_HOUSE_PRICES@DF_HOUSE_PRICES,1.0"]
    assert rows[0].description.startswith("Residential Property Prices Indices")


def test_catalogue_assembled_from_real_dataflows() -> None:
    body = catalogue_of(
        fixture("oecd_g20_prices_structure.xml"),
        shared(OECD_HOUSE_STRUCTURE),
        fixture("estat_lfsa_egai2d_dataflow.xml"),
        shared(ESTAT_GOV),
        shared(ESTAT_NRG_STRUCTURE),
        shared(ECB_STRUCTURE_FULL),
    )
    rows = parse_catalogue(body)
    assert [r.dataset_id for r in rows] == [
        "DSD_G20_PRICES@DF_G20_PRICES",
        "DSD_AN_HOUSE_PRICES@DF_HOUSE_PRICES",
        "LFSA_EGAI2D",
        "GOV_10Q_GGNFA",
        "NRG_BAL_S",
        "EXR",
    ]
    index = CatalogueIndex(rows)
    hits, total = index.search("house price index", 3)
    assert hits[0].row.dataset_id == "DSD_AN_HOUSE_PRICES@DF_HOUSE_PRICES"
    assert total >= 2  # "price" also matches the consumer price indices
    hits, _ = index.search("consumer prices inflation G20", 3)
    assert hits[0].row.dataset_id == "DSD_G20_PRICES@DF_G20_PRICES"
    hits, _ = index.search("employment by occupation", 3)
    assert hits[0].row.dataset_id == "LFSA_EGAI2D"
    hits, _ = index.search("euro exchange rates", 3)
    assert hits[0].row.dataset_id == "EXR"
    hits, _ = index.search("energy balances", 3)
    assert hits[0].row.dataset_id == "NRG_BAL_S"
    # Ids are searchable too.
    hits, _ = index.search("GOV_10Q_GGNFA", 3)
    assert hits[0].row.dataset_id == "GOV_10Q_GGNFA"
    assert index.search("photosynthesis of penguins", 3) == ([], 0)


def test_more_query_words_matched_ranks_first() -> None:
    rows = [
        CatalogueRow("A", "X1", "1.0", "Prices of prices of prices", ""),
        CatalogueRow("A", "X2", "1.0", "Research and development expenditure", "Gross domestic expenditure on R&D"),
        CatalogueRow("A", "X3", "1.0", "Research output", ""),
    ]
    hits, total = CatalogueIndex(rows).search("R&D expenditure research", 10)
    assert [h.row.dataset_id for h in hits] == ["X2", "X3"]
    assert total == 2
    assert hits[0].matched == 3


def test_prefix_words_match() -> None:
    rows = [CatalogueRow("A", "X1", "1.0", "Employment by sector", ""), CatalogueRow("A", "X2", "1.0", "Prices", "")]
    hits, _ = CatalogueIndex(rows).search("employ", 10)
    assert [h.row.dataset_id for h in hits] == ["X1"]


def test_query_terms() -> None:
    assert query_terms("How does R&D spending compare between France and Germany?") == [
        "r&d",
        "spending",
        "france",
        "germany",
    ]
    assert query_terms("the of a") == []
    assert query_terms("GDP gdp GDP") == ["gdp"]


def test_catalogue_size_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalogue_module, "MAX_DATAFLOWS", 2)
    body = catalogue_of(
        fixture("oecd_g20_prices_structure.xml"),
        fixture("estat_lfsa_egai2d_dataflow.xml"),
        fixture("oecd_g20_prices_structure.xml"),
        fixture("estat_lfsa_egai2d_dataflow.xml"),
    )
    with pytest.raises(ResponseTooLargeError):
        parse_catalogue(body)


def test_a_data_message_is_not_a_catalogue() -> None:
    with pytest.raises(UnusableResponseError, match="structure message"):
        parse_catalogue(fixture("estat_nrg_bal_s_data.xml"))


def _reference_search(rows: list[CatalogueRow], query: str, limit: int) -> tuple[list[tuple[str, float, int]], int]:
    """The ranking as first written, a set of words per field: what the index must still answer."""

    def words(text: str) -> frozenset[str]:
        return frozenset(re.findall(r"[0-9a-z]+(?:&[0-9a-z]+)*", text.lower()))

    fields = [
        (words(r.name), words(r.dataset_id.replace("_", " ").replace("@", " ")), words(r.description)) for r in rows
    ]

    def weight(term: str, found: frozenset[str], field_weight: float) -> float:
        if term in found:
            return field_weight
        if len(term) >= 4 and any(w.startswith(term) for w in found):
            return field_weight * 0.6
        return 0.0

    def idf(term: str) -> float:
        df = sum(1 for f in fields if term in f[0] | f[1] | f[2])
        if df == 0:
            df = sum(1 for f in fields if any(w.startswith(term) for w in f[0] | f[1] | f[2]))
        return math.log(1.0 + len(rows) / (1.0 + df))

    terms = query_terms(query)
    idfs = {term: idf(term) for term in terms}
    hits = []
    for row, (name, ident, desc) in zip(rows, fields, strict=True):
        score, matched = 0.0, 0
        for term in terms:
            best = max(weight(term, name, 3.0), weight(term, ident, 2.0), weight(term, desc, 1.0))
            if best:
                matched += 1
                score += best * idfs[term]
        if matched:
            hits.append((row.dataset_id, score, matched))
    hits.sort(key=lambda h: (-h[2], -h[1], h[0]))
    return hits[:limit], len(hits)


def test_ranking_is_the_per_field_word_sets_ranking() -> None:
    rng = random.Random(50)
    vocabulary = ["price", "prices", "priced", "employment", "employ", "r&d", "gdp", "house", "trade", "tr", "x"]
    vocabulary += [f"w{i}" for i in range(40)]

    def text(count: int) -> str:
        return " ".join(rng.choice(vocabulary) for _ in range(count))

    rows = [
        CatalogueRow(
            "A", f"DF_{rng.choice(vocabulary).upper()}@{i % 7}", "1.0", text(4).title(), text(rng.randint(0, 30))
        )
        for i in range(400)
    ]
    index = CatalogueIndex(rows)
    queries = ["price index", "employ", "pric", "tr trade", "R&D gdp house", "w1 w12 w3", "DF_GDP", "absent words"]
    queries += [text(rng.randint(1, 4)) for _ in range(40)]
    for query in queries:
        hits, total = index.search(query, 25)
        assert ([(h.row.dataset_id, h.score, h.matched) for h in hits], total) == _reference_search(rows, query, 25)


def test_the_index_holds_no_word_set_per_dataflow() -> None:
    # A word set per field held about 1.7 KB per dataflow (83 MB for 48,600 with long
    # descriptions); the index now holds about what the words' text weighs.
    rows = [
        CatalogueRow("A", f"DF{i:07d}", "1.0", f"Dataflow {i:07d}", "words of a long description " * 9)
        for i in range(5_000)
    ]
    tracemalloc.start()
    try:
        index = CatalogueIndex(rows)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(index) == len(rows)
    # A string per row (its words, " dataflow 0000001 | df0000001 | words of long description ")
    # held 112 bytes each; the rows' words as runs of ASCII bytes hold some 66.
    assert held < 85 * len(rows)
