"""Operator settings (from the environment) and classification levels.

The ceiling is an operator decision: it comes from the environment or a CLI flag, never
from a tool argument, so a client model cannot raise its own clearance.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
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
    """Strictly parse an operator-supplied level (a typo must not silently widen access)."""
    try:
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
    #: Largest source file ingest will open.
    max_file_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    #: "off" disables the confidence gate entirely (evaluation and sabotage runs only).
    gate: Literal["on", "off"] = "on"
    log_level: str = "INFO"

    @field_validator("ceiling")
    @classmethod
    def _valid_ceiling(cls, value: str) -> str:
        parse_level(value)
        return value.strip().lower()

    @property
    def ceiling_level(self) -> Classification:
        return parse_level(self.ceiling)
