"""The Python client in docs/clients.md runs as written, against a real `serve`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _client_code() -> str:
    text = (REPO / "docs" / "clients.md").read_text(encoding="utf-8")
    return text.split("<!-- python-client -->\n```python\n", 1)[1].split("\n```", 1)[0]


@pytest.mark.model
def test_the_python_client_in_the_docs_asks_and_reads(sample_index: Path, tmp_path: Path) -> None:
    script = tmp_path / "ask.py"
    script.write_text(_client_code(), encoding="utf-8")
    env = {
        **os.environ,
        "GOVERNED_EVIDENCE_DB": str(sample_index),
        "EVIDENCE_SERVER_COMMAND": str(Path(sys.executable).parent / "governed-evidence"),
    }
    done = subprocess.run(
        [sys.executable, str(script), "How many days a week can I work from home?"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("[1] internal/hr/remote-work-policy-2024.md#")
    assert lines[-1].startswith("read internal/hr/remote-work-policy-2024.md#")
    assert "neighbouring passage(s)" in lines[-1]
