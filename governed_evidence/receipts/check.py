"""Verifying a receipt: its signature, then each cited passage against an index.

What is verified is an answer holding a receipt (as a transcript shows it): the receipt
carries a hash of each passage's text and one digest of their citation ids, and the
answer's ``citation_id`` fields name them. The ids are checked against that digest, then
each passage is looked up by its id at the receipt's clearance (what the caller could see
then): ``unchanged`` when its text hashes as the receipt says, ``changed since`` when it
hashes otherwise, ``gone`` when no passage visible at that clearance has the id any more.
A passage of a superseded document says by what.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import apsw
from pydantic import ValidationError

from governed_evidence.config import parse_level
from governed_evidence.errors import ConfigError, InvalidRequestError
from governed_evidence.receipts.canonical import canonical_bytes, digest, text_digest
from governed_evidence.receipts.fingerprint import level_fingerprint
from governed_evidence.receipts.keys import PublicKey
from governed_evidence.receipts.model import Receipt

__all__ = ["Answer", "PassageCheck", "Verdict", "check_passages", "check_signature", "ids_match", "parse_answer"]

SignatureState = Literal["valid", "invalid", "unsigned", "unknown key", "no public key"]
PassageState = Literal["unchanged", "changed since", "gone"]

#: Where a receipt may sit in what is pasted: the answer itself, or a tool result around it.
_WRAPPERS = ("structuredContent", "structured_content", "result")


@dataclass(frozen=True)
class Answer:
    """A receipt, the JSON values it was signed as, and the citation ids of the answer around it."""

    receipt: Receipt
    signed: dict[str, Any]
    #: None: the receipt was given alone, without the answer naming its passages.
    citation_ids: list[str] | None


def _answer_ids(answer: dict[str, Any]) -> list[str] | None:
    """The citation ids an answer served, in the order its receipt hashes them."""
    try:
        if isinstance(answer.get("results"), list):
            return [str(r["citation_id"]) for r in answer["results"]]
        if isinstance(answer.get("passage"), dict):
            views = [*answer.get("before", []), answer["passage"], *answer.get("after", [])]
            return [str(v["citation_id"]) for v in views]
    except (KeyError, TypeError):
        return None
    return None


def _find(value: Any) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
    """The receipt in ``value`` and the answer holding it (None: given alone)."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("receipt"), dict):
        return value["receipt"], value
    if "sig" in value or ("args" in value and "tool" in value):
        return value, None
    for key in _WRAPPERS:
        found = _find(value.get(key))
        if found is not None:
            return found
    return None


def parse_answer(text: str) -> Answer:
    """The receipt in ``text``: an answer (JSON) holding one, or a receipt alone."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidRequestError(f"the receipt is not JSON: {exc.msg} (line {exc.lineno})") from None
    found = _find(value)
    if found is None:
        raise InvalidRequestError("no receipt found: pass an answer holding one (its `receipt` field) or a receipt")
    raw, answer = found
    try:
        receipt = Receipt.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "receipt"
        raise InvalidRequestError(f"the receipt is malformed: {where}: {first['msg']}") from None
    return Answer(receipt, raw, _answer_ids(answer) if answer is not None else None)


def check_signature(answer: Answer, keys: Sequence[PublicKey]) -> SignatureState:
    receipt = answer.receipt
    if receipt.sig is None:
        return "unsigned"
    if not keys:
        return "no public key"
    key = next((k for k in keys if k.id == receipt.key), None)
    if key is None:
        return "unknown key"
    return "valid" if key.verifies(receipt.sig, canonical_bytes(answer.signed)) else "invalid"


@dataclass(frozen=True)
class PassageCheck:
    citation_id: str
    state: PassageState
    superseded_by: str | None = None


@dataclass(frozen=True)
class Verdict:
    signature: SignatureState
    #: Whether the answer's citation ids are the ones the receipt binds (None: no answer given).
    ids_match: bool | None = None
    #: Whether the index still serves the receipt's clearance the same passages, under the same
    #: model (None: not checked).
    same_index: bool | None = None
    passages: list[PassageCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.signature == "valid"
            and self.ids_match is not False
            and all(p.state == "unchanged" for p in self.passages)
        )


def ids_match(answer: Answer) -> bool | None:
    if answer.citation_ids is None or answer.receipt.ids is None:
        return None
    ids = answer.citation_ids
    return len(ids) == len(answer.receipt.cited) and digest(ids) == answer.receipt.ids


def check_passages(conn: apsw.Connection, answer: Answer) -> tuple[bool | None, list[PassageCheck]]:
    """Whether the level's fingerprint is the same, and each cited passage's state in the index on ``conn``."""
    receipt = answer.receipt
    if receipt.index is None:
        return None, []
    try:
        level = parse_level(receipt.clearance)
    except ConfigError:
        raise InvalidRequestError(f"the receipt's clearance {receipt.clearance!r} is not a level") from None
    checks: list[PassageCheck] = []
    if ids_match(answer):
        for citation_id, expected in zip(answer.citation_ids or [], receipt.cited, strict=True):
            row = conn.execute(
                "SELECT p.text, d.superseded_by FROM passages p JOIN documents d ON d.id = p.document_id "
                "WHERE p.citation_id = ? AND p.classification <= ?",
                (citation_id, int(level)),
            ).fetchone()
            if row is None:
                checks.append(PassageCheck(citation_id, "gone"))
                continue
            state: PassageState = "unchanged" if text_digest(str(row[0])) == expected else "changed since"
            checks.append(PassageCheck(citation_id, state, str(row[1]) if row[1] else None))
    model = conn.execute("SELECT value FROM meta WHERE key = 'embedding_model'").fetchone()
    same = level_fingerprint(conn, level) == receipt.index.fp and model is not None and model[0] == receipt.index.model
    return same, checks
