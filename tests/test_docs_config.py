"""docs/configuration.md lists every setting, with its variable name and its default.

The settings are read from ``Settings.model_fields`` when the test runs, so a setting added
to ``config.py`` without a row in the reference fails here, and so does a row left behind
when a setting is removed or renamed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from governed_evidence.config import Settings

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "docs" / "configuration.md"
PREFIX = str(Settings.model_config.get("env_prefix", ""))

#: A table row whose first cell is a variable name in backticks.
_ROW = re.compile(r"^\|\s*`(?P<name>[A-Z][A-Z0-9_]*)`\s*\|(?P<default>[^|]*)\|(?P<meaning>.*)\|\s*$")
_CODE = re.compile(r"`([^`]*)`")
NONE = "(none)"


def _rows() -> dict[str, tuple[str, str]]:
    """Variable name -> (default cell, meaning cell), for every setting row of the reference."""
    rows: dict[str, tuple[str, str]] = {}
    for line in REFERENCE.read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line)
        if match is None or not match["name"].startswith(PREFIX):
            continue
        assert match["name"] not in rows, f"{match['name']} is listed twice in {REFERENCE.name}"
        rows[match["name"]] = (match["default"].strip(), match["meaning"].strip())
    return rows


def _env_name(field_name: str) -> str:
    alias = Settings.model_fields[field_name].validation_alias
    return alias.upper() if isinstance(alias, str) else f"{PREFIX}{field_name}".upper()


def _rendered(value: Any) -> str:
    """A default as the reference writes it: the value an operator would type."""
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if value is None or value == "":
        return NONE
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Path):
        return value.as_posix()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def test_the_reference_has_setting_rows() -> None:
    assert PREFIX == "GOVERNED_EVIDENCE_"
    assert len(_rows()) >= 10, f"no settings tables found in {REFERENCE}"


@pytest.mark.parametrize("field_name", list(Settings.model_fields))
def test_every_setting_is_documented_with_its_default(field_name: str) -> None:
    rows = _rows()
    name = _env_name(field_name)
    assert name in rows, f"{name} (Settings.{field_name}) is missing from docs/{REFERENCE.name}"
    default_cell, meaning = rows[name]
    expected = _rendered(Settings.model_fields[field_name].get_default(call_default_factory=True))
    if expected == NONE:
        assert default_cell.startswith(NONE), f"{name}: default is unset, the reference says {default_cell!r}"
    else:
        shown = _CODE.findall(default_cell)
        assert shown and shown[0] == expected, f"{name}: default is `{expected}`, the reference says {default_cell!r}"
    assert meaning, f"{name}: the reference gives no meaning"


def test_no_documented_setting_is_missing_from_settings() -> None:
    known = {_env_name(f) for f in Settings.model_fields}
    unknown = sorted(set(_rows()) - known)
    assert not unknown, f"documented in {REFERENCE.name} but not fields of Settings: {unknown}"


def test_every_variable_the_docs_mention_is_a_setting() -> None:
    """A ``GOVERNED_EVIDENCE_*`` name anywhere in README.md or docs/ must exist (a renamed
    setting leaves no stale instructions behind)."""
    known = {_env_name(f) for f in Settings.model_fields}
    mentioned: dict[str, set[str]] = {}
    for path in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        for name in re.findall(rf"\b{PREFIX}[A-Z0-9_]*[A-Z0-9]\b", path.read_text(encoding="utf-8")):
            mentioned.setdefault(name, set()).add(str(path.relative_to(REPO)))
    unknown = {name: sorted(where) for name, where in mentioned.items() if name not in known}
    assert not unknown, f"mentioned but not settings: {unknown}"
