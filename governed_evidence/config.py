"""Operator settings (from the environment) and classification levels.

The ceiling is an operator decision: it comes from the environment or a CLI flag, never
from a tool argument, so a client model cannot raise its own clearance.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from governed_evidence.errors import ConfigError

__all__ = [
    "Classification",
    "Settings",
    "parse_label",
    "parse_level",
]


class Classification(enum.IntEnum):
    """Ordered sensitivity levels; a higher value is more sensitive."""

    PUBLIC = 0
    INTERNAL = 1
    RESTRICTED = 2

    @property
    def label(self) -> str:
        return self.name.lower()


def parse_label(value: object) -> Classification:
    """Map a document's label to a level; anything unknown is treated as most sensitive."""
    if isinstance(value, str):
        try:
            return Classification[value.strip().upper()]
        except KeyError:
            pass
    return Classification.RESTRICTED


def parse_level(value: str) -> Classification:
    """Strictly parse an operator-supplied level (a typo must not silently widen access).

    ASCII only: ``str.upper`` maps look-alikes such as a dotless ``ı`` onto Latin letters.
    """
    try:
        if not value.isascii():
            raise KeyError(value)
        return Classification[value.strip().upper()]
    except KeyError:
        names = ", ".join(c.label for c in Classification)
        raise ConfigError(f"unknown classification level {value!r}; use one of: {names}") from None


