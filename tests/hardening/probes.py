"""Leak probes built from the restricted documents' own words, and a detector for them.

The restricted documents are named by the corpus description (data/sample_corpus.md), not
by the code under test, so a classification bug cannot hide a document from its own probes.
Their words are read straight from the files (through the loaders for PDF and DOCX); a word
or a phrase is *distinctive* when it occurs in no public or internal document and in none of
the server's own messages. Any distinctive word or phrase in an answer given below restricted
clearance is a leak.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from governed_evidence.config import Classification
from governed_evidence.errors import ERROR_CODES, WARNING_CODES
from governed_evidence.ingest.loaders import SUPPORTED_SUFFIXES, load_document
from governed_evidence.mcp.app import error_contract
from governed_evidence.mcp.errors import ARGUMENTS_HINT, INTERNAL_ERROR_TEXT
from governed_evidence.mcp.status import ServerStatus
from governed_evidence.search.lookup import NOT_FOUND_HINT, NOT_FOUND_MESSAGE
from governed_evidence.search.models import (
    UNTRUSTED_NOTICE,
    ReadPassageResponse,
    SearchResponse,
    SourcesResponse,
)
from governed_evidence.store.connection import connect

REPO = Path(__file__).resolve().parents[2]
SAMPLE_CORPUS = REPO / "data" / "sample_corpus"
SAMPLE_DESCRIPTION = REPO / "data" / "sample_corpus.md"
QUESTIONS = REPO / "evals" / "questions.jsonl"

#: The restricted-class documents of the sample corpus, as data/sample_corpus.md lists them
#: (five under restricted/, and two whose front matter raises or voids their folder's level).
SAMPLE_RESTRICTED = frozenset(
    {
        "restricted/security/incident-response-playbook.md",
        "restricted/security/vulnerability-register.docx",
        "restricted/hr/salary-bands-2025.md",
        "restricted/hr/investigation-2025-017.md",
        "restricted/board/board-minutes-2025-03-27.pdf",
        "internal/finance/restructure-cost-model-2025.md",
        "public/press/holding-statement-draft.md",
    }
)
#: The same for tests.helpers.small_corpus.
SMALL_RESTRICTED = frozenset({"restricted/zephyr.md", "public/labelled-secret.md"})

_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """Lower-case word tokens (letters and digits; punctuation and underscores split)."""
    return _WORD.findall(text.casefold())


def ngrams(tokens: list[str], n: int) -> Iterator[tuple[str, ...]]:
    for i in range(len(tokens) - n + 1):
        yield tuple(tokens[i : i + n])


def _is_strong_word(token: str) -> bool:
    """A single word that identifies its source: 3+ letters-bearing characters, or 4+ digits."""
    if token.isdigit():
        return len(token) >= 4
    return len(token) >= 3 and any(c.isalpha() for c in token)


# Text the server writes itself: it may appear in any answer and proves nothing.
SERVER_TEXT = [
    UNTRUSTED_NOTICE,
    NOT_FOUND_MESSAGE,
    NOT_FOUND_HINT,
    INTERNAL_ERROR_TEXT,
    # Error codes, their meanings and hints (the form of every tool error, and the capabilities).
    json.dumps(error_contract()),
    *(f"{code} {info.meaning} {info.hint}" for code, info in ERROR_CODES.items()),
    *WARNING_CODES.values(),
    ARGUMENTS_HINT,
    "no passage matched the query",
    "no passage reached the strict confidence threshold",
    "no passage reached the normal confidence threshold the best candidate scored",
    "meaning search unavailable refused no embedder configured the index was built with the query embedder is",
    "query is empty give the words or question to search for characters the limit is",
    "limit must be between and mode must be one of hybrid keyword semantic confidence strict normal",
    "context must be between no evidence index found build one with governed evidence ingest corpus dir",
    "public internal restricted markdown text pdf docx ok",
    "the index failed its integrity check rebuild it not a governed evidence index or is damaged",
    # Field names, enum values and descriptions of every answer model.
    *(
        json.dumps(model.model_json_schema())
        for model in (SearchResponse, ReadPassageResponse, SourcesResponse, ServerStatus)
    ),
]


def strings_in(value: Any) -> Iterator[str]:
    """Every string in a JSON-like value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from strings_in(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from strings_in(v)


def document_text(path: Path, relative: str) -> list[str]:
    """Everything a document says: its raw text (text formats) or what the loader extracts."""
    out = [relative]
    if path.suffix.lower() in (".md", ".markdown", ".txt"):
        out.append(path.read_text(encoding="utf-8", errors="replace"))
    doc = load_document(path, path.stem)
    out.append(doc.title)
    out.extend(" ".join(b.headings) for b in doc.blocks)
    out.append("\n".join(b.text for b in doc.blocks))
    out.extend(strings_in(doc.front_matter.values))
    return out


def index_strings(db: Path, *, at_most: Classification) -> list[str]:
    """Every string the index could serve at ``at_most`` (passages and document rows)."""
    conn = connect(db, readonly=True)
    try:
        rows = conn.execute(
            "SELECT p.citation_id, p.title, p.heading, p.text, d.path, d.title, coalesce(d.superseded_by, '') "
            "FROM passages p JOIN documents d ON d.id = p.document_id WHERE p.classification <= ?",
            (int(at_most),),
        ).fetchall()
    finally:
        conn.close()
    return [str(v) for row in rows for v in row]


def true_levels(corpus: Path, restricted: frozenset[str]) -> dict[str, Classification]:
    """Each document's level as the corpus description states it (folder, or restricted)."""
    levels: dict[str, Classification] = {}
    for path in sorted(corpus.rglob("*")):
        if not (path.is_file() and path.suffix.lower() in SUPPORTED_SUFFIXES):
            continue
        rel = path.relative_to(corpus).as_posix()
        folder = rel.split("/", 1)[0]
        levels[rel] = Classification.RESTRICTED if rel in restricted else Classification[folder.upper()]
    missing = restricted - set(levels)
    assert not missing, f"restricted documents named by the description are missing: {sorted(missing)}"
    return levels


@dataclass
class Vocabulary:
    """The words and phrases of the documents above a ceiling, and of everything at or below it."""

    ceiling: Classification
    above_docs: dict[str, list[str]]
    lower_words: set[str] = field(default_factory=set)
    lower_ngrams: set[tuple[str, ...]] = field(default_factory=set)

    def add_lower(self, texts: Iterable[str]) -> None:
        for text in texts:
            tokens = words(text)
            self.lower_words.update(tokens)
            for n in (2, 3):
                self.lower_ngrams.update(ngrams(tokens, n))


def corpus_vocabulary(
    corpus: Path,
    levels: dict[str, Classification],
    ceiling: Classification,
    served_db: Path | None = None,
    server_text: Iterable[str] = (),
) -> Vocabulary:
    """Split ``corpus`` at ``ceiling``; ``served_db`` adds what that index serves at the ceiling.

    ``server_text``: answers and messages of a server that never held the documents above
    the ceiling (its own wording: capabilities, validation errors, reasons).
    """
    texts = {rel: document_text(corpus / rel, rel) for rel in levels}
    vocab = Vocabulary(ceiling, {rel: texts[rel] for rel, level in levels.items() if level > ceiling})
    for rel, level in levels.items():
        if level <= ceiling:
            vocab.add_lower(texts[rel])
    vocab.add_lower(SERVER_TEXT)
    vocab.add_lower(server_text)
    if served_db is not None:
        vocab.add_lower(index_strings(served_db, at_most=ceiling))
    return vocab


@dataclass(frozen=True)
class Detectors:
    """Distinctive restricted words and phrases; :meth:`find` reports which occur in a text."""

    words: frozenset[str]
    phrases: frozenset[tuple[str, ...]]
    _memo: dict[tuple[str, bool], list[str]] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def find(self, text: str, *, messages: bool = False) -> list[str]:
        """Distinctive words and phrases in ``text``.

        ``messages``: server messages and logs carry numbers of their own (scores, sizes,
        milliseconds), so there only detectors with a letter in them count.
        """
        key = (text, messages)
        if key not in self._memo:
            self._memo[key] = self._find(text, messages)
        return self._memo[key]

    def _find(self, text: str, messages: bool) -> list[str]:
        tokens = words(text)
        hits = {t for t in tokens if t in self.words and not (messages and t.isdigit())}
        for n in (2, 3):
            for gram in ngrams(tokens, n):
                if gram in self.phrases and not (messages and all(t.isdigit() for t in gram)):
                    hits.add(" ".join(gram))
        return sorted(hits)


def detectors(vocab: Vocabulary) -> Detectors:
    found_words: set[str] = set()
    found_phrases: set[tuple[str, ...]] = set()
    for texts in vocab.above_docs.values():
        for text in texts:
            tokens = words(text)
            found_words.update(t for t in tokens if _is_strong_word(t) and t not in vocab.lower_words)
            for n in (2, 3):
                for gram in ngrams(tokens, n):
                    # A phrase of one-letter or short numeric tokens ("1 2") proves little.
                    if gram not in vocab.lower_ngrams and any(_is_strong_word(t) for t in gram):
                        found_phrases.add(gram)
    return Detectors(frozenset(found_words), frozenset(found_phrases))


def canary_terms(description: Path = SAMPLE_DESCRIPTION) -> list[str]:
    """The 'Restricted canary terms' table of the corpus description, term by term."""
    terms: list[str] = []
    in_table = False
    for line in description.read_text(encoding="utf-8").splitlines():
        if line.startswith("### Restricted canary terms"):
            in_table = True
            continue
        if in_table and line.startswith("#"):
            break
        if in_table and line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            # Terms are separated by ", "; figures such as £1,187,000 keep their commas.
            terms.extend(t.strip() for t in re.split(r",\s+", cells[1]) if t.strip())
    return terms


def eval_questions(*slices: str) -> list[str]:
    if not QUESTIONS.is_file():
        return []
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [str(r["question"]) for r in rows if r.get("slice") in slices]


def build_probes(vocab: Vocabulary, found: Detectors, *, extra: Iterable[str] = (), seed: int = 8) -> list[str]:
    """Queries made of the restricted documents' distinctive words and phrases, deduplicated.

    Kinds: every distinctive word; distinctive two- and three-word phrases (a seeded sample);
    sentences and headings of the restricted documents; each document's distinctive words
    strung together; and FTS-syntax variants that try to reach a label or a path.
    """
    rng = random.Random(seed)
    probes: list[str] = list(extra)
    probes.extend(sorted(found.words))
    phrases = sorted(" ".join(p) for p in found.phrases if all(_is_strong_word(t) for t in p))
    rng.shuffle(phrases)
    probes.extend(phrases[:100])
    for rel, texts in vocab.above_docs.items():
        doc_words = sorted({t for text in texts for t in words(text)} & found.words)
        for i in range(0, len(doc_words), 6):
            probes.append(" ".join(doc_words[i : i + 6]))
        body = texts[-2] if len(texts) >= 2 else texts[0]
        sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", body) if len(s.split()) >= 5]
        rng.shuffle(sentences)
        probes.extend(s[:300] for s in sentences[:6])
        stem = Path(rel).stem
        probes.extend(
            [
                rel,
                f"classification:restricted {stem}",
                f'"{stem}" NEAR(restricted)',
                f"{doc_words[0] if doc_words else stem}*",
                f"{Path(rel).parent.as_posix()}/*",
            ]
        )
    probes.extend(["restricted", "classification:restricted", "*", "NEAR(", 'classification = "restricted"'])
    seen: set[str] = set()
    out = []
    for p in probes:
        p = " ".join(p.split())[:500]
        if p and p not in seen:
            seen.add(p)
            out.append(p)
    return out


def copy_without(corpus: Path, target: Path, restricted: frozenset[str]) -> Path:
    """The corpus with its restricted-class documents removed (the never-had-them reference)."""
    shutil.copytree(corpus, target)
    for rel in restricted:
        (target / rel).unlink()
    return target


def guessed_ids(real: Iterable[str]) -> list[str]:
    """Plausible guesses at citation ids near real ones (spans, sections, suffixes, spellings)."""
    out: list[str] = []
    for cid in real:
        path, _, rest = cid.partition("#")
        section, _, where = rest.rpartition(":")
        out += [
            path,
            f"{path}#top:L1-5",
            f"{path}#{section}",
            f"{path}#{section}:L1-999",
            f"{path}#{section}:p1",
            f"{cid}~2",
            cid.split("~")[0],
            cid.upper(),
            f" {cid} ",
            cid.replace("/", "%2F"),
            cid.replace(":", "%3A"),
            f"{path}#%",
            f"{path.split('/')[0]}/%",
            f"{cid}' OR '1'='1",
            f"{path}#{section}:" + re.sub(r"\d+", lambda m: str(int(m.group()) + 1), where),
        ]
    return list(dict.fromkeys(out))


#: Fields holding the server's own sentences (which carry scores and sizes as numbers).
MESSAGE_KEYS = frozenset(
    {"reason", "search_mode_reason", "problem", "semantic_search_reason", "notice", "error", "built_at", "timestamp"}
)


#: A receipt's digests, signature and ids: base64url of hashes and random bytes, not text.
#: Scanned as words, their short runs between '-' and '_' read as words ('few', 'net') about
#: once in 6,000 digests. Their oracle is the reference instead: a receipt equals, apart from
#: its id, time and signature, the one a server that never held the documents above the
#: caller's level gives (tests/receipts/test_receipt_leakage.py, test_http_leakage.py).
RECEIPT_DIGESTS = frozenset({"id", "args", "ids", "cited", "sig", "key"})


def receipt_words(receipt: dict[str, Any]) -> dict[str, Any]:
    """What of a receipt is text to scan: all but its digests and the time it was issued (the
    server's clock, whose year a restricted document may happen to name); the index's model,
    not its fingerprint."""
    kept = {k: v for k, v in receipt.items() if k not in RECEIPT_DIGESTS and k != "at"}
    if isinstance(kept.get("index"), dict):
        kept["index"] = {k: v for k, v in kept["index"].items() if k != "fp"}
    return kept


def scan(found: Detectors, value: Any, key: str = "") -> list[str]:
    """Distinctive words and phrases anywhere in a dumped answer's string values.

    A string holding a JSON document (an MCP text content) is scanned as that document; a
    receipt, as its words (:func:`receipt_words`).
    """
    if key == "receipt" and isinstance(value, dict):
        value = receipt_words(value)
    if key == "public_key":
        # The receipt key's public half (index_status): random bytes in base64url, not text.
        return []
    if isinstance(value, str):
        if value[:1] in "{[":
            try:
                return scan(found, json.loads(value), key)
            except ValueError:
                pass
        return found.find(value, messages=key in MESSAGE_KEYS)
    hits: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            hits += scan(found, v, str(k))
    elif isinstance(value, list | tuple):
        for v in value:
            hits += scan(found, v, key)
    return hits
