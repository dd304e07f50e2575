"""Incremental builds: a re-ingest copies unchanged documents from the previous index and
parses only what changed, and the index it writes is the one a full build would write.

Each change below is made to a copy of the sample corpus (four formats, three levels, a
superseded pair, credential-shaped text). The incremental build is compared with a
``--force`` build of the same corpus: every row of every table (ids included), the
full-text indexes through search, and the search, read and listing answers at every
ceiling, byte for byte as JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from governed_evidence.config import Classification
from governed_evidence.errors import IngestError
from governed_evidence.ingest.pipeline import IngestReport, ingest_corpus
from governed_evidence.search.service import SearchService
from governed_evidence.store.build import IndexBuilder
from governed_evidence.store.build_rows import CopiedDocument
from governed_evidence.store.connection import connect
from governed_evidence.store.meta import IndexMeta
from tests.helpers import HashEmbedder, write

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample_corpus"
RESTRICTED = Classification.RESTRICTED

#: Queries that reach every level and format of the sample corpus.
QUERIES = [
    "annual leave carry over",
    "travel expenses hotel limit",
    "incident response severity",
    "remote work policy",
    "salary bands",
    "water quality sampling",
    "complaints procedure",
    "vulnerability register",
    "board minutes",
    "procurement thresholds",
    "information security passwords",
    "onboarding first week",
]

#: Tables compared row by row; ``meta`` is compared without the build time.
TABLES = {
    "documents": "SELECT * FROM documents ORDER BY id",
    "passages": "SELECT * FROM passages ORDER BY id",
    "vectors": "SELECT passage_id, embedding, classification, searchable FROM passage_vectors ORDER BY passage_id",
    **{
        f"terms_{level.label}": f"SELECT term, doc FROM passages_terms_{level.label} ORDER BY term"
        for level in Classification
    },
    **{
        f"fts_size_{level.label}": f"SELECT id, sz FROM passages_fts_{level.label}_docsize ORDER BY id"
        for level in Classification
    },
}


def _ingest(corpus: Path, db: Path, **kwargs: object) -> IngestReport:
    return ingest_corpus(corpus, db, HashEmbedder(), ceiling=RESTRICTED, progress=None, **kwargs)  # type: ignore[arg-type]


def _rows(db: Path) -> dict[str, object]:
    conn = connect(db, readonly=True)
    try:
        out: dict[str, object] = {name: conn.execute(sql).fetchall() for name, sql in TABLES.items()}
        out["meta"] = sorted(row for row in conn.execute("SELECT key, value FROM meta") if row[0] != "built_at")
    finally:
        conn.close()
    return out


def _answers(db: Path) -> str:
    """What every tool answers at every ceiling, as one JSON text."""
    answers: list[object] = []
    for level in Classification:
        service = SearchService(db, ceiling=level, embedder_factory=HashEmbedder)
        try:
            for query in QUERIES:
                for mode in ("hybrid", "keyword", "semantic"):
                    response = service.search(query, limit=8, mode=mode, confidence_level="normal")
                    answers.append(response.model_dump(mode="json", exclude=set()))
            sources = service.list_sources()
            answers.append(sources.model_dump(mode="json"))
            for document in sources.documents:
                first = service.search(document.title, limit=1, mode="keyword", confidence_level="normal")
                for result in first.results:
                    answers.append(service.read_passage(result.citation_id, context=1).model_dump(mode="json"))
        finally:
            service.reader.close()
    return json.dumps(answers, sort_keys=True, default=str)


def _edit(corpus: Path) -> None:
    path = corpus / "internal/hr/leave-policy.md"
    path.write_text(path.read_text(encoding="utf-8") + "\n\n## Carry over\n\nUp to five days carry over.\n")


def _add(corpus: Path) -> None:
    write(corpus, "internal/hr/parental-leave.md", "# Parental leave\n\nSixteen weeks of parental leave on full pay.\n")


def _delete(corpus: Path) -> None:
    (corpus / "public/faq.md").unlink()


def _rename(corpus: Path) -> None:
    (corpus / "internal/hr/code-of-conduct.md").rename(corpus / "internal/hr/conduct-code.md")


def _move_up(corpus: Path) -> None:
    """public/ -> restricted/: the document must vanish from every lower ceiling."""
    (corpus / "public/customer-complaints-procedure.md").rename(corpus / "restricted/customer-complaints-procedure.md")


def _relabel(corpus: Path) -> None:
    path = corpus / "public/water-quality/sampling-schedule-2025.md"
    path.write_text("---\nclassification: internal\n---\n" + path.read_text(encoding="utf-8"))


def _binary(corpus: Path) -> None:
    """A DOCX replaced by another: a format parsed in a child process."""
    shutil.copyfile(
        corpus / "internal/hr/onboarding-guide.docx", corpus / "restricted/security/vulnerability-register.docx"
    )


def _governance(corpus: Path) -> None:
    write(corpus, "_governance.toml", '[[rule]]\npath = "internal/finance/"\nclassification = "restricted"\n')


def _link(corpus: Path) -> None:
    """A hard link in a restricted folder raises a public file's level."""
    os.link(corpus / "public/faq.md", corpus / "restricted/faq.md.bak")


