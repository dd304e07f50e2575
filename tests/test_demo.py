"""`make demo` (scripts/demo.py): its own index file, and commands that work when copied."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from governed_evidence import __version__
from governed_evidence.config import Settings
from tests.helpers import load_script

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def demo() -> ModuleType:
    return load_script("demo")


def test_the_demo_index_is_not_the_default_index(demo: ModuleType) -> None:
    """An ingest without --db must not replace the demo's index, nor `make demo` the user's."""
    makefile = (REPO / "Makefile").read_text()
    (make_db,) = re.findall(r"^DEMO_DB\s*:=\s*(\S+)\s*$", makefile, flags=re.MULTILINE)
    assert make_db == demo.DEMO_DB
    assert Path(demo.DEMO_DB) != Settings.model_fields["db"].default
    assert str(Settings.model_fields["db"].default) == demo.DEFAULT_DB


def test_a_printed_command_runs_when_pasted_into_a_plain_shell(demo: ModuleType) -> None:
    """No venv on PATH (nothing activated): the printed program is found anyway."""
    line = demo.command_line(["--version"])
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = "/usr/bin:/bin"
    done = subprocess.run(
        ["/bin/sh", "-c", line], cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, (line, done.stderr)
    assert done.stdout.strip() == f"governed-evidence {__version__}"


def test_next_steps_give_commands_and_existing_readme_sections(demo: ModuleType) -> None:
    readme = (REPO / "README.md").read_text()
    text = demo.next_steps(demo.DEMO_DB)
    commands = [line.strip()[2:] for line in text.splitlines() if line.strip().startswith("$ ")]
    ingest, serve, *container = commands
    assert ingest.startswith(demo.command_line([])) and " ingest --corpus " in ingest
    # A client starts the server from anywhere: the program and the index are absolute paths.
    program, command, flag, db = shlex.split(serve)
    assert Path(program).is_absolute() and os.access(program, os.X_OK)
    assert (command, flag) == ("serve", "--db") and Path(db).is_absolute()
    assert container == list(demo.CONTAINER_COMMANDS)
    for line in container:
        assert line in readme, line
    for section in (demo.CLIENT_SECTION, demo.CONTAINER_SECTION):
        assert f'"{section}"' in text
        assert re.search(rf"^#+ {re.escape(section)}$", readme, flags=re.MULTILINE), section
