"""Front matter and titles on every public corpus in ../shared/data/corpora.

Each corpus writes its metadata its own way (Jekyll ``---`` blocks, the SOC 2 policy tool's
bare YAML closed by ``---``); whatever the form, a title is one line, the metadata is not
passage text, and the SOC 2 documents are titled by their ``name:``.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import pytest

from governed_evidence.config import Classification
from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.classify import classify
from governed_evidence.ingest.loaders import SUPPORTED_SUFFIXES
from governed_evidence.ingest.passages import Prepared, prepare_document
from governed_evidence.ingest.report import IngestReport
from tests.helpers import SHARED_DATA

CORPORA = SHARED_DATA / "corpora"
NAMES = ["gds-way", "github-site-policy", "gsa-tts-handbook", "strongdm-comply-soc2"]

#: Two ``key: value`` lines at the start of a passage: metadata indexed as if it were text.
KEY_LINES = re.compile(r"(?:[^\W\d][\w.-]*:(?:[ \t][^\n]*)?\n){2}")


def _prepared(name: str) -> dict[str, Prepared]:
    root = CORPORA / name
    if not root.is_dir():
        pytest.skip(f"shared corpus not present: {root}")
    out: dict[str, Prepared] = {}
    for path in sorted(root.rglob("*")):
        if path.suffix.lower() not in SUPPORTED_SUFFIXES or not path.is_file():
            continue
        rel = PurePosixPath(path.relative_to(root).as_posix())
        try:
            out[str(rel)] = prepare_document(path, rel, classify(path, rel, Classification.PUBLIC), "m", IngestReport())
        except FileRejectedError:
            continue  # a document with no text (a heading only) is refused, and has no title to check
    return out


@pytest.mark.parametrize("name", NAMES)
def test_every_title_is_one_line_and_no_passage_opens_with_metadata(name: str) -> None:
    prepared = _prepared(name)
    assert len(prepared) >= 30, f"{name}: only {len(prepared)} documents prepared"
    multi_line = [rel for rel, p in prepared.items() if "\n" in p.row.title or "\r" in p.row.title]
    assert multi_line == []
    assert all(p.row.title.strip() for p in prepared.values())
    headings = [rel for rel, p in prepared.items() if any("\n" in s.heading for s in p.passages)]
    assert headings == []
    metadata = [s.citation_id for p in prepared.values() for s in p.passages if KEY_LINES.match(s.text)]
    assert metadata == []


def _name_line(path: Path) -> str:
    """The ``name:`` of a SOC 2 file, read here with a pattern of its own (not the parser under test)."""
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.strip() == "---":
            break
        match = re.fullmatch(r'name:\s*"?(.*?)"?\s*', line)
        if match:
            return match[1]
    raise AssertionError(f"{path} has no name: line")


def test_soc2_titles_come_from_name() -> None:
    prepared = _prepared("strongdm-comply-soc2")
    root = CORPORA / "strongdm-comply-soc2"
    named = [rel for rel in prepared if rel.split("/")[0] in ("policies", "narratives", "procedures")]
    assert len(named) >= 30
    for rel in named:
        assert prepared[rel].row.title == _name_line(root / rel), rel
    # Before the bare YAML was read, 23 of the 38 documents were titled by their first heading.
    assert not any(p.row.title == "Purpose and Scope" for p in prepared.values())
