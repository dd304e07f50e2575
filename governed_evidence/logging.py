"""Structured JSON logs on stderr only.

stdout belongs to the MCP JSON-RPC stream in stdio mode, so nothing here may write to it.
Records from libraries that use stdlib logging (FastMCP, httpx) are rendered as the same
JSON lines. Callers log event names and counts, never query or passage text.
"""

from __future__ import annotations

import logging
import sys
from typing import Any


def _import_structlog() -> None:
    """Import structlog with rich hidden from it.

    structlog's console renderer formats tracebacks with rich when rich is importable, so its
    import pulls in ``rich.traceback``, ``rich.syntax`` and pygments: about 40 ms of every
    command's start-up, ``serve`` included. Records here are JSON lines and never go through
    that renderer, so structlog is imported while ``rich`` cannot be; rich itself (FastMCP logs
    with it) imports as usual afterwards. The commands import this module before anything
    imports rich; when something already has (or structlog is loaded), nothing is hidden.
    """
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # what makes `import rich` fail
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]


_import_structlog()

import structlog  # noqa: E402

__all__ = ["configure_logging", "get_logger", "route_library_loggers"]

_configured = False
_SHARED: list[Any] = [
    structlog.processors.add_log_level,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


def configure_logging(level: str = "INFO") -> None:
    """Send structlog and stdlib records as JSON lines to stderr; idempotent."""
    global _configured
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        numeric = logging.INFO
    structlog.configure(
        processors=[*_SHARED, structlog.processors.format_exc_info, structlog.processors.JSONRenderer(sort_keys=True)],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(sys.stderr)
    # The level holds for libraries that set their own logger's level too (fastmcp sets INFO):
    # a record propagated to the root's handler is not checked against the root's level.
    handler.setLevel(numeric)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *_SHARED],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                structlog.processors.JSONRenderer(sort_keys=True),
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(numeric, logging.WARNING))
    _configured = True


def route_library_loggers(*names: str) -> None:
    """Make libraries that install their own (e.g. rich) handlers log through ours."""
    for name in names:
        lib = logging.getLogger(name)
        lib.handlers.clear()
        lib.propagate = True


def get_logger(name: str) -> Any:
    """A structlog logger bound to ``component=name``; configures defaults on first use."""
    if not _configured:
        configure_logging()
    # A lazy proxy: the configuration in force at each call applies, not the one at import.
    return structlog.get_logger(component=name)
