"""JWT access tokens from the organisation's identity provider (OIDC), mapped to a clearance.

fastmcp's :class:`JWTVerifier` checks the signature, ``iss``, ``aud``, ``exp``, ``nbf`` and
the required scope; this module adds what a clearance needs on top of it:

* an ``exp`` claim is required (fastmcp accepts a token without one, which would be valid
  for ever once leaked), and ``exp``, ``nbf`` and ``iat`` must be finite numbers when present
  (fastmcp reads ``"nbf": NaN`` as already valid); no claim may hold NaN or an infinity;
* the token's roles (``roles`` by default, as Entra ID app roles; a list, or one
  space-separated string) are mapped to a clearance, the highest mapped role winning; a
  token with no mapped role is valid with clearance None (statistics, never documents);
* the :data:`~governed_evidence.access.caller.CALLER_CLAIM` is always written here,
  overwriting any claim of that name the token carried, so a token cannot name its own
  clearance;
* the keys may come from a local JWKS file instead of a URL (air-gapped servers, a key
  set the operator manages), re-read whenever its content changes, so both a new key and a
  removed key take effect on the next request without a restart.

Only asymmetric algorithms are accepted: with a shared secret anyone who can verify tokens
could mint them, and a public key must never double as an HMAC secret. Tokens never reach
a log line or a message; the refusals fastmcp logs name the client and the mismatching
claim, never the token.
"""

from __future__ import annotations

import ipaddress
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastmcp.server.auth import AccessToken
from fastmcp.server.auth.providers.jwt import JWTVerifier

from governed_evidence.access.caller import CALLER_CLAIM, Caller
from governed_evidence.config import Classification, Settings, parse_level
from governed_evidence.errors import ConfigError
from governed_evidence.logging import get_logger

__all__ = ["ASYMMETRIC_ALGORITHMS", "ClearanceJWTVerifier", "make_jwt_verifier", "parse_role_map"]

log = get_logger("access.jwt")

#: The signing algorithms a verifier accepts (fastmcp's list without the HS* family).
ASYMMETRIC_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519", "Ed448"}
)

#: Largest JWKS file read; a key set is a few KB, so anything near this is a wrong file.
_MAX_JWKS_FILE_BYTES = 1024 * 1024
#: Claims naming the caller for the audit trail, most readable first.
_NAME_CLAIMS = ("preferred_username", "email", "sub")

_ISSUER = "GOVERNED_EVIDENCE_JWT_ISSUER"
_AUDIENCE = "GOVERNED_EVIDENCE_JWT_AUDIENCE"
_JWKS_URL = "GOVERNED_EVIDENCE_JWT_JWKS_URL"
_JWKS_FILE = "GOVERNED_EVIDENCE_JWT_JWKS_FILE"
_ALGORITHM = "GOVERNED_EVIDENCE_JWT_ALGORITHM"
_ROLES_CLAIM = "GOVERNED_EVIDENCE_JWT_ROLES_CLAIM"
_ROLE_MAP = "GOVERNED_EVIDENCE_JWT_ROLE_MAP"


def parse_role_map(text: str) -> dict[str, Classification]:
    """Parse ``ROLE=LEVEL,ROLE=LEVEL`` strictly: a typo is an error, never a silent grant or loss."""
    mapping: dict[str, Classification] = {}
    for entry in text.split(","):
        role, sep, level = entry.partition("=")
        role = role.strip()
        if not sep or not role or "=" in level:
            raise ConfigError(f"{entry.strip()!r} is not ROLE=LEVEL (entries are separated by commas)")
        if role in mapping:
            raise ConfigError(f"role {role!r} is mapped twice")
        mapping[role] = parse_level(level)
    return mapping


def _read_jwks_file(path: Path) -> bytes:
    """The file's bytes; ValueError (which fastmcp turns into a refused token) if unreadable."""
    try:
        with path.open("rb") as handle:
            content = handle.read(_MAX_JWKS_FILE_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"JWKS file {path} is unreadable ({type(exc).__name__})") from None
    if len(content) > _MAX_JWKS_FILE_BYTES:
        raise ValueError(f"JWKS file {path} is larger than {_MAX_JWKS_FILE_BYTES} bytes")
    return content


