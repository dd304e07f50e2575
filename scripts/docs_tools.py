"""The document tools' examples in docs/tools.md, made from real output, and checked.

Each example block in docs/tools.md follows a marker ``<!-- example: NAME -->``; this script
calls the tool it shows through the same search service ``serve`` uses, on the sample
corpus built as ``make demo`` builds it (the real default model, build ceiling restricted),
with the caller's ceiling ``internal``, and writes or checks the block:

    .venv/bin/python scripts/docs_tools.py --check   # exit 1 and name each drifted example
    .venv/bin/python scripts/docs_tools.py --write   # rewrite the blocks from real output

``built_at`` (the build's time) and ``index_status``'s ``statistics_cache`` (which depends
on the statistics calls made before it) are left out of the comparison; everything else,
scores included, must be what the program prints (tests/test_docs_tools.py).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOOLS_DOC = ROOT / "docs" / "tools.md"
SAMPLE_CORPUS = ROOT / "data" / "sample_corpus"
#: Fields whose value depends on when or after what the example was made.
VOLATILE = ("built_at", "statistics_cache")
_MARK = re.compile(r"<!-- example: ([a-z-]+) -->\n\n?```json\n(.*?)\n```", re.S)

#: Each example's arguments, as docs/tools.md gives them.
HIT_QUERY, HIT_LIMIT = "How many days a week can I work from home?", 2
NONE_QUERY = "Can I bring my dog to the office?"
READ_CITATION, READ_CONTEXT = "internal/hr/remote-work-policy-2024.md#3-how-many-days:L19-23", 1
#: The listing shows its first documents only; the rest have the same shape.
LISTED = 3


def document_examples(db: Path, embedder_factory: Callable[[], Any] | None = None) -> dict[str, Any]:
    """What each document tool returns for its example's arguments, as JSON values."""
    from governed_evidence import composition
    from governed_evidence.config import Classification, Settings

    settings = Settings()
    service = composition.search_service(
        settings, db=db, ceiling=Classification.INTERNAL, embedder_factory=embedder_factory
    )
    try:
        sources = service.list_sources().model_dump(mode="json")
        sources["documents"] = sources["documents"][:LISTED]
        status = composition.server_status(service, None).model_dump(mode="json")
        return {
            "search-hit": service.search(HIT_QUERY, limit=HIT_LIMIT).model_dump(mode="json"),
            "search-none": service.search(NONE_QUERY).model_dump(mode="json"),
            "read-passage": service.read_passage(READ_CITATION, READ_CONTEXT).model_dump(mode="json"),
            "list-sources": sources,
            "index-status": status,
        }
    finally:
        service.close()


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def documented(text: str) -> dict[str, Any]:
    """The examples in the doc's text, by name."""
    return {m.group(1): json.loads(m.group(2)) for m in _MARK.finditer(text)}


def drift(text: str, examples: dict[str, Any]) -> list[str]:
    """The examples whose block differs from real output (or is missing), by name."""
    shown = documented(text)
    return sorted(name for name, value in examples.items() if _stable(shown.get(name)) != _stable(value))


def rewrite(text: str, examples: dict[str, Any]) -> str:
    """The doc with each example's block replaced by real output (volatile fields kept as shown)."""

    def block(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in examples:
            return m.group(0)
        value = examples[name]
        old = json.loads(m.group(2))
        if isinstance(old, dict) and isinstance(value, dict):
            # The doc keeps what it showed for fields that depend on the run.
            value = {k: (old[k] if k in VOLATILE and k in old else v) for k, v in value.items()}
        return f"<!-- example: {name} -->\n\n```json\n{json.dumps(value, indent=2, ensure_ascii=False)}\n```"

    return _MARK.sub(block, text)


def _build(db: Path) -> None:
    from governed_evidence.config import Classification
    from governed_evidence.embeddings.minilm import MiniLMEmbedder
    from governed_evidence.ingest.pipeline import ingest_corpus

    ingest_corpus(SAMPLE_CORPUS, db, MiniLMEmbedder(), ceiling=Classification.RESTRICTED, progress=None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", action="store_true")
    action.add_argument("--write", action="store_true")
    parser.add_argument("--db", type=Path, help="a sample index already built (default: build one)")
    args = parser.parse_args(argv)
    from governed_evidence.logging import configure_logging

    configure_logging("WARNING")
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "docs-demo.sqlite"
        if args.db is None:
            _build(db)
        examples = document_examples(db)
    text = TOOLS_DOC.read_text(encoding="utf-8")
    if args.write:
        TOOLS_DOC.write_text(rewrite(text, examples), encoding="utf-8")
        return 0
    stale = drift(text, examples)
    for name in stale:
        print(f"docs/tools.md: example {name} differs from the program's output", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
