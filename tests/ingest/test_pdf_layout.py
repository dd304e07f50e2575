"""What pypdf's page text carries that is not the document: running headers, page breaks inside
sentences, wrapped lines that look like headings. Built from page text directly (the loader's
``_build`` takes what the parser child returns), so each case is exact; the real PDFs are in
test_loaders_pdf.py."""

from __future__ import annotations

from governed_evidence.ingest.chunker import chunk_blocks
from governed_evidence.ingest.document import LoadedDocument
from governed_evidence.ingest.loaders.pdf import _build, _Extracted, running_lines, strip_running

HEADER = "UFC 3-580-01\n01 Jun 2016"


def build(pages: list[str], outline: dict[int, list[list[str]]] | None = None) -> LoadedDocument:
    return _build(_Extracted(list(pages), outline or {}, False, None), "fallback")


def texts(doc: LoadedDocument) -> list[str]:
    return [" ".join(b.text.split()) for b in doc.blocks]


def page(n: int, body: str) -> str:
    return f"{HEADER}\n{body}\nPage {n} of 6"


def numbered(n: int, body: str) -> str:
    """A page with only a page number: too few pages here for a running header to be learnt."""
    return f"{n}\n{body}\nPage {n}"


def test_running_headers_and_page_numbers_are_dropped_but_numbered_content_is_kept() -> None:
    pages = [page(n, f"Amendment {n}\nThe clause number {n} reads as follows and is complete.") for n in range(1, 7)]
    assert running_lines(pages) >= {"ufc 3-580-01", "01 jun 2016"}
    doc = build(pages)
    joined = " ".join(texts(doc))
    assert "UFC 3-580-01" not in joined and "01 Jun 2016" not in joined and "of 6" not in joined
    # "Amendment 1".."Amendment 6" differ page to page: content, not a running header.
    assert all(f"Amendment {n}" in joined for n in range(1, 7))


def test_a_line_repeated_on_few_pages_is_not_a_running_header() -> None:
    pages = ["Scope\nText one.", "Scope\nText two.", "Other\nText three.", "Other\nText four.", "Last\nFive."]
    assert running_lines(pages) == set()  # each repeats on 2 of 5 pages, under the 3-page minimum
    assert strip_running("12\nBody line.\niv", set()) == "Body line."  # lone page numbers go anyway


def test_a_sentence_over_a_page_break_is_one_block_citing_both_pages() -> None:
    doc = build(
        [
            numbered(1, "Opening sentence here. Every visitor must sign in at the desk and show a badge issued by"),
            numbered(2, "the security office. A new sentence starts the page's own text."),
        ]
    )
    first = next(b for b in doc.blocks if "Every visitor" in b.text)
    assert " ".join(first.text.split()).endswith("issued by the security office.")
    assert (first.page, first.page_end) == (1, 2)
    rest = next(b for b in doc.blocks if "A new sentence" in b.text)
    assert (rest.page, rest.page_end) == (2, None), "only the open sentence's end joins the previous page"
    chunks = chunk_blocks(doc.blocks)
    assert (chunks[0].page_start, chunks[0].page_end) == (1, 2)


def test_a_finished_sentence_or_a_capital_start_is_not_joined() -> None:
    doc = build([numbered(1, "The first page ends properly."), numbered(2, "the next page starts in lower case.")])
    assert [(b.page, b.page_end) for b in doc.blocks] == [(1, None), (2, None)]
    doc = build([numbered(1, "A list of things without a stop"), numbered(2, "Another Item Starts Here.")])
    assert [(b.page, b.page_end) for b in doc.blocks] == [(1, None), (2, None)]


def test_a_block_runs_over_one_page_break_at_most() -> None:
    doc = build(
        [
            numbered(1, "The following tasks are listed:\na) support, advise and cooperate with"),
            numbered(2, "the Member States\nb) monitor and report on"),
            numbered(3, "the application of this regulation;\nc) nothing else."),
        ]
    )
    assert all(b.page_end is None or b.page_end == (b.page or 0) + 1 for b in doc.blocks)
    assert {p for b in doc.blocks for p in (b.page, b.page_end) if p} == {1, 2, 3}


def test_a_wrapped_line_is_not_taken_for_a_heading_without_an_outline() -> None:
    doc = build(
        [
            "Article 5\nProhibited practices are listed here in full.\n"
            "8. When Union institutions, agencies\nand bodies fall within the scope, they act.\n"
            "Regulation (EC) No 300/2008 of the\nEuropean Parliament applies as well."
        ]
    )
    headings = [b.text for b in doc.blocks if b.kind == "heading"]
    assert headings == ["Article 5"]
    assert any("8. When Union institutions, agencies and bodies fall" in t for t in texts(doc))
