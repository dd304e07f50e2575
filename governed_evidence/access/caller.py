"""The caller of one request: a name for the audit trail and the clearance they hold.

A verified credential (a token this server issued, or a JWT from the organisation's
identity provider) becomes a :class:`Caller`, carried inside fastmcp's ``AccessToken`` under
:data:`CALLER_CLAIM`. The verifiers always write that claim themselves, overwriting any
claim of the same name the credential carried, so a caller cannot name their own clearance.

The documents a request may see are those at or below the lower of the server's ceiling and
the caller's clearance (:meth:`Caller.effective`). ``clearance`` None is a caller who is
identified but holds no clearance: they may use the statistics tools, never the documents.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from governed_evidence.config import Classification, parse_level
from governed_evidence.errors import ConfigError

__all__ = ["CALLER_CLAIM", "Caller", "Via"]

#: The claim under which a verifier stores the caller it verified.
CALLER_CLAIM = "governed_evidence_caller"

#: How the caller was identified: the process's own stdio, a server-issued token, a JWT, or
#: no credential at all on a network the operator declared to be the boundary.
Via = Literal["stdio", "token", "jwt", "network"]


@dataclass(frozen=True)
class Caller:
    name: str
    clearance: Classification | None
    via: Via

    def effective(self, ceiling: Classification) -> Classification | None:
        """The highest level this caller may see on a server at ``ceiling`` (None: no documents)."""
        if self.clearance is None:
            return None
        return min(self.clearance, ceiling)

    def claim(self) -> dict[str, Any]:
        """The form stored in an access token's claims."""
        # `is not None`: PUBLIC is the IntEnum 0, and falsy.
        label = self.clearance.label if self.clearance is not None else None
        return {"name": self.name, "clearance": label, "via": self.via}

    @classmethod
    def from_claim(cls, value: object) -> Caller:
        """The caller a verifier stored; anything malformed is a fault, never a wider access."""
        if not isinstance(value, dict):
            raise ConfigError("the access token carries no caller")
        name, clearance, via = value.get("name"), value.get("clearance"), value.get("via")
        if not isinstance(name, str) or via not in ("token", "jwt"):
            raise ConfigError("the access token's caller is malformed")
        level = parse_level(clearance) if isinstance(clearance, str) else None
        if clearance is not None and level is None:
            raise ConfigError("the access token's clearance is malformed")
        return cls(name=name, clearance=level, via=via)
