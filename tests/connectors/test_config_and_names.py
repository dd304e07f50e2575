"""The connectors' configuration is read strictly and never holds a secret; names are made safe."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from governed_evidence.config import Classification
from governed_evidence.connectors.config import GraphSource, load_config, secret_from_env
from governed_evidence.connectors.names import UnsafeNameError, safe_path
from governed_evidence.errors import ConfigError

GOOD = """
mirror = "mirror"
[[source]]
name = "policies"
kind = "sharepoint"
tenant_id = "t"
client_id = "c"
client_secret_env = "SECRET_VAR"
site_id = "contoso.sharepoint.com,1,2"
{extra}
[source.labels]
"label-a" = "public"
"""


def load(tmp_path: Path, extra: str = "", text: str = GOOD) -> object:
    path = tmp_path / "c.toml"
    path.write_text(text.format(extra=extra), encoding="utf-8")
    return load_config(path)


def test_a_good_configuration_is_read_with_paths_relative_to_the_file(tmp_path: Path) -> None:
    config = load(tmp_path)
    source = config.sources[0]  # type: ignore[attr-defined]
    assert isinstance(source, GraphSource) and config.mirror == tmp_path / "mirror"  # type: ignore[attr-defined]
    assert source.labels == {"label-a": Classification.PUBLIC}
    assert source.level_of(["label-a"]) == (Classification.PUBLIC, "label-a")
    assert source.level_of([]) == (Classification.RESTRICTED, None)
    assert source.level_of(["label-a", "unknown"]) == (Classification.RESTRICTED, "unknown")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('client_secret = "s3cr3t-value"', "client_secret must not be in the file"),
        ('colour = "blue"', "unknown key 'colour'"),
        ('graph_url = "http://graph.example.org/v1.0"', "https URL"),
        ("timeout_seconds = -1", "timeout_seconds"),
        ('drive_id = "b!x"', "exactly one of drive_id and site_id"),
    ],
)
def test_a_bad_configuration_names_the_problem_and_never_a_secret(tmp_path: Path, extra: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        load(tmp_path, extra)
    assert "s3cr3t-value" not in str(caught.value)


def test_an_unknown_level_in_the_mapping_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown classification level 'secret'"):
        load(tmp_path, text=GOOD.replace('"label-a" = "public"', '"label-a" = "secret"'))


def test_a_missing_secret_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SECRET_VAR", raising=False)
    with pytest.raises(ConfigError, match="SECRET_VAR"):
        secret_from_env("SECRET_VAR", "policies")
    monkeypatch.setenv("SECRET_VAR", "value-of-the-secret")
    assert secret_from_env("SECRET_VAR", "policies") == "value-of-the-secret"


@pytest.mark.parametrize(
    ("parts", "reason"),
    [
        (("..", "a.md"), "'..'"),
        (("a", "b/c.md"), "separator"),
        (("nul.txt",), "reserved"),
        (("com1",), "reserved"),
        ((".env",), "hidden"),
        (("a" * 256,), "longer than 255"),
        (("x" * 200, "y" * 200, "z" * 200, "w" * 200, "v" * 200, "u" * 200), "path is longer"),
        (("tab\there.md",), "control"),
        (("zero\u200bwidth.md",), "invisible"),
        (("trailing.",), "ends with"),
        (("ghp_" + "a" * 36 + ".md",), "credential-shaped"),
        ((), "no name"),
    ],
)
def test_unsafe_names_are_refused_with_a_reason_that_does_not_repeat_them(parts: tuple[str, ...], reason: str) -> None:
    with pytest.raises(UnsafeNameError, match=reason) as caught:
        safe_path(parts)
    # The reason never repeats a name (a short one such as '..' may appear in it as a word).
    assert not any(len(part) > 3 and part in str(caught.value) for part in parts)


def test_a_safe_name_is_kept_in_nfc() -> None:
    assert safe_path(("Policies", "Cafe\u0301 rules.md")) == PurePosixPath("Policies/Caf\u00e9 rules.md")
