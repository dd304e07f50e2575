"""What an HTML page marks as not content, dropped by rule before its main content is sought.

Dropped: scripts, styles, templates, forms (not one around the whole page) and their
controls, embedded objects, ``nav``, ``aside``, the page's ``header`` and ``footer`` (those
not inside an article or section, as ARIA maps them to banner and contentinfo), ARIA
landmarks of the same kinds (navigation, banner, contentinfo, complementary, search,
dialogs, menus, toolbars), hidden elements, cookie or consent banners and breadcrumb trails
(by the names consent managers and templates give them; an element holding a ``main``,
``article`` or ``h1`` is kept whatever its name).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["drop_boilerplate"]

#: Elements that are never content.
_DROPPED_TAGS = frozenset(
    "script style noscript template nav aside button select textarea input option datalist output "
    "svg math canvas iframe frame frameset object embed applet audio video map dialog".split()
)
#: ARIA roles of the same kinds.
_DROPPED_ROLES = frozenset(
    "navigation banner contentinfo complementary search dialog alertdialog menu menubar toolbar".split()
)
#: ``header`` and ``footer`` belong to the page (banner, contentinfo) unless inside one of these.
_SECTIONING = frozenset({"article", "aside", "main", "nav", "section"})
#: What only an element holding the page's content contains.
_PAGE_CONTENT = ".//main | .//article | .//h1"
#: Names consent managers and site templates give cookie banners, and breadcrumb trails
#: (id, class, aria-label).
_NOT_CONTENT_NAMES = re.compile(
    r"cookie|consent|gdpr|ccpa|onetrust|cookiebot|truste|cmp-banner|privacy-banner|breadcrumb", re.I
)
_HIDDEN_STYLE = re.compile(r"(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*hidden)", re.I)


def _is_boilerplate(el: Any) -> bool:
    """True for an element HTML marks as not content (see the module docstring)."""
    tag = el.tag.lower()
    if tag in _DROPPED_TAGS or (el.get("role") or "").strip().lower() in _DROPPED_ROLES:
        return True
    if tag in ("header", "footer"):
        return not any(a.tag in _SECTIONING for a in el.iterancestors())
    if tag == "form":
        # A feedback, search or sign-in form is not content; a form around the whole page
        # (as ASP.NET, and so SharePoint, writes one) holds it.
        return not el.xpath(_PAGE_CONTENT)
    if el.get("hidden") is not None or (el.get("aria-hidden") or "").strip().lower() == "true":
        return True
    if _HIDDEN_STYLE.search(el.get("style") or ""):
        return True
    if tag in ("html", "body", "main", "article"):
        return False
    # A cookie banner is a sentence and two buttons; an element holding the page's main
    # content only has a consent-like name (a page about the cookie policy, say).
    names = " ".join(el.get(name) or "" for name in ("id", "class", "aria-label"))
    return bool(_NOT_CONTENT_NAMES.search(names)) and not el.xpath(_PAGE_CONTENT)


def drop_boilerplate(root: Any) -> None:
    """Remove from ``root`` every element that is not content, keeping the text after it."""
    doomed = [el for el in root.iter() if isinstance(el.tag, str) and _is_boilerplate(el)]
    for el in doomed:
        # drop_tree keeps the text that follows the element; one inside an element already
        # dropped goes with it.
        el.drop_tree()