def _parse_jwks(content: bytes) -> dict[str, Any]:
    try:
        data = json.loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError("the JWKS is not JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise ValueError('the JWKS is not an object with a "keys" list')
    return data


def _check_jwks_url(url: str) -> None:
    """https, or plain http to this machine only: keys fetched in clear text could be swapped."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError:
        raise ConfigError("give an https URL") from None
    if not parts.hostname or parts.username or parts.password or parts.fragment:
        raise ConfigError("give an https URL without credentials or a fragment")
    if parts.scheme == "https":
        return
    if parts.scheme == "http":
        host = parts.hostname
        try:
            loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if loopback:
            return
    raise ConfigError("give an https URL (plain http only to 127.0.0.1, ::1 or localhost)")


def _roles(value: object) -> list[str]:
    """Role names from a list claim or a space-separated string claim; anything else has none."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list):
        return [role for role in value if isinstance(role, str)]
    return []


def _caller_name(claims: Mapping[str, Any]) -> str | None:
    for claim in _NAME_CLAIMS:
        value = claims.get(claim)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


#: The NumericDate claims (RFC 7519 section 4.1): when present, each must be a time.
_TIME_CLAIMS = ("exp", "nbf", "iat")


def _valid_exp(value: object) -> bool:
    # bool is an int to Python, and json accepts NaN and Infinity: none of them is a time.
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _non_finite_claim(claims: Mapping[str, Any]) -> str | None:
    """The first claim that is not a usable number where one is due, else None.

    fastmcp compares ``nbf`` and ``iat`` with the clock as they come, and ``NaN > now`` is
    false: a ``"nbf": NaN`` would pass as already valid. Any claim holding NaN or an
    infinity is refused too, since no claim means anything by one.
    """
    for name in _TIME_CLAIMS:
        if name in claims and not _valid_exp(claims[name]):
            return name
    for name, value in claims.items():
        if isinstance(value, float) and not math.isfinite(value):
            return str(name)
    return None


class ClearanceJWTVerifier(JWTVerifier):
    """A fastmcp JWT verifier whose access tokens carry the :class:`Caller` they identify."""

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        role_map: Mapping[str, Classification],
        jwks_url: str | None = None,
        jwks_file: Path | None = None,
        algorithm: str = "RS256",
        required_scope: str | None = None,
        roles_claim: str = "roles",
        base_url: str | None = None,
    ) -> None:
        if not issuer or not audience:
            # Without both, a token minted for any other application of the same issuer
            # (or by any issuer trusting the same keys) would be accepted.
            raise ConfigError("a JWT verifier needs both an issuer and an audience")
        if (jwks_url is None) == (jwks_file is None):
            raise ConfigError("a JWT verifier needs exactly one of a JWKS URL and a JWKS file")
        if algorithm not in ASYMMETRIC_ALGORITHMS:
            raise ConfigError(f"unsupported JWT algorithm {algorithm!r}; use one of: {_algorithms()}")
        if not roles_claim:
            raise ConfigError("a JWT verifier needs the name of the roles claim")
        self._jwks_file = jwks_file.resolve() if jwks_file is not None else None
        #: The file content the key cache was last built from (None: not yet read).
        self._jwks_loaded: bytes | None = None
        if self._jwks_file is not None:
            try:
                _parse_jwks(_read_jwks_file(self._jwks_file))
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        # fastmcp resolves keys only when it has a JWKS URI; for a file it is the file's URI,
        # never fetched, because _fetch_jwks below reads the file instead.
        uri = self._jwks_file.as_uri() if self._jwks_file is not None else jwks_url
        super().__init__(
            jwks_uri=uri,
            issuer=issuer,
            audience=audience,
            algorithm=algorithm,
            required_scopes=required_scope.split() if required_scope else None,
            base_url=base_url,
            # Re-reading a local file is cheap, so an unknown kid rereads it at once; a URL
            # keeps fastmcp's default interval, sparing the identity provider a fetch per token.
            jwks_refresh_interval=0.0 if self._jwks_file is not None else 30.0,
        )
        self.roles_claim = roles_claim
        self.role_map = dict(role_map)

    async def _get_verification_key(self, token: str) -> str | bytes:
        if self._jwks_file is not None:
            self._notice_jwks_file_change()
        return await super()._get_verification_key(token)

    def _notice_jwks_file_change(self) -> None:
        """Drop the cached keys when the file no longer holds what they were built from.

        The content is compared, not the modification time: a rotation written twice within
        the file system's time granularity must still be seen, above all one that removes a
        compromised key. The read is a small local file, far cheaper than the signature check.
        """
        if self._jwks_file is None:
            return
        try:
            content = _read_jwks_file(self._jwks_file)
        except ValueError as exc:
            # Every token is refused until the file is back (fastmcp turns the ValueError into
            # a refusal); the operator learns why here, once per refused request.
            log.warning("jwt_jwks_file_unusable", error=str(exc))
            raise
        if content != self._jwks_loaded:
            # Minus infinity, not 0: fastmcp compares the cache time with time.monotonic(), which
            # counts from the host's boot, so a 0 read as fresh for the first cache TTL after a
            # boot (an hour), and a withdrawn key kept verifying that long.
            self._jwks_cache_time = float("-inf")
            self._jwks_last_refresh_attempt = None

    async def _fetch_jwks(self) -> dict[str, Any]:
        if self._jwks_file is not None:
            content = _read_jwks_file(self._jwks_file)
            # Recorded before parsing: a half-written file is refused until its content changes
            # again, and the cache time fastmcp leaves stale keeps the old keys out of use.
            self._jwks_loaded = content
            data = _parse_jwks(content)
        else:
            data = await super()._fetch_jwks()
        # A key published for encryption, or for another algorithm, never verifies a signature.
        keys = [
            key
            for key in data.get("keys", [])
            if isinstance(key, dict)
            and key.get("use", "sig") == "sig"
            and key.get("alg", self.algorithm) == self.algorithm
        ]
        return {**data, "keys": keys}

    async def load_access_token(self, token: str) -> AccessToken | None:
        """fastmcp's checks, then a required ``exp`` and the caller this token identifies.

        Overridden here rather than in ``verify_token`` because ``verify_token`` calls this
        method: every path to an access token passes through the caller claim.
        """
        try:
            access = await super().load_access_token(token)
        except (ArithmeticError, ValueError):
            # An exp of Infinity overflows fastmcp's int(); anything else is refused there.
            return None
        if access is None:
            return None
        claims = access.claims
        if not _valid_exp(claims.get("exp")):
            log.info("jwt_refused", reason="no usable exp claim", client_id=access.client_id)
            return None
        unusable = _non_finite_claim(claims)
        if unusable is not None:
            # The claim's name only if it is one of the standard times: any other name is the issuer's text.
            claim = unusable if unusable in _TIME_CLAIMS else "another"
            log.info("jwt_refused", reason=f"{claim} claim is not a finite number", client_id=access.client_id)
            return None
        name = _caller_name(claims)
        if name is None:
            log.info("jwt_refused", reason="no preferred_username, email or sub claim", client_id=access.client_id)
            return None
        levels = [self.role_map[role] for role in _roles(claims.get(self.roles_claim)) if role in self.role_map]
        caller = Caller(name=name, clearance=max(levels) if levels else None, via="jwt")
        return access.model_copy(update={"claims": {**claims, CALLER_CLAIM: caller.claim()}})


