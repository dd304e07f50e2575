"""HTML loading on real pages written here: the main content only, headings as sections,
tables with their header words, line spans that point into the source file."""

from __future__ import annotations

import textwrap
from pathlib import Path

import lxml.html
import pytest

from governed_evidence.config import Classification
from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.document import Block
from governed_evidence.ingest.loaders import html as html_loader
from governed_evidence.ingest.loaders import load_document
from governed_evidence.ingest.pipeline import ingest_corpus
from governed_evidence.store.connection import connect
from tests.helpers import HashEmbedder

#: An intranet page as a content management system renders one: every kind of boilerplate
#: around the content, each carrying a word that appears nowhere else.
INTRANET_PAGE = """\
<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Travel and expenses | Finance intranet</title>
  <style>body { font-family: stylesheetword, sans-serif; }</style>
  <script>window.analytics = "scriptword";</script>
</head>
<body>
  <header class="site-header">
    <a href="/">Bannerword home</a>
    <nav><ul><li><a href="/hr">Navword people</a></li><li><a href="/it">Navword helpdesk</a></li></ul></nav>
  </header>
  <div id="onetrust-banner-sdk" class="cookie-consent">
    <p>We use cookieword cookies to improve your experience on this intranet site.</p>
    <button>Accept all</button>
  </div>
  <aside class="related"><h3>Related</h3><p>Asideword links to other policies you may like.</p></aside>
  <div class="layout">
    <div class="breadcrumbs"><a href="/">Home</a> &gt; <a href="/finance">Crumbword</a></div>
    <h1>Travel and expenses</h1>
    <p>This policy explains how staff book travel and claim expenses, and what the
    organisation reimburses for hotels, meals and rail fares on business trips.</p>
    <p hidden>Hiddenword draft paragraph that editors keep for later.</p>
    <h2>Hotels</h2>
    <p>Book hotels through the travel portal. The nightly limit depends on the city,
    as listed in the table below, and includes breakfast where the hotel offers it.</p>
    <table>
      <thead><tr><th>City</th><th>Nightly limit (EUR)</th></tr></thead>
      <tbody>
        <tr><td>Paris</td><td>210</td></tr>
        <tr><td>Berlin</td><td>165</td></tr>
      </tbody>
    </table>
    <h3>Long stays</h3>
    <p>Stays of more than fourteen nights are booked as serviced apartments, with the
    approval of the budget holder before the booking is made. The apartment must be within
    thirty minutes of the office by public transport.</p>
    <h2>Meals</h2>
    <p>Meals are reimbursed up to a daily allowance of 45 euros, with itemised receipts
    from the restaurant or shop, for every full day of travel away from the office and for
    evenings when a meeting runs late.<br>Alcohol is never reimbursed.</p>
    <form class="feedback"><label>Was this page useful?</label><input type="text" value="inputword"></form>
  </div>
  <footer><p>Footerword: copyright of the finance directorate.</p></footer>
  <script src="/static/site.js"></script>
  <noscript>Noscriptword: enable JavaScript.</noscript>
</body>
</html>
"""
BOILERPLATE_WORDS = [
    "stylesheetword", "scriptword", "bannerword", "navword", "cookieword", "accept all", "asideword",
    "crumbword", "hiddenword", "footerword", "noscriptword", "inputword", "was this page useful",
]  # fmt: skip


def write_page(path: Path, html: str, encoding: str = "utf-8") -> Path:
    path.write_bytes(html.encode(encoding))
    return path


def texts(blocks: list[Block]) -> str:
    return "\n".join(b.text for b in blocks).lower()


def test_only_the_main_content_is_read(tmp_path: Path) -> None:
    doc = load_document(write_page(tmp_path / "travel.html", INTRANET_PAGE), "fallback")
    assert doc.format == "html"
    assert doc.title == "Travel and expenses | Finance intranet"
    found = texts(doc.blocks)
    for word in BOILERPLATE_WORDS:
        assert word not in found, word
    assert "serviced apartments" in found and "daily allowance of 45 euros" in found


