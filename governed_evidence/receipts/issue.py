"""Issuing receipts: built from what a tool served, signed when the server has a key."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from governed_evidence.config import Classification
from governed_evidence.receipts.canonical import b64url, canonical_bytes, digest, text_digest
from governed_evidence.receipts.fingerprint import Fingerprints
from governed_evidence.receipts.model import DataSource, Receipt, ReceiptKey

if TYPE_CHECKING:
    # Not imported at run time: without a receipt key, serving never loads the crypto library.
    from governed_evidence.receipts.keys import Signer
    from governed_evidence.store.connection import IndexReader

__all__ = ["ReceiptIssuer"]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class ReceiptIssuer:
    """Makes the receipts of one server; ``signer`` None: receipts say they are unsigned."""

    def __init__(self, signer: Signer | None = None) -> None:
        self.signer = signer
        self.fingerprints = Fingerprints()

    def key_info(self) -> ReceiptKey:
        """What index_status and the capabilities resource say of the receipt key."""
        if self.signer is None:
            return ReceiptKey(signed=False)
        public = self.signer.public
        return ReceiptKey(signed=True, algorithm="Ed25519", key_id=public.id, public_key=public.raw)

    def _finish(self, fields: dict[str, Any]) -> Receipt:
        fields.update(v=1, id=b64url(secrets.token_bytes(12)), at=_now(), signed=self.signer is not None)
        if self.signer is not None:
            fields["key"] = self.signer.public.id
        receipt = Receipt.model_validate(fields)
        if self.signer is None:
            return receipt
        # What is signed is the receipt as served (defaults included), nulls left out.
        served = receipt.model_dump(mode="json", exclude_none=True)
        return receipt.model_copy(update={"sig": self.signer.sign(canonical_bytes(served, has_nulls=False))})

    def for_passages(
        self,
        *,
        tool: str,
        arguments: dict[str, Any],
        clearance: Classification,
        reader: IndexReader,
        served: Sequence[tuple[str, str]],
    ) -> Receipt:
        """The receipt of ``served`` (citation id, text exactly as served, in the answer's order) at ``clearance``."""

        return self._finish(
            {
                "tool": tool,
                "args": digest(arguments),
                "clearance": clearance.label,
                "index": self.fingerprints.identity(reader, clearance).model_dump(),
                "ids": digest([citation_id for citation_id, _ in served]),
                "cited": [text_digest(text) for _, text in served],
            }
        )

    def for_data(
        self, *, tool: str, arguments: dict[str, Any], clearance: Classification | None, source: DataSource
    ) -> Receipt:
        """The receipt of statistics read from one provider response."""
        return self._finish(
            {
                "tool": tool,
                "args": digest(arguments),
                "clearance": clearance.label if clearance is not None else "none",
                "data": source.model_dump(),
            }
        )
