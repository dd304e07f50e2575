"""`pytest --fast` (make test-fast) leaves out the real model and the slow suites, and only those."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FILES = (
    "tests/search/test_gate_calibration.py",  # asks for the minilm / sample_index fixtures
    "tests/ingest/test_other_corpus.py",  # one test marked `model` (the CLI as a subprocess)
    "tests/hardening/test_load.py",  # a suite deselected by its path
    "tests/search/test_bm25.py",  # none of these: all kept
)


def fixtures_per_test(*options: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--fixtures-per-test", "-q", "-p", "no:cacheprovider", *options, *FILES],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_fast_deselects_the_real_model_and_the_slow_suites_and_keeps_the_rest() -> None:
    # `--fixtures-per-test` lists each selected test (that uses a fixture) with its fixtures.
    fast = fixtures_per_test("--fast")
    used = set(re.findall(r"^(\w+) -- ", fast, re.MULTILINE))
    assert "tmp_path" in used, "tests are listed at all"
    assert not {"minilm", "sample_index"} & used
    assert "test_load.py" not in fast
    assert "fixtures used by test_the_cli_refuses_another_corpus" not in fast
    assert "fixtures used by test_another_corpus_is_refused_naming_it_and_nothing_changes" in fast
