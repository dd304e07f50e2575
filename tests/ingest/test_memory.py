"""What an ingest holds per file does not grow with the corpus (docs/performance.md, "Ingest memory").

A build writes each document as it is read; what it keeps for the whole run is one short
name a file (the list every stage iterates). Measured as the peak of the Python-side
allocations (tracemalloc) while a build of N tiny files, and one of 4N, is read and written:
the difference, per file added, is what the build holds for each file at its peak. Two
bounded costs are kept out of it: the chunk of documents waiting to be embedded (up to
CHUNK_PASSAGES passages, made small here so both builds fill it), and the similarity
calibration that follows the writing, which compares at most a fixed sample of vectors
(below that sample it grows with the passages): the peak is taken as it starts. SQLite's
page cache is not Python's memory and is not counted.
"""

from __future__ import annotations

import gc
import pathlib
import tracemalloc
from pathlib import Path

import apsw
import pytest

from governed_evidence.config import Classification
from governed_evidence.embeddings.base import Embedder
from governed_evidence.ingest import pipeline, writer
from governed_evidence.ingest.pipeline import dry_run_corpus, ingest_corpus
from tests.helpers import HashEmbedder

#: Bytes a file the build may hold at its peak: its name in the file list and a few
#: pointers (200 to 300 bytes for these names, as the collector runs), with room to spare. When every file kept
#: its row, its report entry, its hash and two paths, it was about 2 KB.
PER_FILE_BOUND = 1000


def _corpus(root: Path, files: int) -> Path:
    for i in range(files):
        folder = root / "public" / f"part-{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note-{i:05d}.md").write_text(
            f"# Note {i}\n\nThe travel policy note number {i} says what a traveller claims.\n", encoding="utf-8"
        )
    return root


#: An allocation this large made by pathlib is the interpreter's table of interned strings
#: growing (pathlib interns each part of a path), never a string or a path.
_TABLE_BYTES = 64 * 1024


def _interned_table_growth() -> int:
    """Bytes of the interned-strings table grown while tracing: when its growth falls in a
    build is decided by everything the process interned before (about 1.9 MB at once after
    some earlier tests), and no build holds it, so it is taken out of the peak."""
    snapshot = tracemalloc.take_snapshot()
    return sum(
        trace.size
        for trace in snapshot.traces
        if trace.size >= _TABLE_BYTES and trace.traceback[0].filename == pathlib.__file__
    )


def _build_peak(corpus: Path, db: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """Peak bytes of Python-side allocations made while ``corpus`` is read and written into ``db``."""
    peaks: list[int] = []
    calibrations = pipeline.level_calibrations

    def calibrated(
        conn: apsw.Connection, ceiling: Classification, embedder: Embedder
    ) -> dict[str, tuple[float, float]]:
        peaks.append(tracemalloc.get_traced_memory()[1] - _interned_table_growth())
        return calibrations(conn, ceiling, embedder)

    monkeypatch.setattr(pipeline, "level_calibrations", calibrated)
    monkeypatch.setattr(writer, "CHUNK_PASSAGES", 8)
    # What earlier tests left is collected and set aside, so the collector runs as often as
    # in a process of its own (a large heap defers it, and uncollected garbage looks held).
    gc.collect()
    gc.freeze()
    tracemalloc.start()
    try:
        ingest_corpus(corpus, db, HashEmbedder(), ceiling=Classification.RESTRICTED, progress=None)
    finally:
        tracemalloc.stop()
        gc.unfreeze()
    (peak,) = peaks
    return peak


def test_what_a_build_holds_per_file_does_not_grow_with_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small, large = 150, 600
    # A first build loads what any build loads once (loaders, regular expressions, caches).
    _build_peak(_corpus(tmp_path / "warm", 20), tmp_path / "warm.sqlite", monkeypatch)
    peak_small = _build_peak(_corpus(tmp_path / "small", small), tmp_path / "small.sqlite", monkeypatch)
    peak_large = _build_peak(_corpus(tmp_path / "large", large), tmp_path / "large.sqlite", monkeypatch)
    per_file = (peak_large - peak_small) / (large - small)
    assert per_file < PER_FILE_BOUND, f"{per_file:.0f} bytes a file at the peak ({peak_small} -> {peak_large})"


def test_a_dry_run_still_lists_every_file_a_build_does_not(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus", 3)
    report = ingest_corpus(corpus, tmp_path / "i.sqlite", HashEmbedder(), ceiling=Classification.PUBLIC, progress=None)
    assert report.documents_indexed == 3 and report.files == []
    dry = dry_run_corpus(corpus, ceiling=Classification.PUBLIC, progress=None)
    assert sorted(f.document for f in dry.files) == [f"public/part-{i}/note-0000{i}.md" for i in range(3)]
    assert dry.documents_indexed == 3 and dry.passages == report.passages
