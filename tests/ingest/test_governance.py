"""The governance file: longest-prefix rules, front matter precedence, strict parsing, the
fingerprint, and ``ingest --dry-run``."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path, PurePosixPath

import pytest
from openpyxl import Workbook

from governed_evidence.config import Classification
from governed_evidence.errors import IngestError
from governed_evidence.ingest.governance import GOVERNANCE_FILE, load_governance
from governed_evidence.ingest.pipeline import dry_run_corpus, ingest_corpus
from governed_evidence.ingest.report import IngestReport
from governed_evidence.store.connection import connect
from governed_evidence.store.lifecycle import Lifecycle
from tests.helpers import HashEmbedder, write

PUBLIC, INTERNAL, RESTRICTED = Classification.PUBLIC, Classification.INTERNAL, Classification.RESTRICTED
REPO = Path(__file__).resolve().parents[2]


def rules(root: Path, text: str) -> Path:
    return write(root, GOVERNANCE_FILE, text)


def build(corpus: Path, db: Path, **kwargs: object) -> IngestReport:
    return ingest_corpus(corpus, db, HashEmbedder(), ceiling=RESTRICTED, progress=None, **kwargs)  # type: ignore[arg-type]


def documents(db: Path) -> dict[str, tuple[object, ...]]:
    """path -> (classification, status, lifecycle, owner, review_by, effective)."""
    conn = connect(db, readonly=True)
    try:
        return {
            str(r[0]): tuple(r[1:])
            for r in conn.execute(
                "SELECT path, classification, status, lifecycle, owner, review_by, effective FROM documents"
            )
        }
    finally:
        conn.close()


def doc(title: str, body: str = "Staff follow this rule every working day.", **front: str) -> str:
    head = "".join(f"{k}: {v}\n" for k, v in front.items())
    fence = f"---\n{head}---\n" if front else ""
    return f"{fence}# {title}\n\n{body}\n"


# -- the rules -----------------------------------------------------------------------------


def test_the_longest_matching_path_wins_whatever_the_order_in_the_file(tmp_path: Path) -> None:
    rules(
        tmp_path,
        """
        [[rule]]
        path = "hr/archive/"
        status = "deprecated"

        [[rule]]
        path = "hr/"
        classification = "internal"
        owner = "HR Policy Team"
        status = "current"
        review_by = 2026-06-30

        [[rule]]
        path = "/"
        owner = "Governance Office"
        """,
    )
    governance = load_governance(tmp_path)
    archived = PurePosixPath("hr/archive/old-leave.md")
    # Each setting from the longest path that sets it: the archive keeps hr/'s level and owner.
    assert governance.classification(archived) is INTERNAL
    assert governance.lifecycle(archived) == Lifecycle("deprecated", "HR Policy Team", date(2026, 6, 30))
    assert governance.lifecycle(PurePosixPath("hr/leave.md")).status == "current"
    assert governance.lifecycle(PurePosixPath("finance/rates.md")) == Lifecycle(owner="Governance Office")
    assert governance.classification(PurePosixPath("finance/rates.md")) is None


def test_paths_match_whole_components_case_insensitively(tmp_path: Path) -> None:
    rules(
        tmp_path,
        '[[rule]]\npath = "HR"\nclassification = "restricted"\n\n[[rule]]\npath = "a/b.md"\nstatus = "draft"\n',
    )
    governance = load_governance(tmp_path)
    assert governance.classification(PurePosixPath("hr/leave.md")) is RESTRICTED
    assert governance.classification(PurePosixPath("Hr/Sub/leave.md")) is RESTRICTED
    assert governance.classification(PurePosixPath("hr-old/leave.md")) is None
    assert governance.classification(PurePosixPath("hr.md")) is None
    assert governance.lifecycle(PurePosixPath("a/b.md")).status == "draft"
    assert governance.lifecycle(PurePosixPath("a/b.md.txt")).status == "current"


def test_without_a_governance_file_documents_behave_as_before(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, "public/a.md", doc("A"))
    write(corpus, "notes/b.md", doc("B", owner="Facilities"))
    report = build(corpus, tmp_path / "i.sqlite")
    stored = documents(tmp_path / "i.sqlite")
    assert stored["public/a.md"] == (int(PUBLIC), "active", "current", None, None, None)
    # Front matter owner was always written; now it is served too.
    assert stored["notes/b.md"] == (int(RESTRICTED), "active", "current", "Facilities", None, None)
    assert report.decided_by == {"folder": {"public": 1}, "default": {"restricted": 1}}


def test_a_rule_outranks_the_level_folder_and_front_matter_outranks_the_rule(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    rules(corpus, '[[rule]]\npath = "public/board/"\nclassification = "restricted"\nowner = "Company Secretary"\n')
    write(corpus, "public/board/minutes.md", doc("Minutes"))
    write(corpus, "public/board/notice.md", doc("Notice", classification="public", owner="Comms", status="draft"))
    write(corpus, "public/faq.md", doc("FAQ"))
    report = build(corpus, tmp_path / "i.sqlite")
    stored = documents(tmp_path / "i.sqlite")
    assert stored["public/board/minutes.md"][:4] == (int(RESTRICTED), "active", "current", "Company Secretary")
    # Front matter wins for one document (level, owner and status alike), and the reviewer is told.
    assert stored["public/board/notice.md"][:4] == (int(PUBLIC), "active", "draft", "Comms")
    assert (
        "public/board/notice.md",
        "front matter classification public is below restricted from rule 1 (path 'public/board/') "
        "of _governance.toml: the front matter wins",
    ) in report.warnings
    assert stored["public/faq.md"][0] == int(PUBLIC)
    assert report.decided_by == {"rule": {"restricted": 1}, "front matter": {"public": 1}, "folder": {"public": 1}}
    assert report.by_classification == {"restricted": {"indexed": 1}, "public": {"draft": 1, "indexed": 1}}


def test_a_rule_sets_the_level_of_formats_without_front_matter(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    rules(corpus, '[[rule]]\npath = "contracts/"\nclassification = "internal"\nstatus = "deprecated"\n')
    (corpus / "contracts").mkdir(parents=True)
    # A workbook: a format with no front matter, so only the rule can set its level.
    workbook = Workbook()
    sheet = workbook.active
    assert sheet is not None
    sheet.append(["Supplier", "Annual cap (EUR)"])
    sheet.append(["Cleaning services", 48000])
    workbook.save(corpus / "contracts" / "caps.xlsx")
    build(corpus, tmp_path / "i.sqlite", default_classification=PUBLIC)
    stored = documents(tmp_path / "i.sqlite")
    assert stored["contracts/caps.xlsx"][:3] == (int(INTERNAL), "active", "deprecated")


def test_a_hard_link_in_a_folder_a_rule_restricts_restricts_the_file(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    rules(corpus, '[[rule]]\npath = "vault/"\nclassification = "restricted"\n')
    path = write(corpus, "public/plan.md", doc("Plan"))
    (corpus / "vault").mkdir()
    # Another name, of a format the walk does not index, in the folder the rule restricts.
    os.link(path, corpus / "vault" / "plan.md.bak")
    report = build(corpus, tmp_path / "i.sqlite")
    assert documents(tmp_path / "i.sqlite")["public/plan.md"][0] == int(RESTRICTED)
    assert report.decided_by == {"rule": {"restricted": 1}}


def test_the_governance_file_is_not_a_document_and_a_nested_one_is_named(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    rules(corpus, '[[rule]]\npath = "hr/"\nowner = "HR"\n')
    write(corpus, "hr/a.md", doc("A"))
    write(corpus, f"hr/{GOVERNANCE_FILE}", '[[rule]]\npath = "a.md"\nstatus = "draft"\n')
    report = build(corpus, tmp_path / "i.sqlite")
    assert report.files_seen == 1 and report.unsupported_files == 1
    assert set(documents(tmp_path / "i.sqlite")) == {"hr/a.md"}
    assert (
        f"hr/{GOVERNANCE_FILE}",
        f"only the corpus folder's own {GOVERNANCE_FILE} is read; this one is ignored",
    ) in (report.warnings)


def test_a_rule_that_matches_no_file_is_a_warning(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    rules(corpus, '[[rule]]\npath = "hr/"\nowner = "HR"\n\n[[rule]]\npath = "h-r/"\nstatus = "draft"\n')
    write(corpus, "hr/a.md", doc("A"))
    report = build(corpus, tmp_path / "i.sqlite")
    assert report.warnings == [(GOVERNANCE_FILE, "rule 2 (path 'h-r/') matches no file in the corpus")]


@pytest.mark.parametrize(
    ("front", "reason"),
    [
        ({"status": "approved"}, "front matter status 'approved' is not one of: draft, current, deprecated"),
        ({"review_by": "soon"}, "front matter review_by 'soon' is not a date (YYYY-MM-DD)"),
        ({"effective": "'2024-02-30'"}, "front matter effective '2024-02-30' is not a date (YYYY-MM-DD)"),
        # Unquoted, YAML itself cannot build it: the front matter is unreadable (restricted, rejected).
        (
            {"effective": "2024-02-30"},
            "front matter is not valid YAML (a value cannot be read, e.g. a date that does not exist)",
        ),
        ({"owner": "[a, b]"}, "front matter owner must be text (a name or a team), got list"),
    ],
)
def test_front_matter_a_document_cannot_use_rejects_that_document(
    tmp_path: Path, front: dict[str, str], reason: str
) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, "public/bad.md", doc("Bad", **front))
    write(corpus, "public/good.md", doc("Good", review_by="2026-01-31", effective="2025-02-01"))
    report = build(corpus, tmp_path / "i.sqlite")
    assert report.rejected == [("public/bad.md", reason)]
    assert documents(tmp_path / "i.sqlite")["public/good.md"][4:] == ("2026-01-31", "2025-02-01")


# -- a malformed file fails the whole build, and the old index keeps serving ---------------

MALFORMED = [
    ("[[rule]\npath = 'hr/'\n", "is not valid TOML"),
    ("[[rules]]\npath = 'hr/'\nstatus = 'draft'\n", "unknown key 'rules' at the top level"),
    ("[rule]\npath = 'hr/'\nstatus = 'draft'\n", "'rule' must be an array of tables: write each rule as [[rule]]"),
    (
        "[[rule]]\npath = 'hr/'\nstatus = 'current'\n\n[[rule]]\npath = 'hr/old/'\nstaus = 'deprecated'\n",
        "rule 2 (path 'hr/old/'): unknown key 'staus' (a rule has: path, classification, status, owner, "
        "review_by, effective, link)",
    ),
    (
        "[[rule]]\npath = 'hr/'\nstatus = 'archived'\n",
        "rule 1 (path 'hr/'): status 'archived' is not one of: draft, current, deprecated",
    ),
    (
        "[[rule]]\npath = 'hr/'\nclassification = 'confidential'\n",
        "rule 1 (path 'hr/'): classification 'confidential' is not one of: public, internal, restricted",
    ),
    ("[[rule]]\npath = 'hr/'\nreview_by = 'next year'\n", "rule 1 (path 'hr/'): review_by 'next year' is not a date"),
    (
        "[[rule]]\npath = 'hr/'\nreview_by = 2026-06-30T09:00:00\n",
        "rule 1 (path 'hr/'): review_by must be a date without a time",
    ),
    ("[[rule]]\nstatus = 'draft'\n", "rule 1: has no path"),
    ("[[rule]]\npath = '../elsewhere/'\nstatus = 'draft'\n", "must stay inside the corpus folder"),
    ("[[rule]]\npath = 'hr/'\n", "rule 1 (path 'hr/'): sets nothing"),
    ("[[rule]]\npath = 'hr/'\nowner = 7\n", "rule 1 (path 'hr/'): owner must be text"),
    (
        "[[rule]]\npath = 'hr/'\nowner = 'HR'\n\n[[rule]]\npath = 'HR'\nstatus = 'draft'\n",
        "rule 2 (path 'HR'): names the same path as rule 1 (path 'hr/'); give each path one rule",
    ),
    ("[[rule]]\npath = 'hr/'\nowner = 'HR'\n\xff\n", "is not valid UTF-8"),
]


@pytest.mark.parametrize(("text", "problem"), MALFORMED, ids=[m[1][:40] for m in MALFORMED])
def test_a_malformed_governance_file_fails_the_build_and_keeps_the_old_index(
    tmp_path: Path, text: str, problem: str
) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, "hr/a.md", doc("A"))
    db = tmp_path / "i.sqlite"
    build(corpus, db)
    before = hashlib.sha256(db.read_bytes()).hexdigest(), db.stat().st_ino
    (corpus / GOVERNANCE_FILE).write_bytes(text.encode().replace(b"\xc3\xbf", b"\xff"))
    with pytest.raises(IngestError) as caught:
        build(corpus, db, force=True)
    message = str(caught.value)
    assert message.startswith(f"{corpus.resolve() / GOVERNANCE_FILE}: ")
    assert problem in message
    assert message.endswith("the ingest stopped before building anything, and the existing index is unchanged")
    assert (hashlib.sha256(db.read_bytes()).hexdigest(), db.stat().st_ino) == before
    # The dry run reads the file as strictly.
    with pytest.raises(IngestError, match="existing index is unchanged"):
        dry_run_corpus(corpus, ceiling=RESTRICTED, progress=None)


def test_a_governance_file_that_is_a_link_or_too_large_is_refused(tmp_path: Path) -> None:
    outside = write(tmp_path, "outside.toml", '[[rule]]\npath = "/"\nclassification = "public"\n')
    corpus = tmp_path / "corpus"
    write(corpus, "a.md", doc("A"))
    (corpus / GOVERNANCE_FILE).symlink_to(outside)
    with pytest.raises(IngestError, match="is a symbolic link"):
        load_governance(corpus)
    (corpus / GOVERNANCE_FILE).unlink()
    (corpus / GOVERNANCE_FILE).write_text("# comment\n" * 200_000)
    with pytest.raises(IngestError, match="is larger than 1024 KiB"):
        load_governance(corpus)


# -- the fingerprint -----------------------------------------------------------------------


def test_editing_a_rule_rebuilds_and_an_unchanged_file_keeps_the_index(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, "hr/a.md", doc("A"))
    write(corpus, "hr/b.md", doc("B"))
    db = tmp_path / "i.sqlite"
    rules(corpus, '[[rule]]\npath = "hr/"\nclassification = "internal"\n')
    assert not build(corpus, db).unchanged
    assert build(corpus, db).unchanged
    rules(
        corpus, '[[rule]]\npath = "hr/"\nclassification = "internal"\n\n[[rule]]\npath = "hr/b.md"\nstatus = "draft"\n'
    )
    again = build(corpus, db)
    assert not again.unchanged
    assert documents(db)["hr/b.md"][2] == "draft"
    kept = build(corpus, db, clock=lambda: date(2030, 1, 1))
    # A kept index still counts what is kept out of search.
    assert kept.unchanged and kept.by_classification == {"internal": {"indexed": 1, "draft": 1}}
    (corpus / GOVERNANCE_FILE).unlink()
    assert not build(corpus, db).unchanged
    assert documents(db)["hr/b.md"][:3] == (int(RESTRICTED), "active", "current")


def test_the_report_counts_documents_overdue_for_review_on_the_clock_s_day(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    rules(corpus, '[[rule]]\npath = "hr/"\nreview_by = 2026-06-30\n')
    write(corpus, "hr/a.md", doc("A"))
    write(corpus, "hr/b.md", doc("B", review_by="2027-01-01"))
    db = tmp_path / "i.sqlite"
    assert build(corpus, db, clock=lambda: date(2026, 6, 30)).stale_documents == 0
    assert build(corpus, db, clock=lambda: date(2026, 7, 1)).stale_documents == 1  # kept, counted again
    assert build(corpus, db, clock=lambda: date(2027, 1, 2), force=True).stale_documents == 2


# -- ingest --dry-run ----------------------------------------------------------------------


def _review_corpus(corpus: Path) -> Path:
    rules(
        corpus,
        """
        [[rule]]
        path = "hr/"
        classification = "internal"
        owner = "HR Policy Team"

        [[rule]]
        path = "hr/drafts/"
        status = "draft"

        [[rule]]
        path = "hr/old/"
        status = "deprecated"

        [[rule]]
        path = "board/"
        classification = "restricted"
        """,
    )
    write(corpus, "hr/leave.md", doc("Leave"))
    write(corpus, "hr/drafts/parental.md", doc("Parental leave"))
    write(corpus, "hr/old/leave-2019.md", doc("Leave 2019"))
    write(corpus, "board/minutes.md", doc("Minutes"))
    write(corpus, "public/empty.md", "")
    write(corpus, "public/notes.rtf", "{\\rtf1 not read}")
    return corpus


def test_a_dry_run_reports_by_classification_and_status_and_writes_nothing(tmp_path: Path) -> None:
    corpus = _review_corpus(tmp_path / "corpus")
    report = dry_run_corpus(corpus, ceiling=INTERNAL, progress=None)
    assert report.dry_run and not report.unchanged
    assert report.by_classification == {
        "internal": {"indexed": 1, "draft": 1, "deprecated": 1},
        "restricted": {"above_ceiling": 1},
        "public": {"rejected": 1},
    }
    assert report.documents_indexed == 3 and report.passages == 3
    assert report.excluded_above_ceiling == 1
    assert report.rejected == [("public/empty.md", "file is empty")]
    assert report.unsupported_files == 1
    assert report.embeddings_computed == report.embeddings_reused == 0
    assert not any(tmp_path.glob("**/*.sqlite*")) and not any(tmp_path.glob("**/.*build*"))


#: The CLI as an operator runs it, in a child process (main() configures logging for the
#: process), with every way to make the embedder failing the run.
_NO_MODEL_CLI = """
import sys
from governed_evidence.embeddings import factory, minilm
from governed_evidence.cli import main

