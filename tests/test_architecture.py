"""The package's layout as docs/architecture.md describes it, and the size a module may grow to."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "governed_evidence"
#: A module longer than this no longer fits one screenful of outline: split it by what it holds.
MAX_MODULE_LINES = 450


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.name not in ("__init__.py", "__main__.py"))


def test_every_module_is_named_in_the_architecture_doc() -> None:
    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([A-Za-z0-9_/]+\.py)`", doc))
    missing = [str(p.relative_to(PACKAGE)) for p in _modules() if str(p.relative_to(PACKAGE)) not in named]
    assert missing == [], f"docs/architecture.md ('Where to find what') does not name: {missing}"


def test_the_doc_names_no_module_that_does_not_exist() -> None:
    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = doc[doc.index("## Where to find what") :]
    named = set(re.findall(r"^\| `([A-Za-z0-9_/]+\.py)`", table, flags=re.M))
    gone = sorted(name for name in named if not (PACKAGE / name).is_file())
    assert gone == [], f"docs/architecture.md names modules that are gone: {gone}"


def test_no_module_is_longer_than_the_convention() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in _modules()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines (split each by what it holds): {long}"
