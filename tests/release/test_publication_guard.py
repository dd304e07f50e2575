"""The publication guard (scripts/publication_guard.py) catches what it promises to catch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import load_script

REPO = Path(__file__).resolve().parents[2]


guard = load_script("publication_guard")

# Fake values assembled at run time so this file itself stays clean.
HOME = "/" + "home/alice/project"
SAMPLES = {
    "private key": "-----BEGIN OPENSSH " + "PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n-----END",
    "cloud access key": "key = " + "AKIA" + "ABCDEFGHIJKLMNOP",
    "cloud secret key": "aws_secret_access_key = " + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "api token": "token " + "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "password assignment": "password = " + '"hunter2-EXAMPLE"',
    "url with password": "postgres://app" + ":Sup3rS3cret@db.example",
    "absolute machine path": f"data lives in {HOME}/data",
}


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_each_kind_is_found_and_named(kind: str) -> None:
    found = {f.kind for f in guard.scan_text("x.md", SAMPLES[kind])}
    assert kind in found


@pytest.mark.parametrize(
    "text",
    [
        "See https://example.com/home/alice/x and ./work/notes and ~/root/x.",
        'The runbook has a `password = "..."` placeholder.',
        "Target: the -----BEGIN RSA " + "PRIVATE KEY----- block (a header alone is not a key).",
        "AKIA keys are issued by the cloud team on request.",
        "Mount it with -v $PWD/data:/data:ro.",
    ],
)
def test_prose_and_relative_paths_are_not_flagged(text: str) -> None:
    assert list(guard.scan_text("x.md", text)) == []


def test_the_script_does_not_flag_itself_and_the_allowlist_never_covers_paths() -> None:
    text = (REPO / "scripts" / "publication_guard.py").read_text()
    assert list(guard.scan_text("scripts/publication_guard.py", text)) == []
    assert all("absolute machine path" not in kinds for kinds in guard.ALLOWLIST.values())


def test_a_planted_secret_fails_the_run_and_the_secret_is_not_printed(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "config.py").write_text(SAMPLES["password assignment"] + "\n")
    (tmp_path / "notes.md").write_text("nothing to see\n")
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "publication_guard.py"), "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "config.py:1: password assignment" in done.stdout
    assert "hunter2" not in done.stdout
    assert "notes.md" not in done.stdout