def test_headings_become_sections_and_tables_keep_their_header_words(tmp_path: Path) -> None:
    doc = load_document(write_page(tmp_path / "travel.html", INTRANET_PAGE), "fallback")
    assert [(b.kind, b.headings) for b in doc.blocks if b.kind == "heading"] == [
        ("heading", ("Travel and expenses",)),
        ("heading", ("Travel and expenses", "Hotels")),
        ("heading", ("Travel and expenses", "Hotels", "Long stays")),
        ("heading", ("Travel and expenses", "Meals")),
    ]
    table = next(b for b in doc.blocks if b.kind == "table")
    assert table.headings == ("Travel and expenses", "Hotels")
    assert table.text == "City: Paris | Nightly limit (EUR): 210\nCity: Berlin | Nightly limit (EUR): 165"
    assert [row for row, _ in table.table_rows] == table.text.split("\n")
    meals = next(b for b in doc.blocks if "daily allowance" in b.text)
    # Source line breaks are spaces; a <br> is a line break.
    assert meals.text.endswith("evenings when a meeting runs late.\nAlcohol is never reimbursed.")


def test_line_spans_point_at_the_source_file(tmp_path: Path) -> None:
    path = write_page(tmp_path / "travel.html", INTRANET_PAGE)
    source = path.read_text().splitlines()
    doc = load_document(path, "fallback")
    for block in doc.blocks:
        assert block.line_start is not None and block.line_end is not None
        cited = " ".join(source[block.line_start - 1 : block.line_end])
        first_words = block.text.split("\n")[0].split(":")[0].split()[:3]
        assert all(word in cited for word in first_words), (block.text, cited)
    table = next(b for b in doc.blocks if b.kind == "table")
    rows = {row: line for row, line in table.table_rows}
    assert "Paris" in source[rows["City: Paris | Nightly limit (EUR): 210"] - 1]  # type: ignore[operator]
    paragraph = next(b for b in doc.blocks if b.text.startswith("This policy explains"))
    # A paragraph wrapped over two source lines is cited for both.
    assert paragraph.line_end == paragraph.line_start + 1  # type: ignore[operator]


