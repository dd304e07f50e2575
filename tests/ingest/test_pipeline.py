"""The ingest pipeline end to end: ceiling, supersession, credentials, rejections, citations."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
import structlog

from governed_evidence.config import Classification
from governed_evidence.errors import IngestError
from governed_evidence.ingest.pipeline import IngestReport, ingest_corpus
from governed_evidence.ingest.templates import strip_template_tags
from governed_evidence.store.connection import connect
from governed_evidence.store.schema import fts_table
from tests.helpers import SHARED_DATA, HashEmbedder, meta_of, small_corpus, write

PUBLIC, INTERNAL, RESTRICTED = Classification.PUBLIC, Classification.INTERNAL, Classification.RESTRICTED

#: Words that occur only in the small corpus's restricted documents. The cost centre number is
#: looked for with its word: four digits alone turn up by chance in stored modification times,
#: digests and vector bytes, which the raw scan below reads too.
RESTRICTED_MARKERS = ["quillmoor", "zephyr", "brackenfield", "centre 9931", "88,000"]
SEEDED_SECRET = "hunter2-EXAMPLE-not-real"


def build(corpus: Path, db: Path, ceiling: Classification, **kwargs: object) -> IngestReport:
    return ingest_corpus(corpus, db, HashEmbedder(), ceiling=ceiling, progress=None, **kwargs)  # type: ignore[arg-type]


def rows(db: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    conn = connect(db, readonly=True)
    try:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]
    finally:
        conn.close()


def all_stored_values(db: Path) -> list[str]:
    """Every value of every table in the file (shadow tables of FTS5 and vec0 included)."""
    conn = connect(db, readonly=True)
    try:
        tables = [str(n) for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert "passages" in tables and "passages_fts_public_data" in tables
        values: list[str] = []
        for table in tables:
            try:
                for row in conn.execute(f'SELECT * FROM "{table}"'):
                    for value in row:
                        if isinstance(value, bytes):
                            values.append(value.decode("latin-1"))
                        elif value is not None:
                            values.append(str(value))
            except apsw.Error:
                # Virtual tables that cannot be scanned directly; their shadow tables are read.
                continue
        return values
    finally:
        conn.close()


def index_mentions(db: Path, word: str) -> bool:
    needle = word.lower()
    in_tables = any(needle in v.lower() for v in all_stored_values(db))
    in_bytes = needle.encode() in db.read_bytes().lower()
    return in_tables or in_bytes


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    """Structured logs as they would be written to stderr, captured in memory."""
    saved = structlog.get_config()
    buffer = io.StringIO()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=buffer))
    try:
        yield buffer
    finally:
        structlog.configure(**saved)


# --- the classification ceiling ---------------------------------------------------------


@pytest.mark.parametrize(
    ("ceiling", "indexed", "excluded"),
    [
        (PUBLIC, {"public/expenses.md", "public/leave.md"}, 5),
        (
            INTERNAL,
            {
                "public/expenses.md",
                "public/leave.md",
                "internal/remote-2022.md",
                "internal/remote-2024.md",
                "internal/runbook.md",
            },
            2,
        ),
    ],
)
def test_documents_above_the_ceiling_are_counted_and_absent_from_the_file(
    tmp_path: Path, corpus: Path, ceiling: Classification, indexed: set[str], excluded: int
) -> None:
    db = tmp_path / "index.sqlite"
    report = build(corpus, db, ceiling)

    assert report.files_seen == 7
    assert report.excluded_above_ceiling == excluded
    assert report.documents_indexed == len(indexed)
    assert report.rejected == []
    assert {p for (p,) in rows(db, "SELECT path FROM documents")} == indexed
    assert max(c for (c,) in rows(db, "SELECT classification FROM passages")) <= int(ceiling)  # type: ignore[type-var]
    meta = meta_of(db)
    assert meta["ceiling"] == ceiling.label
    assert meta["excluded_above_ceiling"] == str(excluded)
    # No table above the ceiling exists at all.
    names = {n for (n,) in rows(db, "SELECT name FROM sqlite_master")}
    assert fts_table(RESTRICTED) not in names
    for word in RESTRICTED_MARKERS:
        assert not index_mentions(db, word), word
    assert not index_mentions(db, "restricted/")
    assert not index_mentions(db, "labelled-secret")
    assert not any("zephyr" in str(v).lower() for v in report.as_dict().values())


def test_restricted_markers_are_detectable_when_restricted_is_indexed(built_index: Path) -> None:
    """The absence check above can see the words when they are there."""
    for word in RESTRICTED_MARKERS:
        assert index_mentions(built_index, word), word
    assert {p for (p,) in rows(built_index, "SELECT path FROM documents")} >= {
        "restricted/zephyr.md",
        "public/labelled-secret.md",
    }


def test_labelled_document_in_public_folder_is_stored_at_its_label(built_index: Path) -> None:
    ((level,),) = rows(built_index, "SELECT classification FROM documents WHERE path = 'public/labelled-secret.md'")
    assert level == int(RESTRICTED)
    public_fts = rows(
        built_index, f"SELECT rowid FROM {fts_table(PUBLIC)} WHERE {fts_table(PUBLIC)} MATCH 'brackenfield'"
    )
    restricted_fts = rows(
        built_index, f"SELECT rowid FROM {fts_table(RESTRICTED)} WHERE {fts_table(RESTRICTED)} MATCH 'brackenfield'"
    )
    assert public_fts == [] and len(restricted_fts) == 1


def _write_broken_restricted(corpus: Path) -> None:
    (corpus / "restricted" / "ledger-kestrel.md").write_bytes(b"# Ledger Kestrel\n\nAmounts \x00\x01 binary junk\n")
    (corpus / "restricted" / "payroll-osprey.md").write_bytes(b"# Payroll Osprey\n\n\xff\xfe not utf-8 \xc3\x28\n")


@pytest.mark.parametrize("ceiling", [PUBLIC, INTERNAL])
def test_broken_file_above_the_ceiling_is_never_read_or_named(
    tmp_path: Path, corpus: Path, ceiling: Classification, log_output: io.StringIO
) -> None:
    _write_broken_restricted(corpus)
    report = build(corpus, tmp_path / "index.sqlite", ceiling)

    assert report.rejected == []
    assert report.excluded_above_ceiling == (5 if ceiling is PUBLIC else 2) + 2
    everything = json.dumps(report.as_dict()) + log_output.getvalue()
    for name in ("ledger-kestrel", "payroll-osprey", "Kestrel", "Osprey"):
        assert name not in everything


def test_broken_file_within_the_ceiling_is_rejected_by_name_and_logged(
    tmp_path: Path, corpus: Path, log_output: io.StringIO
) -> None:
    _write_broken_restricted(corpus)
    report = build(corpus, tmp_path / "index.sqlite", RESTRICTED)

    reasons = dict(report.rejected)
    assert "NUL bytes" in reasons["restricted/ledger-kestrel.md"]
    assert "not valid UTF-8" in reasons["restricted/payroll-osprey.md"]
    logged = [json.loads(line) for line in log_output.getvalue().splitlines() if line.strip()]
    rejected_events = [e for e in logged if e.get("event") == "file_rejected"]
    assert {e["document"] for e in rejected_events} == {"restricted/ledger-kestrel.md", "restricted/payroll-osprey.md"}
    # Info: the report carries every rejection, and the CLI prints it (a warning would repeat it).
    assert all(e["level"] == "info" for e in rejected_events)


@pytest.mark.parametrize(
    ("rel", "content"),
    [
        ("restricted/empty-heron.md", b""),
        ("restricted/huge-heron.md", b"# Heron\n\n" + b"word " * 400),
    ],
)
def test_unreadable_file_above_the_ceiling_is_counted_not_named(
    tmp_path: Path, rel: str, content: bytes, log_output: io.StringIO
) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, "public/ok.md", "# Ok\n\nA public page about the canteen opening hours.\n")
    (corpus / rel).parent.mkdir(parents=True, exist_ok=True)
    (corpus / rel).write_bytes(content)
    report = build(corpus, tmp_path / "index.sqlite", PUBLIC, max_file_bytes=1000)

    assert report.documents_indexed == 1
    assert report.excluded_above_ceiling == 1
    assert report.rejected == []
    assert "heron" not in (json.dumps(report.as_dict()) + log_output.getvalue()).lower()


def test_oversized_file_within_the_ceiling_is_rejected_with_a_reason(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, "public/ok.md", "# Ok\n\nA public page about the canteen opening hours.\n")
    write(corpus, "public/huge.md", "# Huge\n\n" + "word " * 400)
    report = build(corpus, tmp_path / "index.sqlite", PUBLIC, max_file_bytes=1000)
    assert report.documents_indexed == 1
    assert dict(report.rejected)["public/huge.md"].endswith("over the 1000-byte limit")


def test_symlink_escaping_the_corpus_is_rejected_and_its_target_not_indexed(tmp_path: Path) -> None:
    outside = write(tmp_path, "elsewhere/private.md", "# Private\n\nThe gannet protocol lives outside the corpus.\n")
    corpus = tmp_path / "corpus"
    write(corpus, "public/ok.md", "# Ok\n\nA public page about the canteen opening hours.\n")
    (corpus / "public" / "link.md").symlink_to(outside)
    db = tmp_path / "index.sqlite"
    report = build(corpus, db, PUBLIC)
    assert "outside the corpus" in dict(report.rejected)["public/link.md"]
    assert not index_mentions(db, "gannet")


@pytest.mark.timeout(60)
def test_links_loops_and_pipes_are_rejected_without_being_opened(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, "public/ok.md", "# Ok\n\nA public page about the canteen opening hours.\n")
    (corpus / "public" / "loop-a.md").symlink_to("loop-b.md")
    (corpus / "public" / "loop-b.md").symlink_to("loop-a.md")
    (corpus / "public" / "dangling.md").symlink_to(tmp_path / "missing.md")
    os.mkfifo(corpus / "public" / "pipe.md")  # opening it would block the ingest
    (corpus / "public" / "up").symlink_to("..")  # a directory loop must not be walked forever
    write(tmp_path, "elsewhere/inner.md", "# Inner\n\nThe plover text lives outside the corpus.\n")
    (corpus / "public" / "outside.md").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    db = tmp_path / "index.sqlite"
    report = build(corpus, db, PUBLIC)
    assert report.documents_indexed == 1
    assert "outside the corpus" in dict(report.rejected)["public/outside.md"]
    assert not index_mentions(db, "plover")
    reasons = dict(report.rejected)
    # Refused as links, not opened; the wording after "symbolic link" differs by Python version
    # (a loop is named as one before 3.13 only), so only the behaviour is asserted.
    assert reasons["public/loop-a.md"].startswith("symbolic link")
    assert reasons["public/loop-b.md"].startswith("symbolic link")
    assert "outside the corpus" in reasons["public/dangling.md"]
    assert reasons["public/pipe.md"] == "not a regular file"


def test_symlink_above_the_ceiling_is_counted_not_named(tmp_path: Path, log_output: io.StringIO) -> None:
    outside = write(tmp_path, "elsewhere/private.md", "# Private\n\nNot part of the corpus.\n")
    corpus = tmp_path / "corpus"
    write(corpus, "public/ok.md", "# Ok\n\nA public page about the canteen opening hours.\n")
    (corpus / "restricted").mkdir()
    (corpus / "restricted" / "plover-link.md").symlink_to(outside)
    report = build(corpus, tmp_path / "index.sqlite", PUBLIC)
    assert report.rejected == []
    assert report.excluded_above_ceiling == 1
    assert "plover" not in json.dumps(report.as_dict()) + log_output.getvalue()


# --- supersession and credentials -------------------------------------------------------


def test_superseded_document_is_stored_but_not_searchable(built_index: Path) -> None:
    docs = {p: (s, b) for p, s, b in rows(built_index, "SELECT path, status, superseded_by FROM documents")}
    assert docs["internal/remote-2022.md"] == ("superseded", "internal/remote-2024.md")
    assert docs["internal/remote-2024.md"] == ("active", None)

    old = rows(
        built_index,
        "SELECT p.id, p.searchable FROM passages p JOIN documents d ON d.id = p.document_id "
        "WHERE d.path = 'internal/remote-2022.md'",
    )
    assert old and all(searchable == 0 for _, searchable in old)
    old_ids = {pid for pid, _ in old}
    vec_flags = rows(built_index, "SELECT passage_id, searchable FROM passage_vectors")
    assert {pid for pid, s in vec_flags if s == 0} == old_ids
    for level in Classification:
        table = fts_table(level)
        hits = {r for (r,) in rows(built_index, f"SELECT rowid FROM {table} WHERE {table} MATCH 'director'")}
        assert not hits & old_ids
    # Its successor is searchable by the word only it uses.
    table = fts_table(INTERNAL)
    assert rows(built_index, f"SELECT count(*) FROM {table} WHERE {table} MATCH 'three'") == [(1,)]


def test_superseded_by_unknown_document_is_warned(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, "public/a.md", "---\nsuperseded_by: public/missing.md\n---\n# A\n\nOld rules for the bike shed.\n")
    report = build(corpus, tmp_path / "index.sqlite", PUBLIC)
    assert report.superseded_documents == 1
    assert ("public/a.md", "superseded_by names a document that is not in the index") in report.warnings


def test_seeded_credential_never_reaches_the_file_but_the_rest_of_the_document_does(
    built_index: Path, corpus: Path, tmp_path: Path, log_output: io.StringIO
) -> None:
    assert SEEDED_SECRET in (corpus / "internal" / "runbook.md").read_text()
    assert SEEDED_SECRET.encode() not in built_index.read_bytes()
    assert not any(SEEDED_SECRET in v for v in all_stored_values(built_index))
    texts = [
        t
        for (t,) in rows(
            built_index,
            "SELECT p.text FROM passages p JOIN documents d ON d.id = p.document_id "
            "WHERE d.path = 'internal/runbook.md'",
        )
    ]
    assert any("release pipeline after the change board approves" in str(t) for t in texts)
    ((refused,),) = rows(built_index, "SELECT refused_count FROM documents WHERE path = 'internal/runbook.md'")
    assert refused == 1
    # A rebuild reports the refusal by kind, never by content.
    report = build(corpus, tmp_path / "again.sqlite", RESTRICTED)
    assert report.passages_refused == 1
    warnings = dict(report.warnings)
    assert "password assignment" in warnings["internal/runbook.md"]
    assert SEEDED_SECRET not in json.dumps(report.as_dict()) + log_output.getvalue()


LONG_INTRO = (
    "This page explains how engineers get access to the staging cluster, who approves the request, "
    "how long access lasts and what happens when it expires or is revoked early."
)
ACCESS_TEXT = (
    "Ask the platform team for access to the staging cluster before the release. The platform team checks "
    "your training record, your manager approval and the change ticket, then grants access for ninety days."
)


def test_credential_in_a_heading_never_reaches_heading_paths_or_citation_ids(tmp_path: Path) -> None:
    secret = "Kx9-leaky-value"
    corpus = tmp_path / "corpus"
    write(
        corpus,
        "public/setup.md",
        f'# Setup\n\n{LONG_INTRO}\n\n## Access: password = "{secret}"\n\n{ACCESS_TEXT}\n\n## Other\n\n{LONG_INTRO}\n',
    )
    db = tmp_path / "index.sqlite"
    report = build(corpus, db, PUBLIC)
    assert secret.encode() not in db.read_bytes()
    assert secret.lower().encode() not in db.read_bytes().lower()
    assert not any(secret.lower() in v.lower() for v in all_stored_values(db))
    # The text under the refused heading is still indexed.
    texts = " ".join(str(t) for (t,) in rows(db, "SELECT text FROM passages"))
    assert "grants access for ninety days" in texts
    assert "password assignment" in dict(report.warnings)["public/setup.md"]


@pytest.mark.parametrize(
    "content",
    [
        "---\ntitle: Vault token {token}\n---\nBody text about rotating tokens every quarter for service accounts.\n",
        "# Vault token {token}\n\nBody text about rotating tokens every quarter for service accounts.\n",
    ],
    ids=["front-matter-title", "h1-title"],
)
def test_credential_in_a_title_is_not_stored(tmp_path: Path, content: str) -> None:
    token = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789AB"
    corpus = tmp_path / "corpus"
    write(corpus, "public/vault-rotation.md", content.format(token=token))
    db = tmp_path / "index.sqlite"
    report = build(corpus, db, PUBLIC)
    assert token[:12].encode() not in db.read_bytes()
    assert rows(db, "SELECT title FROM documents") == [("vault rotation",)]
    assert "rotating tokens every quarter" in str(rows(db, "SELECT text FROM passages"))
    assert "API token" in dict(report.warnings)["public/vault-rotation.md"]


def test_document_that_is_only_a_credential_is_rejected(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, "public/ok.md", "# Ok\n\nA public page about the canteen opening hours.\n")
    key = "AKIA" + "IOSFODNN7EXAMPLE"
    write(corpus, "public/keys.txt", f"{key}\n")
    db = tmp_path / "index.sqlite"
    report = build(corpus, db, PUBLIC)
    assert dict(report.rejected)["public/keys.txt"] == "all text was refused"
    assert key.encode() not in db.read_bytes()
    assert report.documents_indexed == 1


# --- resilience -------------------------------------------------------------------------


def test_bad_files_are_rejected_and_the_good_ones_indexed(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, "public/good-one.md", "# Good one\n\nThe first good page explains the parking rules.\n")
    write(corpus, "public/good-two.txt", "Bicycle storage\n\nBicycles are stored in the basement rack.\n")
    (corpus / "public" / "nul.md").write_bytes(b"# Nul\n\n\x00\x00\x00\n")
    (corpus / "public" / "latin1.md").write_bytes("Caf\u00e9 menu".encode("latin-1"))
    (corpus / "public" / "fake.docx").write_text("not a zip archive")
    (corpus / "public" / "fake.pdf").write_text("not a pdf either")
    (corpus / "public" / "empty.md").write_bytes(b"")
    # Front matter that cannot be parsed makes the file restricted (fail closed): excluded.
    write(corpus, "public/broken-front.md", "---\ntitle: [oops\n---\n# Body\n\nThe osprey words.\n")
    write(corpus, "public/notes.rtf", "{\\rtf1 unsupported}")
    write(corpus, ".hidden/secret.md", "# Hidden\n\nThe osprey code is hidden.\n")
    write(corpus, "public/.draft.md", "# Draft\n\nThe osprey draft.\n")
    db = tmp_path / "index.sqlite"
    report = build(corpus, db, PUBLIC, default_classification=PUBLIC)

    assert report.documents_indexed == 2
    assert {p for (p,) in rows(db, "SELECT path FROM documents")} == {"public/good-one.md", "public/good-two.txt"}
    reasons = dict(report.rejected)
    assert set(reasons) == {
        "public/nul.md",
        "public/latin1.md",
        "public/fake.docx",
        "public/fake.pdf",
        "public/empty.md",
    }
    assert report.excluded_above_ceiling == 1
    assert "NUL" in reasons["public/nul.md"]
    assert "UTF-8" in reasons["public/latin1.md"]
    assert "archive" in reasons["public/fake.docx"]
    assert "PDF" in reasons["public/fake.pdf"]
    assert "empty" in reasons["public/empty.md"]
    assert report.unsupported_files == 1
    assert not index_mentions(db, "osprey")


def test_real_pdf_and_docx_files_are_ingested_with_pages_and_positions(tmp_path: Path) -> None:
    pdf = SHARED_DATA / "ingest-samples" / "pdf-scanned-or-tricky" / "GSA_EFT_Enrollment_Form_acroform.pdf"
    scanned = SHARED_DATA / "ingest-samples" / "pdf-scanned-or-tricky" / "c02-22_scanned_page_public_domain.pdf"
    docx = SHARED_DATA / "ingest-samples" / "docx" / "GSA_TTS_TEMPLATE_Team_charter.docx"
    for path in (pdf, scanned, docx):
        if not path.is_file():
            pytest.skip(f"{path} not present")
    corpus = small_corpus(tmp_path / "corpus")
    shutil.copyfile(pdf, corpus / "public" / "eft-form.pdf")
    shutil.copyfile(scanned, corpus / "public" / "scan.pdf")
    shutil.copyfile(docx, corpus / "internal" / "charter.docx")
    db = tmp_path / "index.sqlite"
    report = build(corpus, db, INTERNAL)

    assert "no extractable text layer" in dict(report.rejected)["public/scan.pdf"]
    assert any(p == "public/eft-form.pdf" and "XFA" in w for p, w in report.warnings)
    formats = dict(rows(db, "SELECT path, format FROM documents"))
    assert formats["public/eft-form.pdf"] == "pdf"
    assert formats["internal/charter.docx"] == "docx"
    assert_passage_positions(db, corpus)


def assert_passage_positions(db: Path, corpus: Path) -> None:
    passages = rows(
        db,
        "SELECT d.path, d.format, p.citation_id, p.heading, p.line_start, p.line_end, p.page_start, p.page_end, p.text "
        "FROM passages p JOIN documents d ON d.id = p.document_id ORDER BY d.path, p.ordinal",
    )
    assert passages
    ids = [p[2] for p in passages]
    assert len(ids) == len(set(ids))
    for path, fmt, cid, heading, line_start, line_end, page_start, page_end, text in passages:
        assert isinstance(cid, str) and cid.startswith(f"{path}#")
        assert isinstance(heading, str)
        assert isinstance(text, str) and text.strip()
        if fmt == "pdf":
            assert line_start is None and line_end is None
            assert isinstance(page_start, int) and isinstance(page_end, int) and 1 <= page_start <= page_end
            assert re.fullmatch(rf"{re.escape(str(path))}#[a-z0-9-]+:p\d+(-\d+)?(~\d+)?", cid)
        else:
            assert page_start is None and page_end is None
            assert isinstance(line_start, int) and isinstance(line_end, int) and 1 <= line_start <= line_end
            assert cid.split("#", 1)[1].split("~")[0].endswith(f":L{line_start}-{line_end}")
            if fmt in ("markdown", "text"):
                source = (corpus / str(path)).read_text(encoding="utf-8").split("\n")
                assert line_end <= len(source)
                # The cited lines hold the passage's first and last lines.
                cited = strip_template_tags("\n".join(source[line_start - 1 : line_end]))
                assert text.split("\n")[0] in cited and text.split("\n")[-1] in cited


def test_every_passage_has_a_citation_heading_and_position(built_index: Path, corpus: Path) -> None:
    assert_passage_positions(built_index, corpus)
    by_id = {
        cid: (heading, start, end)
        for cid, heading, start, end in rows(
            built_index, "SELECT citation_id, heading, line_start, line_end FROM passages"
        )
    }
    # A passage under a subsection is cited by it, with its exact source lines.
    assert by_id["public/expenses.md#hotels:L11-13"][1:] == (11, 13)
    assert "Hotels" in str(by_id["public/expenses.md#hotels:L11-13"][0])


def test_markdown_passages_are_exactly_their_cited_lines(built_index: Path, corpus: Path) -> None:
    passages = rows(
        built_index,
        "SELECT d.path, p.line_start, p.line_end, p.text FROM passages p JOIN documents d ON d.id = p.document_id "
        "WHERE d.format = 'markdown' AND d.path != 'internal/runbook.md'",
    )
    assert len(passages) >= 5
    for path, start, end, text in passages:
        source = (corpus / str(path)).read_text(encoding="utf-8").split("\n")
        assert text == "\n".join(source[int(start) - 1 : int(end)])  # type: ignore[call-overload]


def test_duplicate_citation_positions_get_distinct_ids(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    sentences = " ".join(f"Sentence number {i} talks about the archive retention rule." for i in range(60))
    write(corpus, "public/long.md", f"# Archive\n\n{sentences}\n")
    db = tmp_path / "index.sqlite"
    build(corpus, db, PUBLIC)
    ids = [c for (c,) in rows(db, "SELECT citation_id FROM passages ORDER BY ordinal")]
    assert len(ids) >= 2 and len(set(ids)) == len(ids)
    assert ids[1].startswith("public/long.md#archive:L3-3")


def test_missing_corpus_folder_is_an_ingest_error(tmp_path: Path) -> None:
    db = tmp_path / "index.sqlite"
    with pytest.raises(IngestError, match="does not exist"):
        build(tmp_path / "nope", db, PUBLIC)
    assert not db.exists()


def test_gsa_handbook_slice_ingests_without_rejections(tmp_path: Path) -> None:
    pages = SHARED_DATA / "corpora" / "gsa-tts-handbook" / "pages" / "travel-and-leave"
    if not pages.is_dir():
        pytest.skip(f"{pages} not present")
    db = tmp_path / "index.sqlite"
    report = build(pages, db, RESTRICTED, default_classification=PUBLIC)
    assert report.rejected == []
    assert report.documents_indexed == len(list(pages.rglob("*.md")))
    assert not any("{%" in str(t) for (t,) in rows(db, "SELECT text FROM passages"))
    assert_passage_positions(db, pages)


def test_ingest_with_the_real_default_model(tmp_path: Path, corpus: Path, minilm: object) -> None:
    db = tmp_path / "index.sqlite"
    report = ingest_corpus(corpus, db, minilm, ceiling=INTERNAL, progress=None)  # type: ignore[arg-type]
    identity = minilm.identity  # type: ignore[attr-defined]
    meta = meta_of(db)
    assert meta["embedding_model"] == identity.model_id
    assert meta["embedding_dimension"] == str(identity.dimension)
    assert report.embeddings_computed == report.passages > 0
    # Nearest passage to a paraphrase of the bereavement rule, by the stored vectors.
    query = minilm.embed(["time off after a relative dies"])[0]  # type: ignore[attr-defined]
    conn = connect(db, readonly=True)
    try:
        ((cid,),) = conn.execute(
            "SELECT p.citation_id FROM passage_vectors v JOIN passages p ON p.id = v.passage_id "
            "WHERE v.embedding MATCH ? AND k = 1",
            (query.astype("float32").tobytes(),),
        ).fetchall()
    finally:
        conn.close()
    assert str(cid).startswith("public/leave.md#")


def test_credential_split_across_blocks_is_refused_and_reported(tmp_path: Path) -> None:
    from governed_evidence.config import Classification
    from governed_evidence.ingest.pipeline import ingest_corpus
    from tests.helpers import HashEmbedder, write

    corpus = tmp_path / "c"
    # Each paragraph alone is harmless; joined in one passage they form a password assignment.
    write(
        corpus, "internal/db.md", '# Database\n\nThe service password =\n\n"Hx7-EXAMPLE-pw"\n\n## Other\n\nKeep this.\n'
    )
    report = ingest_corpus(
        corpus, tmp_path / "i.sqlite", HashEmbedder(), ceiling=Classification.RESTRICTED, progress=None
    )
    assert report.passages_refused >= 1
    assert any("credential" in w for _, w in report.warnings)
    assert b"Hx7-EXAMPLE-pw" not in (tmp_path / "i.sqlite").read_bytes()
