"""From user text to an FTS5 query: tokenised like the index, quoted, never passed through.

User text is split by SQLite's own ``unicode61`` tokenizer (through apsw), so the words
searched are exactly the words the index holds; each token is quoted, so ``NEAR(``,
``classification:restricted``, ``*`` or a lone ``"`` are searched as plain words and can
never become FTS5 syntax.
"""

from __future__ import annotations

import apsw

from governed_evidence.store.schema import FTS_TOKENIZER

__all__ = [
    "STOPWORDS",
    "index_tokenizer",
    "match_expression",
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


def index_tokenizer(conn: apsw.Connection) -> apsw.FTS5Tokenizer:
    """The full-text index's own tokenizer (porter over unicode61), from its schema definition."""
    name, *args = FTS_TOKENIZER.split()
    return conn.fts5_tokenizer(name, args)


def _word_tokenizer(conn: apsw.Connection) -> apsw.FTS5Tokenizer:
    """The index's tokenizer without stemming: words as typed, folded like the index folds them."""
    _, name, *args = FTS_TOKENIZER.split()
    return conn.fts5_tokenizer(name, args)


def query_tokens(conn: apsw.Connection, text: str) -> list[str]:
    """Distinct content-word tokens of ``text``, in order, as the index tokenizer splits them."""
    raw = _word_tokenizer(conn)(text.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None, include_offsets=False)
    tokens: list[str] = []
    for item in raw:
        token = str(item[0] if isinstance(item, tuple) else item)
        if token and token not in tokens:
            tokens.append(token)
    content = [t for t in tokens if t not in STOPWORDS]
    return content or tokens


def token_stems(conn: apsw.Connection, tokens: list[str]) -> list[str]:
    """The index's stemmed form of each token, one per token (empty when it has none)."""
    tokenizer = index_tokenizer(conn)
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
