"""Regression tests for served fields the security review's tests (#17) do not reach.

``tests/hardening/test_review_findings.py`` checks invisible characters in the document,
citation id, title, heading, text and superseded_by of Markdown, DOCX and PDF files. Two
carriers came later and are checked here, on every string of every answer (not a hand list
of fields):

- ``owner`` from a document's front matter (served on every result, passage and source
  listing since the lifecycle fields landed): each invisible class is stripped, and a
  credential-shaped owner refuses the file without storing it;
- HTML, XLSX and PPTX titles, headings, cells and notes (loaders added after the review).

And item 5's "check paths" for a folder rather than a file name: a credential-shaped
folder refuses the files under it, and neither the index nor the report holds it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from openpyxl import Workbook
from pptx import Presentation
from pptx.util import Inches

from governed_evidence.invisible import find_invisible
from tests.hardening import figures
from tests.hardening.probes import strings_in
from tests.hardening.test_review_findings import (
    ACCESS_KEY,
    INVISIBLE_CLASSES,
    PUBLIC,
    _answers,
    _citation_ids,
    _documents,
    _index_bytes,
    _ingest,
    _marker_leaks,
    _serving,
)
from tests.helpers import write

GOOD = "# Canteen\n\nThe canteen opens at noon on weekdays.\n"
PROSE = (
    "Visitors to the depot park in the marked bays beside the gatehouse and sign the register at the "
    "front desk, where the duty officer issues a day badge and explains the fire assembly point."
)


def _owner_doc(x: str) -> str:
    return (
        f'---\ntitle: "Depot{x} visitors"\nowner: "Facilities{x} Team"\n---\n'
        f"# Depot visitors\n\n{PROSE}\n\n## Parking\n\n{PROSE} Bays are allocated by the facilities team.\n"
    )


def _html(path: Path, x: str) -> None:
    paras = "".join(f"<p>{PROSE} Paragraph {i} of the harbour{x} notice.</p>" for i in range(4))
    path.write_text(
        f"<!doctype html><html><head><title>Harbour{x} notice</title></head><body><main>"
        f"<h1>Harbour{x} notice</h1>{paras}<h2>Mooring{x} fees</h2>{paras}</main></body></html>",
        encoding="utf-8",
    )


def _xlsx(path: Path, x: str) -> None:
    book = Workbook()
    sheet = book.active
    sheet.title = f"Fees{x}"
    sheet.append([f"Berth{x} type", f"Daily{x} fee", "Notes"])
    for i in range(6):
        sheet.append([f"Pontoon{x} {i}", 10 + i, f"Payable{x} at the harbour office"])
    book.properties.title = f"Berth{x} fees"
    book.save(path)


def _pptx(path: Path, x: str) -> None:
    deck = Presentation()
    deck.core_properties.title = f"Ferry{x} induction"
    for i in range(2):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"Ferry{x} safety {i}"
        slide.placeholders[1].text = f"Crew{x} check the life jackets before every crossing. {PROSE}"
        slide.notes_slide.notes_text_frame.text = f"Remind{x} the crew about the muster drill."
        slide.shapes.add_textbox(Inches(1), Inches(6), Inches(4), Inches(1)).text_frame.text = f"Deck{x} plan"
    deck.save(path)


#: carrier -> query that finds it.
CARRIERS = {
    "public/owned.md": "depot visitors park bays gatehouse register",
    "public/harbour.html": "harbour notice mooring fees",
    "public/fees.xlsx": "berth pontoon daily fee harbour office",
    "public/ferry.pptx": "ferry crew life jackets crossing muster drill",
}


@pytest.mark.filterwarnings("ignore:Title is more than 31 characters")
@pytest.mark.parametrize("kind", list(INVISIBLE_CLASSES))
def test_invisible_characters_in_owner_and_office_html_carriers_are_never_served(tmp_path: Path, kind: str) -> None:
    x = INVISIBLE_CLASSES[kind]
    corpus = tmp_path / "corpus"
    write(corpus, "public/good.md", GOOD)
    write(corpus, "public/owned.md", _owner_doc(x))
    _html(corpus / "public/harbour.html", x)
    _xlsx(corpus / "public/fees.xlsx", x)
    _pptx(corpus / "public/ferry.pptx", x)
    db = tmp_path / "index.sqlite"
    report = _ingest(corpus, db)
    indexed = _documents(db)
    missing = [rel for rel in CARRIERS if rel not in indexed]
    assert not missing, f"carriers not indexed: {missing}; rejected: {report.rejected}"

    with _serving(db, PUBLIC) as service:
        answers = _answers(service, list(CARRIERS.values()), _citation_ids(db))
    served: list[str] = []
    strings = 0
    owners: set[str] = set()
    for label, answer in answers:
        dumped = answer.model_dump(mode="json")
        for value in strings_in(dumped):
            strings += 1
            hidden = find_invisible(value)
            if hidden:
                served.append(f"{label}: {value[:60]!a} carries {hidden}")
        owners |= {str(v) for v in _owners(dumped)}
    served += [f"report: {s[:60]!a}" for s in strings_in(report.as_dict()) if find_invisible(s)]

    figures.add("review gaps: served strings checked for invisible characters", strings)
    figures.add("review gaps: invisible characters served", len(served))
    assert served == [], f"{len(served)} served string(s) carry invisible characters ({kind}):\n" + "\n".join(
        served[:10]
    )
    # The planted owner really is served (else the check proves little about that field).
    assert any(" ".join(o.split()) == "Facilities Team" for o in owners), f"the owner was not served: {owners}"


def _owners(value: object) -> list[object]:
    """Every value of an ``owner`` key in a JSON-like answer."""
    found: list[object] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "owner" and v is not None:
                found.append(v)
            found += _owners(v)
    elif isinstance(value, list):
        for v in value:
            found += _owners(v)
    return found


def test_a_credential_shaped_owner_is_refused_and_never_stored(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, "public/good.md", GOOD)
    rel = "public/keyed-owner.md"
    write(corpus, rel, f"---\ntitle: Depot visitors\nowner: {ACCESS_KEY}\n---\n# Depot visitors\n\n{PROSE}\n")
    db = tmp_path / "index.sqlite"
    report = _ingest(corpus, db)

    leaks: list[str] = []
    if ACCESS_KEY.lower().encode() in _index_bytes(db):
        leaks.append("the index file holds the access key")
    if ACCESS_KEY.lower() in json.dumps(report.as_dict()).lower():
        leaks.append("the ingest report holds the access key")
    with _serving(db, PUBLIC) as service:
        answers = _answers(service, ["depot visitors park bays"], _citation_ids(db))
    leaks += _marker_leaks(answers, [ACCESS_KEY], "public")
    figures.add("review gaps: credentials stored or served", len(leaks))
    assert leaks == [], "\n".join(leaks)
    assert "credential" in dict(report.rejected).get(rel, ""), report.rejected
    assert "public/good.md" in _documents(db)


def test_a_credential_shaped_folder_name_is_refused_and_never_echoed(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    write(corpus, "public/good.md", GOOD)
    write(corpus, f"public/{ACCESS_KEY}/notes.md", f"# Depot visitors\n\n{PROSE}\n")
    db = tmp_path / "index.sqlite"
    report = _ingest(corpus, db)

    leaks: list[str] = []
    if ACCESS_KEY.lower().encode() in _index_bytes(db):
        leaks.append("the index file holds the access key")
    if ACCESS_KEY.lower() in json.dumps(report.as_dict()).lower():
        leaks.append("the ingest report holds the access key")
    with _serving(db, PUBLIC) as service:
        answers = _answers(service, ["depot visitors park bays", ACCESS_KEY], _citation_ids(db))
    leaks += _marker_leaks(answers, [ACCESS_KEY], "public")
    figures.add("review gaps: credentials stored or served", len(leaks))
    assert leaks == [], "\n".join(leaks)
    assert len(report.rejected) == 1 and "credential" in report.rejected[0][1], report.rejected
    assert set(_documents(db)) == {"public/good.md"}


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("[a.md, b.md]", "must be the path"),
        ("{path: a.md}", "must be the path"),
        ("7", "must be the path"),
        ("x" * 2000, "longer than 1024"),
    ],
    ids=["list", "mapping", "number", "over-1024-chars"],
)
def test_superseded_by_must_be_one_short_string(tmp_path: Path, value: str, reason: str) -> None:
    # Item 7 ("accept only string values"): no structure of any size reaches str(), and a
    # string is a path, not a document.
    corpus = tmp_path / "corpus"
    write(corpus, "public/good.md", GOOD)
    rel = "public/old.md"
    write(corpus, rel, f"---\ntitle: Old visitors\nsuperseded_by: {value}\n---\n# Old visitors\n\n{PROSE}\n")
    report = _ingest(corpus, tmp_path / "index.sqlite")
    assert reason in dict(report.rejected).get(rel, ""), report.rejected
    assert set(_documents(tmp_path / "index.sqlite")) == {"public/good.md"}
