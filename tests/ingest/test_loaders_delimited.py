"""CSV and TSV read like a sheet: each row with its header's names, cited by its lines,
bounded like XLSX, the encoding detected or reported."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from governed_evidence.config import Classification
from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.classify import classify
from governed_evidence.ingest.loaders import SUPPORTED_SUFFIXES, delimited, load_document, skip_reason
from governed_evidence.ingest.passages import prepare_document
from governed_evidence.ingest.report import IngestReport


def _file(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def test_csv_and_tsv_are_read_not_skipped() -> None:
    assert {".csv", ".tsv"} <= SUPPORTED_SUFFIXES
    assert skip_reason("rates.csv") is None and skip_reason("Rates.TSV") is None


def test_rows_carry_their_header_names_and_their_lines(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "rates.csv",
        "Hotel rates 2025\n"
        "City,Nightly limit (EUR),Notes\n"
        "Paris,210,\n"
        '"Lyon",150,"Breakfast\nincluded"\n'
        "\n"
        "Nice,,Ask finance\n",
    )
    doc = load_document(path, "rates")
    assert doc.format == "csv" and doc.title == "rates"
    assert [(b.kind, b.text, b.line_start, b.line_end) for b in doc.blocks] == [
        ("paragraph", "Hotel rates 2025", 1, 1),
        ("table", "City: Paris | Nightly limit (EUR): 210", 3, 3),
        ("table", "City: Lyon | Nightly limit (EUR): 150 | Notes: Breakfast included", 4, 5),
        ("table", "City: Nice | Notes: Ask finance", 7, 7),
    ]
    assert doc.warnings == []


def test_semicolons_and_tabs_are_found(tmp_path: Path) -> None:
    semi = load_document(_file(tmp_path, "a.csv", "Name;Phone\nAda;0123\nBob;0456\n"), "a")
    assert [b.text for b in semi.blocks] == ["Name: Ada | Phone: 0123", "Name: Bob | Phone: 0456"]
    tabs = load_document(_file(tmp_path, "b.tsv", "Name\tPhone, office\nAda\t0123, ext 4\n"), "b")
    assert [b.text for b in tabs.blocks] == ["Name: Ada | Phone, office: 0123, ext 4"]


def test_the_encoding_is_detected_or_reported(tmp_path: Path) -> None:
    utf16 = load_document(_file(tmp_path, "u.csv", "\ufeffCity,Rate\nZürich,300\n".encode("utf-16")), "u")
    assert [b.text for b in utf16.blocks] == ["City: Zürich | Rate: 300"]
    assert utf16.warnings == []
    bom = load_document(_file(tmp_path, "b.csv", "\ufeffCity,Rate\nZürich,300\n".encode()), "b")
    assert [b.text for b in bom.blocks] == ["City: Zürich | Rate: 300"]
    windows = load_document(_file(tmp_path, "w.csv", "City,Rate\nZürich,300 €\n".encode("cp1252")), "w")
    assert [b.text for b in windows.blocks] == ["City: Zürich | Rate: 300 €"]
    assert len(windows.warnings) == 1 and "read as Windows-1252" in windows.warnings[0]


def test_binary_and_undecodable_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FileRejectedError, match="NUL bytes"):
        load_document(_file(tmp_path, "x.csv", b"a,b\n\x00\x01,2\n"), "x")
    with pytest.raises(FileRejectedError, match="neither UTF-8"):
        load_document(_file(tmp_path, "y.csv", b"a,b\n\x81\x8d,2\n"), "y")
    with pytest.raises(FileRejectedError, match="no text"):
        load_document(_file(tmp_path, "z.csv", "Only,A header\n"), "z")


def test_a_file_past_a_bound_is_refused_not_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(delimited, "MAX_ROWS", 10)
    rows = "".join(f"{i},x\n" for i in range(11))
    with pytest.raises(FileRejectedError, match="more than 10 rows"):
        load_document(_file(tmp_path, "r.csv", "n,v\n" + rows), "r")
    monkeypatch.setattr(delimited, "MAX_CELLS", 7)
    with pytest.raises(FileRejectedError, match="more than 7 cells"):
        load_document(_file(tmp_path, "c.csv", "a,b,c,d\n1,2,3,4\n"), "c")
    monkeypatch.setattr(delimited, "MAX_DELIMITED_BYTES", 16)
    with pytest.raises(FileRejectedError, match="over the 16-byte limit"):
        load_document(_file(tmp_path, "s.csv", "a,b\n" * 10), "s")
    monkeypatch.setattr(delimited, "MAX_FIELD_CHARS", 100)
    monkeypatch.setattr(delimited, "MAX_DELIMITED_BYTES", 10_000)
    with pytest.raises(FileRejectedError, match="cannot be read as delimited text"):
        load_document(_file(tmp_path, "f.csv", 'a,b\n"' + "x" * 200 + '",1\n'), "f")


def test_a_credential_in_one_row_costs_that_row_only(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "keys.csv",
        "Service,Owner,Secret\nBilling,Ada,\nDeploy,Bob,AKIAIOSFODNN7EXAMPLE\nWiki,Cy,\n",
    )
    rel = PurePosixPath("keys.csv")
    report = IngestReport()
    prepared = prepare_document(path, rel, classify(path, rel, Classification.PUBLIC), "m", report)
    text = "\n".join(p.text for p in prepared.passages)
    assert "Service: Billing" in text and "Service: Wiki" in text
    assert "AKIA" not in text and "Deploy" not in text
    assert report.passages_refused == 1
    assert all(p.citation_id.startswith("keys.csv#top:L") for p in prepared.passages)
