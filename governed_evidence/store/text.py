"""Text as a search index should see it: link targets and tags removed, words kept.

Every pattern here runs over untrusted text, so each one is linear in its input: no
repetition can match a newline unless the pattern is anchored to it, and every
repetition that could rescan the rest of the text from many starting points (link text,
a link target, a tag body) is bounded in length. A construct longer than its bound is
simply left as words, which only costs the index a few extra tokens.

The result is computed once at ingest and stored with the passage; search reads the
stored copy and never runs these patterns at query time.
"""

from __future__ import annotations

import re

__all__ = ["search_text"]

#: Longest link text, link target or tag body removed; longer ones are left as words.
_SPAN = 500

_MD_IMAGE = re.compile(rf"!\[([^\]\n]{{0,{_SPAN}}})\]\([^)\n]{{0,{_SPAN}}}\)")
_MD_LINK = re.compile(rf"\[([^\]\n]{{0,{_SPAN}}})\]\([^)\n]{{0,{_SPAN}}}\)")
_MD_REF = re.compile(rf"^[ \t]*\[[^\]\n]{{1,{_SPAN}}}\]:[ \t]*\S.*$", re.MULTILINE)
_HTML_TAG = re.compile(rf"</?[A-Za-z][^>]{{0,{_SPAN}}}>")
_URL = re.compile(r"\bhttps?://\S+|\bwww\.\S+")
# [ \t], not \s: \s matches newlines, and over a run of blank lines that made this pattern
# cubic (a 2 KB document stalled every search for about 90 s).
_TABLE_RULE = re.compile(r"^[ \t]*\|?[ \t]*:?-{3,}.*$", re.MULTILINE)
_SPACES = re.compile(r"[ \t]+")


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
    return _SPACES.sub(" ", text).strip()
