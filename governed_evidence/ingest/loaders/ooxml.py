"""The zip archive of an XLSX or PPTX workbook, judged and copied before a parser sees it.

Both formats are Office Open XML packages: a zip of XML parts and media, so one small
file can expand to gigabytes, like a DOCX (``docx``). openpyxl and python-pptx open the
archive themselves, and python-pptx reads every member into memory whatever it is, so
neither is handed the file. The archive is judged by its directory first (member count,
declared sizes, compression ratios, duplicate names, compression methods), then copied
into memory: every XML part decompressed through one shared cap that counts the bytes
actually produced, every other member (images, video, fonts, embedded workbooks) as an
empty part of the same name. The parsers read text only, so a zero-byte image costs them
nothing, and the relationships still find every part they name.

An XML part that carries a document type declaration is refused: Office never writes
one, and a DTD is what an entity-expansion bomb ("billion laughs") needs. The parsers
would not expand it either (openpyxl reads through defusedxml, or lxml with entities
off; python-pptx's lxml parser has entities off), so this is a second line, and it makes
the file fail with a reason rather than be indexed with the entity references as text.
"""

from __future__ import annotations

import io
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from governed_evidence.errors import FileRejectedError

__all__ = ["RATIO_FLOOR_BYTES", "PackageLimits", "read_capped", "read_package"]

#: Members smaller than this are not judged by ratio: small parts have noisy ratios and
#: cannot expand to much anyway (the same rule as the DOCX loader).
RATIO_FLOOR_BYTES = 1024 * 1024
#: Names of the parts that are XML and so are decompressed: everything else is media or
#: an embedded binary the text parsers never read.
_XML_SUFFIXES = (".xml", ".rels")
#: What a DTD starts with, in the encodings an XML part may use (UTF-8, UTF-16 either way).
_DTD_MARKS = tuple(
    mark.encode(codec) for mark in ("<!DOCTYPE", "<!ENTITY") for codec in ("utf-8", "utf-16-le", "utf-16-be")
)
#: The first bytes of an OLE compound file: what Office writes for a password-protected
#: workbook or deck (whatever its suffix), and for the pre-2007 binary formats.
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


@dataclass(frozen=True)
class PackageLimits:
    """What one format accepts, and its name in every reason."""

    #: "XLSX" or "PPTX": the start of every rejection message.
    label: str
    #: Members of the archive, media included.
    max_members: int
    #: Declared size of the whole archive, media included, before anything is decompressed.
    max_uncompressed_bytes: int
    #: Decompressed XML handed to the parser, all parts together.
    max_xml_bytes: int
    #: Declared expansion of one member; deflate itself cannot exceed about 1032:1.
    max_compression_ratio: int = 200


def _check_directory(infos: list[zipfile.ZipInfo], limits: PackageLimits) -> None:
    """Refuse by what the zip directory declares, before anything is decompressed.

    Member names are attacker text, so no message quotes one.
    """
    label = limits.label
    if len(infos) > limits.max_members:
        raise FileRejectedError(f"{label} has {len(infos)} archive members, over the {limits.max_members}-member limit")
    total = sum(i.file_size for i in infos)
    if total > limits.max_uncompressed_bytes:
        raise FileRejectedError(
            f"{label} expands to {total} bytes, over the {limits.max_uncompressed_bytes}-byte limit"
        )
    names = Counter(i.filename for i in infos)
    if "[Content_Types].xml" not in names:
        raise FileRejectedError(f"{label} has no [Content_Types].xml part (not an Office Open XML package)")
    if any(count > 1 for count in names.values()):
        # Which copy a reader takes is up to the reader; Office never writes two.
        raise FileRejectedError(f"{label} has two archive members with the same name")
    for info in infos:
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise FileRejectedError(f"{label} uses a compression method Office does not write")
        if info.file_size >= RATIO_FLOOR_BYTES:
            ratio = info.file_size / max(info.compress_size, 1)
            if ratio > limits.max_compression_ratio:
                raise FileRejectedError(
                    f"{label} has a member that expands {ratio:.0f}:1, over the "
                    f"{limits.max_compression_ratio}:1 limit (no Office content compresses that far)"
                )


def read_capped(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int, label: str) -> bytes:
    """The member's bytes, decompressing at most ``limit + 1`` of them whatever it declares
    (so more than ``limit`` bytes back means the member is over the cap).

    zipfile stops at the declared size and then fails the checksum when the data is
    longer; the cap here does not depend on that.
    """
    try:
        with archive.open(info) as member:
            return member.read(limit + 1)
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - BadZipFile, zlib.error, EOFError, encryption: all the same to us
        raise FileRejectedError(f"{label} archive is damaged or declares false sizes ({type(exc).__name__})") from None


def read_package(path: Path, limits: PackageLimits) -> tuple[io.BytesIO, int]:
    """The package rebuilt in memory (XML parts decompressed under the cap, every other
    member empty), and how many bytes of XML it holds.

    Raises :class:`FileRejectedError` with the reason when the archive is refused.
    """
    label = limits.label
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        with path.open("rb") as fh:
            if fh.read(len(_OLE_MAGIC)) == _OLE_MAGIC:
                raise FileRejectedError(
                    f"{label} is an OLE compound file, not an Office Open XML package "
                    "(password-protected, or the pre-2007 binary format)"
                ) from None
        raise FileRejectedError(f"{label} is not a valid archive ({type(exc).__name__})") from None
    buffer = io.BytesIO()
    budget = limits.max_xml_bytes
    with archive:
        infos = archive.infolist()
        _check_directory(infos, limits)
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as out:
            for info in infos:
                if info.is_dir():
                    continue
                if not info.filename.lower().endswith(_XML_SUFFIXES):
                    out.writestr(info.filename, b"")
                    continue
                # Judged by the declared size first, then by the bytes the member really yields.
                if info.file_size > budget or len(data := read_capped(archive, info, budget, label)) > budget:
                    raise FileRejectedError(f"{label} XML parts expand past the {limits.max_xml_bytes}-byte limit")
                if any(mark in data for mark in _DTD_MARKS):
                    raise FileRejectedError(
                        f"{label} has an XML part with a document type declaration (Office never writes one; "
                        "refused as a possible entity-expansion bomb)"
                    )
                budget -= len(data)
                out.writestr(info.filename, data)
    buffer.seek(0)
    return buffer, limits.max_xml_bytes - budget
