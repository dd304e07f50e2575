"""Ctrl-C: one line, exit code 130, no traceback, and an interrupted ingest changes nothing.

Each run is a real subprocess receiving a real SIGINT. The child runs the CLI's ``main``
behind a small wrapper that only reports where it is (a marker file), so the signal lands
in the phase under test: mid-embedding with the real model, or in the write phase while
the shadow file exists.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import apsw
import pytest

from benchmarks.startup import rpc_request
from governed_evidence.config import Classification
from governed_evidence.ingest.pipeline import ingest_corpus
from tests.helpers import HashEmbedder, small_corpus

REPO = Path(__file__).resolve().parents[1]
SAMPLE_CORPUS = REPO / "data" / "sample_corpus"

# The CLI as the console script runs it; the real embedder's first embed() says the model has
# started, so the test signals while the passages are embedded, and each call that returns adds
# its count of texts to a second file. The model runs a few texts a call, so the marker is
# written once, whole (renamed into place): a signal landing between two calls or during a write
# must not read as either "not started" or "the model finished".
MID_EMBEDDING = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from governed_evidence.embeddings.minilm import MiniLMEmbedder
    from governed_evidence.cli import main

    marker = Path(sys.argv[1])
    real_embed = MiniLMEmbedder.embed

    def embed(self, texts):
        if not marker.exists():
            written = marker.with_suffix(".tmp")
            written.write_text(f"embedding {len(texts)}")
            written.replace(marker)
        vectors = real_embed(self, texts)
        with marker.with_suffix(".done").open("a") as done:
            done.write(f"{len(texts)}\\n")
        return vectors

    MiniLMEmbedder.embed = embed
    sys.exit(main(sys.argv[2:]))
    """
)

# The CLI with the deterministic embedder; Ctrl-C arrives while the builder writes passages
# into its shadow file (the marker lists the shadow files that exist at that moment).
IN_WRITE_PHASE = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from governed_evidence.embeddings import factory
    from governed_evidence.store import build
    from governed_evidence.cli import main
    from tests.helpers import HashEmbedder

    marker = Path(sys.argv[1])
    factory.make_embedder = lambda settings, name=None: HashEmbedder()
    factory.make_ingest_embedder = factory.make_embedder
    real_add = build.IndexBuilder.add_passage
    added = []

    def add_passage(self, document_id, row, embedding):
        real_add(self, document_id, row, embedding)
        added.append(1)
        if len(added) == 3:
            shadows = self.shadow.parent.glob("." + self.target.name + ".build-*")
            marker.write_text(",".join(sorted(p.name for p in shadows)))
            os.kill(os.getpid(), signal.SIGINT)

    build.IndexBuilder.add_passage = add_passage
    sys.exit(main(sys.argv[2:]))
    """
)

# Any other command: Ctrl-C while it works (here, as it builds its search service).
IN_SEARCH = textwrap.dedent(
    """
    import os, signal, sys
    from governed_evidence import composition
    from governed_evidence.cli import main

    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        raise AssertionError("SIGINT did not interrupt")

    composition.search_service = interrupted
    sys.exit(main(sys.argv[1:]))
    """
)


def _after_progress(stderr: str) -> str:
    """stderr without ingest's progress lines: exactly what else was said (no traceback)."""
    return "\n".join(line for line in stderr.strip().splitlines() if not line.startswith("ingest: "))


def _sigint_at_default() -> None:
    """In the child before it runs: Ctrl-C at its default, as for a command a terminal runs.

    A job started in the background of a non-interactive shell (``make test &``, ``nohup``)
    inherits SIGINT ignored, and Python then leaves it ignored; these tests are about what the
    CLI does when the signal arrives, not about that inheritance."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "GOVERNED_EVIDENCE_LOG_LEVEL"}
    return {**env, "PYTHONPATH": str(REPO)}


def _texts_embedded(marker: Path) -> int:
    """Texts the model returned vectors for, by the calls that completed (a line cut short by
    the signal is not one)."""
    done = marker.with_suffix(".done")
    lines = done.read_text().split("\n")[:-1] if done.exists() else []
    return sum(int(line) for line in lines)


def _passages(db: Path) -> int:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        (count,) = conn.execute("SELECT count(*) FROM passages").fetchone() or (0,)
        return int(count)
    finally:
        conn.close()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _leftovers(db: Path) -> list[str]:
    return sorted(p.name for p in db.parent.iterdir() if p.name.startswith(f".{db.name}.build-"))


def _old_index(db: Path, corpus: Path) -> str:
    """An index of ``corpus`` built by another embedder: the CLI's real model must rebuild it."""
    ingest_corpus(corpus, db, HashEmbedder(), ceiling=Classification.RESTRICTED, progress=None)
    return _sha256(db)


