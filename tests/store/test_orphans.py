"""A build killed outright leaves a shadow file; the next build removes it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from governed_evidence.config import Classification
from governed_evidence.store.build import IndexBuilder


def test_orphaned_shadow_of_a_dead_process_is_removed(tmp_path: Path) -> None:
    target = tmp_path / "index.sqlite"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    orphan = tmp_path / f".index.sqlite.build-{dead_pid}-abcd1234"
    orphan.write_bytes(b"half-built")
    live = tmp_path / f".index.sqlite.build-{os.getpid()}-live0000"
    live.write_bytes(b"in progress elsewhere")
    unrelated = tmp_path / ".other.sqlite.build-1-x"
    unrelated.write_bytes(b"not ours")
    builder = IndexBuilder(target, dimension=4, ceiling=Classification.PUBLIC)
    builder.abort()
    assert not orphan.exists()
    assert live.exists() and unrelated.exists()
