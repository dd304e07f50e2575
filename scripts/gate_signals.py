"""Print the gate's signals for a question set, to calibrate thresholds on the eval slices.

Usage: python scripts/gate_signals.py --db DB --questions evals/questions.jsonl [--ceiling internal]
For every question: the top candidates' similarity, coverage, agreement and confidence,
and whether each is an expected document. Tune on the eval slices only, never on held-out sets.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from governed_evidence.config import parse_level
from governed_evidence.embeddings.minilm import MiniLMEmbedder
from governed_evidence.search.service import SearchService


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--questions", required=True)
    parser.add_argument("--ceiling", default="internal")
    parser.add_argument("--slices", default="answerable,paraphrase,unanswerable,superseded")
    parser.add_argument("--top", type=int, default=3)
    args = parser.parse_args()
    embedder = MiniLMEmbedder()
    svc = SearchService(Path(args.db), ceiling=parse_level(args.ceiling), embedder_factory=lambda: embedder)
    wanted = set(args.slices.split(","))
    for line in Path(args.questions).read_text().splitlines():
        q = json.loads(line)
        if q["slice"] not in wanted:
            continue
        ranking = svc.rank(q["question"])
        rows = []
        paths = ranking.document_paths()
        for c, document in list(zip(ranking.candidates, paths, strict=True))[: args.top]:
            rows.append(
                {
                    "doc": document,
                    "hit": document in q["expected"],
                    "sim": None if c.signals.similarity is None else round(c.signals.similarity, 3),
                    "cov": round(c.signals.coverage, 3),
                    "agree": c.signals.agreement,
                    "conf": c.confidence,
                }
            )
        print(json.dumps({"id": q["id"], "slice": q["slice"], "top": rows}))


if __name__ == "__main__":
    main()
