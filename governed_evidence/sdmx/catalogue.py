"""The dataflow catalogue: streamed out of a (possibly large) structure message, then searched.

Parsing streams ``Dataflow`` elements one at a time (:func:`governed_evidence.sdmx.xml.stream`),
so a catalogue of thousands of flows, or of millions of other elements, never sits in
memory as a tree. A dataflow whose agency, id or version a caller could not send (``..``,
a slash, non-ASCII digits) is left out: it could never be asked for safely.

Search is a small weighted word match (name > id > description, rarer words count more)
over rows parsed once per catalogue body; it needs no index because a provider's
catalogue has at most a few thousand flows.
"""

from __future__ import annotations

import math
import re
import sys
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from governed_evidence.errors import ResponseTooLargeError, UnusableResponseError
from governed_evidence.logging import get_logger
from governed_evidence.sdmx.kept import TextBudget
from governed_evidence.sdmx.validate import provider_dataset_ref
from governed_evidence.sdmx.xml import MES, STR, V3_TO_V21, localised, localised_text, plain_text, stream

__all__ = [
    "MAX_DATAFLOWS",
    "CatalogueIndex",
    "CatalogueRow",
    "Hit",
    "Words",
    "catalogue_row",
    "index_words",
    "parse_catalogue",
    "query_terms",
]

log = get_logger("sdmx.catalogue")

MAX_DATAFLOWS = 50_000
_DATAFLOW = f"{{{STR}}}Dataflow"
_STRUCTURE = f"{{{MES}}}Structure"
#: Keeps "R&D" one word on both sides of the match.
_WORD_RE = re.compile(r"[0-9a-z]+(?:&[0-9a-z]+)*")
_STOPWORDS = frozenset(
    "a an and are as at be between by compare compared do does for from how in into is it its of on or per "
    "show than that the to vs what which with".split()
)
#: Field weights: a word in the name says more than one in a long description.
_NAME, _ID, _DESCRIPTION = 3.0, 2.0, 1.0
_WEIGHTS = (_NAME, _ID, _DESCRIPTION)
#: Prefix matches ("employ" → "employment") count for less than whole words.
_PREFIX = 0.6
#: Rows whose words the search index joins into one run of bytes (some 64 KiB of them).
_CHUNK_ROWS = 1024


@dataclass(frozen=True, slots=True)
class CatalogueRow:
    """One dataflow as the catalogue lists it (slots: a catalogue holds up to MAX_DATAFLOWS)."""

    agency: str
    dataset_id: str
    version: str
    name: str
    description: str

    @property
    def dataset(self) -> str:
        """The reference callers pass to describe_dataset and get_data."""
        return f"{self.agency},{self.dataset_id},{self.version}"


def _is_dataflow(parent: str, tag: str) -> bool:
    return tag == _DATAFLOW


def catalogue_row(agency: str, dataset_id: str, version: str, name: str, description: str) -> CatalogueRow | None:
    """A catalogue row from a provider's identifiers and texts; None when a caller could not send them back."""
    ref = provider_dataset_ref(agency, dataset_id, version or "latest")
    if ref is None or ref.agency is None:
        return None
    # A catalogue repeats a few agencies and versions over thousands of rows: held once each.
    return CatalogueRow(
        agency=sys.intern(ref.agency),
        dataset_id=ref.id,
        version=sys.intern(ref.version),
        name=name,
        description=description,
    )


def parse_catalogue(body: bytes) -> list[CatalogueRow]:
    """Every ``Dataflow`` definition in an SDMX-ML 2.1 or 3.0 structure message, in document order.

    Raises
    ------
    UnusableResponseError
        Not a structure message, unsafe or malformed.
    ResponseTooLargeError
        More than :data:`MAX_DATAFLOWS` dataflows, or more text than ``MAX_KEPT_TEXT``.
    """
    rows: list[CatalogueRow] = []
    budget = TextBudget()
    root_seen = False
    definitions = unusable = 0
    for kind, tag, attrib, element in stream(body, units=_is_dataflow, rename=V3_TO_V21):
        if not root_seen:
            root_seen = True
            if kind != "start" or tag != _STRUCTURE:
                raise UnusableResponseError("expected an SDMX-ML structure message for the catalogue")
            continue
        # Definitions carry an id; the same tag inside a constraint attachment is a reference.
        if element is None or not attrib.get("id"):
            continue
        # Counted before validation, so skipped entries cannot make the parse unbounded.
        definitions += 1
        if definitions > MAX_DATAFLOWS:
            raise ResponseTooLargeError("the catalogue lists more dataflows than this server reads")
        row = catalogue_row(
            attrib.get("agencyID", ""),
            attrib.get("id", ""),
            attrib.get("version", "latest"),
            localised(element),
            plain_text(localised_text(element, "Description"), 600),
        )
        if row is None:
            unusable += 1
            continue
        budget.keep(row.dataset_id, row.name, row.description)
        # The index words are made later, in the server: counted at their most, the row's
        # text again (ASCII words out of it, each field's between two spaces, a line's ``||\n``).
        budget.add(len(row.dataset_id) + len(row.name) + len(row.description) + 9)
        rows.append(row)
    if unusable:
        log.warning("sdmx_catalogue_entries_skipped", count=unusable, reason="identifiers")
    return rows


