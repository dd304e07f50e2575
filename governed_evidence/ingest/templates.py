"""Template tags: site plumbing a static site generator fills in, never text to index.

ERB (``<%= current_page.data.title %>``, ``<% end %>``), Handlebars and Go templates
(``{{ title }}``, ``{{{ raw }}}``, ``{{- .Title -}}``) and Liquid/Jinja (``{% if %}``,
``{{ page.title }}``) are removed where they would otherwise be served: a documentation
site's Markdown pages (their text, headings and title), and every format's titles and
headings (which name the citation ids).
"""

from __future__ import annotations

__all__ = ["strip_template_tags"]

#: Template tags and where each ends, the longer opener first where two start alike.
#: Found by scanning, not by a lazy regex: a lazy ``\{\{.*?\}\}`` rescans the rest of the
#: text from every unclosed opener (64 KB of ``{{`` took two minutes); the scan below reads
#: the text once per kind of tag.
_TAG_DELIMITERS = (("<%", "%>"), ("{{{", "}}}"), ("{{", "}}"), ("{%", "%}"))


def strip_template_tags(text: str) -> str:
    """``text`` without template tags (see the module docstring), in one pass.

    A tag runs from its opener to the first closer after it, as a lazy match would. Once an
    opener has no closer after it, no later opener of that kind can close either, so that
    kind is no longer looked for: the work is linear in the text.
    """
    if "{" not in text and "<%" not in text:
        return text
    out: list[str] = []
    pos = 0
    live = list(_TAG_DELIMITERS)
    while live:
        found = [
            (start, -len(opener), opener, closer) for opener, closer in live if (start := text.find(opener, pos)) >= 0
        ]
        if not found:
            break
        start, _, opener, closer = min(found)
        end = text.find(closer, start + len(opener))
        if end < 0:
            live.remove((opener, closer))
            continue
        out.append(text[pos:start])
        pos = end + len(closer)
    out.append(text[pos:])
    return "".join(out)
