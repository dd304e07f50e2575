"""What the human commands write on stderr: warnings only by default, JSON logs on request.

Subprocesses with the real default model, on a small corpus that holds what used to put
JSON lines among the human output: a rejected file (reported, then logged again) and a
PDF that makes pypdf warn as it repairs it (summarised by the loader as it is).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import write

REPO = Path(__file__).resolve().parents[1]
#: The index file and the ingest run that built it.
Built = tuple[Path, subprocess.CompletedProcess[str]]


def _pdf_with_a_wrong_xref(text: str) -> bytes:
    """A one-page PDF whose cross-reference offsets are off: pypdf reads it and warns."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % (offset + 7) for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref + 3)
    return bytes(out)


def cli(*args: str, level: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GOVERNED_EVIDENCE_LOG_LEVEL"}
    if level is not None:
        env["GOVERNED_EVIDENCE_LOG_LEVEL"] = level
    done = subprocess.run(
        [sys.executable, "-m", "governed_evidence", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def json_lines(stderr: str) -> list[dict[str, Any]]:
    """The stderr lines that are JSON log records."""
    records = []
    for line in stderr.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("logging") / "corpus"
    write(root, "public/leave.md", "# Leave\n\nStaff get twenty-five days of annual leave a year.\n")
    (root / "public" / "broken.md").write_bytes(b"# Broken\n\nA NUL \x00 byte.\n")
    (root / "public" / "expenses.pdf").write_bytes(
        _pdf_with_a_wrong_xref("Staff may claim travel expenses within thirty days.")
    )
    return root


@pytest.fixture(scope="module")
def db(corpus: Path) -> Built:
    path = corpus.parent / "evidence.sqlite"
    return path, cli("ingest", "--corpus", str(corpus), "--db", str(path))


def test_ingest_prints_its_report_and_logs_nothing_by_default(
    db: Built,
) -> None:
    _, done = db
    assert "public/broken.md" in done.stdout  # the rejection, reported once, in the report
    assert json_lines(done.stderr) == []
    assert "pypdf" not in done.stderr


def test_verbose_ingest_logs_json_again_with_pypdf_warnings(corpus: Path, db: Built) -> None:
    path, _ = db
    # Before the command's name: the program-level flag.
    done = cli("--verbose", "ingest", "--corpus", str(corpus), "--db", str(path), "--force")
    records = json_lines(done.stderr)
    events = [r.get("event") for r in records]
    assert "ingest_finished" in events
    assert [r["level"] for r in records if r.get("event") == "file_rejected"] == ["info"]
    assert any(str(r.get("logger", "")).startswith("pypdf") and r["level"] == "warning" for r in records)


def test_search_and_status_log_nothing_by_default(db: Built) -> None:
    path, _ = db
    search = cli("search", "annual leave", "--db", str(path))
    assert "leave" in search.stdout.lower()
    assert json_lines(search.stderr) == []
    status = cli("status", "--db", str(path))
    assert json_lines(status.stderr) == []


def test_verbose_or_an_explicit_level_brings_the_json_logs_back(
    db: Built,
) -> None:
    path, _ = db
    # After the command's name, as most people type it.
    verbose = cli("search", "annual leave", "--db", str(path), "--verbose")
    assert [r["event"] for r in json_lines(verbose.stderr)] == ["search"]
    explicit = cli("search", "annual leave", "--db", str(path), level="INFO")
    assert [r["event"] for r in json_lines(explicit.stderr)] == ["search"]
