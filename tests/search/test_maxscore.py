"""MaxScore finds exactly the top k that scoring every row finds: the same rows, in the same
order, ties at the cut settled the same way; and it does skip rows when it can."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from governed_evidence.config import Classification
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.search import bm25
from governed_evidence.search.impacts import load_impacts
from governed_evidence.search.maxscore import Phrase, best_positions, pruned_top, whole_scores
from governed_evidence.search.query import query_tokens, token_stems
from governed_evidence.search.tuning import DEFAULT_TUNING
from governed_evidence.store.connection import connect
from tests.helpers import HashEmbedder, counting_maxscore
from tests.search.test_impacts import QUERIES, SHARED_CORPUS, SOC2_QUERIES

SEED = 20261206
DEPTHS = (1, 3, 10, 50, 200)
#: The shipped share of postings at which MaxScore gives up.
SHARE = DEFAULT_TUNING.essential_share


def _phrase(rng: random.Random, rows: int, held: int, *, levels: int) -> Phrase:
    positions = np.asarray(sorted(rng.sample(range(rows), held)), dtype=np.int32)
    # Few distinct impacts: many rows score exactly alike, so the cut often falls inside a tie.
    impacts = np.asarray([rng.randrange(1, levels + 1) / levels for _ in range(held)], dtype=np.float32)
    idf = bm25.idf(rows, held)
    return Phrase(positions, impacts, idf, float(idf * impacts.max()))


def _dense_top(phrases: list[Phrase], rows: int, depth: int) -> np.ndarray:
    """Every row scored (the full scoring's bincount), then the k best by score and position."""
    scores = np.bincount(
        np.concatenate([p.positions for p in phrases]),
        weights=np.concatenate([p.weights() for p in phrases]),
        minlength=rows,
    )
    matched = np.flatnonzero(scores > 0.0)
    return best_positions(matched, scores[matched], depth)


def _query(rng: random.Random, rows: int) -> list[Phrase]:
    # A few rare words and a few common ones, sometimes one given twice (it counts twice).
    sizes = [rng.randint(1, rows // 50 + 1) for _ in range(rng.randint(0, 3))]
    sizes += [rng.randint(rows // 10, rows * 9 // 10) for _ in range(rng.randint(1, 5))]
    phrases = [_phrase(rng, rows, size, levels=rng.choice([3, 20, 1000])) for size in sizes]
    rng.shuffle(phrases)
    if rng.random() < 0.3:
        phrases.append(rng.choice(phrases))
    return phrases


def test_pruned_top_equals_scoring_every_row_on_random_queries() -> None:
    rng = random.Random(SEED)
    pruned = 0
    for _ in range(300):
        rows = rng.choice([200, 2_000, 20_000])
        phrases = _query(rng, rows)
        for depth in DEPTHS:
            got = pruned_top(phrases, depth, SHARE)
            if got is None:
                continue
            pruned += 1
            assert np.array_equal(got, _dense_top(phrases, rows, depth)), depth
    # The comparison is not vacuous: most of these queries are pruned.
    assert pruned > 750


def test_whole_scores_equal_the_full_scoring_to_the_last_bit() -> None:
    rng = random.Random(SEED + 1)
    for _ in range(50):
        rows = 5_000
        phrases = _query(rng, rows)
        every = np.bincount(
            np.concatenate([p.positions for p in phrases]),
            weights=np.concatenate([p.weights() for p in phrases]),
            minlength=rows,
        )
        sample = np.unique(np.asarray(rng.sample(range(rows), 700), dtype=np.int64))
        assert np.array_equal(whole_scores(phrases, sample), every[sample])


def test_ties_at_the_cut_go_to_the_lowest_positions() -> None:
    # Ten rows hold the one phrase with the same impact: the three kept are the first three.
    positions = np.arange(0, 100, 10, dtype=np.int32)
    same = Phrase(positions, np.full(10, 0.5, dtype=np.float32), 2.0, 1.0)
    assert best_positions(positions, whole_scores([same], positions), 3).tolist() == [0, 10, 20]
    # One row above the tie leads; the tie is then cut by position.
    better = Phrase(np.asarray([90], dtype=np.int32), np.asarray([0.9], dtype=np.float32), 2.0, 1.8)
    scores = whole_scores([same, better], positions)
    assert best_positions(positions, scores, 3).tolist() == [90, 0, 10]
    assert best_positions(positions, scores, 0).tolist() == []


def test_a_query_of_one_rare_word_and_common_ones_skips_most_rows() -> None:
    rng = random.Random(SEED + 2)
    rows = 50_000
    rare = _phrase(rng, rows, 300, levels=1000)
    common = [_phrase(rng, rows, rows // 2, levels=1000) for _ in range(3)]
    phrases = [common[0], rare, *common[1:]]
    got = pruned_top(phrases, 10, SHARE)
    assert got is not None
    assert np.array_equal(got, _dense_top(phrases, rows, 10))
    # Nothing to prune: a single common word is all essential.
    assert pruned_top(common[:1], 10, SHARE) is None
    assert pruned_top([], 10, SHARE) is None
    assert pruned_top(phrases, 0, SHARE) is None


def _rankings(db: Path, level: Classification, queries: list[str], depth: int, *, pruned: bool) -> list[list[int]]:
    conn = connect(db, readonly=True)
    impacts = load_impacts(conn, level)
    assert impacts is not None
    out = []
    for query in queries:
        phrases = token_stems(conn, query_tokens(conn, query))
        out.append(impacts.rank(phrases, depth, essential_share=SHARE if pruned else None))
    return out


def test_rankings_are_the_same_with_and_without_pruning(built_index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    queries = [*QUERIES, "policy access security data", "the the the"]
    answered = counting_maxscore(monkeypatch)
    for depth in (1, 2, 5, 20):
        every_row = _rankings(built_index, Classification.RESTRICTED, queries, depth, pruned=False)
        assert not answered
        assert _rankings(built_index, Classification.RESTRICTED, queries, depth, pruned=True) == every_row, depth
        assert any(every_row)
        # Over a handful of passages few queries can be pruned; the real corpus below has more.
        pruned, answered[:] = sum(answered), []
        assert pruned > 0 or depth > 1


@pytest.mark.skipif(not SHARED_CORPUS.is_dir(), reason=f"{SHARED_CORPUS} is absent (a real policy corpus)")
def test_rankings_are_the_same_with_and_without_pruning_on_a_real_corpus(
    tmp_path: Path, hash_embedder: HashEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "soc2.sqlite"
    ingest_corpus(SHARED_CORPUS, db, hash_embedder, ceiling=Classification.RESTRICTED, progress=None)
    # Two longer ones too: more common words beside the rare ones, more for MaxScore to skip.
    queries = [
        *SOC2_QUERIES,
        "vendor risk assessment and the security of third parties",
        "background checks for new employees before they join the company",
    ]
    answered = counting_maxscore(monkeypatch)
    every_row = _rankings(db, Classification.RESTRICTED, queries, 10, pruned=False)
    assert _rankings(db, Classification.RESTRICTED, queries, 10, pruned=True) == every_row
    assert all(every_row)
    # MaxScore answered most of them itself (the comparison is not of scoring every row twice).
    assert sum(answered) >= len(queries) // 2, answered
