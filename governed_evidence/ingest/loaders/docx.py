"""Word documents via docx2python: heading styles and tables kept.

Positions are paragraph numbers in the extracted text (reported as ``lines``), since a
DOCX has no stable pages.

A DOCX is a zip archive, so one small file can expand to gigabytes. The archive is judged
by its directory before anything is decompressed (member count, declared sizes,
compression ratios); then only the parts docx2python reads for text (the relationship
files, the main document, numbering and core properties) are decompressed, into memory,
through a cap that counts the bytes actually produced rather than trusting the declared
sizes. Media, fonts and embedded objects are never decompressed. The parse itself runs in
a child process under the per-file memory and processor budgets (``bounded``), since
docx2python builds 30-40 bytes of objects for every byte of XML.
"""

from __future__ import annotations

import io
import re
import warnings
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

from governed_evidence.errors import FileRejectedError
from governed_evidence.ingest.document import Block, BlockKind, LoadedDocument
from governed_evidence.ingest.guards import sanitize
from governed_evidence.ingest.loaders.bounded import limit_cpu, run_bounded

__all__ = [
    "CPU_BASE_SECONDS",
    "CPU_SECONDS_PER_MIB",
    "MAX_COMPRESSION_RATIO",
    "MAX_MEMBERS",
    "MAX_PARSED_BYTES",
    "MAX_UNCOMPRESSED_BYTES",
    "load_docx",
]

#: Declared size of the whole archive, media included. Word documents with many images
#: stay well under this; more is refused before anything is decompressed.
MAX_UNCOMPRESSED_BYTES = 200 * 1024 * 1024
#: Word writes one member per part: tens for a typical document, a few hundred with many
#: images. Thousands mean a crafted archive (each entry also costs directory parsing).
MAX_MEMBERS = 5_000
#: Word's XML deflates 5-30:1 (the samples: at most 24:1; one real body repeated a
#: hundred times: 29:1). Hundreds to one takes long runs of one repeated fragment, which is
#: what the padding of a compression bomb is; deflate itself cannot exceed about 1032:1,
#: so a larger declared ratio is a falsified size.
MAX_COMPRESSION_RATIO = 200
#: Members smaller than this are not judged by ratio: small parts have noisy ratios and
#: cannot expand to much anyway.
_RATIO_FLOOR_BYTES = 1024 * 1024
#: XML handed to the parser (relationships, main document, numbering, core properties),
#: counted as decompressed. docx2python needs 30-40 bytes of memory per byte of XML (13 MB:
#: 400 MiB; 22 MB: 820 MiB, 63 s), so 20 MiB, a document of thousands of pages, stays
#: inside the 1 GiB per-file memory budget and the 120 s processor budget; a larger one is
#: refused by this clear rule rather than midway through the parse.
MAX_PARSED_BYTES = 20 * 1024 * 1024
#: Processor time paced by the XML size: a fixed allowance for opening and small parts,
#: then about three times docx2python's measured 2.2-2.9 s per MiB of document XML.
CPU_BASE_SECONDS = 10.0
CPU_SECONDS_PER_MIB = 8.0

#: The parts docx2python reads for ``body_pars`` and ``core_properties``, by relationship
#: type, besides every ``.rels`` file (and ``word/numbering.xml``, which it opens by name).
_READ_TYPES = frozenset({"officeDocument", "core-properties"})
_NUMBERING = "word/numbering.xml"
_HEADING_STYLE = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)

#: One paragraph as the parser process returns it: its raw run text and its style name.
_Par = tuple[str, str]
#: A docx2python group (a table, or a run of body paragraphs): rows of cells of paragraphs.
_Group = tuple[bool, list[list[list[_Par]]]]


def _open_archive(path: Path) -> tuple[zipfile.ZipFile, list[zipfile.ZipInfo]]:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise FileRejectedError(f"DOCX is not a valid archive ({type(exc).__name__})") from None
    return archive, archive.infolist()


