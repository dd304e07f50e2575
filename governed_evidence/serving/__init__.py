"""The team server: the MCP app over streamable HTTP, with per-caller identity and clearance."""

__all__: list[str] = []
