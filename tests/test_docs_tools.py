"""docs/tools.md's document-tool examples are the program's real output (scripts/docs_tools.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers import load_script

docs_tools = load_script("docs_tools")


def test_the_document_examples_are_what_the_tools_return(sample_index: Path, minilm: Any) -> None:
    examples = docs_tools.document_examples(sample_index, embedder_factory=lambda: minilm)
    text = docs_tools.TOOLS_DOC.read_text(encoding="utf-8")
    assert set(docs_tools.documented(text)) == set(examples), "an example lost its marker"
    assert docs_tools.drift(text, examples) == [], "run: .venv/bin/python scripts/docs_tools.py --write"


def test_a_drifted_example_is_named_and_rewritten() -> None:
    text = 'x\n<!-- example: index-status -->\n\n```json\n{"schema_version": 3, "built_at": "then"}\n```\ny\n'
    real = {"index-status": {"schema_version": 5, "built_at": "now"}}
    assert docs_tools.drift(text, real) == ["index-status"]
    fixed = docs_tools.rewrite(text, real)
    assert docs_tools.drift(fixed, real) == []
    # The run's own time is kept as the doc showed it; the rest is the program's.
    assert json.loads(fixed.split("```json\n")[1].split("\n```")[0]) == {"schema_version": 5, "built_at": "then"}
    assert fixed.startswith("x\n") and fixed.endswith("\ny\n")
    assert docs_tools.drift(text.replace("3", "5"), real) == []  # built_at alone does not count
