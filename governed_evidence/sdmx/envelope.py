"""ZIP and gzip envelopes around an SDMX message, opened under the same byte cap as the body.

Some providers deliver a message as a file: Eurostat's deferred delivery is a ZIP holding
one SDMX-ML data file, and some mirrors serve ``.xml.gz``. This is a *file* format, told
by the Content-Type (or, for a generic one such as ``application/octet-stream``, by its
magic bytes: :data:`~governed_evidence.sdmx.formats.GENERIC_TYPES`), not the
HTTP content-coding that :mod:`~governed_evidence.sdmx.decoding` undoes.

What comes out is bounded like any body, because an archive is where a small download
becomes a large one:

- the bytes after decompression count against the kind's byte cap, measured while
  reading (a member's declared size is checked first, but it can lie);
- exactly one file: an archive of several is not one SDMX message; the count (at most
  :data:`MAX_MEMBERS` entries) and the directory's size are read from the archive's end
  record before its directory is parsed, so a listing of a million entries costs nothing;
- no archive inside an archive (a nested ZIP or gzip is refused, not opened);
- no member whose name climbs out of the archive (``..``, an absolute path, a drive or a
  backslash): nothing is written to disk, but such a name is the mark of a hostile file;
- no encrypted member.

The content type of what is inside is read from its first bytes, so the readers that
follow are chosen as for any response.
"""

from __future__ import annotations

import io
import zipfile
import zlib

from governed_evidence.errors import ResponseTooLargeError, UnusableResponseError
from governed_evidence.sdmx.formats import GENERIC_TYPES, media_type

__all__ = ["MAX_MEMBERS", "is_envelope", "unwrap"]

#: Entries (directories included) an archive may list; SDMX deliveries hold one file.
MAX_MEMBERS = 16
_ZIP_TYPES = frozenset({"application/zip", "application/x-zip-compressed", "application/x-zip"})
_GZIP_TYPES = frozenset({"application/gzip", "application/x-gzip"})
_ZIP_MAGIC = b"PK\x03\x04"
_GZIP_MAGIC = b"\x1f\x8b"
#: The end of central directory record: its signature, fixed size, and how far from the end
#: it may sit (a trailing comment is at most 65,535 bytes).
_END_MAGIC = b"PK\x05\x06"
_END_SIZE = 22
_END_SEARCH = _END_SIZE + 0xFFFF
_ZIP64_LOCATOR_MAGIC = b"PK\x06\x07"
_ZIP64_LOCATOR_SIZE = 20
_ZIP64_END_MAGIC = b"PK\x06\x06"
#: A central directory of MAX_MEMBERS entries with long names and extra fields is a few KB.
_MAX_DIRECTORY_BYTES = 64 * 1024
#: Bytes read from an archive member at a time, so a lying size header costs at most the cap.
_STEP = 1024 * 1024


def _kind(content_type: str, body: bytes) -> str | None:
    mt = media_type(content_type)
    # A generic type (application/octet-stream, none at all, ...) is told by its magic bytes.
    generic = mt in GENERIC_TYPES
    if mt in _ZIP_TYPES or (generic and body.startswith(_ZIP_MAGIC)):
        return "zip"
    if mt in _GZIP_TYPES or (generic and body.startswith(_GZIP_MAGIC)):
        return "gzip"
    return None


def is_envelope(content_type: str, body: bytes) -> bool:
    """Whether ``body`` is a ZIP or gzip file to open before reading."""
    return _kind(content_type, body) is not None


def _inner_type(data: bytes) -> str:
    """The media type the readers should see for what came out of an envelope."""
    if data.startswith((_ZIP_MAGIC, _GZIP_MAGIC)):
        raise UnusableResponseError("the provider's archive holds another archive, which this server does not open")
    head = data[:64].lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"<"):
        return "application/xml"
    if head.startswith((b"{", b"[")):
        return "application/json"
    return "application/vnd.sdmx.data+csv"


def _safe_name(name: str) -> bool:
    parts = name.replace("\\", "/").split("/")
    return not (
        "\\" in name
        or name.startswith("/")
        or (len(name) > 1 and name[1] == ":")
        or any(p in ("..", ".") for p in parts)
        or not name.isprintable()
    )


def _too_large(max_bytes: int) -> ResponseTooLargeError:
    return ResponseTooLargeError(
        f"the provider's archive expands to more than {max_bytes} bytes; narrow the key or the period"
    )


