"""What a caller may ask of document search, defined once.

The search service enforces these, the MCP schemas publish them and the CLI offers them,
all from here, so a limit cannot differ between the tool a model sees and the code behind it.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "CONFIDENCE_LEVELS",
    "DEFAULT_LIMIT",
    "MAX_CITATION_ID_CHARS",
    "MAX_CONTEXT",
    "MAX_LIMIT",
    "MAX_QUERY_CHARS",
    "SEARCH_MODES",
    "ConfidenceLevel",
    "SearchMode",
]

SearchMode = Literal["hybrid", "keyword", "semantic"]
ConfidenceLevel = Literal["strict", "normal"]
#: In the order a user is offered them; the first is the default.
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)
CONFIDENCE_LEVELS: tuple[str, ...] = get_args(ConfidenceLevel)

MAX_QUERY_CHARS = 500
DEFAULT_LIMIT = 8
MAX_LIMIT = 20
#: Neighbouring passages read_passage may add on each side.
MAX_CONTEXT = 3
MAX_CITATION_ID_CHARS = 1000
