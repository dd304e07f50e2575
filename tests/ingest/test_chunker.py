"""Chunking: section boundaries, passage sizes, table and code handling, line spans."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governed_evidence.ingest.chunker import MAX_WORDS, MIN_WORDS, Chunk, chunk_blocks
from governed_evidence.ingest.document import Block
from governed_evidence.ingest.loaders.markdown import parse_markdown


def sentence(tag: str, n: int) -> str:
    """``n`` distinct words ending in a full stop; the first word is capitalised."""
    words = [f"{tag}w{i}" for i in range(n)]
    words[0] = words[0].capitalize()
    return " ".join(words) + "."


def chunks_of(markdown: str) -> list[Chunk]:
    doc = parse_markdown(textwrap.dedent(markdown).lstrip("\n"), "doc")
    return chunk_blocks(doc.blocks)


def test_each_section_of_reasonable_size_is_its_own_passage() -> None:
    chunks = chunks_of(
        f"""
        # Policy

        {sentence("intro", 40)}

        ## Scope

        {sentence("scope", 60)}

        ## Duties

        {sentence("duties", 50)}
        """
    )
    assert [c.headings for c in chunks] == [("Policy",), ("Policy", "Scope"), ("Policy", "Duties")]
    assert chunks[1].text.startswith("## Scope\n\n")
    assert "duties" not in chunks[1].text.lower()
    assert [(c.line_start, c.line_end) for c in chunks] == [(1, 3), (5, 7), (9, 11)]


def test_small_passage_is_merged_forward_under_the_shared_headings() -> None:
    chunks = chunks_of(
        f"""
        # Policy

        ## Scope

        Applies to all.

        ## Duties

        {sentence("duties", 60)}
        """
    )
    # "# Policy" and the short Scope section are too small to stand alone.
    assert len(chunks) == 1
    (chunk,) = chunks
    assert chunk.text.startswith("# Policy\n\n## Scope\n\nApplies to all.\n\n## Duties")
    assert chunk.headings == ("Policy",)
    assert (chunk.line_start, chunk.line_end) == (1, 9)


def test_merged_passage_without_shared_headings_claims_no_section() -> None:
    chunks = chunks_of(
        f"""
        # Introduction

        Short opening line.

        # Obligations

        {sentence("obligation", 70)}
        """
    )
    assert len(chunks) == 1
    # The passage holds text from both top-level sections, so it cannot be cited as either.
    assert chunks[0].headings == ()


def test_no_passage_exceeds_max_words_when_a_section_has_a_short_tail() -> None:
    chunks = chunks_of(
        f"""
        # Rules

        {sentence("long", 190)}

        {sentence("tail", 20)}
        """
    )
    assert all(c.words <= MAX_WORDS for c in chunks)
    # Nothing was lost on the way.
    joined = " ".join(c.text for c in chunks)
    assert "Longw0" in joined and "longw189." in joined and "tailw19." in joined


def test_long_paragraph_is_split_at_sentences_within_max_words() -> None:
    para = " ".join(sentence(f"s{i}", 25) for i in range(20))  # 500 words
    chunks = chunks_of(f"# Handbook\n\n{para}\n")
    body = [c for c in chunks if re.search(r"s\d+w", c.text, re.IGNORECASE)]
    assert len(body) >= 3
    assert all(c.words <= MAX_WORDS for c in chunks)
    assert " ".join(c.text for c in body).endswith(para)
    for c in body:
        # Pieces end at a sentence boundary and stay under their heading.
        assert c.text.rstrip().endswith(".")
        assert c.headings == ("Handbook",)
        # Each piece cites the paragraph's line (and the heading's, if it holds it).
        expected = (1, 3) if c.text.startswith("# Handbook") else (3, 3)
        assert (c.line_start, c.line_end) == expected


def test_run_on_text_without_sentence_ends_is_cut_by_words() -> None:
    para = " ".join(f"word{i}" for i in range(450))
    chunks = chunks_of(f"{para}\n")
    assert [c.words for c in chunks] == [200, 200, 50]
    assert " ".join(c.text for c in chunks) == para


def test_long_markdown_table_repeats_header_and_delimiter_and_never_splits_rows() -> None:
    rows = [f"| item {i} | a description of entry number {i} with several words | owner{i} |" for i in range(60)]
    header = "| Name | Description | Owner |"
    delimiter = "|---|:---|---:|"
    markdown = "# Register\n\n## Assets\n\n" + "\n".join([header, delimiter, *rows]) + "\n"
    chunks = chunks_of(markdown)

    table_chunks = [c for c in chunks if "| item " in c.text]
    assert len(table_chunks) >= 3
    seen: list[str] = []
    for chunk in table_chunks:
        assert chunk.words <= MAX_WORDS
        table_part = chunk.text[chunk.text.index(header) :].split("\n")
        assert table_part[0] == header
        assert table_part[1] == delimiter
        body = table_part[2:]
        # Whole rows only, in source order.
        assert all(r in rows for r in body)
        seen.extend(body)
        # The line span covers this piece's rows.
        numbers = [rows.index(r) + 7 for r in body]
        assert chunk.line_start is not None and chunk.line_end is not None
        assert chunk.line_start <= min(numbers) and chunk.line_end == max(numbers)
    assert seen == rows
    # Only the first piece claims the header lines.
    assert table_chunks[1].line_start == 7 + rows.index(table_chunks[1].text.split("\n")[2])


def test_long_code_fence_stays_in_one_passage() -> None:
    code_lines = [f"step_{i} = run(task_{i}, retries={i})" for i in range(120)]
    fence = "```python\n" + "\n".join(code_lines) + "\n```"
    chunks = chunks_of(f"# Runbook\n\n{sentence('before', 40)}\n\n{fence}\n\n{sentence('after', 40)}\n")
    holding = [c for c in chunks if "step_" in c.text]
    assert len(holding) == 1
    (code,) = holding
    assert fence in code.text
    assert code.words > MAX_WORDS  # the one allowed oversize passage
    assert (code.line_start, code.line_end) == (5, 126)
    assert "beforew" not in code.text and "afterw" not in code.text


def test_pdf_blocks_give_page_spans() -> None:
    blocks = [
        Block("paragraph", sentence("first", 80), ("Scope",), page=3),
        Block("paragraph", sentence("second", 20), ("Scope",), page=4),
        Block("paragraph", sentence("third", 150), ("Scope",), page=4),
    ]
    chunks = chunk_blocks(blocks)
    assert [(c.page_start, c.page_end) for c in chunks] == [(3, 4), (4, 4)]
    assert all(c.line_start is None and c.line_end is None for c in chunks)


# --- properties over generated documents -------------------------------------------------

_TOKEN = re.compile(r"b(\d+)w(\d+)", re.IGNORECASE)


@dataclass
class Generated:
    blocks: list[Block]
    section_of: list[int]  # block index -> section index (as the chunker defines sections)
    header_tokens: set[str]  # table header tokens (repeated by design)


@st.composite
def documents(draw: st.DrawFn) -> Generated:
    blocks: list[Block] = []
    section_of: list[int] = []
    header_tokens: set[str] = set()
    stack: list[tuple[int, str]] = []
    line = 1
    section = -1
    n_sections = draw(st.integers(1, 6))
    for s in range(n_sections):
        level = draw(st.integers(1, 3))
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, f"Heading {s}"))
        path = tuple(t for _, t in stack)
        section += 1
        b = len(blocks)
        blocks.append(Block("heading", f"b{b}w0 b{b}w1", path, line, line))
        section_of.append(section)
        line += 2
        for _ in range(draw(st.integers(0, 4))):
            b = len(blocks)
            kind = draw(st.sampled_from(["paragraph", "paragraph", "list", "table", "code"]))
            if kind == "table":
                n_rows = draw(st.integers(1, 40))
                width = draw(st.integers(2, 12))
                header = [" ".join(f"b{b}w{i}" for i in range(3)), "|---|---|"]
                header_tokens.update(f"b{b}w{i}" for i in range(3))
                rows = []
                for r in range(n_rows):
                    words = " ".join(f"b{b}w{3 + r * width + i}" for i in range(width))
                    rows.append((f"| {words} |", line + 2 + r))
                text = "\n".join([*header, *(r for r, _ in rows)])
                block = Block("table", text, path, line, line + 1 + n_rows, table_header=header, table_rows=rows)
                line += n_rows + 3
            else:
                n_sentences = draw(st.integers(1, 12))
                sizes = [draw(st.integers(1, 60)) for _ in range(n_sentences)]
                parts, k = [], 0
                for size in sizes:
                    words = [f"b{b}w{k + i}" for i in range(size)]
                    words[0] = words[0].capitalize()
                    parts.append(" ".join(words) + ".")
                    k += size
                n_lines = draw(st.integers(1, 5))
                block = Block(kind, " ".join(parts), path, line, line + n_lines - 1)
                line += n_lines + 1
            blocks.append(block)
            section_of.append(section)
    return Generated(blocks, section_of, header_tokens)


def _block_of(token: str) -> int:
    match = _TOKEN.fullmatch(token)
    assert match is not None
    return int(match.group(1))


def _token_lines(block: Block, token: str) -> tuple[int, int] | None:
    """The source lines a token of ``block`` comes from (None for repeated table headers)."""
    assert block.line_start is not None and block.line_end is not None
    if block.kind == "table":
        for row, number in block.table_rows:
            if re.search(rf"\b{token}\b", row):
                assert number is not None
                return number, number
        return None
    return block.line_start, block.line_end


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_chunking_invariants_on_generated_documents(doc: Generated) -> None:
    chunks = chunk_blocks(doc.blocks)
    occurrences: dict[str, int] = {}
    chunks_holding: dict[int, int] = {}
    for chunk in chunks:
        tokens = [m.group(0).lower() for m in _TOKEN.finditer(chunk.text)]
        block_ids = sorted({_block_of(t) for t in tokens})
        assert block_ids, "a passage without text"
        for i in block_ids:
            chunks_holding[i] = chunks_holding.get(i, 0) + 1
        for t in tokens:
            occurrences[t] = occurrences.get(t, 0) + 1

        # Size: only a code fence may exceed MAX_WORDS, and then it stands alone.
        if chunk.words > MAX_WORDS:
            assert len(block_ids) == 1 and doc.blocks[block_ids[0]].kind == "code"

        # Sections: text from any section but the last one in a passage is a small merged remnant.
        sections = [doc.section_of[i] for i in block_ids]
        last = max(sections)
        earlier_words = sum(1 for t in tokens if doc.section_of[_block_of(t)] != last)
        assert earlier_words < MIN_WORDS
        # Headings: the passage is cited under headings every block in it shares.
        for i in block_ids:
            assert doc.blocks[i].headings[: len(chunk.headings)] == chunk.headings
        if len(set(sections)) == 1:
            assert chunk.headings == doc.blocks[block_ids[0]].headings

        # Line span covers every line the passage's text came from.
        assert chunk.line_start is not None and chunk.line_end is not None
        for t in set(tokens):
            block = doc.blocks[_block_of(t)]
            span = _token_lines(block, t)
            if span is not None:
                assert chunk.line_start <= span[0] and span[1] <= chunk.line_end

        # Tables: every piece starts its rows with the full header, rows are whole.
        for i in block_ids:
            block = doc.blocks[i]
            if block.kind == "table":
                head = "\n".join(block.table_header)
                assert head in chunk.text
                for row, _ in block.table_rows:
                    first = row.split()[1]
                    if re.search(rf"\b{first}\b", chunk.text):
                        assert row in chunk.text

    # Nothing lost, nothing duplicated (table headers are repeated on purpose).
    for i, block in enumerate(doc.blocks):
        for m in _TOKEN.finditer(block.text):
            token = m.group(0).lower()
            if token in doc.header_tokens:
                assert occurrences.get(token, 0) >= 1
            elif block.kind == "heading":
                # A heading that ends up in a passage of headings only is dropped with it.
                assert occurrences.get(token, 0) <= 1, (i, token)
            else:
                assert occurrences.get(token) == 1, (i, token)
    # A code fence is never split across passages.
    for i, block in enumerate(doc.blocks):
        if block.kind == "code":
            assert chunks_holding[i] == 1


def test_a_heading_left_alone_is_not_a_passage() -> None:
    # The first piece under "Long" fills a passage by itself, so its heading cannot join it.
    chunks = chunks_of(
        f"""
        # Long

        {sentence("alpha", 200)}
        """
    )
    assert all(c.text.strip() != "# Long" for c in chunks)
    assert chunks and all(c.headings == ("Long",) for c in chunks)
