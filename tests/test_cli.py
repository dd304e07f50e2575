"""The CLI contract end to end, as a subprocess, with the real default model."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from governed_evidence.mcp.status import ServerStatus
from governed_evidence.search.models import SearchResponse
from tests.helpers import run_cli

REPO = Path(__file__).resolve().parents[1]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=env, log_level="INFO")


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "evidence.sqlite"
    done = cli("ingest", "--corpus", "data/sample_corpus", "--db", str(path), "--ceiling", "restricted", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["documents_indexed"] == 22
    assert report["superseded_documents"] == 1
    assert report["passages_refused"] >= 1
    return path


def test_ingest_of_the_unchanged_corpus_keeps_the_index(db: Path, tmp_path: Path) -> None:
    """A second process with the real model computes the same fingerprint and keeps the file."""
    copy = tmp_path / "evidence.sqlite"
    shutil.copyfile(db, copy)
    before = copy.read_bytes()
    args = ("ingest", "--corpus", "data/sample_corpus", "--db", str(copy), "--ceiling", "restricted")
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Index unchanged since ")
    assert "22 documents" in done.stdout and "use --force to rebuild" in done.stdout
    done = cli(*args, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["unchanged"] is True
    assert copy.read_bytes() == before


def test_a_rebuild_through_the_cli_keeps_the_statistics_ledger(db: Path, tmp_path: Path) -> None:
    """The CLI hands the statistics carry-over to the build (the store knows nothing of it)."""
    from governed_evidence.sdmx.schema import schema_sql
    from governed_evidence.store.connection import connect

    copy = tmp_path / "evidence.sqlite"
    shutil.copyfile(db, copy)
    conn = connect(copy, readonly=False)
    conn.execute(schema_sql())
    conn.executemany(
        "INSERT INTO sdmx_rate_ledger(provider, bucket, at) VALUES (?, ?, ?)",
        [("OECD", "data", 1000.0 + i) for i in range(3)],
    )
    conn.close()
    done = cli("ingest", "--corpus", "data/sample_corpus", "--db", str(copy), "--ceiling", "restricted", "--force")
    assert done.returncode == 0, done.stderr
    conn = connect(copy, readonly=True)
    try:
        (count,) = conn.execute("SELECT count(*) FROM sdmx_rate_ledger").fetchone()
    finally:
        conn.close()
    assert count == 3


def search(db: Path, query: str, *extra: str) -> SearchResponse:
    done = cli("search", query, "--db", str(db), "--json", *extra)
    assert done.returncode == 0, done.stderr
    return SearchResponse.model_validate_json(done.stdout)


def test_hit_with_citation(db: Path) -> None:
    response = search(db, "How many days a week can I work from home?", "--ceiling", "internal")
    top = response.results[0]
    assert top.document == "internal/hr/remote-work-policy-2024.md"
    assert top.citation_id.startswith("internal/hr/remote-work-policy-2024.md#")
    assert top.lines is not None and top.lines.start <= top.lines.end
    assert "three days" in top.text
    assert all(r.document != "internal/hr/remote-work-policy-2022.md" for r in response.results)


def test_paraphrase_found_by_meaning(db: Path) -> None:
    response = search(db, "time off when a relative dies", "--ceiling", "internal")
    assert response.search_mode == "hybrid"
    assert response.results[0].heading.endswith("Bereavement leave")
    assert response.results[0].matched_by in ("semantic", "both")


def test_abstention(db: Path) -> None:
    response = search(db, "Can I bring my dog to the office?", "--ceiling", "internal")
    assert response.status == "NO_RELEVANT_CONTEXT"
    assert response.results == [] and response.reason


def test_restricted_never_appears_below_its_ceiling(db: Path) -> None:
    for query in ["Project Bittern acquisition price", "salary bands pay award", "incident bridge PIN"]:
        for mode in ("hybrid", "keyword", "semantic"):
            response = search(db, query, "--ceiling", "internal", "--confidence", "normal", "--mode", mode)
            assert all(r.classification != "restricted" for r in response.results)
            assert "restricted/" not in response.model_dump_json()


def test_pdf_and_docx_are_cited_by_page_and_line(db: Path) -> None:
    pdf = search(db, "How long do you keep customer account records?", "--ceiling", "public", "--confidence", "normal")
    hit = next(r for r in pdf.results if r.document.endswith(".pdf"))
    assert hit.pages is not None and hit.lines is None and "#" in hit.citation_id
    docx = search(db, "What happens on my first day?", "--ceiling", "internal", "--confidence", "normal")
    assert any(r.document.endswith(".docx") and r.lines is not None for r in docx.results)


def test_status_json_matches_the_model_and_counts_only_visible(db: Path) -> None:
    done = cli("status", "--db", str(db), "--ceiling", "public", "--json")
    assert done.returncode == 0, done.stderr
    status = ServerStatus.model_validate_json(done.stdout)
    assert status.ok and status.integrity == "ok"
    assert status.embedding_model == "sentence-transformers/all-MiniLM-L6-v2@int8-onnx"
    assert status.embedding_dimension == 384
    assert [c.classification for c in status.by_classification] == ["public"]


def test_stdout_is_only_the_json_and_logs_hold_no_query_text(db: Path) -> None:
    query = "unmistakable-probe-phrase bereavement"
    done = cli("search", query, "--db", str(db), "--json")
    json.loads(done.stdout)  # nothing but the JSON document on stdout
    assert done.stderr.strip(), "expected a structured log line on stderr"
    for line in done.stderr.strip().splitlines():
        record = json.loads(line)
        assert record["event"] == "search"
    assert "unmistakable" not in done.stderr and "bereavement" not in done.stderr


def test_bad_arguments_exit_2_with_a_message(db: Path) -> None:
    done = cli("search", " ", "--db", str(db))
    assert done.returncode == 2 and "query is empty" in done.stderr
    done = cli("search", "x", "--db", str(db), "--limit", "99")
    assert done.returncode == 2 and "limit" in done.stderr


def test_missing_index_is_a_clear_error(tmp_path: Path) -> None:
    done = cli("search", "leave", "--db", str(tmp_path / "none.sqlite"))
    assert done.returncode == 1
    assert "no evidence index found" in done.stderr
    assert "Traceback" not in done.stderr
