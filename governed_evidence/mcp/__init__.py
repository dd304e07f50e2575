"""The MCP surface: a thin FastMCP shell over the services (no search or policy logic here).

``build_app`` is imported on first use: the package also holds what the command line
reports without serving (``mcp.status``), and importing FastMCP for that took most of
`governed-evidence status`'s 3.3 s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from governed_evidence.mcp.app import build_app

__all__ = ["build_app"]


def __getattr__(name: str) -> Any:
    if name == "build_app":
        from governed_evidence.mcp.app import build_app

        return build_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
