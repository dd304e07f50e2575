"""PDF loading on real files: page numbers, refusals (scanned, encrypted, damaged), XFA forms."""

from __future__ import annotations

import functools
from pathlib import Path

import pypdf
import pytest

from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.document import Block, LoadedDocument
from governed_evidence.ingest.loaders import load_document
from governed_evidence.ingest.loaders.pdf import load_pdf
from tests.helpers import SHARED_DATA

SAMPLES = SHARED_DATA / "ingest-samples"
TEXT_PDFS = SAMPLES / "pdf-text"
TRICKY_PDFS = SAMPLES / "pdf-scanned-or-tricky"

IRS = "IRS_Publication_5616_Rev2-2024.pdf"
DOD = "DoD_UFC_3-580-01_Telecom_Interior_Infrastructure.pdf"
EU_AI_ACT = "EU_AI_Act_EP_texts_adopted_P9_TA-2023-0236.pdf"
SCANNED = ["c02-22_scanned_page_public_domain.pdf", "skew_scanned_two_column_CC-BY-SA-3.0.pdf"]
XFA_FORM = "GSA_EFT_Enrollment_Form_acroform.pdf"

# (file, phrase as it reads once whitespace is collapsed, 1-based page it is printed on);
# each was checked against the page text pypdf extracts.
KNOWN_PHRASES = [
    (IRS, "are called private foundations", 5),
    (IRS, "DuPont v. Commissioner, 74 T.C. 498", 41),
    (DOD, "must be stamped by a BICSI Registered Communications Distribution Designer", 11),
    (EU_AI_ACT, "Affected persons should always be informed that they are subject to the use", 101),
]


def sample(folder: Path, name: str) -> Path:
    path = folder / name
    if not path.is_file():
        pytest.skip(f"{path} not present")
    return path


@functools.cache
def _load_cached(path: Path) -> LoadedDocument:
    return load_pdf(path, "fallback title")


def loaded(name: str) -> LoadedDocument:
    """Each large PDF is parsed once per session (parsing the three takes seconds)."""
    return _load_cached(sample(TEXT_PDFS, name))


def page_count(path: Path) -> int:
    return len(pypdf.PdfReader(path).pages)


def collapsed_text_by_page(doc: LoadedDocument) -> dict[int, str]:
    """Text by page; a block carrying a sentence over a page break counts for both pages."""
    pages: dict[int, list[str]] = {}
    for block in doc.blocks:
        assert block.page is not None
        for page in range(block.page, (block.page_end or block.page) + 1):
            pages.setdefault(page, []).append(block.text)
    return {page: " ".join(" ".join(texts).split()) for page, texts in pages.items()}


@pytest.mark.parametrize("name", [IRS, DOD, EU_AI_ACT])
def test_text_pdf_blocks_carry_pages_within_the_document(name: str) -> None:
    doc = loaded(name)
    pages = page_count(TEXT_PDFS / name)

    assert doc.format == "pdf"
    assert len(doc.blocks) > 20
    block_pages = [b.page for b in doc.blocks]
    assert all(p is not None and 1 <= p <= pages for p in block_pages)
    # Blocks come in reading order, so their pages never go backwards.
    assert block_pages == sorted(block_pages)  # type: ignore[type-var]
    # A block runs on past its page only to finish a sentence: onto the next page.
    assert all(b.page_end is None or b.page_end == b.page + 1 for b in doc.blocks)  # type: ignore[operator]
    # Text PDFs have a text layer on (nearly) every page.
    covered = {p for b in doc.blocks for p in (b.page, b.page_end) if p is not None}
    assert len(covered) >= 0.9 * pages
    # PDF blocks have no line numbers: a PDF citation is by page.
    assert all(b.line_start is None and b.line_end is None for b in doc.blocks)
    assert all(b.text.strip() for b in doc.blocks)


