"""Tool and prompt registration with the docstring handed to fastmcp as the description.

fastmcp parses any docstring it finds for per-parameter descriptions, and that imports
its docstring parser (griffe): about 30 ms of start-up, paid before the first answer.
These docstrings hold no parameter sections (the annotated types describe the parameters),
so the description fastmcp would derive is the cleaned docstring itself; passing it
explicitly and clearing ``__doc__`` publishes the same description without the parser.
tests/mcp/test_stdio.py freezes the published surface.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from fastmcp import FastMCP
    from mcp.types import ToolAnnotations

__all__ = ["prompt", "tool"]

F = TypeVar("F", bound=Callable[..., Any])


def _description(fn: Callable[..., Any]) -> str | None:
    description = inspect.getdoc(fn)
    fn.__doc__ = None
    return description


def tool(app: FastMCP, annotations: ToolAnnotations) -> Callable[[F], F]:
    """``@app.tool(annotations=...)``, described by the function's docstring."""

    def register(fn: F) -> F:
        app.tool(annotations=annotations, description=_description(fn))(fn)
        return fn

    return register


def prompt(app: FastMCP, name: str) -> Callable[[F], F]:
    """``@app.prompt(name=...)``, described by the function's docstring."""

    def register(fn: F) -> F:
        app.prompt(name=name, description=_description(fn))(fn)
        return fn

    return register
