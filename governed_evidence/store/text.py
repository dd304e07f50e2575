"""Text as a search index should see it: link targets and tags removed, words kept."""

from __future__ import annotations

import re

__all__ = ["search_text"]

_MD_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_MD_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_MD_REF = re.compile(r"^\s*\[[^\]]+\]:\s*\S+.*$", re.MULTILINE)
_HTML_TAG = re.compile(r"</?[A-Za-z][^>]*>")
_URL = re.compile(r"\bhttps?://\S+|\bwww\.\S+")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}.*$", re.MULTILINE)


#: Every substitution below needs one of these in the text; without them only spacing changes.
_TRIGGERS = ("[", "<", "http", "www.", "---")


def search_text(text: str) -> str:
    """What the full-text index holds for a passage body."""
    if not any(t in text for t in _TRIGGERS):
        # Spacing does not change a token; the index is contentless and keeps only tokens.
        return text
    text = _MD_IMAGE.sub(r"\1", text)
    text = _MD_LINK.sub(r"\1", text)
    text = _MD_REF.sub("", text)
    text = _HTML_TAG.sub(" ", text)
    text = _URL.sub(" ", text)
    text = _TABLE_RULE.sub("", text)
    return re.sub(r"[ \t]+", " ", text).strip()
