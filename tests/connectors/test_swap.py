"""Replacing the mirror whole, with and without an atomic exchange of the two folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from governed_evidence.connectors import swap


@pytest.mark.parametrize("exchange", [True, False])
def test_the_new_folder_replaces_the_old_and_nothing_is_left_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exchange: bool
) -> None:
    if not exchange:
        monkeypatch.setattr(swap, "_exchange", lambda a, b: False)
    mirror, new = tmp_path / "mirror", tmp_path / ".mirror.staging-1"
    (mirror / "a").mkdir(parents=True)
    (mirror / "a" / "old.md").write_text("old")
    new.mkdir()
    (new / "new.md").write_text("new")
    swap.replace_folder(new, mirror)
    assert sorted(p.name for p in mirror.rglob("*")) == ["new.md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mirror"]


def test_a_first_mirror_is_put_in_place(tmp_path: Path) -> None:
    new = tmp_path / ".m.staging-1"
    new.mkdir()
    swap.replace_folder(new, tmp_path / "m")
    assert (tmp_path / "m").is_dir() and not new.exists()


def test_recover_restores_the_previous_mirror_and_removes_staging(tmp_path: Path) -> None:
    previous = swap.previous_of(tmp_path / "mirror")
    previous.mkdir()
    (previous / "kept.md").write_text("kept")
    (tmp_path / ".mirror.staging-abc").mkdir()
    swap.recover(tmp_path / "mirror")
    assert (tmp_path / "mirror" / "kept.md").read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mirror"]