def test_citations_name_the_heading_and_the_source_lines(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    path = write_page(corpus / "travel.html", INTRANET_PAGE)
    db = tmp_path / "index.sqlite"
    ingest_corpus(corpus, db, HashEmbedder(), ceiling=Classification.RESTRICTED, progress=None)
    conn = connect(db, readonly=True)
    try:
        rows = conn.execute("SELECT citation_id, heading, line_start, line_end, text FROM passages").fetchall()
    finally:
        conn.close()
    source = path.read_text().splitlines()
    assert len(rows) >= 2
    for cid, heading, start, end, text in rows:
        # The citation is named by the passage's innermost heading and cites its source lines.
        section = heading.split(" > ")[-1].lower().replace(" ", "-")
        assert cid.split("~")[0] == f"travel.html#{section}:L{start}-{end}"
        assert text.split()[0] in " ".join(source[start - 1 : end])
    table = next(r for r in rows if "City: Paris | Nightly limit (EUR): 210" in r[4])
    paris_line = next(n for n, line in enumerate(source, 1) if "<td>Paris</td>" in line)
    assert table[2] <= paris_line <= table[3]
    assert any(r[1] == "Travel and expenses > Meals" and r[0].startswith("travel.html#meals:L") for r in rows)


def test_a_form_around_the_whole_page_is_kept(tmp_path: Path) -> None:
    # ASP.NET pages (SharePoint's among them) put the whole page inside one form.
    page = """<html><head><title>Leave</title></head><body><form id="aspnetForm" action="/leave.aspx">
      <div id="s4-workspace"><h1>Leave policy</h1>
      <p>Full-time staff receive twenty-five days of annual leave each year, plus public holidays.</p>
      <p>Leave is requested through the people portal at least two weeks before it starts.</p></div>
    </form></body></html>"""
    found = texts(load_document(write_page(tmp_path / "leave.html", page), "leave").blocks)
    assert "twenty-five days of annual leave" in found and "people portal" in found


def test_a_page_that_marks_its_main_content_is_taken_at_its_word(tmp_path: Path) -> None:
    page = textwrap.dedent(
        """\
        <html><head><title>Leave</title></head><body>
        <div class="masthead">Mastword: the people team site, with news and events for all staff members.</div>
        <main>
          <article>
            <header><h1>Leave policy</h1><p class="byline">Owned by the people team</p></header>
            <p>Full-time staff receive twenty-five days of annual leave each year.</p>
            <nav class="toc"><a href="#a">Tocword contents</a></nav>
          </article>
        </main>
        <div class="promo">Promoword: read about the staff summer party, with photos and a long report.</div>
        </body></html>
        """
    )
    doc = load_document(write_page(tmp_path / "leave.html", page), "fallback")
    found = texts(doc.blocks)
    # The article's own header (its title and byline) is content; the page's is not.
    assert "owned by the people team" in found and "twenty-five days" in found
    assert [b.headings for b in doc.blocks if b.kind == "heading"] == [("Leave policy",)]
    for word in ("mastword", "promoword", "tocword"):
        assert word not in found


def test_an_exported_page_without_landmarks_goes_through_readability(tmp_path: Path) -> None:
    # The shape of a Confluence export: div soup, a breadcrumb trail, page metadata, a
    # footer div, a table with a spanning cell; encoded in Windows-1252, declared in <meta>.
    page = textwrap.dedent(
        """\
        <html><head><title>Space : Remote work</title>
        <meta http-equiv="Content-Type" content="text/html; charset=windows-1252"></head>
        <body class="theme-default">
        <div id="page"><div id="main" class="aui-page-panel">
        <div id="main-header">
        <div id="breadcrumb-section"><ol id="breadcrumbs"><li><a href="index.html">Crumbword</a></li></ol></div>
        <h1 id="title-heading" class="pagetitle">Remote work</h1>
        </div>
        <div id="content" class="view">
        <div class="page-metadata">Metaword: created by Jane Smith, last modified on 01 March 2024</div>
        <div id="main-content" class="wiki-content group">
        <h2 id="RemoteWork-Eligibility">Eligibility</h2>
        <p>Staff may work remotely up to three days a week with their manager’s agreement, once probation has ended.</p>
        <h2 id="RemoteWork-Equipment">Equipment</h2>
        <div class="table-wrap"><table class="confluenceTable"><tbody>
        <tr><th class="confluenceTh"><p>Item</p></th><th class="confluenceTh"><p>Allowance</p></th></tr>
        <tr><td class="confluenceTd" rowspan="2"><p>Desk setup</p></td>
        <td class="confluenceTd"><p>One monitor up to 250 euros</p></td></tr>
        <tr><td class="confluenceTd"><p>One chair up to 300 euros</p></td></tr>
        </tbody></table></div>
        <p>Equipment remains the property of the organisation and is returned when the employee leaves.</p>
        </div></div></div>
        <div id="footer"><section class="footer-body"><p>Footerword: generated by Confluence</p></section></div>
        </div></body></html>
        """
    )
    doc = load_document(write_page(tmp_path / "remote.html", page, "cp1252"), "fallback")
    found = texts(doc.blocks)
    assert "manager’s agreement" in found
    for word in ("crumbword", "metaword", "footerword"):
        assert word not in found
    table = next(b for b in doc.blocks if b.kind == "table")
    # The spanning cell names both rows it spans.
    assert table.text.split("\n") == [
        "Item: Desk setup | Allowance: One monitor up to 250 euros",
        "Item: Desk setup | Allowance: One chair up to 300 euros",
    ]
    assert table.headings == ("Equipment",)


def test_utf8_without_a_declaration_is_read_as_utf8(tmp_path: Path) -> None:
    page = "<html><body><main><p>Café receipts in € are accepted for every meal.</p></main></body></html>"
    doc = load_document(write_page(tmp_path / "cafe.html", page), "Café")
    assert doc.blocks[0].text == "Café receipts in € are accepted for every meal."
    assert doc.title == "Café"


def test_grouped_header_rows_name_each_column(tmp_path: Path) -> None:
    page = """<html><body><main><table>
      <thead>
        <tr><th rowspan="2">City</th><th colspan="2">Limit (EUR)</th></tr>
        <tr><th>Hotel</th><th>Meals</th></tr>
      </thead>
      <tr><td>Paris</td><td>210</td><td>45</td></tr>
    </table></main></body></html>"""
    doc = load_document(write_page(tmp_path / "grouped.html", page), "grouped")
    assert doc.blocks[0].text == "City: Paris | Limit (EUR) Hotel: 210 | Limit (EUR) Meals: 45"


def test_a_layout_table_is_read_as_content(tmp_path: Path) -> None:
    page = """<html><body><main><table><tr>
      <td><h2>Claims</h2><p>Claims are filed within thirty days of the journey.</p></td>
      <td><h2>Receipts</h2><p>Receipts are kept for seven years by the finance team.</p></td>
    </tr></table></main></body></html>"""
    doc = load_document(write_page(tmp_path / "layout.html", page), "layout")
    assert [(b.kind, b.headings, b.text) for b in doc.blocks] == [
        ("heading", ("Claims",), "Claims"),
        ("paragraph", ("Claims",), "Claims are filed within thirty days of the journey."),
        ("heading", ("Receipts",), "Receipts"),
        ("paragraph", ("Receipts",), "Receipts are kept for seven years by the finance team."),
    ]


def test_a_page_about_cookies_is_not_taken_for_a_cookie_banner(tmp_path: Path) -> None:
    page = """<html><body><div class="cookie-policy"><h1>Cookie policy</h1>
      <p>This intranet sets one session cookie, which expires when the browser is closed.</p>
    </div></body></html>"""
    doc = load_document(write_page(tmp_path / "cookies.html", page), "cookies")
    assert "one session cookie" in texts(doc.blocks)


def test_entity_declarations_are_refused_and_the_parser_would_not_expand_them(tmp_path: Path) -> None:
    entities = '<!ENTITY a "aaaaaaaaaa">' + "".join(
        f'<!ENTITY {chr(98 + n)} "{f"&{chr(97 + n)};" * 10}">' for n in range(8)
    )
    page = f"<!DOCTYPE html [{entities}]><html><body><main><p>Bomb: &i; end.</p></main></body></html>"
    path = write_page(tmp_path / "lol.html", page)
    with pytest.raises(FileRejectedError, match="HTML declares XML entities"):
        load_document(path, "lol")
    # Were the declaration let through, lxml's HTML parser would keep the reference as text.
    parsed = lxml.html.document_fromstring(path.read_bytes()).text_content()
    assert "&i;" in parsed and "aaaaaaaaaa" * 2 not in parsed


def test_oversized_page_is_refused_before_parsing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(html_loader, "MAX_HTML_BYTES", 1_000)
    with pytest.raises(FileRejectedError, match=r"HTML page is \d+ bytes, over the 1000-byte limit for HTML"):
        load_document(write_page(tmp_path / "big.html", INTRANET_PAGE), "big")


def test_page_parse_is_paced_by_the_processor_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(html_loader, "CPU_BASE_SECONDS", 0.0)
    monkeypatch.setattr(html_loader, "CPU_SECONDS_PER_MIB", 0.0)
    with pytest.raises(FileRejectedError, match="HTML exceeded the per-file processor budget"):
        load_document(write_page(tmp_path / "travel.html", INTRANET_PAGE), "travel")


def test_page_with_nothing_but_boilerplate_is_refused(tmp_path: Path) -> None:
    page = "<html><body><nav><a href='/'>Home</a></nav><footer>Copyright</footer></body></html>"
    with pytest.raises(FileRejectedError, match="HTML has no text"):
        load_document(write_page(tmp_path / "empty.html", page), "empty")


def test_nesting_past_the_parsers_limit_is_refused_not_cut_short(tmp_path: Path) -> None:
    # libxml2 stops at 256 levels and returns what it read so far: the page would lose the rest.
    depth = 300
    page = "<html><body><main>" + "<div>" * depth + "<p>Deep policy text.</p>" + "</div>" * depth
    page += "<p>Text after the deep part.</p></main></body></html>"
    with pytest.raises(FileRejectedError, match="HTML goes past the parser's limits"):
        load_document(write_page(tmp_path / "deep.html", page), "deep")
    shallow = page.replace("<div>" * depth, "<div>" * 200).replace("</div>" * depth, "</div>" * 200)
    found = texts(load_document(write_page(tmp_path / "shallow.html", shallow), "shallow").blocks)
    assert "deep policy text." in found and "text after the deep part." in found
