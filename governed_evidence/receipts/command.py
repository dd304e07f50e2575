"""``governed-evidence verify RECEIPT``: check a receipt's signature, then its passages against an index.

RECEIPT is the answer holding the receipt (as a transcript shows it), or the receipt alone
(then only its signature is checked). Exit status: 0 when the signature is valid and every
cited passage is unchanged; 1 when the signature is not valid (altered, unsigned, or no
matching public key) or the index cannot be read; 3 when it is valid but a passage changed
or is gone, or the answer's citation ids are not the receipt's; 2 when the receipt cannot
be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from governed_evidence.errors import InvalidRequestError
from governed_evidence.receipts.check import Answer, Verdict, check_passages, check_signature, ids_match, parse_answer
from governed_evidence.receipts.keys import PublicKey, load_public_key, load_signer

if TYPE_CHECKING:
    from governed_evidence.config import Settings

__all__ = ["EXIT_CHANGED", "MAX_RECEIPT_BYTES", "cmd_verify", "register", "verdict_json", "verify"]

#: A pasted answer holding a receipt is a few kilobytes; a larger input is not one.
MAX_RECEIPT_BYTES = 4 * 1024 * 1024
EXIT_CHANGED = 3


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``verify`` to the program's sub-parsers."""
    p = sub.add_parser("verify", help="check an evidence receipt's signature and its passages against an index")
    p.add_argument(
        "receipt", help="a file holding the answer with its receipt (or the receipt alone), or - to read it from stdin"
    )
    p.add_argument("--db", help="index to check the passages against (default: $GOVERNED_EVIDENCE_DB)")
    p.add_argument(
        "--public-key",
        action="append",
        metavar="KEY",
        help="a public key to trust: a PEM file, or the public_key index_status shows as --public-key=KEY "
        "(repeatable; default: "
        "the key of $GOVERNED_EVIDENCE_RECEIPT_KEY)",
    )
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.set_defaults(func=cmd_verify)


def _read(source: str) -> str:
    if source == "-":
        data = sys.stdin.buffer.read(MAX_RECEIPT_BYTES + 1)
    else:
        try:
            with Path(source).open("rb") as f:
                data = f.read(MAX_RECEIPT_BYTES + 1)
        except OSError as exc:
            raise InvalidRequestError(f"cannot read {source}: {exc.strerror or exc}") from None
    if len(data) > MAX_RECEIPT_BYTES:
        raise InvalidRequestError(f"{source} is larger than a receipt ({MAX_RECEIPT_BYTES} bytes at most)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequestError(f"{source} is not UTF-8 text") from None


def _keys(args: argparse.Namespace, settings: Settings) -> list[PublicKey]:
    if args.public_key:
        return [load_public_key(k) for k in args.public_key]
    if settings.receipt_key is not None:
        return [load_signer(settings.receipt_key).public]
    return []


def verify(answer: Answer, keys: list[PublicKey], db: Path | None) -> Verdict:
    """The signature, then (with ``db``) the passages of a receipt that cites them."""
    signature = check_signature(answer, keys)
    matched = ids_match(answer)
    if answer.receipt.index is None or db is None:
        return Verdict(signature, matched)
    from governed_evidence.store.connection import connect

    conn = connect(db, readonly=True)
    try:
        same, passages = check_passages(conn, answer)
    finally:
        conn.close()
    return Verdict(signature, matched, same, passages)


def verdict_json(answer: Answer, verdict: Verdict) -> dict[str, Any]:
    receipt = answer.receipt
    return {
        "receipt": receipt.id,
        "issued_at": receipt.at,
        "tool": receipt.tool,
        "clearance": receipt.clearance,
        "signature": verdict.signature,
        "key": receipt.key,
        "citation_ids_match": verdict.ids_match,
        "same_index": verdict.same_index,
        "passages": [
            {"citation_id": p.citation_id, "state": p.state, "superseded_by": p.superseded_by} for p in verdict.passages
        ],
        "data": receipt.data.model_dump() if receipt.data is not None else None,
        "ok": verdict.ok,
    }


def _shown(value: object) -> str:
    """Text from a pasted receipt as printed: anything unprintable (escape sequences, a lone
    surrogate) written as its code, so a hostile file cannot drive the terminal."""
    text = str(value)
    return text if text.isprintable() else "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)


def _print(answer: Answer, verdict: Verdict) -> None:
    r = answer.receipt
    print(f"receipt {_shown(r.id)}: {_shown(r.tool)} at {_shown(r.at)}, clearance {_shown(r.clearance)}")
    print(f"signature: {verdict.signature}" + (f" (key {_shown(r.key)})" if r.key else ""))
    if verdict.ids_match is None and r.cited:
        print("passages: not checked (give the whole answer: the receipt names its passages by the answer's ids)")
    elif verdict.ids_match is False:
        print("passages: the answer's citation ids are not the ones this receipt was issued for")
    if verdict.same_index is not None:
        print(
            "index: the same passages at this clearance, and the same model, as when issued"
            if verdict.same_index
            else "index: the passages at this clearance or the model have changed since it was issued"
        )
    for p in verdict.passages:
        state = f"changed since {_shown(r.at)}" if p.state == "changed since" else p.state
        later = f" (document superseded by {_shown(p.superseded_by)})" if p.superseded_by else ""
        print(f"  {state}: {_shown(p.citation_id)}{later}")
    if r.data is not None:
        d = r.data
        cached = " (from the cache)" if d.from_cache else ""
        print(
            f"statistics: {_shown(d.provider)} {_shown(d.url)}, retrieved {_shown(d.retrieved_at)}{cached}, "
            f"body sha256 {_shown(d.body)}"
        )


def cmd_verify(args: argparse.Namespace, settings: Settings) -> int:
    answer = parse_answer(_read(args.receipt))
    db = Path(args.db) if args.db else settings.db
    checked = answer.receipt.index is not None and answer.citation_ids is not None
    verdict = verify(answer, _keys(args, settings), db if checked else None)
    if args.json:
        print(json.dumps(verdict_json(answer, verdict), indent=2))
    else:
        _print(answer, verdict)
    if verdict.signature != "valid":
        return 1
    return 0 if verdict.ok else EXIT_CHANGED
