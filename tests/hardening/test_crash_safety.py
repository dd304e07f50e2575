"""kill -9 an ingest at random points: the previous index stays intact and keeps serving, and a
reader searching throughout a rebuild never sees an error or a half-built index.

The ingest runs in a child process that reports its phases (parse, embed, write, commit) on
stdout. A first, uninterrupted run measures when each phase starts; then each seeded run
picks a phase and a random moment inside it, and sends SIGKILL then.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from governed_evidence.config import Classification
from governed_evidence.errors import GovernedEvidenceError
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.search.service import SearchService
from governed_evidence.store.connection import connect
from tests.hardening import figures
from tests.helpers import HashEmbedder, write

REPO = Path(__file__).resolve().parents[2]
SEED = 8
#: Phases the kills are spread over (two kills in each of the longer ones).
KILL_PHASES = ["parse", "embed", "write", "write", "commit", "commit"]
MIN_KILLS = 5
#: Tries per phase when a kill lands after the phase it aimed at.
KILL_ATTEMPTS = 3
ORDER = ["parse", "embed", "write", "commit", "published", "done"]

CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from governed_evidence.config import Classification
    from governed_evidence.ingest.pipeline import ingest_corpus
    from governed_evidence.store import build
    from tests.helpers import HashEmbedder

    def mark(stage):
        print(f"{time.monotonic():.6f} {stage}", flush=True)

    # Phase markers only: each wrapper reports, then does exactly what it wraps.
    add_document, commit = build.IndexBuilder.add_document, build.IndexBuilder.commit
    copy_documents = build.IndexBuilder.copy_documents

    def marked_add(self, row):
        if not getattr(self, "_marked", False):
            self._marked = True
            mark("write")
        return add_document(self, row)

    def marked_copy(self, run):
        # An incremental build writes by copying unchanged documents as much as by adding.
        if run and not getattr(self, "_marked", False):
            self._marked = True
            mark("write")
        return copy_documents(self, run)

    def marked_commit(self, meta):
        mark("commit")
        commit(self, meta)
        mark("published")

    build.IndexBuilder.add_document, build.IndexBuilder.commit = marked_add, marked_commit
    build.IndexBuilder.copy_documents = marked_copy
    embedded = []

    def progress(stage, done, total):
        if not embedded:
            embedded.append(1)
            mark("embed")

    mark("parse")
    report = ingest_corpus(Path(sys.argv[1]), Path(sys.argv[2]), HashEmbedder(), ceiling=Classification.RESTRICTED,
                           progress=progress)
    print(f"# {report.build} copied={report.files_copied}", flush=True)
    mark("done")
    """
)


def _corpus(root: Path, documents: int, tag: str) -> Path:
    for i in range(documents):
        level = ("public", "internal", "restricted")[i % 3]
        sections = "\n\n".join(
            f"## Section {j}\n\n" + " ".join(f"{tag} clause {i}-{j} word{k} about reservoirs." for k in range(25))
            for j in range(4)
        )
        write(root, f"{level}/doc-{i:04d}.md", f"# {tag} document {i}\n\n{sections}\n")
    return root


def _counts(db: Path) -> tuple[int, int, str]:
    conn = connect(db, readonly=True)
    try:
        (documents,) = conn.execute("SELECT count(*) FROM documents").fetchone() or (0,)
        (passages,) = conn.execute("SELECT count(*) FROM passages").fetchone() or (0,)
        check = ",".join(str(r[0]) for r in conn.execute("PRAGMA integrity_check"))
    finally:
        conn.close()
    return int(documents), int(passages), check


def _child(corpus: Path, db: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "GOVERNED_EVIDENCE_LOG_LEVEL": "WARNING"}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(corpus), str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=REPO,
    )


def _marks(lines: list[str]) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in lines:
        if line.startswith("#"):
            continue  # what the build was, not a phase
        stamp, _, stage = line.strip().partition(" ")
        if stage:
            found[stage] = float(stamp)
    return found


