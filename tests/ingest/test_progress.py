"""Ingest progress: plain lines off a terminal, a bar on one, nothing with --quiet."""

from __future__ import annotations

import io
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from governed_evidence.config import Classification
from governed_evidence.embeddings.factory import LazyEmbedder
from governed_evidence.ingest.embed import BATCH
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.ingest.progress import LINE_INTERVAL_S, IngestProgress
from governed_evidence.ingest.report import UNKNOWN
from governed_evidence.ingest.writer import CHUNK_PASSAGES
from tests.helpers import Clock, HashEmbedder

REPO = Path(__file__).resolve().parents[2]


def test_off_a_terminal_a_line_when_a_stage_starts_every_few_seconds_and_one_at_the_end() -> None:
    out, clock = io.StringIO(), Clock()
    progress = IngestProgress(out, terminal=False, clock=clock)
    progress("embedding", 0, 1000)  # said at once: the stage has started
    for done in range(64, 1000, 64):
        clock.now += 1.0  # 64 passages a second
        progress("embedding", done, 1000)
    clock.now += 1.0
    progress("embedding", 1000, 1000)
    lines = out.getvalue().splitlines()
    assert lines[0] == "ingest: embedding 0/1,000 passages"
    # 16 s of work: the start, a line every LINE_INTERVAL_S, and the end.
    assert lines[1] == "ingest: embedding 256/1,000 passages (64.0/s, about 12 s left)"
    assert len(lines) == 2 + int(15 // LINE_INTERVAL_S)
    # "done in" counts from the stage's start, not from its first progress.
    assert lines[-1] == "ingest: embedding 1,000/1,000 passages, done in 16 s"


def test_no_two_lines_of_a_stage_are_further_apart_than_the_interval_when_it_moves() -> None:
    out, clock = io.StringIO(), Clock()
    stamps: list[float] = []

    class Stamped(io.StringIO):
        def write(self, text: str) -> int:
            if text.strip():
                stamps.append(clock.now)
            return out.write(text)

    progress = IngestProgress(Stamped(), terminal=False, clock=clock)
    progress("embedding", 0, 2000)
    for done in range(32, 2000, 32):
        clock.now += 1.3  # one batch of 32 passages
        progress("embedding", done, 2000)
    progress("embedding", 2000, 2000)
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert max(gaps) <= LINE_INTERVAL_S + 1.3
    assert min(gaps[:-1]) >= LINE_INTERVAL_S


def test_a_build_says_it_loads_the_model_and_counts_passages_before_their_total_is_known() -> None:
    out, clock = io.StringIO(), Clock()
    progress = IngestProgress(out, terminal=False, clock=clock)
    progress("reading", 0, 40)
    progress("model", 0, 1)
    clock.now += 2.4
    progress("model", 1, 1)
    progress("embedding", 0, UNKNOWN)
    clock.now += 6
    progress("embedding", 96, UNKNOWN)
    progress("reading", 20, 40)
    clock.now += 6
    progress("embedding", 192, 192)
    progress("reading", 40, 40)
    assert out.getvalue().splitlines() == [
        "ingest: reading 0/40 files",
        "ingest: loading the embedding model",
        "ingest: embedding model loaded in 2 s",
        "ingest: embedding 0 passages so far",
        "ingest: embedding 96 passages so far (16.0/s)",
        "ingest: reading 20/40 files (2.4/s, about 8 s left)",
        "ingest: embedding 192/192 passages, done in 12 s",
        "ingest: reading 40/40 files, done in 14 s",
    ]


def test_each_stage_has_its_own_unit_and_timing() -> None:
    out, clock = io.StringIO(), Clock()
    progress = IngestProgress(out, terminal=False, clock=clock)
    progress("reading", 0, 3)
    clock.now += 90
    progress("reading", 3, 3)
    progress("embedding", 10, 10)
    assert out.getvalue().splitlines() == [
        "ingest: reading 0/3 files",
        "ingest: reading 3/3 files, done in 1 min 30 s",
        "ingest: embedding 10/10 passages, done in 0 s",
    ]


def test_on_a_terminal_a_bar_is_drawn_and_closed() -> None:
    out = io.StringIO()
    progress = IngestProgress(out, terminal=True)
    progress("embedding", 5, UNKNOWN)  # a pulsing bar until the total is known
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


def test_a_build_reports_the_model_load_then_every_batch_while_it_reads(tmp_path: Path) -> None:
    # 40 documents of several passages: more than one chunk, several batches per chunk.
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for n in range(40):
        sections = "\n\n".join(f"## Rule {n}-{k}\n\nStaff follow rule {n}-{k} on {k} days a week." for k in range(20))
        (corpus / f"policy-{n:02d}.md").write_text(f"# Policy {n}\n\n{sections}\n", encoding="utf-8")
    calls: list[tuple[str, int, int]] = []
    # Its identity known without loading it, as the default model's is.
    embedder = LazyEmbedder(HashEmbedder, HashEmbedder().identity)
    report = ingest_corpus(
        corpus,
        tmp_path / "index.sqlite",
        embedder,
        ceiling=Classification.RESTRICTED,
        default_classification=Classification.PUBLIC,
        progress=lambda stage, done, total: calls.append((stage, done, total)),
    )
    passages = report.embeddings_computed
    assert passages == report.passages > CHUNK_PASSAGES
    stages = [stage for stage, _, _ in calls]
    # Reading starts at once; the model loads (said before and after) before the first batch.
    assert calls[0] == ("reading", 0, 40)
    assert calls[stages.index("model") : stages.index("model") + 2] == [("model", 0, 1), ("model", 1, 1)]
    assert stages.index("model") < stages.index("embedding")
    # Documents are embedded as they are read: batches come between files, not after the last.
    last_read = max(i for i, stage in enumerate(stages) if stage == "reading")
    first_embedded = stages.index("embedding")
    assert first_embedded < last_read
    embedding = [(done, total) for stage, done, total in calls if stage == "embedding"]
    # A tick per batch of at most BATCH passages, never going back; no total until all is read.
    done_values = [done for done, _ in embedding]
    assert done_values == sorted(done_values)
    assert max(b - a for a, b in itertools.pairwise(done_values)) <= BATCH
    assert len(set(done_values)) >= passages // BATCH
    assert all(total == UNKNOWN for _, total in embedding[:-1])
    assert embedding[-1] == (passages, passages)
    assert embedder.loaded
