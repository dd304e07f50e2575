"""The pure parts of `make bench-peers` (benchmarks/peers.py): fusion, document mapping, quality,
the interleaving order and the report section. Nothing here is timed; the peers themselves are
only needed by the last test, which skips when they are not installed (they live in
.cache/peers-venv, never in the product's venv)."""

from __future__ import annotations

import argparse
import importlib.util
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from benchmarks.peers import (
    PEER_MODULES,
    PEERS,
    Corpus,
    balanced_orders,
    chosen_peers,
    documents_in_order,
    interleaved,
    paired_bootstrap,
    quality,
    ratio_alone,
    rrf,
    scifact_id,
    visible_qrels,
)
from benchmarks.peers_report import BEGIN, END, best_peer, peers_section, ratio_to_best_peer, replace_section
from benchmarks.run import quick_line, search_line


def test_rrf_sums_reciprocal_ranks_with_k_60() -> None:
    # 7: 1/61 + 1/62; 3: 1/62 + 1/61 (a tie, 3 appeared first); 9: 1/63; 5: 1/63.
    assert rrf([[3, 7, 9], [7, 3, 5]], k=60, depth=10) == [3, 7, 9, 5]
    assert rrf([[1, 2], [2]], k=60, depth=10) == [2, 1]
    assert rrf([[1, 2, 3]], depth=2) == [1, 2]
    assert rrf([[], []]) == []


def test_rrf_a_document_in_both_lists_beats_one_ranked_first_in_one() -> None:
    assert rrf([[1, 2], [3, 2]], k=60)[0] == 2


def test_passages_map_to_their_abstract_once() -> None:
    assert scifact_id("scifact/r0000/4983.md") == "4983"
    assert scifact_id("scifact/r0012/4983.md") == "4983"
    assert scifact_id("policies/leave.md") == "policies/leave.md"
    document_of = {1: "a", 2: "a", 3: "b", 4: "c"}
    assert documents_in_order([2, 1, 4, 3], document_of) == ["a", "c", "b"]


def test_quality_is_beir_ndcg_and_recall() -> None:
    qrels = {"q1": {"a": 1, "b": 1}, "q2": {"c": 2}}
    ndcg, recall = quality({"q1": ["a", "x", "b"], "q2": ["y", "c"]}, qrels)
    q1 = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    q2 = (2 / math.log2(3)) / 2
    assert ndcg == round((q1 + q2) / 2, 4)
    assert recall == 1.0
    assert quality({}, qrels) == (0.0, 0.0)
    assert quality({"q1": ["x"]}, qrels) == (0.0, 0.0)


def test_the_paired_bootstrap_interval_brackets_the_mean_difference() -> None:
    base = [0.5, 0.6, 0.7, 0.8] * 10
    assert paired_bootstrap(base, base) == (0.0, 0.0, 0.0)
    better = [b + 0.1 for b in base]
    mean, low, high = paired_bootstrap(base, better)
    assert mean == low == high == 0.1
    noisy = [b + (0.2 if i % 2 else -0.2) for i, b in enumerate(base)]
    mean, low, high = paired_bootstrap(base, noisy)
    assert low < mean == 0.0 < high
    assert paired_bootstrap([], []) == (0.0, 0.0, 0.0)


def test_only_abstracts_in_the_corpus_are_judged() -> None:
    qrels = {"q1": {"a": 1, "b": 1}, "q2": {"c": 1}, "q3": {"a": 0}}
    assert visible_qrels(qrels, {"a"}) == {"q1": {"a": 1}}