def _check_directory(infos: list[zipfile.ZipInfo]) -> None:
    """Refuse by what the zip directory declares, before anything is decompressed.

    Member names are attacker text, so no message quotes one.
    """
    if len(infos) > MAX_MEMBERS:
        raise FileRejectedError(f"DOCX has {len(infos)} archive members, over the {MAX_MEMBERS}-member limit")
    total = sum(i.file_size for i in infos)
    if total > MAX_UNCOMPRESSED_BYTES:
        raise FileRejectedError(f"DOCX expands to {total} bytes, over the {MAX_UNCOMPRESSED_BYTES}-byte limit")
    names = Counter(i.filename for i in infos)
    if "word/document.xml" not in names:
        raise FileRejectedError("DOCX has no word/document.xml part")
    if any(count > 1 for count in names.values()):
        # Which copy a reader takes is up to the reader; Word never writes two.
        raise FileRejectedError("DOCX has two archive members with the same name")
    for info in infos:
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise FileRejectedError("DOCX uses a compression method Word does not write")
        if info.file_size >= _RATIO_FLOOR_BYTES:
            ratio = info.file_size / max(info.compress_size, 1)
            if ratio > MAX_COMPRESSION_RATIO:
                raise FileRejectedError(
                    f"DOCX has a member that expands {ratio:.0f}:1, over the {MAX_COMPRESSION_RATIO}:1 limit "
                    "(no Word content compresses that far)"
                )


