"""The bytes a receipt's signature covers, and the digests it carries.

Canonical JSON: keys sorted, no whitespace, UTF-8, members whose value is null left out (a
client that drops nulls from a pasted answer leaves the signed bytes as they were), and the
``sig`` member removed. A receipt holds only strings, integers, booleans, lists and objects,
so the form has no float to disagree on. A lone surrogate, which JSON can carry as an
escape but UTF-8 cannot, is encoded as its code point ("surrogatepass") rather than refused.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

__all__ = ["b64url", "canonical_bytes", "digest", "from_b64url", "text_digest"]


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def from_b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_without_nulls(v) for v in value]
    return value


def canonical_bytes(value: dict[str, Any], *, has_nulls: bool = True) -> bytes:
    """``value`` (a receipt as JSON values) without ``sig``, as the bytes that are signed.

    ``has_nulls=False``: the caller built ``value`` without nulls (the issuer, on every citing
    answer), so the walk that removes them is skipped.
    """
    body = {k: v for k, v in value.items() if k != "sig"}
    return json.dumps(
        _without_nulls(body) if has_nulls else body,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    ).encode("utf-8", "surrogatepass")


def digest(value: Any) -> str:
    """SHA-256 (base64url) of ``value`` as canonical JSON (the tool arguments)."""
    data = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    # A lone surrogate (JSON can carry one as an escape) is hashed as its code point, not refused.
    return b64url(hashlib.sha256(data.encode("utf-8", "surrogatepass")).digest())


def text_digest(text: str) -> str:
    """SHA-256 (base64url) of ``text`` as UTF-8: what a receipt says of a passage served."""
    return b64url(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest())
