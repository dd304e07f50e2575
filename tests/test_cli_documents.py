"""The CLI reaches what the MCP tools do: ``read``, ``sources``, ``stats providers``, and the
dry run's per-file label report (text, ``--json`` and ``--csv``).

Run in-process through ``main`` over an index built with the hash embedder: neither
``read`` nor ``sources`` embeds anything.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from governed_evidence.cli import main
from governed_evidence.config import Classification
from governed_evidence.search.models import ReadPassageResponse, SourcesResponse
from governed_evidence.search.service import SearchService
from tests.helpers import write


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _a_citation(db: Path, level: Classification, document_prefix: str) -> str:
    service = SearchService(db, ceiling=level)
    try:
        listing = service.list_sources()
        doc = next(d for d in listing.documents if d.document.startswith(document_prefix))
        conn, _ = service.reader.connection()
        row = conn.execute(
            "SELECT p.citation_id FROM passages p JOIN documents d ON d.id = p.document_id "
            "WHERE d.path = ? ORDER BY p.ordinal DESC LIMIT 1",
            (doc.document,),
        ).fetchone()
        return str(row[0])
    finally:
        service.close()


def test_read_prints_what_read_passage_returns(built_index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cid = _a_citation(built_index, Classification.PUBLIC, "public/")
    code, out, _ = _run(
        capsys, "read", cid, "--db", str(built_index), "--ceiling", "public", "--context", "1", "--json"
    )
    assert code == 0
    service = SearchService(built_index, ceiling=Classification.PUBLIC)
    try:
        expected = service.read_passage(cid, 1)
    finally:
        service.close()
    assert ReadPassageResponse.model_validate_json(out) == expected
    assert expected.before  # the context was asked for and given

    code, out, _ = _run(capsys, "read", cid, "--db", str(built_index), "--ceiling", "public")
    assert code == 0
    assert out.startswith(cid + "\n") or f"\n{cid}\n" in out
    assert expected.passage.text.split("\n")[0] in out
    assert "untrusted data" in out


def test_read_of_a_passage_above_the_ceiling_reads_like_a_missing_one(
    built_index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = _a_citation(built_index, Classification.RESTRICTED, "restricted/")
    db = ["--db", str(built_index), "--ceiling", "public"]
    denied = _run(capsys, "read", secret, *db)
    missing = _run(capsys, "read", "public/none.md#x:L1-2", *db)
    assert denied[0] == missing[0] == 1
    assert denied[1] == missing[1] == ""
    assert denied[2] == missing[2]
    assert "restricted" not in denied[2]


def test_read_refuses_a_context_out_of_range(built_index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "read", "a.md#x:L1-2", "--db", str(built_index), "--context", "9")
    assert code == 2
    assert "context must be between 0 and 3" in err


def test_sources_prints_what_list_sources_returns_and_nothing_above_the_ceiling(
    built_index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "sources", "--db", str(built_index), "--ceiling", "public", "--json")
    assert code == 0
    listing = SourcesResponse.model_validate_json(out)
    service = SearchService(built_index, ceiling=Classification.PUBLIC)
    try:
        assert listing == service.list_sources()
    finally:
        service.close()
    assert listing.documents and all(d.classification == "public" for d in listing.documents)

    code, out, _ = _run(capsys, "sources", "--db", str(built_index), "--ceiling", "public")
    assert code == 0
    assert out.startswith(f"ceiling: public | documents: {len(listing.documents)}")
    for d in listing.documents:
        assert d.document in out
    assert "restricted/" not in out and "internal/" not in out


def test_sources_without_an_index_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "none.sqlite"
    code, _, err = _run(capsys, "sources", "--db", str(missing))
    assert code == 1
    assert str(missing) in err and "governed-evidence ingest" in err


def test_stats_providers_lists_every_bundled_provider(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "stats", "providers", "--json")
    assert code == 0
    listing = json.loads(out)
    ids = [p["id"] for p in listing["providers"]]
    assert ids == sorted(["OECD", "ECB", "ESTAT", "IMF", "BIS", "UNICEF", "ILO", "ISTAT", "INSEE"])
    assert listing["default"] == "OECD"
    assert all(p["base_url"].startswith("https://") for p in listing["providers"])

    code, out, _ = _run(capsys, "stats", "providers")
    assert code == 0
    assert "OECD Data Explorer (default)" in out
    assert all(pid in out for pid in ids)


def test_stats_providers_merges_the_operators_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = tmp_path / "providers.toml"
    extra.write_text(
        "[providers.ABS]\nname = 'Australian Bureau of Statistics'\nbase_url = 'https://api.data.abs.gov.au'\n"
        "[providers.ISTAT]\nenabled = false\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("GOVERNED_EVIDENCE_SDMX_PROVIDERS", str(extra))
    code, out, _ = _run(capsys, "stats", "providers", "--json")
    assert code == 0
    listing = json.loads(out)
    ids = [p["id"] for p in listing["providers"]]
    assert "ABS" in ids and "ISTAT" not in ids
    assert listing["providers_file"] == str(extra)


def _labelled_corpus(root: Path) -> Path:
    write(root, "public/handbook.md", "# Handbook\n\nHow we work in the open.\n")
    write(root, "notes/plan.md", "---\nclassification: internal\n---\n# Plan\n\nThe plan for the year.\n")
    write(root, "team/rota.md", "# Rota\n\nWho is on call this week.\n")
    write(root, "readme.md", "# Readme\n\nWhat this folder holds.\n")
    write(root, "restricted/hr/dismissal-of-jane-doe.md", "# Case\n\nThe case file.\n")
    write(root, "_governance.toml", "[[rule]]\npath = 'team'\nclassification = 'internal'\n")
    return root


def test_the_dry_run_says_which_file_got_which_level_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = _labelled_corpus(tmp_path / "corpus")
    sheet = tmp_path / "labels.csv"
    args = ["ingest", "--corpus", str(corpus), "--db", str(tmp_path / "i.sqlite"), "--dry-run", "--quiet"]
    args += ["--ceiling", "internal", "--default-classification", "public"]
    expected = {
        "public/handbook.md": ("public", "folder", "", "indexed"),
        "notes/plan.md": ("internal", "front matter", "", "indexed"),
        "team/rota.md": ("internal", "rule", "rule 1 (path 'team')", "indexed"),
        "readme.md": ("public", "default", "", "indexed"),
    }

    code, out, _ = _run(capsys, *args, "--json", "--csv", str(sheet))
    assert code == 0
    report = json.loads(out)
    files = {
        f["document"]: (f["classification"], f["decided_by"], f["rule"] or "", f["outcome"]) for f in report["files"]
    }
    assert files == expected
    with sheet.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["document"]: (r["classification"], r["decided_by"], r["rule"], r["outcome"]) for r in rows} == expected

    code, out, _ = _run(capsys, *args)
    assert code == 0
    assert "files (4): level, what decided it, outcome" in out
    assert "internal   rule 1 (path 'team') indexed    team/rota.md" in out
    assert "public     default              indexed    readme.md" in out
    assert "and 1 document(s) above the ceiling, not named" in out
    # The document above the build ceiling is counted, never named, in any of the three.
    for text in (out, json.dumps(report), sheet.read_text(encoding="utf-8")):
        assert "dismissal" not in text and "jane" not in text


def test_csv_is_only_for_a_dry_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = _labelled_corpus(tmp_path / "corpus")
    code, _, err = _run(capsys, "ingest", "--corpus", str(corpus), "--db", str(tmp_path / "i.sqlite"), "--csv", "x.csv")
    assert code == 2
    assert "--csv: only with --dry-run" in err
    assert not (tmp_path / "i.sqlite").exists()


def test_a_label_report_cell_never_starts_a_spreadsheet_formula(tmp_path: Path) -> None:
    from governed_evidence.commands.ingest import write_labels_csv
    from governed_evidence.ingest.report import IngestReport

    report = IngestReport(dry_run=True)
    report.count(Classification.PUBLIC, "folder", "indexed", '=HYPERLINK("x").md')
    sheet = tmp_path / "labels.csv"
    write_labels_csv(report, sheet)
    with sheet.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows[0]["document"] == '\'=HYPERLINK("x").md'


def test_status_names_the_corpus_folder_for_the_operator_only(
    built_index: Path, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "status", "--db", str(built_index))
    assert code == 0
    assert f"corpus folder: {corpus.resolve()}\n" in out
    code, out, _ = _run(capsys, "status", "--db", str(built_index), "--json")
    assert code == 0
    assert str(corpus.resolve()) not in out  # index_status (what a client gets) never carries it
