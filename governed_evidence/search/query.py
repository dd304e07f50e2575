"""From user text to an FTS5 query: tokenised like the index, quoted, never passed through.

User text is split by SQLite's own ``unicode61`` tokenizer (through apsw), so the words
searched are exactly the words the index holds; each token is quoted, so ``NEAR(``,
``classification:restricted``, ``*`` or a lone ``"`` are searched as plain words and can
never become FTS5 syntax.
"""

from __future__ import annotations

import apsw

__all__ = [
    "STOPWORDS",
    "match_expression",
    "query_stems",
    "query_tokens",
    "quote_token",
    "token_stems",
]

#: Function words that carry no evidence of relevance; dropped unless nothing else is left.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    s t don shall may might must us get got also""".split()
)


def query_tokens(conn: apsw.Connection, text: str) -> list[str]:
    """Distinct content-word tokens of ``text``, in order, as the index tokenizer splits them."""
    tokenizer = conn.fts5_tokenizer("unicode61", ["remove_diacritics", "2"])
    raw = tokenizer(text.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None, include_offsets=False)
    tokens: list[str] = []
    for item in raw:
        token = str(item[0] if isinstance(item, tuple) else item)
        if token and token not in tokens:
            tokens.append(token)
    content = [t for t in tokens if t not in STOPWORDS]
    return content or tokens


def query_stems(conn: apsw.Connection, tokens: list[str]) -> list[str]:
    """The index's stemmed form of each token (porter), distinct, in order."""
    tokenizer = conn.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
    stems: list[str] = []
    for token in tokens:
        for item in tokenizer(token.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None, include_offsets=False):
            stem = str(item[0] if isinstance(item, tuple) else item)
            if stem and stem not in stems:
                stems.append(stem)
    return stems


def token_stems(conn: apsw.Connection, tokens: list[str]) -> list[str]:
    """The index's stemmed form of each token, one per token (empty when it has none)."""
    tokenizer = conn.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
    out: list[str] = []
    for token in tokens:
        items = tokenizer(token.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None, include_offsets=False)
        stems = [str(i[0] if isinstance(i, tuple) else i) for i in items]
        out.append(stems[0] if len(stems) == 1 else "")
    return out


def quote_token(token: str) -> str:
    """An FTS5 string literal: wrapped in double quotes, embedded quotes doubled."""
    return '"' + token.replace('"', '""') + '"'


def match_expression(tokens: list[str]) -> str:
    """OR of quoted tokens; empty string when there is nothing to search."""
    return " OR ".join(quote_token(t) for t in tokens)
