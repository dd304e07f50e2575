"""What the operator's command line says about a corpus that shows nothing, and where it looked.

The CLI may tell the operator what lies above a ceiling ("0 passages visible at ceiling
public (N above it)") and which file it opened; what an MCP client is told stays as it was:
the tools' results are unchanged (``--json`` prints them), the operator-only module is not
reachable from ``mcp/``, and the error naming the index file is masked for a client.
"""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

import pytest

from governed_evidence.config import Classification
from governed_evidence.errors import GovernedEvidenceError, IndexMissingError
from governed_evidence.mcp.errors import INTERNAL_ERROR_TEXT, to_tool_error
from governed_evidence.search.visibility import visibility
from governed_evidence.store.connection import connect, read_meta
from tests.helpers import run_cli, write

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "governed_evidence"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=env, log_level="WARNING", drop=("GOVERNED_EVIDENCE_CEILING",))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's own folder: no labels, no level folders, so every document is restricted."""
    root = tmp_path_factory.mktemp("own") / "policies"
    write(root, "travel.md", "# Travel\n\nStaff book rail travel through the travel portal.\n")
    write(root, "desks/clear-desk.md", "# Clear desk\n\nDesks are cleared every Friday evening.\n")
    return root


@pytest.fixture(scope="module")
def ingested(corpus: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    db = corpus.parent / "evidence.sqlite"
    done = cli("ingest", "--corpus", str(corpus), "--db", str(db))
    assert done.returncode == 0, done.stderr
    return db, done


def _passages(db: Path) -> int:
    conn = connect(db, readonly=True)
    try:
        return read_meta(conn).passages
    finally:
        conn.close()


def test_ingest_summary_counts_levels_and_names_the_fix(
    ingested: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    _, done = ingested
    out = done.stdout
    assert "documents by classification:" in out
    assert "    public          0\n" in out
    assert "    restricted      2  (2 indexed)" in out
    assert "level decided by: default (--default-classification restricted) 2 (restricted 2)" in out
    assert "visible at ceiling public (search and serve by default): 0 documents" in out
    assert "warning: no document is visible at ceiling public" in out
    assert "re-ingest with --default-classification public" in out


def test_ingest_json_carries_the_counts(corpus: Path, tmp_path: Path) -> None:
    done = cli("ingest", "--corpus", str(corpus), "--db", str(tmp_path / "e.sqlite"), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["by_classification"] == {"restricted": {"indexed": 2}}
    assert report["decided_by"] == {"default": {"restricted": 2}}


def test_ingest_with_a_public_default_has_nothing_to_warn_about(corpus: Path, tmp_path: Path) -> None:
    args = ("ingest", "--corpus", str(corpus), "--db", str(tmp_path / "e.sqlite"), "--default-classification", "public")
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    assert "visible at ceiling public (search and serve by default): 2 documents" in done.stdout
    assert "warning: no document is visible" not in done.stdout


def test_search_that_finds_nothing_tells_the_operator_what_is_above(
    ingested: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    db, _ = ingested
    total = _passages(db)
    done = cli("search", "rail travel portal", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert "NO_RELEVANT_CONTEXT" in done.stdout
    assert f"0 passages visible at ceiling public ({total} above it, in 2 documents)" in done.stdout
    assert "--default-classification public" in done.stdout and "--ceiling internal" in done.stdout
    # What the tool returns (and --json prints) says nothing of it.
    done = cli("search", "rail travel portal", "--db", str(db), "--json")
    response = json.loads(done.stdout)
    assert response["status"] == "NO_RELEVANT_CONTEXT"
    assert "above" not in done.stdout and str(total) not in json.dumps(response.get("reason"))


def test_status_names_the_file_and_what_is_above(ingested: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    db, _ = ingested
    done = cli("status", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert f"index file: {db.absolute()}" in done.stdout
    assert f"0 passages visible at ceiling public ({_passages(db)} above it, in 2 documents)" in done.stdout
    done = cli("status", "--db", str(db), "--ceiling", "restricted")
    assert f"{_passages(db)} passages visible at ceiling restricted (0 above it)" in done.stdout
    done = cli("status", "--db", str(db), "--json")
    assert "above" not in done.stdout and str(db) not in done.stdout


def test_status_without_an_index_names_the_path_and_no_placeholders(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "evidence.sqlite"
    done = cli("status", "--db", str(missing))
    assert done.returncode == 1
    assert f"index file: {missing}" in done.stdout
    assert "no evidence index found" in done.stdout
    assert "None" not in done.stdout


def test_missing_index_and_corpus_errors_name_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "none.sqlite"
    done = cli("search", "leave", "--db", str(missing))
    assert done.returncode == 1
    assert "no evidence index found" in done.stderr and str(missing) in done.stderr
    assert "Traceback" not in done.stderr
    gone = tmp_path / "no-such-folder"
    done = cli("ingest", "--corpus", str(gone), "--db", str(tmp_path / "e.sqlite"))
    assert done.returncode == 1
    assert f"the corpus folder {gone} does not exist" in done.stderr


def test_the_error_naming_the_index_file_never_reaches_a_client(tmp_path: Path) -> None:
    # The CLI re-raises index errors with the path as the base class, which the MCP layer
    # masks; the caller-facing error itself still names no path.
    named = GovernedEvidenceError(f"no evidence index found (index file: {tmp_path})")
    assert str(to_tool_error(named)) == INTERNAL_ERROR_TEXT
    with pytest.raises(IndexMissingError) as caught:
        visibility(tmp_path / "absent.sqlite", Classification.PUBLIC)
    assert str(tmp_path) not in str(to_tool_error(caught.value))


def test_visibility_counts_match_what_the_service_shows(built_index: Path, service_factory) -> None:  # type: ignore[no-untyped-def]
    conn = connect(built_index, readonly=True)
    try:
        meta = read_meta(conn)
    finally:
        conn.close()
    for ceiling in Classification:
        status = service_factory(ceiling).status()
        seen = visibility(built_index, ceiling)
        assert (seen.visible_documents, seen.visible_passages) == (status.documents, status.passages)
        assert seen.documents_above == meta.documents - status.documents
        assert seen.passages_above == meta.passages - status.passages
    assert visibility(built_index, Classification.RESTRICTED).passages_above == 0
    assert visibility(built_index, Classification.PUBLIC).passages_above > 0


def test_no_mcp_module_imports_the_operator_counts() -> None:
    importers = []
    for path in sorted((PACKAGE / "mcp").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            if any(n.startswith("governed_evidence.search.visibility") for n in names):
                importers.append(str(path.relative_to(PACKAGE)))
    assert importers == []
