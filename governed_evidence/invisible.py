"""Characters a reader cannot see, removed from everything the server stores or serves.

Invisible characters hide text from the person who reviews a document while still reaching
the model that reads it: Unicode tag characters spell out whole instructions, bidirectional
overrides make a file name read backwards, zero-width characters split a keyword so a rule
does not see it. The set is taken from the Unicode database, not a hand list, so a class a
list forgets (U+061C, U+206A-206F, U+FFF9-FFFB, the tag block) cannot slip through:

- every format character (general category ``Cf``: zero-width, bidi controls, tags, ...);
- every control character (``Cc``) except tab and newline;
- the characters that render as nothing although their category says otherwise: variation
  selectors, the combining grapheme joiner, Hangul fillers, Khmer inherent vowels, the
  Mongolian free variation selectors;
- line and paragraph separators (U+2028/2029) become a space: a line span counts ``\\n``
  only, and a separator some viewers break on must not move text between lines.

Used by ingest (every text, title, heading and path it keeps) and by the statistics client
(every provider string it serves). It is one compiled character class, so removal is linear
in the text.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import cache

__all__ = ["find_invisible", "strip_invisible"]

#: Not ``Cf`` or ``Cc``, yet drawn as nothing (checked against real renderers' lists).
_EXTRA_INVISIBLE = (
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x115F, 0x1160),  # Hangul choseong / jungseong fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180D),  # Mongolian free variation selectors
    (0x180F, 0x180F),
    (0x3164, 0x3164),  # Hangul filler
    (0xFE00, 0xFE0F),  # variation selectors
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xE0100, 0xE01EF),  # variation selectors supplement
)
_SEPARATORS = re.compile("[\u2028\u2029]")


def _ranges(codepoints: list[int]) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    for cp in codepoints:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    return ranges


@cache
def _pattern() -> re.Pattern[str]:
    # Built once per process from this Python's Unicode database (about 0.2 s), on first use,
    # so `serve` pays for it only when a statistics answer is sanitised.
    hidden = [
        cp
        for cp in range(sys.maxunicode + 1)
        if (cat := unicodedata.category(chr(cp))) == "Cf" or (cat == "Cc" and cp not in (0x09, 0x0A))
    ]
    ranges = _ranges(hidden) + list(_EXTRA_INVISIBLE)
    body = "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges)
    return re.compile(f"[{body}]")


def strip_invisible(text: str) -> str:
    """``text`` without invisible characters; ``\\r\\n`` and ``\\r`` become ``\\n`` first."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _SEPARATORS.sub(" ", text)
    return _pattern().sub("", text)


def find_invisible(text: str) -> list[str]:
    """Code points (``U+XXXX``) of the invisible characters in ``text``, in order, once each.

    For reports: a file name carrying them is refused, and the reason names what was found
    without reproducing the characters themselves.
    """
    found = dict.fromkeys(f"U+{ord(ch):04X}" for ch in _pattern().findall(text.replace("\r\n", "\n")))
    found.update(dict.fromkeys(f"U+{ord(ch):04X}" for ch in _SEPARATORS.findall(text)))
    return list(found)
