"""`make demo`: build the sample index with the real model and show what the server does.

Each step prints the exact command it runs, so every result can be reproduced by hand.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "governed_evidence"]


def run(title: str, args: list[str]) -> None:
    print(f"\n=== {title}")
    print("$ governed-evidence " + " ".join(shlex.quote(a) for a in args), flush=True)
    completed = subprocess.run([*CLI, *args], cwd=ROOT, check=False, env=_env())
    if completed.returncode not in (0,):
        raise SystemExit(f"demo step failed with exit code {completed.returncode}")


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.setdefault("GOVERNED_EVIDENCE_LOG_LEVEL", "WARNING")
    return env


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default="data/evidence.sqlite")
    db = parser.parse_args().db
    run(
        "Build the index from the sample corpus (real all-MiniLM-L6-v2 model, offline)",
        ["ingest", "--corpus", "data/sample_corpus", "--db", db, "--ceiling", "restricted"],
    )
    run("Index status as a caller with ceiling 'internal' sees it", ["status", "--db", db, "--ceiling", "internal"])
    run(
        "A keyword hit with its citation (the superseded 2022 policy is never cited)",
        ["search", "How many days a week can I work from home?", "--db", db, "--ceiling", "internal", "--limit", "2"],
    )
    run(
        "A paraphrase: keywords alone miss it...",
        [
            "search",
            "time off when a relative dies",
            "--db",
            db,
            "--ceiling",
            "internal",
            "--mode",
            "keyword",
            "--limit",
            "2",
        ],
    )
    run(
        "...hybrid search finds it by meaning",
        ["search", "time off when a relative dies", "--db", db, "--ceiling", "internal", "--limit", "2"],
    )
    run(
        "Abstention: the corpus cannot answer this, so the server says so",
        ["search", "Can I bring my dog to the office?", "--db", db, "--ceiling", "internal"],
    )
    run(
        "The classification ceiling: restricted board minutes never appear for an 'internal' caller",
        ["search", "Project Bittern acquisition price", "--db", db, "--ceiling", "internal", "--confidence", "normal"],
    )
    run(
        "...while the operator's 'restricted' ceiling finds them",
        ["search", "Project Bittern acquisition price", "--db", db, "--ceiling", "restricted", "--limit", "1"],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
