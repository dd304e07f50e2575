"""The MCP surface: a thin FastMCP shell over the services (no search or policy logic here)."""

from governed_evidence.mcp.app import build_app

__all__ = ["build_app"]