def test_interleaving_runs_every_system_on_each_item_in_balanced_orders() -> None:
    calls: list[tuple[str, int]] = []
    systems = {name: (lambda i, n=name: calls.append((n, i))) for name in ("a", "b", "c")}
    ticks = iter(range(1000))
    out = interleaved(systems, 2, passes=2, warmup=1, clock=lambda: float(next(ticks)))
    assert calls[:3] == [("a", 0), ("b", 0), ("c", 0)]  # the warm-up
    timed = calls[3:]
    # Item by item, every system once each, in the first four balanced orders of three.
    assert timed == [
        ("a", 0), ("b", 0), ("c", 0),
        ("b", 1), ("c", 1), ("a", 1),
        ("c", 0), ("a", 0), ("b", 0),
        ("c", 1), ("b", 1), ("a", 1),
    ]  # fmt: skip
    assert {name: len(v) for name, v in out.items()} == {"a": 4, "b": 4, "c": 4}


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 6, 7])
def test_balanced_orders_put_each_system_first_and_after_each_other_equally_often(count: int) -> None:
    orders = balanced_orders(count)
    assert len(orders) == (2 * count if count % 2 else count)
    assert all(sorted(order) == list(range(count)) for order in orders)
    firsts = Counter(order[0] for order in orders)
    assert set(firsts.values()) == {len(orders) // count}
    follows = Counter((order[j], order[j + 1]) for order in orders for j in range(count - 1))
    pairs = count * (count - 1)
    assert len(follows) == pairs
    assert len(set(follows.values())) <= 1  # every ordered pair adjacent the same number of times


def test_rotating_one_order_would_not_balance_its_neighbours() -> None:
    # What the balanced orders replace: every rotation of (a, b, c) keeps b right after a.
    rotations = [[(s + shift) % 3 for s in range(3)] for shift in range(3)]
    follows = Counter((o[j], o[j + 1]) for o in rotations for j in range(2))
    assert follows[(1, 0)] == 0 and follows[(0, 1)] == 2
    assert balanced_orders(0) == []


def _systems() -> dict[str, dict[str, object]]:
    def row(label: str, p50: float, p95: float) -> dict[str, object]:
        ms = {"p50": p50, "p95": p95}
        return {"label": label, "ms": ms, "ndcg_at_10": 0.7, "recall_at_100": 0.9, "build_s": 1.0, "size_bytes": 10**6}

    return {
        "project": row("project hybrid (search alone)", 10.0, 20.0),
        "project_with_embedding": row("project hybrid, embedding the query itself", 15.0, 2.0),
        "tantivy_numpy": row("tantivy", 2.0, 4.0),
        "lancedb_exact": row("LanceDB", 20.0, 40.0),
    }


def test_the_best_peer_is_never_the_project() -> None:
    systems = _systems()
    assert best_peer(systems) == "tantivy_numpy"
    assert ratio_to_best_peer(20.0, systems) == 5.0
    assert best_peer({"project": systems["project"]}) is None


def test_the_ratio_alone_reads_the_loops_of_their_own_not_the_rotation() -> None:
    systems = _systems()
    assert ratio_alone(systems) is None  # --alone not given: no such figures
    systems["project"]["alone_ms"] = {"p50": 1.0, "p95": 3.0}
    systems["tantivy_numpy"]["alone_ms"] = {"p50": 0.5, "p95": 1.0}
    systems["lancedb_exact"]["alone_ms"] = {"p50": 0.2, "p95": 0.75}
    # The best peer alone is LanceDB here, though tantivy is the best in the rotation.
    assert ratio_alone(systems) == 4.0
    assert ratio_to_best_peer(20.0, systems) == 5.0


def test_the_section_is_replaced_between_its_markers() -> None:
    peers = {"protocol": {}, "sizes": {"10000": {"systems": _systems(), "ratio_to_best_peer_p95": 5.0}}}
    section = peers_section(peers)
    assert section[0] == BEGIN and section[-1] == END
    assert any(line.startswith("| 10,000 | tantivy | 2.0 / 4.0 | 5.00x | 0.700 | - | 0.900 |") for line in section)
    doc = f"# Performance\n\nbefore\n\n{BEGIN}\nSTALE-ROWS\n{END}\n\nafter\n"
    updated = replace_section(doc, section)
    assert (
        "STALE-ROWS" not in updated
        and updated.startswith("# Performance\n\nbefore\n\n")
        and updated.endswith("after\n")
    )
    assert replace_section(updated, section) == updated
    assert replace_section("# Performance\n", section).endswith(END + "\n")


def test_a_size_carried_over_from_an_earlier_run_names_that_run() -> None:
    carried = {"systems": _systems(), "ratio_to_best_peer_p95": 5.0, "from_run_started_at": "2026-12-05T08:06:37Z"}
    peers = {
        "protocol": {},
        "sizes": {"10000": {"systems": _systems(), "ratio_to_best_peer_p95": 5.0}, "100000": carried},
    }
    notes = [line for line in peers_section(peers) if line.startswith("- 1")]
    assert notes[0].startswith("- 10,000 passages") and "from the run started" not in notes[0]
    assert notes[1].startswith("- 100,000 passages") and notes[1].endswith(
        "(from the run started 2026-12-05T08:06:37Z)."
    )


def test_the_glue_peers_rank_a_tiny_corpus(tmp_path: Path) -> None:
    missing = [m for m in PEER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"peer libraries not installed here ({', '.join(missing)}): `make bench-peers` has them")
    from benchmarks.peers import Bm25sNumpy, LanceHybrid, TantivyNumpy

    texts = ["cats purr loudly", "dogs bark at night", "stars shine at night", "cats and dogs play"]
    vectors = np.eye(4, 8, dtype=np.float32)
    corpus = Corpus(np.array([11, 12, 13, 14]), texts, vectors, {11: "a", 12: "b", 13: "c", 14: "d"})
    query = vectors[1]
    for system in (
        TantivyNumpy(corpus, tmp_path / "t"),
        Bm25sNumpy(corpus, tmp_path / "b"),
        LanceHybrid(corpus, tmp_path, ann=False),
    ):
        assert system.rank("dogs barking", query, 2, 4)[0] == 12, system.label


def test_the_peers_are_chosen_by_name_in_table_order() -> None:
    assert chosen_peers("") == PEERS
    assert chosen_peers("all") == PEERS
    assert chosen_peers("bm25s_numpy, tantivy_numpy") == ("tantivy_numpy", "bm25s_numpy")
    with pytest.raises(argparse.ArgumentTypeError, match="unknown peer faiss: choose among tantivy_numpy"):
        chosen_peers("tantivy_numpy,faiss")


_SEARCH = {
    "hybrid_ms": {"p50": 7.0, "p95": 9.0},
    "keyword_ms": {"p95": 4.0},
    "semantic_ms": {"p95": 6.0},
    "query_embed_ms": {"p50": 10.0},
    "numpy_ms": {"p95": 3.0},
    "recall_at_10": 1.0,
}


def test_the_quick_line_takes_its_ratio_from_the_interleaved_run_only() -> None:
    systems = {
        "project": {"ms": {"p95": 2.5}, "ndcg_at_10": 0.71},
        "project_with_embedding": {"ms": {"p95": 9.0}, "ndcg_at_10": 0.71},
        "tantivy_numpy": {"ms": {"p95": 1.25}, "ndcg_at_10": 0.73},
        "bm25s_numpy": {"ms": {"p95": 2.0}, "ndcg_at_10": 0.70},
    }
    entry = {"systems": systems, "ratio_to_best_peer_p95": 2.0, "vectors": "real"}
    line = quick_line(10_000, _SEARCH, {"run": {"started_at": "T"}, "entry": entry})
    # The ratio is the interleaved run's project p95 over its best peer's, not this run's 9.0 ms.
    assert line["ratio_to_best_peer_p95"] == 2.0
    assert (line["project_p95_ms"], line["best_peer"], line["best_peer_p95_ms"]) == (2.5, "tantivy_numpy", 1.25)
    assert (line["project_ndcg_at_10"], line["best_peer_ndcg_at_10"]) == (0.71, 0.73)
    assert line["hybrid_p95_ms"] == 9.0


def test_without_the_peers_the_quick_line_gives_no_ratio_and_says_why() -> None:
    line = quick_line(10_000, _SEARCH, {"reason": "the peers are not installed"})
    assert line["ratio_to_best_peer_p95"] is None
    assert line["peers_note"] == "the peers are not installed"
    assert "best_peer_p95_ms" not in line


def test_each_size_s_progress_line_holds_its_search_figures_and_no_peer_fields() -> None:
    # Printed before the peers run: a ratio, or a note of no peers, would say something untrue.
    line = search_line(10_000, _SEARCH)
    assert (line["passages"], line["hybrid_p95_ms"], line["recall_at_10"]) == (10_000, 9.0, 1.0)
    assert not {k for k in line if "peer" in k}
    assert quick_line(10_000, _SEARCH, {"reason": "x"}).items() >= line.items()


def test_without_the_peers_venv_no_peers_run_is_started(tmp_path: Path) -> None:
    from benchmarks.run import _quick_peers

    out = tmp_path / "quick-peers.json"
    found = _quick_peers(10_000, python=tmp_path / "absent" / "python", out=out)
    assert "make bench-peers" in found["reason"] and "entry" not in found
    assert not out.exists()
