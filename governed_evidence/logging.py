"""Structured JSON logs on stderr only.

stdout belongs to the MCP JSON-RPC stream in stdio mode, so nothing here may write to it.
Callers log event names and counts, never query or passage text.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

__all__ = ["configure_logging", "get_logger"]

_configured = False


def configure_logging(level: str = "INFO") -> None:
    """Send structlog JSON lines to stderr; idempotent."""
    global _configured
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        numeric = logging.INFO
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(sort_keys=True),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    # Libraries that use stdlib logging also go to stderr, never stdout.
    logging.basicConfig(stream=sys.stderr, level=max(numeric, logging.WARNING), force=True)
    _configured = True


def get_logger(name: str) -> Any:
    """A bound structlog logger; configures defaults on first use."""
    if not _configured:
        configure_logging()
    # A lazy proxy: the configuration in force at each call applies, not the one at import.
    return structlog.get_logger(component=name)