def test_irs_publication_has_over_a_hundred_pages_of_text() -> None:
    doc = loaded(IRS)
    assert page_count(TEXT_PDFS / IRS) > 100
    assert max(b.page for b in doc.blocks if b.page is not None) > 100
    assert doc.title == "Publication 5616 (Rev. 2-2024)"


@pytest.mark.parametrize(("name", "phrase", "page"), KNOWN_PHRASES)
def test_known_phrase_is_found_on_its_printed_page(name: str, phrase: str, page: int) -> None:
    doc = loaded(name)
    by_page = collapsed_text_by_page(doc)
    assert phrase in by_page[page]
    # Not smeared onto neighbouring pages either, unless the block holding it carries a
    # sentence over the break: then its span names both pages and no more.
    holders = [
        range(b.page or 0, (b.page_end or b.page or 0) + 1)
        for b in doc.blocks
        if phrase in " ".join(b.text.split()) and b.page is not None and b.page <= page <= (b.page_end or b.page)
    ]
    assert len(holders) == 1
    span = holders[0]
    assert page in span and len(span) <= 2
    for neighbour in (page - 1, page + 1):
        if neighbour not in span:
            assert phrase not in by_page.get(neighbour, "")


def block_with(doc: LoadedDocument, phrase: str) -> Block:
    found = [b for b in doc.blocks if phrase in " ".join(b.text.split())]
    assert len(found) == 1, phrase
    return found[0]


@pytest.mark.parametrize(
    ("name", "phrase", "headings"),
    [
        (IRS, "are called private foundations", ("I. Overview",)),
        # Same page, after the "A. Background / History" title line.
        (IRS, "Under Chapter 42, excise taxes are imposed", ("I. Overview", "A. Background / History")),
        # Page 40 starts "C. Taxable Period" and then "D. Correction"; page 41 continues D.
        (IRS, "DuPont v. Commissioner, 74 T.C. 498", ("IV. Other Definitions", "D. Correction")),
        (
            IRS,
            "A.3. Grants to Intermediaries (1) Indirect self-dealing",
            ("III. Other Considerations", "A. Indirect Self-Dealing", "A.3. Grants to Intermediaries"),
        ),
        (DOD, "This UFC applies to all interior", ("INTRODUCTION", "1-2 APPLICABILITY")),
        (
            DOD,
            "Design interior telecommunications infrastructure to meet the needs",
            ("CHAPTER 2  DESIGN REQUIREMENTS", "2-1 GENERAL GUIDANCE"),
        ),
    ],
)
def test_pdf_outline_gives_the_section_a_passage_is_printed_in(
    name: str, phrase: str, headings: tuple[str, ...]
) -> None:
    assert block_with(loaded(name), phrase).headings == headings


def _outline_titles_by_page(path: Path) -> dict[int, set[str]]:
    reader = pypdf.PdfReader(path)
    titles: dict[int, set[str]] = {}

    def walk(items: list[object]) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item)
            else:
                page = reader.get_destination_page_number(item)  # type: ignore[arg-type]
                titles.setdefault(page + 1, set()).add(" ".join(str(item.title).split()))  # type: ignore[attr-defined]

    walk(reader.outline)  # type: ignore[arg-type]
    return titles


@pytest.mark.parametrize("name", [IRS, DOD])
def test_no_block_runs_across_the_start_of_an_outline_section(name: str) -> None:
    doc = loaded(name)
    titles = _outline_titles_by_page(TEXT_PDFS / name)
    assert sum(len(t) for t in titles.values()) > 50
    starting = 0
    for block in doc.blocks:
        assert block.page is not None
        on_page = titles.get(block.page, set())
        lines = [" ".join(line.split()) for line in block.text.split("\n")]
        # A section title can only open a block, and that block is cited under it.
        assert not any(line in on_page for line in lines[1:]), (block.page, lines[:3])
        if lines[0] in on_page:
            starting += 1
            assert " ".join(block.headings[-1].split()) == lines[0]
    assert starting > 30