def _kill_once(
    corpus: Path,
    db: Path,
    pristine: Path,
    phase: str,
    delay: float,
    old: tuple[int, int, str],
    new: tuple[int, int, str],
) -> str | None:
    """One rebuild of ``db`` killed ``delay`` s after it reports ``phase``; checks what then serves.

    Returns the last phase the child reported, or None when it finished before the kill.
    """
    # Each run starts from the previous index (replaced atomically, as a rebuild would).
    staged = db.with_name("staged.sqlite")
    shutil.copyfile(pristine, staged)
    os.replace(staged, db)
    previous_inode = os.stat(db).st_ino
    child = _child(corpus, db)
    assert child.stdout is not None
    seen = [child.stdout.readline()]
    while not seen[-1].endswith(f" {phase}\n"):
        assert seen[-1], f"the child ended before reaching {phase}"
        seen.append(child.stdout.readline())
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    rest, _ = child.communicate(timeout=60)
    reached: str | None = list(_marks([*seen, *rest.splitlines()]))[-1]
    if child.returncode == 0:
        reached = None
    else:
        assert child.returncode == -signal.SIGKILL, child.returncode

    documents, passages, check = _counts(db)
    assert check == "ok"
    # The rename is the last step of commit and "published" is printed after it, so a
    # kill between the two leaves the new file in place with "commit" as the last mark:
    # whether the rename happened is read from the file's identity, not from the mark.
    renamed = os.stat(db).st_ino != previous_inode
    if reached in (None, "published"):
        assert renamed
    if renamed:
        # Killed after the rename: the finished new index is what serves.
        assert (documents, passages) == new[:2]
    else:
        assert (documents, passages) == old[:2], f"killed in {reached}: the previous index changed"
    fresh = SearchService(db, ceiling=Classification.RESTRICTED, embedder_factory=HashEmbedder)
    try:
        assert fresh.status().ok
        assert fresh.search("reservoirs clause", limit=3, confidence_level="normal").results
    finally:
        fresh.reader.close()
    return reached


@dataclass
class Reader:
    """Searches the served index continuously; records what it saw."""

    db: Path
    allowed: set[int]
    stop: threading.Event = field(default_factory=threading.Event)
    errors: list[str] = field(default_factory=list)
    seen: dict[int, int] = field(default_factory=dict)
    calls: int = 0

    def run(self) -> None:
        embedder = HashEmbedder()
        service = SearchService(
            self.db, ceiling=Classification.RESTRICTED, embedder_factory=lambda: embedder, gate_enabled=False
        )
        try:
            while not self.stop.is_set():
                try:
                    response = service.search("reservoirs clause word3", limit=5)
                    documents = service.list_sources().totals
                    status = service.status()
                except GovernedEvidenceError as exc:  # any error at all is a failure
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                    continue
                self.calls += 1
                count = sum(t.documents for t in documents)
                self.seen[count] = self.seen.get(count, 0) + 1
                # (A rebuild may publish between two calls, so each call is checked on its own.)
                if count not in self.allowed or status.integrity != "ok" or status.documents not in self.allowed:
                    self.errors.append(f"half-built view: {count} documents, integrity {status.integrity}")
                if not response.results:
                    self.errors.append("a search returned nothing")
        finally:
            service.reader.close()


def _edited(old: Path, root: Path) -> Path:
    """``old`` with one file in ten edited, one in thirteen deleted and 40 added: most of
    its documents are copied by an incremental build."""
    shutil.copytree(old, root)
    for i, path in enumerate(sorted(root.rglob("*.md"))):
        if i % 10 == 0:
            path.write_text(path.read_text(encoding="utf-8") + "\nRevised clause about reservoirs.\n")
        elif i % 13 == 0:
            path.unlink()
    _corpus(root / "added", 40, "current")
    return root