def _unlink(corpus: Path) -> None:
    """The link of :func:`_link` removed again: the file takes its own level back."""
    (corpus / "restricted/faq.md.bak").unlink()


def _many(corpus: Path) -> None:
    _edit(corpus)
    _add(corpus)
    _delete(corpus)
    _rename(corpus)
    _move_up(corpus)


CHANGES: dict[str, tuple[Callable[[Path], None], str, dict[str, int]]] = {
    "edit": (_edit, "incremental", {"files_reparsed": 1, "files_added": 0, "files_removed": 0}),
    "add": (_add, "incremental", {"files_reparsed": 0, "files_added": 1, "files_removed": 0}),
    "delete": (_delete, "incremental", {"files_reparsed": 0, "files_added": 0, "files_removed": 1}),
    "rename": (_rename, "incremental", {"files_reparsed": 0, "files_added": 1, "files_removed": 1}),
    "move public to restricted": (_move_up, "incremental", {"files_reparsed": 0, "files_added": 1, "files_removed": 1}),
    "relabel in front matter": (_relabel, "incremental", {"files_reparsed": 1, "files_added": 0, "files_removed": 0}),
    "replace a docx": (_binary, "incremental", {"files_reparsed": 1, "files_added": 0, "files_removed": 0}),
    "governance rule": (_governance, "full", {}),
    "hard link added": (_link, "incremental", {"files_reparsed": 1, "files_added": 0, "files_removed": 0}),
    "five at once": (_many, "incremental", {"files_reparsed": 1, "files_added": 3, "files_removed": 3}),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sample corpus and its index, built once (copied by each test)."""
    root = tmp_path_factory.mktemp("incremental")
    corpus = root / "corpus"
    shutil.copytree(SAMPLE, corpus)
    db = root / "index.sqlite"
    _ingest(corpus, db)
    return corpus, db


def _copy(tmp_path: Path, built: tuple[Path, Path]) -> tuple[Path, Path]:
    """This test's own copy of the built corpus and of its index."""
    corpus, db = tmp_path / "corpus", tmp_path / "index.sqlite"
    shutil.copytree(built[0], corpus)
    shutil.copyfile(built[1], db)
    return corpus, db


@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_an_incremental_build_is_the_full_build(tmp_path: Path, built: tuple[Path, Path], change: str) -> None:
    apply, kind, counts = CHANGES[change]
    corpus, incremental = _copy(tmp_path, built)
    full = tmp_path / "full.sqlite"
    documents_before = len(_rows(incremental)["documents"])  # type: ignore[arg-type]
    apply(corpus)

    report = _ingest(corpus, incremental)
    clean = _ingest(corpus, full, force=True)

    assert report.build == kind and clean.build == "full" and clean.full_build_reason == "--force"
    if kind == "incremental":
        assert {k: getattr(report, k) for k in counts} == counts
        assert report.files_copied == report.documents_indexed - report.files_reparsed - report.files_added
        assert report.files_copied == documents_before - report.files_reparsed - report.files_removed
        # Only the changed files were parsed: everything else came from the previous index.
        assert report.embeddings_computed <= clean.embeddings_computed
    else:
        assert report.files_copied == 0 and report.full_build_reason and "settings" in report.full_build_reason
    # The index is the full build's, row for row (ids included), and so is every answer.
    assert _rows(incremental) == _rows(full)
    assert _answers(incremental) == _answers(full)
    # And the report says what the full build's says, timings and build kind aside.
    ignore = {"seconds", "built_at", "build", "full_build_reason", "files_copied", "files_reparsed", "files_added"}
    ignore |= {"files_removed", "embeddings_reused", "embeddings_computed"}
    assert {k: v for k, v in report.as_dict().items() if k not in ignore} == {
        k: v for k, v in clean.as_dict().items() if k not in ignore
    }


def test_a_removed_hard_link_gives_the_file_its_own_level_back(tmp_path: Path, built: tuple[Path, Path]) -> None:
    """The previous index holds the file at its link's level: it is parsed again, not copied."""
    corpus, db = _copy(tmp_path, built)
    full = tmp_path / "full.sqlite"
    _link(corpus)
    assert _ingest(corpus, db).build == "incremental"
    _unlink(corpus)
    report = _ingest(corpus, db)
    assert report.build == "incremental" and report.files_reparsed == 1
    _ingest(corpus, full, force=True)
    assert _rows(db) == _rows(full)
    service = SearchService(db, ceiling=Classification.PUBLIC, embedder_factory=HashEmbedder)
    try:
        assert "public/faq.md" in {d.document for d in service.list_sources().documents}
    finally:
        service.reader.close()


def test_a_moved_document_leaves_every_lower_ceiling(tmp_path: Path, built: tuple[Path, Path]) -> None:
    corpus, db = _copy(tmp_path, built)
    _move_up(corpus)
    report = _ingest(corpus, db)
    assert report.build == "incremental"
    for level in (Classification.PUBLIC, Classification.INTERNAL):
        service = SearchService(db, ceiling=level, embedder_factory=HashEmbedder, gate_enabled=False)
        try:
            paths = {d.document for d in service.list_sources().documents}
            assert "public/customer-complaints-procedure.md" not in paths
            assert "restricted/customer-complaints-procedure.md" not in paths
            for mode in ("hybrid", "keyword", "semantic"):
                found = service.search("complaints procedure", limit=20, mode=mode).results
                assert all("complaints-procedure" not in r.citation_id for r in found)
        finally:
            service.reader.close()
    service = SearchService(db, ceiling=RESTRICTED, embedder_factory=HashEmbedder)
    try:
        assert "restricted/customer-complaints-procedure.md" in {d.document for d in service.list_sources().documents}
    finally:
        service.reader.close()


def test_a_deleted_document_leaves_search_and_counts(tmp_path: Path, built: tuple[Path, Path]) -> None:
    corpus, db = _copy(tmp_path, built)
    before = _ingest(corpus, db)
    assert before.build == "incremental" and before.files_copied == before.documents_indexed
    _delete(corpus)
    report = _ingest(corpus, db)
    assert report.documents_indexed == before.documents_indexed - 1 and report.files_removed == 1
    service = SearchService(db, ceiling=Classification.PUBLIC, embedder_factory=HashEmbedder, gate_enabled=False)
    try:
        assert "public/faq.md" not in {d.document for d in service.list_sources().documents}
        assert sum(t.documents for t in service.list_sources().totals) == service.status().documents
        assert all(not r.citation_id.startswith("public/faq.md") for r in service.search("faq", limit=20).results)
    finally:
        service.reader.close()


def test_warnings_of_copied_documents_are_reported_again(tmp_path: Path, built: tuple[Path, Path]) -> None:
    """The credential-shaped text of the sample corpus is reported by every build, parsed or copied."""
    corpus, db = _copy(tmp_path, built)
    full = _ingest(corpus, db, force=True)
    assert full.warnings and full.passages_refused
    _add(corpus)
    report = _ingest(corpus, db)
    assert report.build == "incremental" and report.files_copied == full.documents_indexed
    assert report.warnings == full.warnings
    assert report.passages_refused == full.passages_refused


def test_force_parses_every_file(tmp_path: Path, built: tuple[Path, Path]) -> None:
    corpus, db = _copy(tmp_path, built)
    _edit(corpus)
    report = _ingest(corpus, db, force=True)
    assert report.build == "full" and report.files_copied == 0
    assert report.files_added == report.documents_indexed


def test_an_index_of_other_settings_is_not_copied_from(tmp_path: Path, built: tuple[Path, Path]) -> None:
    """Another model (or ceiling, or default level) means other rows: nothing is copied."""
    corpus, db = _copy(tmp_path, built)
    _edit(corpus)
    report = ingest_corpus(corpus, db, HashEmbedder(model_id="test/other"), ceiling=RESTRICTED, progress=None)
    assert report.build == "full" and report.files_copied == 0
    assert report.full_build_reason is not None and "settings" in report.full_build_reason
    report = ingest_corpus(
        corpus, db, HashEmbedder(model_id="test/other"), ceiling=Classification.INTERNAL, progress=None
    )
    assert report.build == "full" and report.files_copied == 0


def test_a_copy_that_does_not_match_its_plan_fails_the_build(tmp_path: Path, built: tuple[Path, Path]) -> None:
    """Should the previous index change between the plan and the copy (another build renamed
    a new file into place), the copy refuses rows that are not the planned ones: nothing is
    published, and the index that was there keeps serving."""
    db = tmp_path / "index.sqlite"
    shutil.copyfile(built[1], db)
    conn = connect(db, readonly=True)
    try:
        doc_id, path, content_hash, level = conn.execute(
            "SELECT id, path, content_hash, classification FROM documents WHERE path LIKE 'restricted/%' LIMIT 1"
        ).fetchone()
    finally:
        conn.close()
    before = db.read_bytes()
    wrong = [
        # The row's level is not the planned one (a restricted document planned as public).
        CopiedDocument(int(doc_id), str(path), str(content_hash), Classification.PUBLIC, 0.0),
        # Another document's row under this path.
        CopiedDocument(int(doc_id), "public/elsewhere.md", str(content_hash), Classification(int(level)), 0.0),
        CopiedDocument(int(doc_id), str(path), "0" * 64, Classification(int(level)), 0.0),
    ]
    for plan in wrong:
        with (
            IndexBuilder(db, dimension=64, ceiling=RESTRICTED, copy_from=db) as builder,
            pytest.raises(IngestError, match="previous index changed"),
        ):
            builder.copy_documents([plan])
        assert db.read_bytes() == before
    assert not list(tmp_path.glob(".index.sqlite.build-*"))


def test_a_copied_passage_at_another_level_than_its_document_fails_verification(
    tmp_path: Path, built: tuple[Path, Path]
) -> None:
    """A damaged previous index whose passage rows disagree with their document's level is
    not published: the copy takes only passages at the planned level, and the count check fails."""
    db = tmp_path / "index.sqlite"
    shutil.copyfile(built[1], db)
    damaged = tmp_path / "damaged.sqlite"
    shutil.copyfile(db, damaged)
    conn = connect(damaged, readonly=False)
    try:
        doc_id, path, content_hash, level = conn.execute(
            "SELECT id, path, content_hash, classification FROM documents WHERE path LIKE 'restricted/%' "
            "AND passage_count > 1 LIMIT 1"
        ).fetchone()
        conn.execute("UPDATE passages SET classification = 0 WHERE document_id = ? AND ordinal = 0", (doc_id,))
    finally:
        conn.close()
    builder = IndexBuilder(db, dimension=64, ceiling=RESTRICTED, copy_from=damaged)
    with builder:
        builder.copy_documents(
            [CopiedDocument(int(doc_id), str(path), str(content_hash), Classification(int(level)), 0.0)]
        )
        with pytest.raises(IngestError, match="declare"):
            builder.commit(IndexMeta(embedding_model="test/hash-bow", embedding_dimension=64, ceiling=RESTRICTED))
    conn = connect(db, readonly=True)
    try:
        assert conn.execute(
            "SELECT count(*) FROM passages WHERE classification = 0 AND document_id = ?", (doc_id,)
        ).fetchone() == (0,)
    finally:
        conn.close()


CHILD = """
import sys
from pathlib import Path
from governed_evidence.cli import main
code = main(sys.argv[1:])
print("MODEL LOADED" if "onnxruntime" in sys.modules else "NO MODEL", flush=True)
sys.exit(code)
"""


def _cli_ingest(corpus: Path, db: Path) -> tuple[dict[str, object], str]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, "ingest", "--corpus", str(corpus), "--db", str(db), "--json", "--quiet"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
        check=True,
    ).stdout
    report, _, loaded = out.rpartition("}")
    return json.loads(report + "}"), loaded.strip()