class Settings(BaseSettings):
    """Everything an operator can set, read from ``GOVERNED_EVIDENCE_*`` variables."""

    model_config = SettingsConfigDict(env_prefix="GOVERNED_EVIDENCE_", extra="ignore")

    #: The one SQLite file holding documents, passages, vectors and caches.
    db: Path = Path("data/evidence.sqlite")
    #: Highest classification served to callers of this process.
    ceiling: str = "public"
    #: Which embedder produces query vectors (must match the index's model).
    embedder: Literal["default", "openai"] = "default"
    #: OpenAI-compatible embeddings endpoint (base URL without /v1/embeddings).
    openai_base_url: str = "http://127.0.0.1:11434"
    openai_model: str = "nomic-embed-text"
    openai_api_key: SecretStr | None = None
    openai_timeout_s: float = Field(default=30.0, gt=0)
    #: How a query is told from a passage (embeddings/prompts.py): a named family's prompts,
    #: each prefix overridable by hand, and an optional ``input_type`` pair (query/passage).
    openai_preset: Literal["none", "e5", "nomic", "bge", "gte", "arctic", "mxbai"] = "none"
    openai_query_prefix: str | None = None
    openai_passage_prefix: str | None = None
    openai_input_type: str = Field(default="", pattern=r"^$|^[^/\s]+/[^/\s]+$")
    #: Largest source file ingest will open.
    max_file_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    #: Memory the server may use to hold its in-memory copies of each level it serves: the
    #: searchable vectors and the keyword impact lists (about 2.2 KB a passage together); 0, or
    #: an index that needs more, searches with sqlite-vec's KNN and FTS5 instead.
    vector_memory_mb: int = Field(default=4096, ge=0)
    #: "off" disables the confidence gate entirely (evaluation and sabotage runs only).
    gate: Literal["on", "off"] = "on"
    #: Level of the JSON logs on stderr. Left unset, `serve` logs at this default and the
    #: human commands only warnings (their results are their output; cli.py, --verbose).
    log_level: str = "INFO"
    tokens_file: Path | None = Field(
        default=None,
        description=(
            "JSON file of the bearer tokens this server issued (hashes only, written by "
            "`governed-evidence token`); `token --tokens-file` overrides it"
        ),
    )

    # Optional second-stage reranker (ADR 0008). It sees only passages the ceiling and the
    # gate have already let through, and any failure keeps the search's own order.
    #: "rerank-api": POST {base}/rerank (Cohere, Jina, Infinity, llama.cpp, TEI);
    #: "chat-grader": an OpenAI-compatible chat model grades each passage 0-3.
    reranker: Literal["off", "rerank-api", "chat-grader"] = "off"
    #: Base URL of the endpoint (without /rerank or /v1/chat/completions).
    reranker_base_url: str = "http://127.0.0.1:8080"
    #: Model name sent with every request; required when the reranker is on.
    reranker_model: str = ""
    reranker_api_key: SecretStr | None = None
    #: Request body of the rerank API: "documents" (Cohere, Jina, Infinity, llama.cpp) or "tei".
    reranker_api_flavour: Literal["documents", "tei"] = "documents"
    #: How many of the gate's eligible passages are sent (the best ones, in the search's order).
    reranker_top_n: int = Field(default=20, ge=1, le=50)
    #: Budget of one search's reranking, requests included; past it the search's order stands.
    reranker_timeout_s: float = Field(default=10.0, gt=0, le=60)
    #: rerank-api only: a passage scored below this is withheld like the gate withholds;
    #: unset reorders only. (The chat grader withholds passages graded 0.)
    reranker_min_score: float | None = Field(default=None, allow_inf_nan=False)

    # Official statistics (SDMX). Provider budgets live with the providers (providers.toml).
    #: TOML file adding or overriding SDMX providers (``[providers.ID]`` tables).
    sdmx_providers: Path | None = None
    #: Writable SQLite file for the SDMX cache when the index file is read-only or absent;
    #: unset means an in-memory cache (and a per-process rate ledger).
    sdmx_cache_path: Path | None = None
    sdmx_ttl_catalogue_s: int = Field(default=24 * 3600, ge=0)
    sdmx_ttl_structure_s: int = Field(default=7 * 24 * 3600, ge=0)
    sdmx_ttl_data_s: int = Field(default=3600, ge=0)
    #: Read timeout per attempt; a whole attempt is also bounded by twice this.
    sdmx_timeout_s: float = Field(default=30.0, gt=0, le=600)
    #: Retries after the first attempt, for 429/502/503/504 and transport failures.
    sdmx_max_retries: int = Field(default=2, ge=0, le=5)
    #: Longest wait honoured from a Retry-After header; a longer request fails (or serves stale).
    sdmx_max_retry_wait_s: float = Field(default=20.0, ge=0, le=600)
    #: Decoded-body caps per request kind (a gzip bomb is measured after decoding).
    sdmx_max_bytes_catalogue: int = Field(default=64 * 1024 * 1024, gt=0)
    sdmx_max_bytes_structure: int = Field(default=32 * 1024 * 1024, gt=0)
    sdmx_max_bytes_data: int = Field(default=16 * 1024 * 1024, gt=0)
    #: Most observations parsed from one data response (more is refused: narrow the key).
    sdmx_max_rows_parsed: int = Field(default=200_000, gt=0)
    #: Cache size (compressed bodies) above which the oldest entries are evicted.
    sdmx_cache_max_bytes: int = Field(default=256 * 1024 * 1024, gt=0)
    #: The only proxy provider requests use: an http(s) URL, credentials allowed (kept out of
    #: logs and messages). HTTPS_PROXY and the other environment variables are ignored.
    sdmx_proxy: SecretStr | None = None
    #: One deadline per statistics tool call, every attempt, retry and Retry-After wait
    #: included (MCP clients give up well before three 30 s attempts end).
    sdmx_deadline_s: float = Field(default=20.0, gt=0, le=300)

    # The team server (serve --transport http): the audit trail and the public address.
    audit_log: str | None = Field(
        default=None,
        description="Where the audit trail goes, one JSON line per tool call: a file path or `stderr` (unset: none)",
    )
    audit_queries: Literal["on", "off"] = Field(
        default="off", description="`on` records each search's query text in the audit trail (never passage text)"
    )
    receipt_key: Path | None = Field(
        default=None,
        description="PEM file of the Ed25519 private key that signs evidence receipts (unset: receipts are unsigned)",
    )
    public_url: str | None = Field(
        default=None,
        description="The server's public base URL (https://host), for the OAuth resource metadata published with JWTs",
    )

    # JWT access tokens from the organisation's identity provider (access/jwt.py). Validated
    # when the HTTP server builds its verifier, naming the setting to fix.
    jwt_issuer: str = Field(default="", description="Required `iss` of every JWT (the identity provider)")
    jwt_audience: str = Field(default="", description="Required `aud` of every JWT (this server's application)")
    jwt_jwks_url: str = Field(default="", description="https URL of the provider's key set (or JWT_JWKS_FILE)")
    jwt_jwks_file: Path | None = Field(
        default=None, description='Local {"keys": [...]} file instead of a URL; re-read when its content changes'
    )
    jwt_algorithm: str = Field(default="RS256", description="The one signing algorithm accepted (asymmetric only)")
    jwt_required_scope: str = Field(default="", description="Scope every JWT must carry (space-separated: all)")
    jwt_roles_claim: str = Field(default="roles", description="Claim holding the caller's roles (a list or a string)")
    jwt_role_map: str = Field(
        default="Evidence.Public=public,Evidence.Internal=internal,Evidence.Restricted=restricted",
        description="ROLE=LEVEL pairs, comma-separated; the highest mapped role is the caller's clearance",
    )

    @field_validator("ceiling")
    @classmethod
    def _valid_ceiling(cls, value: str) -> str:
        try:
            parse_level(value)
        except ConfigError as exc:
            # The operator sees only this text (the CLI prints it and exits): name what to fix.
            raise ConfigError(f"GOVERNED_EVIDENCE_CEILING: {exc}") from None
        return value.strip().lower()

    @field_validator("reranker_base_url")
    @classmethod
    def _valid_reranker_url(cls, value: str) -> str:
        parts = urlsplit(value.strip())
        # Credentials belong in GOVERNED_EVIDENCE_RERANKER_API_KEY, where they stay secret.
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
            raise ConfigError("GOVERNED_EVIDENCE_RERANKER_BASE_URL: give an http(s) URL without credentials")
        if parts.query or parts.fragment:
            raise ConfigError("GOVERNED_EVIDENCE_RERANKER_BASE_URL: give the base URL without a query or fragment")
        return value.strip().rstrip("/")

    @field_validator("sdmx_proxy")
    @classmethod
    def _valid_sdmx_proxy(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        text = value.get_secret_value().strip()
        # The value may hold a password: no message here repeats it.
        problem = "give an http or https proxy URL such as http://proxy.example:3128 (user:password@ allowed)"
        try:
            parts = urlsplit(text)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
        except ValueError:
            raise ConfigError(f"GOVERNED_EVIDENCE_SDMX_PROXY: {problem}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"GOVERNED_EVIDENCE_SDMX_PROXY: {problem}")
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ConfigError("GOVERNED_EVIDENCE_SDMX_PROXY: give the proxy URL without a path, query or fragment")
        return SecretStr(text)

    @model_validator(mode="after")
    def _reranker_has_a_model(self) -> Settings:
        if self.reranker != "off" and not self.reranker_model.strip():
            raise ConfigError(f"GOVERNED_EVIDENCE_RERANKER_MODEL must be set when the reranker is {self.reranker!r}")
        return self

    @property
    def ceiling_level(self) -> Classification:
        return parse_level(self.ceiling)