@pytest.mark.parametrize("build", ["another corpus", "incremental"])
def test_kill_9_during_ingest_leaves_the_previous_index_serving(tmp_path: Path, build: str) -> None:
    """A rebuild from another corpus (every file parsed), and from the same corpus edited (the
    write phase is mostly copying rows from the index being replaced)."""
    old_corpus = _corpus(tmp_path / "old", 60, "former")
    new = tmp_path / "new"
    new_corpus = _corpus(new, 120, "current") if build == "another corpus" else _edited(old_corpus, new)
    db = tmp_path / "index.sqlite"
    ingest_corpus(old_corpus, db, HashEmbedder(), ceiling=Classification.RESTRICTED, progress=None)
    pristine = tmp_path / "pristine.sqlite"
    shutil.copyfile(db, pristine)
    old = _counts(db)
    assert old[2] == "ok"

    # An uninterrupted run measures the phases (and gives the counts of a finished rebuild).
    scratch = tmp_path / "scratch.sqlite"
    shutil.copyfile(pristine, scratch)
    child = _child(new_corpus, scratch)
    out, _ = child.communicate(timeout=120)
    assert child.returncode == 0, out
    copied = int(out.split("copied=")[1].split()[0])
    # Another corpus has no file in common with the previous index: nothing to copy.
    assert copied > 40 if build == "incremental" else copied == 0, out
    phases = _marks(out.splitlines())
    assert list(phases) == ["parse", "embed", "write", "commit", "published", "done"], phases
    new = _counts(scratch)
    assert new[2] == "ok" and new[:2] != old[:2]
    following = {"parse": "embed", "embed": "write", "write": "commit", "commit": "published"}
    durations = {name: phases[after] - phases[name] for name, after in following.items()}

    reader = Reader(db, {old[0], new[0]})
    thread = threading.Thread(target=reader.run, daemon=True)
    thread.start()
    rng = random.Random(SEED)
    outcomes: list[tuple[str, str, float]] = []
    finished = 0
    try:
        for phase in KILL_PHASES:
            # A random moment inside the phase, measured from the child's own report of it.
            # (Commit is short and ends in the rename, so its kills come in its first half.)
            delay = rng.uniform(0.0, (0.5 if phase == "commit" else 0.9) * durations[phase])
            for _attempt in range(KILL_ATTEMPTS):
                reached = _kill_once(new_corpus, db, pristine, phase, delay, old, new)
                if reached is None:
                    finished += 1  # this run beat its kill: a finished rebuild, checked all the same
                else:
                    outcomes.append((phase, reached, round(delay, 3)))
                    if ORDER.index(reached) <= ORDER.index(phase):
                        break
                # The phase ended sooner than in the measuring run (a loaded machine varies by
                # more than the phase lasts): the kill landed later, so aim earlier, a bounded
                # number of times, to have a kill inside every phase.
                delay /= 4
        # A finished rebuild afterwards publishes and removes the killed runs' shadow files.
        child = _child(new_corpus, db)
        out, _ = child.communicate(timeout=120)
        assert child.returncode == 0
        assert _counts(db) == new
        time.sleep(0.2)
    finally:
        reader.stop.set()
        thread.join(timeout=30)
    leftovers = sorted(p.name for p in tmp_path.glob(".index.sqlite.build-*"))
    assert leftovers == [], leftovers
    figures.add("crash safety: ingests killed with SIGKILL", len(outcomes))
    figures.add("crash safety: crashes survived (index intact and serving)", len(outcomes))
    for _, reached, _ in outcomes:
        figures.add(f"crash safety: killed in {reached}", 1)
        if build == "incremental":
            figures.add(f"crash safety: incremental builds killed in {reached}", 1)
    figures.add("crash safety: reader calls during rebuilds", reader.calls)
    assert len(outcomes) >= MIN_KILLS
    assert {reached for _, reached, _ in outcomes} >= {"parse", "write", "commit"}, (outcomes, durations)
    assert not reader.errors, reader.errors[:5]
    assert reader.calls > 50 and set(reader.seen) <= {old[0], new[0]}
    assert len(reader.seen) == 2, "the reader saw both the previous and the rebuilt index"


@pytest.mark.parametrize("seed", [1])
def test_reader_threads_never_see_a_half_built_index_during_in_process_rebuilds(tmp_path: Path, seed: int) -> None:
    """Rebuilds in this process (alternating two corpora) while readers search without pause."""
    corpora = [_corpus(tmp_path / "a", 30, "alpha"), _corpus(tmp_path / "b", 45, "beta")]
    db = tmp_path / "index.sqlite"
    ingest_corpus(corpora[0], db, HashEmbedder(), ceiling=Classification.RESTRICTED, progress=None)
    counts = {_counts(db)[0]}
    scratch = tmp_path / "scratch.sqlite"
    ingest_corpus(corpora[1], scratch, HashEmbedder(), ceiling=Classification.RESTRICTED, progress=None)
    counts.add(_counts(scratch)[0])
    readers = [Reader(db, counts) for _ in range(2)]
    threads = [threading.Thread(target=r.run, daemon=True) for r in readers]
    for t in threads:
        t.start()
    rng = random.Random(seed)
    rebuilds = 6
    try:
        for i in range(rebuilds):
            ingest_corpus(corpora[(i + 1) % 2], db, HashEmbedder(), ceiling=Classification.RESTRICTED, progress=None)
            time.sleep(rng.uniform(0.0, 0.05))
    finally:
        for r in readers:
            r.stop.set()
        for t in threads:
            t.join(timeout=30)
    figures.add("crash safety: reader calls during rebuilds", sum(r.calls for r in readers))
    for r in readers:
        assert not r.errors, r.errors[:5]
        assert r.calls > 10
