"""The Makefile's interpreter check: a wrong Python fails fast and never leaves a venv behind.

Each test runs `make` on a scratch copy of the Makefile (with the files its rules read), so the
working tree's own .venv is never touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import load_script

REPO = Path(__file__).resolve().parents[2]
COPIED = ("Makefile", "pyproject.toml", "scripts/check_python.py", "requirements/lock.txt", "requirements/tools.txt")

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


check_python = load_script("check_python")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for name in COPIED:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, tmp_path / name)
    return tmp_path


def fake_python(path: Path, version: str) -> Path:
    """An interpreter that reports `version` to scripts/check_python.py and is the real one for
    `-m venv`, so a Makefile that ignored the check would go on to create a venv with it."""
    parts = ", ".join(version.split("."))
    code = (
        f"import runpy, sys; sys.version_info = ({parts}, 'final', 0); "
        "del sys.argv[0]; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "-m" ]; then exec "{sys.executable}" "$@"; fi\n'
        f'exec "{sys.executable}" -c "{code}" "$@"\n'
    )
    path.chmod(0o755)
    return path


def make(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    return subprocess.run(
        ["make", "--no-print-directory", *args], cwd=tree, capture_output=True, text=True, timeout=120, env=env
    )


def interpreter_id(python: str | Path) -> str:
    done = subprocess.run([str(python), "scripts/check_python.py", "--id"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize(
    ("version", "spec", "ok"),
    [
        ((3, 11, 0), ">=3.11", True),
        ((3, 13, 2), ">=3.11", True),
        ((3, 10, 14), ">=3.11", False),
        ((2, 7, 18), ">=3.11", False),
        ((3, 12, 1), ">=3.11,<3.13", True),
        ((3, 13, 0), ">=3.11, <3.13", False),
        ((3, 11, 4), "==3.11.*", True),
        ((3, 12, 0), "==3.11.*", False),
        ((3, 11, 4), "!=3.11.4", False),
        ((3, 12, 3), "~=3.11", True),
        ((4, 0, 0), "~=3.11", False),
        ((3, 11, 0), "", True),
    ],
)
def test_requires_python_is_evaluated_like_a_specifier(version: tuple[int, int, int], spec: str, ok: bool) -> None:
    assert check_python.satisfies(version, spec) is ok


def test_the_range_checked_is_the_one_in_pyproject() -> None:
    text = (REPO / "pyproject.toml").read_text()
    assert check_python.requires_python(text) == ">=3.11"
    with pytest.raises(ValueError, match="unsupported"):
        check_python.satisfies((3, 11, 0), ">=3.11-beta")


@pytest.mark.parametrize("target", ["install", "tools"])
def test_a_too_old_python_fails_fast_with_one_line_and_creates_no_venv(tree: Path, target: str) -> None:
    old = fake_python(tree / "old" / "python3.9", "3.9.18")
    started = time.monotonic()
    done = make(tree, target, f"PYTHON={old}")
    seconds = time.monotonic() - started
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if not line.startswith("make:")]
    assert lines == [
        f"governed-evidence needs Python >=3.11 (requires-python in pyproject.toml), but PYTHON={old} is "
        "Python 3.9.18; name one that is, e.g. make PYTHON=python3.11 install"
    ]
    assert not (tree / ".venv").exists() and not (tree / ".venv-tools").exists()
    assert seconds < 30, f"the check took {seconds:.1f} s"


def test_a_venv_left_by_another_interpreter_is_removed_and_rebuilt(tree: Path) -> None:
    # What a too-old Python used to leave: a venv whose python is 3.9, half-installed, no stamp.
    fake_python(tree / ".venv" / "bin" / "python", "3.9.18")
    done = make(tree, "-n", "install", f"PYTHON={sys.executable}")
    assert done.returncode == 0, done.stderr
    current = interpreter_id(sys.executable)
    stale = interpreter_id(tree / ".venv" / "bin" / "python")
    assert stale.endswith(" 3.9.18") and stale != current
    planned = done.stdout
    assert f"[ '{stale}' != '{current}' ]" in planned
    assert "rm -rf .venv" in planned
    assert planned.index("check_python.py --name") < planned.index("rm -rf .venv") < planned.index("-m venv .venv")
    assert f"echo '{current}' > .venv/.installed-stamp" in planned


def test_a_venv_recorded_as_made_by_this_interpreter_is_kept(tree: Path) -> None:
    current = interpreter_id(sys.executable)
    (tree / ".venv" / "bin").mkdir(parents=True)
    (tree / ".venv" / ".installed-stamp").write_text(current + "\n")
    up_to_date = make(tree, "-q", ".venv/.installed-stamp", f"PYTHON={sys.executable}")
    assert up_to_date.returncode == 0, "the venv should be up to date"
    # The same stamp, recorded by another interpreter: the venv is out of date and rebuilt.
    (tree / ".venv" / ".installed-stamp").write_text("/opt/python3.12/bin/python3.12 3.12.1\n")
    planned = make(tree, "-n", "install", f"PYTHON={sys.executable}").stdout
    assert "rm -rf .venv" in planned and "-m venv .venv" in planned
