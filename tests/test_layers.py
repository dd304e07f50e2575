"""The layer rules of docs/architecture.md, checked against every import in the package.

Imports inside functions and under ``TYPE_CHECKING`` count too: a lazy import still ties
the layers together.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "governed_evidence"
BOTTOM = {"config", "errors", "logging", "invisible", "sqlite", "_threads", "_heap", "_forked", "__init__"}

#: What each part may import besides the bottom layer and itself.
ALLOWED: dict[str, set[str]] = {
    "store": set(),
    "embeddings": set(),
    "ingest": {"store", "embeddings"},
    "search": {"store", "embeddings", "receipts"},
    "sdmx": {"receipts"},
    # Receipts: their model is imported by search's and sdmx's answers; only their
    # fingerprint and verification read the index (store).
    "receipts": {"store"},
    "access": set(),
    "telemetry": set(),
    "mcp": {"access", "receipts", "search", "sdmx", "telemetry"},
    "serving": {"access", "mcp"},
    "evaluation": {"ingest", "search", "store", "embeddings", "mcp"},
    "composition": {
        "access",
        "embeddings",
        "ingest",
        "mcp",
        "receipts",
        "sdmx",
        "search",
        "serving",
        "store",
        "telemetry",
    },
    "commands": {
        "access",
        "composition",
        "embeddings",
        "ingest",
        "mcp",
        "sdmx",
        "search",
        "serving",
        "store",
        "telemetry",
    },
    "connectors": {"composition", "ingest"},
    "cli": {
        "access",
        "commands",
        "composition",
        "connectors",
        "embeddings",
        "evaluation",
        "ingest",
        "mcp",
        "receipts",
        "sdmx",
        "search",
        "serving",
        "store",
        "telemetry",
    },
    "__main__": {"cli"},
}


def _part(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imported_parts(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "governed_evidence" and len(parts) > 1:
                found.add(parts[1])
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_part_has_a_rule() -> None:
    parts = {_part(p) for p in MODULES}
    assert parts - BOTTOM <= set(ALLOWED), parts - BOTTOM - set(ALLOWED)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_follow_the_layers(path: Path) -> None:
    part = _part(path)
    allowed = BOTTOM | {part} | ALLOWED.get(part, set())
    if part in BOTTOM:
        # The bottom imports nothing of the package but errors (config reads it).
        allowed = {"errors", part} if part == "config" else {part}
        if part == "__init__":
            allowed = set()
    wrong = _imported_parts(path) - allowed - {"__version__"}
    assert not wrong, f"{path.relative_to(PACKAGE)} ({part}) imports {sorted(wrong)}"
