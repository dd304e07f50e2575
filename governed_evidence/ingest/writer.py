"""Writing a build as it is read: documents go into the index a chunk at a time.

The reading loop hands each document to :meth:`ChunkWriter.add` as soon as it is parsed (or
found unchanged, to be copied). Once the parsed documents waiting hold
:data:`CHUNK_PASSAGES` passages, their vectors are computed (or reused) and every waiting
document is written, in the order read, which is the order a build always writes. A
document's passages and embedder inputs are then dropped. The build so holds one chunk of
texts and vectors at a time, not the corpus's: its memory does not grow with the corpus
(docs/performance.md, "Ingest memory").

How many passages there are to embed is known only once the last file is read, so the
embedding progress counts passages done with no total until then (``total`` is
:data:`UNKNOWN`); the reading progress, which now includes the embedding, gives the time left.
"""

from __future__ import annotations

import time
from pathlib import Path

from governed_evidence.embeddings.base import Embedder
from governed_evidence.ingest.embed import embed_with_reuse
from governed_evidence.ingest.passages import Prepared
from governed_evidence.ingest.reading import Copied
from governed_evidence.ingest.report import UNKNOWN, ProgressFn
from governed_evidence.store.build import IndexBuilder
from governed_evidence.store.build_rows import CopiedDocument

__all__ = ["CHUNK_PASSAGES", "ChunkWriter"]

#: Parsed passages waiting before they are embedded and written: enough to sort a few
#: batches' texts by length, few enough that a chunk's texts and vectors weigh little.
CHUNK_PASSAGES = 256


class ChunkWriter:
    """Embeds and writes documents a chunk at a time, in the order :meth:`add` gets them."""

    def __init__(
        self,
        builder: IndexBuilder,
        embedder: Embedder,
        previous: Path,
        *,
        progress: ProgressFn | None,
    ) -> None:
        """``previous`` is the index being replaced: vectors of unchanged texts are taken from it."""
        self._builder = builder
        self._embedder = embedder
        self._previous = previous
        self._progress = progress
        self._waiting: list[Prepared | Copied] = []
        self._waiting_passages = 0
        #: Parsed passages written, and copied ones.
        self.passages = 0
        self.copied_passages = 0
        #: Vectors taken from the previous index, and computed.
        self.reused = 0
        self.computed = 0
        #: Seconds spent embedding (loading the model included) and writing.
        self.embed_seconds = 0.0
        self.write_seconds = 0.0

    def add(self, item: Prepared | Copied) -> None:
        self._waiting.append(item)
        if isinstance(item, Prepared):
            self._waiting_passages += len(item.passages)
            if self._waiting_passages >= CHUNK_PASSAGES:
                self.flush()

    def _embedding(self, stage: str, done: int, total: int) -> None:
        """Progress of one chunk, told as progress of the whole build."""
        if self._progress is None:
            return
        if stage == "embedding":
            self._progress(stage, self.computed + done, UNKNOWN)
        else:
            self._progress(stage, done, total)

    def flush(self) -> None:
        """Embed and write every waiting document."""
        prepared = [item for item in self._waiting if isinstance(item, Prepared)]
        inputs = [
            (row.text_hash, text)
            for item in prepared
            for row, text in zip(item.passages, item.embed_inputs, strict=True)
        ]
        t0 = time.perf_counter()
        embedded = embed_with_reuse(self._previous, self._embedder, inputs, progress=self._embedding)
        t1 = time.perf_counter()
        self.embed_seconds += t1 - t0
        self.reused += embedded.reused
        self.computed += embedded.computed
        run: list[CopiedDocument] = []
        for item in self._waiting:
            if isinstance(item, Copied):
                run.append(item.document)
                continue
            # Consecutive unchanged documents are copied in one go, in build order.
            self.copied_passages += self._builder.copy_documents(run)
            run = []
            doc_id = self._builder.add_document(item.row)
            for row in item.passages:
                self._builder.add_passage(doc_id, row, embedded.vectors[row.text_hash])
            self.passages += len(item.passages)
        self.copied_passages += self._builder.copy_documents(run)
        self._waiting, self._waiting_passages = [], 0
        self.write_seconds += time.perf_counter() - t1

    def finish(self) -> None:
        """Write what is still waiting, and say the embedding is done."""
        self.flush()
        if self._progress is not None and self.computed:
            self._progress("embedding", self.computed, self.computed)
