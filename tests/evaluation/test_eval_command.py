"""`governed-evidence eval` end to end: the gate passes, and sabotage turns it red."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _eval(db: Path, *extra: str, gate: str = "on") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GOVERNED_EVIDENCE_GATE": gate, "GOVERNED_EVIDENCE_LOG_LEVEL": "WARNING"}
    return subprocess.run(
        [sys.executable, "-m", "governed_evidence", "eval", "--db", str(db), *extra],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )


def test_eval_gate_passes_with_governance_slices_over_mcp(sample_index: Path) -> None:
    done = _eval(sample_index, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["gate"] == "PASS"
    assert result["governance_via"] == "mcp-stdio"
    by_slice = {r["slice"]: r for r in result["reports"]}
    assert by_slice["denied"]["metrics"]["leaks"] == 0
    assert by_slice["secret"]["metrics"]["violations"] == 0


def test_sabotage_turning_the_gate_off_fails_the_eval(sample_index: Path, tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    done = _eval(sample_index, "--no-mcp", "--write-baseline", str(baseline), gate="off")
    assert done.returncode == 1
    assert "EVAL GATE: FAIL" in done.stdout
    assert "[FAIL] unanswerable.abstention_rate = 0.000" in done.stdout
    # Quality regressions do not block a baseline; only a must-be-zero failure would.
    assert baseline.is_file()
