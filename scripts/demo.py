"""`make demo`: build the sample index with the real model and show what the server does.

Each step prints the exact command it runs, as it can be pasted into a shell in the
repository's root (where `make demo` runs), so every result can be reproduced by hand. The
demo has its own index file (data/demo.sqlite): an `ingest` of the operator's own folder
writes data/evidence.sqlite by default, and neither replaces the other.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO_DB = "data/demo.sqlite"
#: Where `ingest` writes when given no --db (governed_evidence.config.Settings.db).
DEFAULT_DB = "data/evidence.sqlite"
#: The README sections the last step points to (tests/test_demo.py checks they exist).
CLIENT_SECTION = "Connecting an MCP client"
CONTAINER_SECTION = "Container"
#: The README's container commands, as its Container section gives them.
CONTAINER_COMMANDS = (
    "docker build -f Containerfile -t governed-evidence .",
    "docker run --rm -i --read-only --network none governed-evidence",
)


def _shown(path: Path) -> str:
    """``path`` as a command typed in the repository's root shows it."""
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def program(*, absolute: bool = False) -> list[str]:
    """The command that runs the CLI as a shell finds it: the installed script beside this
    interpreter (``.venv/bin/governed-evidence``; a bare ``governed-evidence`` is on no one's
    PATH), else this interpreter with ``-m``."""
    script = Path(sys.executable).parent / "governed-evidence"
    if script.is_file():
        return [str(script.absolute()) if absolute else _shown(script)]
    python = Path(sys.executable)
    return [str(python.absolute()) if absolute else _shown(python), "-m", "governed_evidence"]


def command_line(args: list[str], *, absolute: bool = False) -> str:
    return shlex.join([*program(absolute=absolute), *args])


def run(title: str, args: list[str]) -> None:
    print(f"\n=== {title}")
    print(f"$ {command_line(args)}", flush=True)
    # The command as printed, in the reader's environment: its output is what a copy prints.
    completed = subprocess.run([*program(absolute=True), *args], cwd=ROOT, check=False)
    if completed.returncode != 0:
        raise SystemExit(f"demo step failed with exit code {completed.returncode}")


def next_steps(demo_db: str) -> str:
    own_db = os.environ.get("GOVERNED_EVIDENCE_DB", DEFAULT_DB)
    serve = command_line(["serve", "--db", str((ROOT / own_db).absolute())], absolute=True)
    lines = [
        "\n=== Next",
        f"Index your own folder (into {own_db}, the default; this demo's index stays in {demo_db}):",
        f"  $ {command_line(['ingest', '--corpus', '/path/to/your/folder'])}",
        f'Connect an MCP client: README.md, "{CLIENT_SECTION}", has the client configuration for this server:',
        f"  $ {serve}",
        f'Run the container (README.md, "{CONTAINER_SECTION}", says how to serve your own index with it):',
        *(f"  $ {c}" for c in CONTAINER_COMMANDS),
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default=DEMO_DB)
    db = parser.parse_args().db
    if Path.cwd().resolve() != ROOT:
        print(f"(the commands below run in the repository's root: cd {shlex.quote(str(ROOT))})")
    try:
        _steps(db)
    except KeyboardInterrupt:
        # Ctrl-C reached the running command too, and it has said what it left behind.
        return 130
    print(next_steps(db))
    return 0


def _steps(db: str) -> None:
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


if __name__ == "__main__":
    sys.exit(main())
