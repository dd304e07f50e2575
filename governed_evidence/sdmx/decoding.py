"""Response bodies read and decoded here, not by httpx, and never past the byte cap.

At most one content-coding is decoded, and only one the client asked for (gzip or
deflate, see :data:`ACCEPT_ENCODING`); it is decompressed incrementally with
``max_length`` so that no step produces more than the room left under the cap. A bomb of
any depth or ratio therefore costs at most the cap, never its expanded size. An error
body is read only for its start (its status text or SDMX error code), and a coding this
client cannot decode leaves it short or empty instead of hiding the status.
"""

from __future__ import annotations

import io
import re
import zlib
from collections.abc import Callable

import httpx

from governed_evidence.errors import ResponseTooLargeError, UnusableResponseError

__all__ = ["ACCEPT_ENCODING", "ERROR_BODY_BYTES", "read_body"]

#: What the client's Accept-Encoding offers, and so what may come back.
ACCEPT_ENCODING = "gzip, deflate"
#: Error bodies are only read for their status text or SDMX error code.
ERROR_BODY_BYTES = 64 * 1024
#: The content-codings decoded (x-gzip is gzip's registered alias), with their zlib window bits.
_CODINGS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
_CONTENT_LENGTH_RE = re.compile(r"[0-9]{1,18}")
#: Most bytes one decompression step produces, so decoding never holds a second large copy.
_STEP = 1024 * 1024


class _Decoder:
    """One content-coding, decompressed a bounded step at a time (identity passes through)."""

    def __init__(self, coding: str | None) -> None:
        self._wbits = _CODINGS[coding] if coding else None
        self._zlib = zlib.decompressobj(self._wbits) if self._wbits is not None else None
        self._started = False

    def decode_into(self, data: bytes, body: io.BytesIO, limit: int) -> None:
        """Append what ``data`` decodes to onto ``body``, stopping once ``body`` is past ``limit``.

        Raises ``zlib.error`` on a corrupt stream or data after its end.
        """
        if self._zlib is None:
            body.write(data[: limit + 1 - body.tell()])
            return
        pending = data
        while pending and body.tell() <= limit:
            try:
                # max_length is what bounds memory: one step yields at most _STEP bytes and
                # never more than one byte past the cap.
                piece = self._zlib.decompress(pending, min(_STEP, limit + 1 - body.tell()))
            except zlib.error:
                if self._started or self._wbits != zlib.MAX_WBITS:
                    raise
                # "deflate" is sometimes sent without the zlib wrapper (as httpx also accepts).
                self._wbits = -zlib.MAX_WBITS
                self._zlib = zlib.decompressobj(self._wbits)
                continue
            self._started = True
            if self._zlib.eof and self._zlib.unused_data:
                raise zlib.error("data after the end of the compressed body")
            body.write(piece)
            if not piece and len(self._zlib.unconsumed_tail) == len(pending):
                break  # no progress (zlib always makes some; this only keeps the loop finite)
            pending = self._zlib.unconsumed_tail

    def finish(self) -> None:
        """Raises ``zlib.error`` when the compressed body ended early (an empty body is empty)."""
        if self._zlib is not None and self._started and not self._zlib.eof:
            raise zlib.error("the compressed body is truncated")


def _coding(response: httpx.Response) -> str | None:
    """The response's one content-coding (None for identity).

    Raises
    ------
    UnusableResponseError
        More than one coding (each layer would multiply what a few bytes expand to), or one
        this client did not offer.
    """
    codings = [
        c.strip().lower()
        for c in response.headers.get_list("content-encoding", split_commas=True)
        if c.strip().lower() not in ("", "identity")
    ]
    if len(codings) > 1:
        raise UnusableResponseError("the provider sent more than one content-coding, which this server does not decode")
    if codings and codings[0] not in _CODINGS:
        raise UnusableResponseError("the provider sent a content-coding this server did not ask for")
    return codings[0] if codings else None


def _too_large(max_bytes: int) -> str:
    return (
        f"the provider's response exceeds this server's limit of {max_bytes // (1024 * 1024)} MiB; "
        "narrow the key or the period"
    )


def read_body(
    response: httpx.Response, *, ok: bool, max_bytes: int, deadline: float, monotonic: Callable[[], float]
) -> bytes:
    """The decoded body of a success (``ok``), within ``max_bytes``; of anything else, its start.

    An error body is read only for its status text or SDMX error code, so a coding or
    a stream this client cannot decode leaves it short or empty instead of hiding the
    status (a 503 must stay a 503: retried, or answered from a stale copy).

    Raises
    ------
    ResponseTooLargeError
        A success whose declared or decoded size exceeds ``max_bytes``.
    UnusableResponseError
        A success with a coding this client does not decode, or that fails to decompress.
    httpx.ReadTimeout
        When ``monotonic()`` passes ``deadline`` while the body arrives.
    """
    limit = max_bytes if ok else ERROR_BODY_BYTES
    try:
        coding = _coding(response)
    except UnusableResponseError:
        if ok:
            raise
        return b""
    declared = response.headers.get("content-length", "")
    if ok and coding is None and _CONTENT_LENGTH_RE.fullmatch(declared) and int(declared) > limit:
        raise ResponseTooLargeError(_too_large(max_bytes))
    stream = response.stream
    if not isinstance(stream, httpx.SyncByteStream):  # pragma: no cover - a sync client's stream
        raise TypeError("expected a synchronous response stream")
    decoder = _Decoder(coding)
    # BytesIO rather than bytearray: getvalue() hands over its buffer without a copy,
    # so a body at the cap is held once, not twice.
    body = io.BytesIO()
    if ok and coding is None and _CONTENT_LENGTH_RE.fullmatch(declared) and int(declared) > 0:
        # Sized once to the declared length (within the cap, checked above) and filled in:
        # grown chunk by chunk, its reallocations left up to 28 MB of holes in the heap
        # beside a 16 MiB body, resident for the rest of the call and in the parsing child.
        body.seek(int(declared) - 1)
        body.write(b"\0")
        body.seek(0)
    try:
        # The raw (still encoded) bytes as they arrive. Not iter_raw(): a response
        # built with its content already loaded (as transports in tests build them)
        # refuses iter_raw, while its stream still yields the bytes as sent.
        for chunk in stream:
            # Decoded up to one byte past the limit: that byte tells "over" from "exactly at".
            decoder.decode_into(chunk, body, limit)
            if body.tell() > limit:
                if not ok:
                    # Only the start of an error body is ever looked at.
                    return body.getvalue()[:limit]
                raise ResponseTooLargeError(_too_large(max_bytes))
            if monotonic() > deadline:
                raise httpx.ReadTimeout("overall deadline exceeded")
        if ok:
            decoder.finish()
    except zlib.error:
        if ok:
            raise UnusableResponseError("the provider sent a body that could not be decompressed") from None
    body.truncate()  # a body shorter than it declared ends where it ended
    return body.getvalue()