def query_terms(text: str) -> list[str]:
    """Lower-cased words of a query, without stop words or single letters, first occurrence order."""
    seen: dict[str, None] = {}
    for word in _WORD_RE.findall(text.lower()):
        if len(word) > 1 and word not in _STOPWORDS:
            seen.setdefault(word, None)
    return list(seen)


def _words(text: str) -> str:
    """The distinct lower-cased words of ``text``, each between single spaces (``" a b "``)."""
    return " " + " ".join(dict.fromkeys(_WORD_RE.findall(text.lower()))) + " "


#: A run of rows' words (their lines joined) and where each row starts in it, the last offset its end.
Words = tuple[bytes, "array[int]"]


def index_words(rows: Sequence[CatalogueRow]) -> Words:
    """The words of ``rows`` as :class:`CatalogueIndex` holds them: one run of bytes, made at its size."""
    lines = [_line(r) for r in rows]
    starts = array("q", [0])
    for line in lines:
        starts.append(starts[-1] + len(line))
    return b"".join(lines), starts


def _line(row: CatalogueRow) -> bytes:
    """A row's words, ``" name words | id words | description words "`` and a newline, in ASCII (``_WORD_RE``)."""
    ident = row.dataset_id.replace("_", " ").replace("@", " ")
    return f"{_words(row.name)}|{_words(ident)}|{_words(row.description)}\n".encode("ascii")


@dataclass(frozen=True)
class Hit:
    row: CatalogueRow
    score: float
    #: Query words this dataflow matched.
    matched: int


class CatalogueIndex:
    """Rows with the words of their fields, built once per catalogue body.

    Each row's words are one string, ``" name words | id words | description words "``,
    each field's distinct words between single spaces: a query word is a whole word of a
    field where ``" word "`` occurs, the start of one where ``" word"`` does (words hold no
    spaces and no ``|``). A set of word strings per field held 83 MB for 48,600 dataflows
    with long descriptions; a string per row, 6 MB. The rows' words are held as one run
    of ASCII bytes, each row ended by a newline (no word holds one), with where each
    starts: a string per row weighed some 60 bytes more than its words (3 MB of the 6),
    and a query word is looked for over all the rows in C, the rows it occurs in found by
    their offsets. They are joined :data:`_CHUNK_ROWS` rows at a time, each run made once
    at its size: grown a row at a time instead, the reallocations left twice its size of
    holes in the heap. A catalogue read in the parsing child comes with its rows' words
    made there (``words``), off the server's interpreter lock.
    Document frequencies are counted per query word, in the same pass that weighs the rows.
    """

    def __init__(self, rows: list[CatalogueRow], words: Iterable[Words] | None = None) -> None:
        """The index of ``rows``; ``words``, their words made already (:func:`index_words`), runs of rows in order."""
        self.rows = rows
        if words is None:
            words = (index_words(rows[first : first + _CHUNK_ROWS]) for first in range(0, len(rows), _CHUNK_ROWS))
        #: (first row, its rows' words, where each row starts in them), per run of rows.
        self._chunks: list[tuple[int, bytes, array[int]]] = []
        first = 0
        for text, starts in words:
            self._chunks.append((first, text, starts))
            first += len(starts) - 1
        if first != len(rows):
            raise ValueError("the words given are not the rows'")

    def __len__(self) -> int:
        return len(self.rows)

    def _match(self, term: str) -> tuple[dict[int, float], float]:
        """Each matching row's best field weight for ``term`` (by row number), and the term's idf."""
        whole, start = f" {term} ".encode("ascii"), f" {term}".encode("ascii")
        weights: dict[int, float] = {}
        exact = prefixed = 0
        for first, text, starts in self._chunks:
            at = text.find(start)
            while at != -1:
                row = bisect_right(starts, at) - 1
                words = text[starts[row] : starts[row + 1] - 1]
                prefixed += 1
                best = 0.0
                for field, weight in zip(words.split(b"|"), _WEIGHTS, strict=True):
                    if whole in field:
                        best = max(best, weight)
                    elif len(term) >= 4 and start in field:
                        best = max(best, weight * _PREFIX)
                if whole in words:
                    exact += 1
                if best:
                    weights[first + row] = best
                at = text.find(start, starts[row + 1])
        # A word no dataflow has whole is weighed by the dataflows it starts a word of.
        df = exact or prefixed
        return weights, math.log(1.0 + len(self.rows) / (1.0 + df))

    def search(self, query: str, limit: int) -> tuple[list[Hit], int]:
        """Best ``limit`` hits and how many dataflows matched at least one query word."""
        terms = query_terms(query)
        if not terms:
            return [], 0
        matches = [self._match(term) for term in terms]
        hits: list[Hit] = []
        for i in sorted(set().union(*(weights for weights, _ in matches))):
            score = 0.0
            matched = 0
            for weights, idf in matches:
                best = weights.get(i, 0.0)
                if best:
                    matched += 1
                    score += best * idf
            hits.append(Hit(self.rows[i], score, matched))
        # More of the question matched first; then how strongly; then a stable order.
        hits.sort(key=lambda h: (-h.matched, -h.score, h.row.dataset_id))
        return hits[:limit], len(hits)