def _algorithms() -> str:
    return ", ".join(sorted(ASYMMETRIC_ALGORITHMS))


def make_jwt_verifier(settings: Settings, *, base_url: str | None = None) -> ClearanceJWTVerifier:
    """The verifier the settings describe; ConfigError naming the setting to fix."""
    issuer = settings.jwt_issuer.strip()
    audience = settings.jwt_audience.strip()
    url = settings.jwt_jwks_url.strip() or None
    file = settings.jwt_jwks_file
    if not issuer:
        raise ConfigError(f"{_ISSUER} must be set: the verifier refuses tokens from any other issuer")
    if not audience:
        raise ConfigError(f"{_AUDIENCE} must be set: without it tokens minted for other applications would pass")
    if url is None and file is None:
        raise ConfigError(f"set {_JWKS_URL} or {_JWKS_FILE}: the keys that verify token signatures")
    if url is not None and file is not None:
        raise ConfigError(f"set only one of {_JWKS_URL} and {_JWKS_FILE}")
    if url is not None:
        try:
            _check_jwks_url(url)
        except ConfigError as exc:
            raise ConfigError(f"{_JWKS_URL}: {exc}") from None
    if file is not None:
        try:
            _parse_jwks(_read_jwks_file(file))
        except ValueError as exc:
            raise ConfigError(f"{_JWKS_FILE}: {exc}") from None
    algorithm = settings.jwt_algorithm.strip()
    if algorithm not in ASYMMETRIC_ALGORITHMS:
        raise ConfigError(f"{_ALGORITHM}: unsupported algorithm {algorithm!r}; use one of: {_algorithms()}")
    roles_claim = settings.jwt_roles_claim.strip()
    if not roles_claim:
        raise ConfigError(f"{_ROLES_CLAIM} must name the claim holding the caller's roles")
    try:
        role_map = parse_role_map(settings.jwt_role_map)
    except ConfigError as exc:
        raise ConfigError(f"{_ROLE_MAP}: {exc}") from None
    return ClearanceJWTVerifier(
        issuer=issuer,
        audience=audience,
        role_map=role_map,
        jwks_url=url,
        jwks_file=file,
        algorithm=algorithm,
        required_scope=settings.jwt_required_scope.strip() or None,
        roles_claim=roles_claim,
        base_url=base_url,
    )
