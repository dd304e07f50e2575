"""The receipt as it travels in an answer (declared in the three tools' output schemas).

Short field names, hashes in base64url and the citation ids bound by one digest rather
than repeated (the answer beside the receipt already carries them) keep a receipt for
eight passages well under a kilobyte: the assistant pays for every token of an answer.
Only what the caller could see is in it: hashes of the passages served and of their ids,
a fingerprint of the passages at the caller's level, and a hash of the arguments (never
the query itself).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RECEIPT_VERSION", "DataSource", "IndexIdentity", "Receipt", "ReceiptKey"]

RECEIPT_VERSION: Literal[1] = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class IndexIdentity(_Model):
    fp: str = Field(
        description="SHA-256 (base64url) over every passage visible at the clearance applied: citation id, level, "
        "searchable, SHA-256 of its text. Unchanged by documents above that clearance."
    )
    model: str = Field(description="The embedding model of the index.")


class DataSource(_Model):
    provider: str
    url: str = Field(description="The exact request URL the values were read from.")
    retrieved_at: str
    from_cache: bool
    body: str = Field(description="SHA-256 (hex) of the response body the values were read from.")


class Receipt(_Model):
    v: Literal[1] = RECEIPT_VERSION
    id: str = Field(description="This receipt's id; the audit trail records it beside the call.")
    at: str = Field(description="When it was issued (ISO 8601, UTC).")
    tool: str
    args: str = Field(description="SHA-256 (base64url) of the tool's arguments as canonical JSON.")
    clearance: str = Field(description="The clearance applied to the call (public, internal, restricted or none).")
    index: IndexIdentity | None = None
    ids: str | None = Field(
        default=None,
        description="SHA-256 (base64url) of the citation ids served, in the answer's order, as a canonical JSON list: "
        "binds the answer's citation_id fields without repeating them.",
    )
    cited: list[str] = Field(
        default_factory=list,
        description="Per passage served, in the answer's order: SHA-256 (base64url) of its text exactly as served.",
    )
    data: DataSource | None = None
    key: str | None = Field(default=None, description="Id of the signing key (index_status shows its public key).")
    sig: str | None = Field(
        default=None, description="Ed25519 signature (base64url) of the receipt without sig, as canonical JSON."
    )
    signed: bool = Field(description="False when the server has no receipt key: the receipt is not signed.")


class ReceiptKey(_Model):
    """The receipt key as index_status shows it: what a verifier needs to trust the server's receipts."""

    signed: bool = Field(description="False when the server has no receipt key: its receipts are not signed.")
    algorithm: Literal["Ed25519"] | None = None
    key_id: str | None = Field(default=None, description="The id receipts carry in their `key` field.")
    public_key: str | None = Field(default=None, description="The raw public key, base64url (32 bytes).")
