"""The server's receipt key (Ed25519) and the public keys a verifier trusts.

The private key is read once, at start, from the PEM file the operator configured
(``GOVERNED_EVIDENCE_RECEIPT_KEY``); it is never logged and never leaves the process. A
key is named by its id, the first eight bytes of the SHA-256 of its raw public key
(base64url): a receipt carries the id, so a verifier holding several public keys (after a
rotation) knows which one to check it with.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from governed_evidence.errors import ConfigError
from governed_evidence.receipts.canonical import b64url, from_b64url

__all__ = ["ALGORITHM", "PublicKey", "Signer", "load_public_key", "load_signer"]

ALGORITHM = "Ed25519"


def _raw(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


@dataclass(frozen=True)
class PublicKey:
    """A public key a receipt can be checked with."""

    key: Ed25519PublicKey

    @property
    def raw(self) -> str:
        """The raw 32-byte public key, base64url (what index_status shows)."""
        return b64url(_raw(self.key))

    @property
    def id(self) -> str:
        return b64url(hashlib.sha256(_raw(self.key)).digest()[:8])

    def verifies(self, signature: str, data: bytes) -> bool:
        try:
            self.key.verify(from_b64url(signature), data)
        except (InvalidSignature, ValueError):
            return False
        return True


class Signer:
    """Signs receipts with the server's private key."""

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key
        self.public = PublicKey(key.public_key())

    def sign(self, data: bytes) -> str:
        return b64url(self._key.sign(data))

    def __repr__(self) -> str:  # never the key itself
        return f"Signer(key_id={self.public.id})"


#: Longest key file read: a PEM Ed25519 key is about 120 bytes.
_MAX_KEY_FILE = 64 * 1024


def _read(path: Path, what: str) -> bytes:
    try:
        with path.open("rb") as f:
            data = f.read(_MAX_KEY_FILE + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    if len(data) > _MAX_KEY_FILE:
        raise ConfigError(f"the {what} {path} is not a key file (larger than {_MAX_KEY_FILE} bytes)")
    return data


def load_signer(path: Path) -> Signer:
    """The private key in the PEM file at ``path`` (PKCS#8, unencrypted, Ed25519)."""
    data = _read(path, "receipt key (GOVERNED_EVIDENCE_RECEIPT_KEY)")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise ConfigError(
            f"the receipt key {path} is not an unencrypted PEM private key "
            f"({type(exc).__name__}); make one with `openssl genpkey -algorithm ed25519`"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(
            f"the receipt key {path} is not an Ed25519 key; make one with `openssl genpkey -algorithm ed25519`"
        )
    return Signer(key)


def load_public_key(source: str) -> PublicKey:
    """A public key given as a PEM file (public or private key) or as the raw key in base64url."""
    path = Path(source)
    if path.is_file():
        data = _read(path, "public key")
        try:
            loaded: object = serialization.load_pem_public_key(data)
        except ValueError:
            return load_signer(path).public
        if not isinstance(loaded, Ed25519PublicKey):
            raise ConfigError(f"{path} is not an Ed25519 public key")
        return PublicKey(loaded)
    try:
        raw = from_b64url(source.strip())
        return PublicKey(Ed25519PublicKey.from_public_bytes(raw))
    except ValueError:
        raise ConfigError("a public key is a PEM file or the base64url public_key that index_status shows") from None
