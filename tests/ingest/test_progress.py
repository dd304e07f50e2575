"""Ingest progress: plain lines off a terminal, a bar on one, nothing with --quiet."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from governed_evidence.ingest.progress import LINE_INTERVAL_S, IngestProgress
from tests.helpers import Clock

REPO = Path(__file__).resolve().parents[2]


def test_off_a_terminal_a_line_every_few_seconds_and_one_at_the_end() -> None:
    out, clock = io.StringIO(), Clock()
    progress = IngestProgress(out, terminal=False, clock=clock)
    progress("embedding", 0, 1000)  # nothing done yet: nothing to say
    for done in range(64, 1000, 64):
        clock.now += 1.0  # 64 passages a second
        progress("embedding", done, 1000)
    clock.now += 1.0
    progress("embedding", 1000, 1000)
    lines = out.getvalue().splitlines()
    # 15 s of work at one line per LINE_INTERVAL_S, plus the final line.
    assert 15 // LINE_INTERVAL_S <= len(lines) <= 15 // LINE_INTERVAL_S + 2
    assert lines[0] == "ingest: embedding 64/1,000 passages (64.0/s, about 15 s left)"
    assert lines[-1] == "ingest: embedding 1,000/1,000 passages, done in 16 s"


def test_each_stage_has_its_own_unit_and_timing() -> None:
    out, clock = io.StringIO(), Clock()
    progress = IngestProgress(out, terminal=False, clock=clock)
    progress("reading", 0, 3)
    clock.now += 90
    progress("reading", 3, 3)
    progress("embedding", 10, 10)
    assert out.getvalue().splitlines() == [
        "ingest: reading 3/3 files, done in 1 min 30 s",
        "ingest: embedding 10/10 passages, done in 0 s",
    ]


def test_on_a_terminal_a_bar_is_drawn_and_closed() -> None:
    out = io.StringIO()
    progress = IngestProgress(out, terminal=True)
    progress("embedding", 5, 20)
    progress("embedding", 20, 20)
    progress.close()
    drawn = out.getvalue()
    assert "embedding" in drawn and "20/20" in drawn and "passages" in drawn
    progress.close()  # twice is harmless (the CLI closes in a finally)


@pytest.mark.model
@pytest.mark.parametrize("quiet", [False, True])
def test_the_cli_reports_progress_on_stderr_only_and_quiet_silences_it(tmp_path: Path, quiet: bool) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for n in range(3):
        (corpus / f"policy-{n}.md").write_text(f"# Policy {n}\n\nStaff must lock screens after {n + 5} minutes.\n")
    command = [
        sys.executable, "-m", "governed_evidence", "ingest", "--corpus", str(corpus),
        "--db", str(tmp_path / "index.sqlite"), "--default-classification", "public", "--json",
    ]  # fmt: skip
    if quiet:
        command.append("--quiet")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVERNED_EVIDENCE_")}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["passages"] >= 3, "stdout stays one JSON document"
    progress_lines = [line for line in done.stderr.splitlines() if line.startswith("ingest: ")]
    if quiet:
        assert progress_lines == []
    else:
        assert "ingest: reading 3/3 files, done in" in done.stderr
        assert any(line.startswith("ingest: embedding ") and "passages, done in" in line for line in progress_lines)