def _read_capped(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    """The member's bytes, decompressing at most ``limit + 1`` of them whatever it declares.

    zipfile stops at the declared size and then fails the checksum when the data is
    longer; the cap here does not depend on that.
    """
    try:
        with archive.open(info) as member:
            data = member.read(limit + 1)
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - BadZipFile, zlib.error, EOFError, encryption: all the same to us
        raise FileRejectedError(f"DOCX archive is damaged or declares false sizes ({type(exc).__name__})") from None
    if len(data) > limit:
        raise FileRejectedError(f"DOCX text parts expand past the {MAX_PARSED_BYTES}-byte limit")
    return data


def _parts_to_parse(archive: zipfile.ZipFile, infos: list[zipfile.ZipInfo]) -> dict[str, bytes]:
    """The parts docx2python reads, decompressed under one shared cap."""
    from docx2python.docx_reader import DocxReader

    by_name = {i.filename: i for i in infos}
    parts: dict[str, bytes] = {}
    budget = MAX_PARSED_BYTES

    def take(info: zipfile.ZipInfo) -> None:
        nonlocal budget
        if info.file_size > budget:
            raise FileRejectedError(f"DOCX text parts expand past the {MAX_PARSED_BYTES}-byte limit")
        data = _read_capped(archive, info, budget)
        budget -= len(data)
        parts[info.filename] = data

    for info in infos:
        if info.filename.endswith(".rels"):
            take(info)
    # Resolve the relationship targets with docx2python's own rules, so exactly the parts
    # it will open are the ones copied.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with DocxReader(_zip_of(parts)) as reader:
                files = [(f.Type, f.path) for f in reader.files if f.Type in _READ_TYPES]
    except Exception as exc:  # noqa: BLE001 - the parser raises many unrelated types
        raise FileRejectedError(f"DOCX cannot be parsed ({type(exc).__name__})") from None
    main_parts = sum(1 for kind, _ in files if kind == "officeDocument")
    if main_parts > 1:
        # docx2python parses every one: a thousand references to one part is a thousand parses.
        raise FileRejectedError(f"DOCX declares {main_parts} main document parts; Word writes one")
    for name in [*(p for _, p in files), _NUMBERING]:
        member = by_name.get(name)
        if member is not None and name not in parts:
            take(member)
    return parts


def _zip_of(parts: dict[str, bytes]) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as out:
        for name, data in parts.items():
            out.writestr(name, data)
    buffer.seek(0)
    return buffer


def _extract(path: Path) -> tuple[list[_Group], str | None]:
    """Run in the bounded child: the archive checks, then docx2python, down to plain data."""
    from docx2python import docx2python

    archive, infos = _open_archive(path)
    with archive:
        _check_directory(infos)
        parts = _parts_to_parse(archive, infos)
    parsed_mib = sum(len(d) for d in parts.values()) / (1024 * 1024)
    limit_cpu(
        CPU_BASE_SECONDS + CPU_SECONDS_PER_MIB * parsed_mib,
        f"for {parsed_mib:.1f} MiB of XML, with {CPU_BASE_SECONDS:g} s plus {CPU_SECONDS_PER_MIB:g} s a MiB allowed",
    )
    try:
        with warnings.catch_warnings():
            # Missing optional parts (e.g. docProps/core.xml from Google Docs) only warn.
            warnings.simplefilter("ignore")
            with docx2python(_zip_of(parts)) as content:
                groups: list[_Group] = []
                for group in content.body_pars:
                    first = next((p for row in group for cell in row for p in cell), None)
                    is_table = first is not None and "tbl" in (first.lineage or ())
                    rows = [
                        [[("".join(run.text for run in par.runs), par.style or "") for par in cell] for cell in row]
                        for row in group
                    ]
                    groups.append((is_table, rows))
                core: Any = content.core_properties
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - the parser raises many unrelated types
        raise FileRejectedError(f"DOCX cannot be parsed ({type(exc).__name__})") from None
    core_title = core.get("title") if isinstance(core, dict) else None
    return groups, core_title if isinstance(core_title, str) else None


# docx2python writes images and similar objects into the text as ----media/image1.png----.
_PLACEHOLDER = re.compile(r"----(?:media/|Image alt text---->)[^\n]*?----")


def _par_text(raw: str) -> str:
    return _PLACEHOLDER.sub("", sanitize(raw)).strip()


def load_docx(path: Path, fallback_title: str) -> LoadedDocument:
    # Imported here so the parser process starts with it loaded rather than importing it.
    import docx2python  # noqa: F401

    groups, core_title = run_bounded("DOCX", _extract, path)
    return _build(groups, core_title, fallback_title)


def _build(groups: list[_Group], core_title: str | None, fallback_title: str) -> LoadedDocument:
    blocks: list[Block] = []
    stack: list[tuple[int, str]] = []
    title: str | None = None
    line = 0
    for is_table, group in groups:
        headings = tuple(t for _, t in stack)
        if is_table:
            rows: list[tuple[str, int | None]] = []
            for row in group:
                cells = [" ".join(filter(None, (_par_text(raw) for raw, _ in cell))) for cell in row]
                if any(cells):
                    line += 1
                    rows.append(("| " + " | ".join(cells) + " |", line))
            if rows:
                header = [rows[0][0]]
                text = "\n".join(r for r, _ in rows)
                blocks.append(
                    Block("table", text, headings, rows[0][1], rows[-1][1], table_header=header, table_rows=rows[1:])
                )
            continue
        for row in group:
            for cell in row:
                for raw, raw_style in cell:
                    text = _par_text(raw)
                    if not text:
                        continue
                    line += 1
                    style = raw_style.strip()
                    match = _HEADING_STYLE.match(style)
                    if style.lower() == "title" and title is None:
                        title = text
                        continue
                    if match:
                        level = int(match.group(1))
                        while stack and stack[-1][0] >= level:
                            stack.pop()
                        stack.append((level, text))
                        blocks.append(Block("heading", text, tuple(t for _, t in stack), line, line))
                        continue
                    kind: BlockKind = "list" if style.lower().startswith("list") else "paragraph"
                    blocks.append(Block(kind, text, tuple(t for _, t in stack), line, line))
    if not blocks:
        raise FileRejectedError("DOCX has no text")
    if title is None:
        title = core_title.strip() if core_title is not None and core_title.strip() else fallback_title
    return LoadedDocument(title=title, format="docx", blocks=blocks)
