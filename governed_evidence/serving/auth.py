"""Which credential a team server accepts: none, tokens it issued, or JWTs from an IdP.

Both verifiers are fastmcp token verifiers (fastmcp checks the bearer token on every request
to ``/mcp`` and answers a missing or bad one with 401 and ``WWW-Authenticate``); each turns
a credential it accepts into a :class:`~governed_evidence.access.caller.Caller`.

With JWTs and a public URL (``GOVERNED_EVIDENCE_PUBLIC_URL``), the server also publishes its
OAuth protected-resource metadata (RFC 9728) naming the identity provider as the
authorization server, so an MCP client can discover where to get a token.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from governed_evidence.errors import ConfigError

if TYPE_CHECKING:
    from fastmcp.server.auth import AuthProvider

    from governed_evidence.config import Settings
    from governed_evidence.serving.http import AuthMode

__all__ = ["make_auth"]


def make_auth(mode: AuthMode, settings: Settings, *, tokens_file: Path | None) -> AuthProvider | None:
    if mode == "none":
        return None
    if mode == "tokens":
        from governed_evidence.access.tokens import TokensFileVerifier

        path = tokens_file or settings.tokens_file
        if path is None:
            raise ConfigError("--auth tokens needs --tokens-file or GOVERNED_EVIDENCE_TOKENS_FILE")
        try:
            found = Path(path).is_file()
        except OSError as exc:  # a folder the server's user cannot enter
            raise ConfigError(f"cannot read the tokens file {path}: {exc.strerror or exc}") from None
        if not found:
            raise ConfigError(f"no tokens file at {path}: create one with 'governed-evidence token create'")
        return TokensFileVerifier(Path(path))
    if mode != "jwt":
        raise ConfigError(f"unknown --auth {mode!r}: use none, tokens or jwt")
    from fastmcp.server.auth import RemoteAuthProvider
    from pydantic import AnyHttpUrl

    from governed_evidence.access.jwt import make_jwt_verifier

    verifier = make_jwt_verifier(settings, base_url=settings.public_url)
    if settings.public_url is None or not settings.jwt_issuer:
        return verifier
    return RemoteAuthProvider(
        token_verifier=verifier,
        authorization_servers=[AnyHttpUrl(settings.jwt_issuer)],
        base_url=settings.public_url,
        resource_name="governed-evidence",
    )