def no_model(*args, **kwargs):
    raise AssertionError("a dry run must not make the embedder")

factory.make_embedder = no_model
minilm.MiniLMEmbedder = no_model
sys.exit(main(sys.argv[1:]))
"""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _NO_MODEL_CLI, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "GOVERNED_EVIDENCE_LOG_LEVEL": "WARNING"},
    )


def test_ingest_dry_run_on_the_command_line_loads_no_model_and_touches_no_index(tmp_path: Path) -> None:
    corpus = _review_corpus(tmp_path / "corpus")
    db = tmp_path / "index.sqlite"
    args = ["ingest", "--corpus", str(corpus), "--db", str(db), "--ceiling", "internal", "--dry-run", "--quiet"]
    done = _cli(*args, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["dry_run"] is True
    assert report["by_classification"]["internal"] == {"indexed": 1, "draft": 1, "deprecated": 1}
    assert report["decided_by"] == {"rule": {"internal": 3, "restricted": 1}}
    assert report["rejected"] == [{"document": "public/empty.md", "reason": "file is empty"}]
    assert not db.exists()

    done = _cli(*args)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith(f"Dry run: 3 documents, 3 passages would be indexed into {db}; nothing was embedded")
    assert "internal        3  (1 indexed, 1 draft (not searched), 1 deprecated (not searched))" in out
    assert "rejected public/empty.md: file is empty" in out
    assert "level decided by: governance rule 4 (internal 3, restricted 1)" in out
    assert not db.exists()


def test_a_dry_run_with_a_malformed_file_fails_with_its_message(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, "a.md", doc("A"))
    rules(corpus, "[[rule]]\npath = 'a.md'\nstatus = 'retired'\n")
    done = _cli("ingest", "--corpus", str(corpus), "--db", str(tmp_path / "i.sqlite"), "--dry-run", "--quiet")
    assert done.returncode == 1
    assert "rule 1 (path 'a.md'): status 'retired' is not one of: draft, current, deprecated" in done.stderr