@pytest.mark.model
def test_a_re_ingest_that_embeds_nothing_loads_no_model(tmp_path: Path) -> None:
    """Through the CLI with the real default model: the first build loads it; an unchanged
    corpus, and a change that needs no new vector (a deletion), do not."""
    corpus = tmp_path / "corpus"
    write(corpus, "public/a.md", "# Alpha\n\nAlpha policy text about reservoirs.\n")
    write(corpus, "public/b.md", "# Beta\n\nBeta policy text about pumps.\n")
    db = tmp_path / "index.sqlite"
    first, loaded = _cli_ingest(corpus, db)
    assert first["build"] == "full" and loaded == "MODEL LOADED"
    again, loaded = _cli_ingest(corpus, db)
    assert again["unchanged"] is True and loaded == "NO MODEL"
    (corpus / "public/b.md").unlink()
    fewer, loaded = _cli_ingest(corpus, db)
    assert fewer["build"] == "incremental" and fewer["files_removed"] == 1 and loaded == "NO MODEL"
    write(corpus, "public/c.md", "# Gamma\n\nGamma policy text about valves.\n")
    more, loaded = _cli_ingest(corpus, db)
    assert more["build"] == "incremental" and more["files_added"] == 1 and loaded == "MODEL LOADED"
    assert more["embeddings_computed"] == 1 and more["files_copied"] == 1