def _check_directory(body: bytes) -> None:
    """Refuse an archive whose central directory lists too much, before it is read.

    :class:`zipfile.ZipFile` reads every entry of the central directory into objects when
    it opens the file, so an archive listing hundreds of thousands of entries costs their
    memory and time before any limit applied to ``infolist()`` could refuse it. The end
    record states the count and the directory's size in its last bytes; both are checked
    here (the count read from the ZIP64 record when the end record defers to it), and
    zipfile reads entries until the stated size is consumed, so bounding the size bounds
    what it parses whatever the count says.
    """
    end = body.rfind(_END_MAGIC, max(0, len(body) - _END_SEARCH))
    if end < 0 or len(body) < end + _END_SIZE:
        raise UnusableResponseError("the provider's ZIP file could not be read")
    entries, size = (
        int.from_bytes(body[end + 10 : end + 12], "little"),
        int.from_bytes(body[end + 12 : end + 16], "little"),
    )
    locator = end - _ZIP64_LOCATOR_SIZE
    if locator >= 0 and body.startswith(_ZIP64_LOCATOR_MAGIC, locator):
        record = int.from_bytes(body[locator + 8 : locator + 16], "little")
        if not body.startswith(_ZIP64_END_MAGIC, record) or len(body) < record + 56:
            raise UnusableResponseError("the provider's ZIP file could not be read")
        entries = int.from_bytes(body[record + 32 : record + 40], "little")
        size = int.from_bytes(body[record + 40 : record + 48], "little")
    if entries > MAX_MEMBERS:
        raise UnusableResponseError("the provider's ZIP file lists more entries than one SDMX delivery")
    if size > _MAX_DIRECTORY_BYTES:
        raise UnusableResponseError("the provider's ZIP file has a larger directory than one SDMX delivery")


def _unzip(body: bytes, max_bytes: int) -> bytes:
    _check_directory(body)
    try:
        archive = zipfile.ZipFile(io.BytesIO(body))
    except (zipfile.BadZipFile, ValueError, OSError):
        raise UnusableResponseError("the provider's ZIP file could not be read") from None
    with archive:
        entries = archive.infolist()
        if len(entries) > MAX_MEMBERS:
            raise UnusableResponseError("the provider's ZIP file lists more entries than one SDMX delivery")
        if not all(_safe_name(e.filename) for e in entries):
            raise UnusableResponseError("the provider's ZIP file names a path outside the archive; it was not opened")
        files = [e for e in entries if not e.is_dir()]
        if len(files) != 1:
            raise UnusableResponseError(
                f"the provider's ZIP file holds {len(files)} files; this server reads one SDMX message"
            )
        member = files[0]
        if member.flag_bits & 0x1:
            raise UnusableResponseError("the provider's ZIP file is encrypted")
        if member.filename.lower().endswith((".zip", ".gz", ".gzip", ".tgz")):
            raise UnusableResponseError("the provider's archive holds another archive, which this server does not open")
        if member.file_size > max_bytes:
            raise _too_large(max_bytes)
        out = io.BytesIO()
        try:
            with archive.open(member) as stream:
                while chunk := stream.read(min(_STEP, max_bytes + 1 - out.tell())):
                    out.write(chunk)
                    if out.tell() > max_bytes:
                        raise _too_large(max_bytes)
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, OSError, ValueError):
            # A corrupt stream, a CRC mismatch or an unsupported compression method.
            raise UnusableResponseError("the provider's ZIP file could not be read") from None
        return out.getvalue()


def _gunzip(body: bytes, max_bytes: int) -> bytes:
    decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = io.BytesIO()
    pending = body
    try:
        while pending and not decoder.eof:
            # max_length bounds each step, so a bomb never yields more than the cap plus one byte.
            out.write(decoder.decompress(pending, min(_STEP, max_bytes + 1 - out.tell())))
            if out.tell() > max_bytes:
                raise _too_large(max_bytes)
            pending = decoder.unconsumed_tail
        if not decoder.eof:
            raise UnusableResponseError("the provider's gzip file is truncated")
    except zlib.error:
        raise UnusableResponseError("the provider's gzip file could not be read") from None
    if decoder.unused_data:
        # A second gzip member or trailing bytes: not the single file an SDMX delivery is.
        raise UnusableResponseError("the provider's gzip file holds more than one stream")
    return out.getvalue()


def unwrap(content_type: str, body: bytes, *, max_bytes: int) -> tuple[str, bytes]:
    """The message inside a ZIP or gzip envelope and the media type to read it as; others unchanged.

    Raises
    ------
    UnusableResponseError
        A corrupt, encrypted, multi-file or nested archive, or a member named outside it.
    ResponseTooLargeError
        More than ``max_bytes`` after decompression.
    """
    kind = _kind(content_type, body)
    if kind is None:
        return content_type, body
    data = _unzip(body, max_bytes) if kind == "zip" else _gunzip(body, max_bytes)
    return _inner_type(data), data