def _wait_for(marker: Path, proc: subprocess.Popen[str], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if marker.is_file() and (text := marker.read_text()):
            return text
        if proc.poll() is not None:
            pytest.fail(f"the ingest ended (exit {proc.returncode}) before reaching the phase under test")
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"the ingest did not reach the phase under test within {timeout} s")


def test_ctrl_c_mid_embedding_leaves_the_previous_index_and_says_so(tmp_path: Path) -> None:
    db = tmp_path / "evidence.sqlite"
    before = _old_index(db, SAMPLE_CORPUS)
    marker = tmp_path / "phase"
    argv = ["ingest", "--corpus", str(SAMPLE_CORPUS), "--db", str(db), "--ceiling", "restricted"]
    # Its own session, signalled as a group: what a terminal's Ctrl-C does (the PDF parser
    # children get it too).
    proc = subprocess.Popen(
        [sys.executable, "-c", MID_EMBEDDING, str(marker), *argv],
        cwd=REPO,
        env=_env(),
        preexec_fn=_sigint_at_default,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert _wait_for(marker, proc, timeout=180).startswith("embedding")
        time.sleep(0.5)  # inside onnxruntime's run by now: where the traceback came from
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _texts_embedded(marker) < _passages(db), "the model finished before the interrupt"
    assert proc.returncode == 130, err
    assert _after_progress(err) == "interrupted; the previous index is unchanged"
    assert "Traceback" not in err and out == ""
    assert _sha256(db) == before
    assert _leftovers(db) == []


def _interrupted_in_write_phase(marker: Path, corpus: Path, db: Path) -> subprocess.CompletedProcess[str]:
    """``ingest`` run under IN_WRITE_PHASE, which interrupts it once the shadow file is written."""
    return subprocess.run(
        [sys.executable, "-c", IN_WRITE_PHASE, str(marker), "ingest", "--corpus", str(corpus), "--db", str(db)],
        cwd=REPO,
        env=_env(),
        preexec_fn=_sigint_at_default,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_ctrl_c_while_the_shadow_file_is_written_removes_it(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path / "corpus")
    db = tmp_path / "evidence.sqlite"
    # The same embedder but a different build ceiling: a real rebuild, into a shadow file.
    ingest_corpus(corpus, db, HashEmbedder(), ceiling=Classification.INTERNAL, progress=None)
    before = _sha256(db)
    marker = tmp_path / "phase"
    done = _interrupted_in_write_phase(marker, corpus, db)
    assert marker.read_text().startswith(".evidence.sqlite.build-"), "no shadow file when the signal came"
    assert done.returncode == 130, done.stderr
    assert _after_progress(done.stderr) == "interrupted; the previous index is unchanged"
    assert _sha256(db) == before
    assert _leftovers(db) == []


def test_ctrl_c_of_a_first_ingest_says_no_index_was_written(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path / "corpus")
    db = tmp_path / "evidence.sqlite"
    marker = tmp_path / "phase"
    done = _interrupted_in_write_phase(marker, corpus, db)
    assert done.returncode == 130, done.stderr
    assert _after_progress(done.stderr) == "interrupted; no index was written"
    assert not db.exists() and _leftovers(db) == []


def test_ctrl_c_of_another_command_says_interrupted(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", IN_SEARCH, "search", "leave", "--db", str(tmp_path / "evidence.sqlite")],
        cwd=REPO,
        env=_env(),
        preexec_fn=_sigint_at_default,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 130, done.stderr
    assert _after_progress(done.stderr) == "interrupted"
    assert done.stdout == ""


def test_ctrl_c_of_serve_is_a_log_line_and_exit_130(tmp_path: Path) -> None:
    """serve's stderr is a log stream: the notice is one more JSON line, not a traceback."""
    corpus = small_corpus(tmp_path / "corpus")
    db = tmp_path / "evidence.sqlite"
    ingest_corpus(corpus, db, HashEmbedder(), ceiling=Classification.RESTRICTED, progress=None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "governed_evidence", "serve", "--db", str(db)],
        cwd=REPO,
        env=_env(),
        preexec_fn=_sigint_at_default,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        assert rpc_request(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})  # serving
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    records = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert records[-1]["event"] == "interrupted"