@pytest.mark.parametrize("name", SCANNED)
def test_scanned_pdf_is_refused_for_having_no_text_layer(name: str) -> None:
    path = sample(TRICKY_PDFS, name)
    with pytest.raises(FileRejectedError, match="no extractable text layer"):
        load_pdf(path, "scan")
    # The same through the suffix dispatcher the pipeline uses.
    with pytest.raises(FileRejectedError, match="OCR is not supported"):
        load_document(path, "scan")


def test_xfa_form_yields_static_text_and_a_warning() -> None:
    doc = load_pdf(sample(TRICKY_PDFS, XFA_FORM), "eft form")
    text = " ".join(" ".join(b.text for b in doc.blocks).split())
    assert "ELECTRONIC FUNDS TRANSFER" in text.upper()
    assert len(text) > 300
    assert any("XFA" in w for w in doc.warnings)
    assert {b.page for b in doc.blocks} == {1}


def test_text_pdf_without_xfa_has_no_xfa_warning() -> None:
    assert not any("XFA" in w for w in loaded(DOD).warnings)


def _one_page_pdf(tmp_path: Path, name: str, *, user_password: str | None, algorithm: str = "RC4-128") -> Path:
    source = pypdf.PdfReader(sample(TEXT_PDFS, DOD))
    writer = pypdf.PdfWriter()
    writer.add_page(source.pages[10])
    if user_password is not None:
        writer.encrypt(user_password=user_password, owner_password="owner-pass", algorithm=algorithm)
    out = tmp_path / name
    with out.open("wb") as fh:
        writer.write(fh)
    return out


@pytest.mark.parametrize("algorithm", ["RC4-128", "AES-256"])
def test_password_protected_pdf_is_refused_as_encrypted(tmp_path: Path, algorithm: str) -> None:
    path = _one_page_pdf(tmp_path, "locked.pdf", user_password="s3cret", algorithm=algorithm)
    assert pypdf.PdfReader(path).is_encrypted
    with pytest.raises(FileRejectedError, match="encrypted"):
        load_pdf(path, "locked")


def test_pdf_encrypted_with_an_empty_user_password_is_read(tmp_path: Path) -> None:
    path = _one_page_pdf(tmp_path, "owner-only.pdf", user_password="")
    assert pypdf.PdfReader(path).is_encrypted
    doc = load_pdf(path, "owner only")
    assert "BICSI" in " ".join(b.text for b in doc.blocks)
    assert {b.page for b in doc.blocks} == {1}


@pytest.mark.parametrize("name", [IRS, DOD, EU_AI_ACT])
@pytest.mark.parametrize("fraction", [0.5, 0.05])
def test_truncated_pdf_is_refused_or_read_never_crashes(tmp_path: Path, name: str, fraction: float) -> None:
    data = sample(TEXT_PDFS, name).read_bytes()
    path = tmp_path / "truncated.pdf"
    path.write_bytes(data[: int(len(data) * fraction)])
    # Any exception other than FileRejectedError fails the test.
    try:
        doc = load_pdf(path, "truncated")
    except FileRejectedError as exc:
        assert "PDF" in str(exc)
    else:
        assert doc.blocks and all(b.text.strip() for b in doc.blocks)


def test_truncated_pdf_with_its_trailer_kept_is_refused_or_read(tmp_path: Path) -> None:
    data = sample(TEXT_PDFS, DOD).read_bytes()
    path = tmp_path / "holed.pdf"
    path.write_bytes(data[: len(data) // 2] + data[-2000:])
    try:
        doc = load_pdf(path, "holed")
    except FileRejectedError as exc:
        assert str(exc)
    else:
        assert all(b.page is not None for b in doc.blocks)


def test_file_that_is_not_a_pdf_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "fake.pdf"
    path.write_text("This is a plain text file wearing a .pdf suffix.\n")
    with pytest.raises(FileRejectedError, match="PDF"):
        load_pdf(path, "fake")
