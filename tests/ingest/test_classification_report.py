"""The ingest report says how documents were classified, and warns when none can be served.

The fail-closed default is unchanged (no label, no level folder: restricted); the report
counts documents per level and outcome and per deciding rule, names no document above the
ceiling, and :func:`serving_notice` names the flag, folder or label that would change it.
"""

from __future__ import annotations

import json
from pathlib import Path

from governed_evidence.config import Classification
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.ingest.report import IngestReport, serving_notice
from tests.helpers import HashEmbedder, write

PUBLIC, INTERNAL, RESTRICTED = Classification.PUBLIC, Classification.INTERNAL, Classification.RESTRICTED


def _ingest(corpus: Path, db: Path, **kwargs: object) -> IngestReport:
    return ingest_corpus(corpus, db, HashEmbedder(), progress=None, **kwargs)  # type: ignore[arg-type]


def _unlabelled(root: Path) -> Path:
    write(root, "travel.md", "# Travel\n\nStaff book rail travel through the portal.\n")
    write(root, "notes/desks.md", "# Desks\n\nClear desks are checked every Friday evening.\n")
    return root


def test_unlabelled_documents_are_restricted_and_the_report_says_why(tmp_path: Path) -> None:
    report = _ingest(_unlabelled(tmp_path / "corpus"), tmp_path / "index.sqlite", ceiling=RESTRICTED)
    assert report.by_classification == {"restricted": {"indexed": 2}}
    assert report.decided_by == {"default": {"restricted": 2}}
    assert report.visible_at(PUBLIC) == 0 and report.visible_at(RESTRICTED) == 2
    notice = serving_notice(report, PUBLIC)
    assert notice[0].startswith("no document is visible at ceiling public") and "2 indexed above it" in notice[0]
    assert any("--default-classification public" in line and line.startswith("2 ") for line in notice[1:])
    # Only the rule that applied is offered, with the wider ceiling as the last resort.
    assert not any("front matter" in line or "folder named" in line for line in notice)
    assert "--ceiling internal" in notice[-1]


def test_nothing_to_warn_about_when_something_is_served(tmp_path: Path) -> None:
    corpus = _unlabelled(tmp_path / "corpus")
    report = _ingest(corpus, tmp_path / "a.sqlite", ceiling=RESTRICTED, default_classification=PUBLIC)
    assert report.by_classification == {"public": {"indexed": 2}}
    assert serving_notice(report, PUBLIC) == []
    write(corpus, "public/canteen.md", "# Canteen\n\nThe canteen opens at noon.\n")
    report = _ingest(corpus, tmp_path / "b.sqlite", ceiling=RESTRICTED)
    assert report.decided_by == {"default": {"restricted": 2}, "folder": {"public": 1}}
    assert serving_notice(report, PUBLIC) == []
    # At a ceiling of internal the same index shows one document: still something to serve.
    assert report.visible_at(INTERNAL) == 1


def test_levels_outcomes_and_rules_are_counted_without_names(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, "internal/hr/leave.md", "# Leave\n\nStaff take leave after agreeing it with a manager.\n")
    write(corpus, "restricted/merger-osprey.md", "# Osprey\n\nThe osprey merger closes in May.\n")
    write(corpus, "labelled-heron.md", "---\nclassification: restricted\n---\n# Heron\n\nHeron figures.\n")
    write(corpus, "public/old.md", "---\nsuperseded_by: public/new.md\n---\n# Old\n\nThe old canteen rule.\n")
    write(corpus, "public/new.md", "# New\n\nThe new canteen rule applies from June.\n")
    write(corpus, "public/empty.md", "# Only a heading\n")
    report = _ingest(corpus, tmp_path / "index.sqlite", ceiling=INTERNAL)
    assert report.by_classification == {
        "internal": {"indexed": 1},
        "restricted": {"above_ceiling": 2},
        "public": {"superseded": 1, "indexed": 1, "rejected": 1},
    }
    assert report.decided_by == {
        "folder": {"internal": 1, "restricted": 1, "public": 2},
        "front matter": {"restricted": 1},
    }
    assert report.excluded_above_ceiling == 2 and report.documents_indexed == 3
    reported = json.dumps(report.as_dict())
    assert "osprey" not in reported and "heron" not in reported
    assert json.loads(reported)["by_classification"] == report.by_classification


def test_each_rule_that_put_documents_above_the_ceiling_is_named(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, "internal/a.md", "# A\n\nAlpha text for the internal folder.\n")
    write(corpus, "b.md", "---\nclassification: internal\n---\n# B\n\nBravo text labelled internal.\n")
    report = _ingest(corpus, tmp_path / "index.sqlite", ceiling=RESTRICTED, default_classification=PUBLIC)
    notice = serving_notice(report, PUBLIC)
    assert notice and "2 indexed above it" in notice[0]
    assert any(line.startswith("1 under a folder") and "public/" in line for line in notice)
    assert any(
        line.startswith("1 labelled in their front matter") and "classification: public" in line for line in notice
    )
    assert not any("--default-classification" in line for line in notice)


def test_documents_only_above_the_build_ceiling_ask_for_a_wider_ceiling(tmp_path: Path) -> None:
    report = _ingest(_unlabelled(tmp_path / "corpus"), tmp_path / "index.sqlite", ceiling=PUBLIC)
    assert report.by_classification == {"restricted": {"above_ceiling": 2}}
    notice = serving_notice(report, PUBLIC)
    assert "2 above the build ceiling, not indexed" in notice[0]
    assert notice[1:] == ["re-ingest with a wider --ceiling to index the documents above the build ceiling"]


def test_a_kept_index_still_counts_its_levels(tmp_path: Path) -> None:
    corpus = _unlabelled(tmp_path / "corpus")
    write(corpus, "restricted/old.md", "---\nsuperseded_by: restricted/new.md\n---\n# Old\n\nThe old rule.\n")
    db = tmp_path / "index.sqlite"
    first = _ingest(corpus, db, ceiling=RESTRICTED)
    again = _ingest(corpus, db, ceiling=RESTRICTED)
    assert again.unchanged
    assert again.by_classification == first.by_classification == {"restricted": {"indexed": 2, "superseded": 1}}
    # Nothing was parsed again: the build's deciding rules are kept with its counts, and the
    # operator is told what the build said.
    assert again.decided_by == first.decided_by == {"default": {"restricted": 2}, "folder": {"restricted": 1}}
    assert serving_notice(again, PUBLIC) == serving_notice(first, PUBLIC)
    assert "3 indexed above it" in serving_notice(again, PUBLIC)[0]
