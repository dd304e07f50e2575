"""Providers are data: the bundled table plus an operator's TOML overrides, https or loopback only."""

from __future__ import annotations

from pathlib import Path

import pytest

from governed_evidence.errors import ConfigError, InvalidRequestError
from governed_evidence.sdmx.providers import check_base_url, load_providers


def test_bundled_providers_and_their_quirks() -> None:
    providers = load_providers()
    assert providers.ids() == ["ECB", "ESTAT", "OECD"]
    oecd = providers.get("OECD")
    assert oecd.base_url == "https://sdmx.oecd.org/public/rest"
    assert oecd.catalogue_agency == "all"
    assert oecd.default_agency is None
    assert oecd.data_per_hour == 60
    assert oecd.availableconstraint is True
    ecb = providers.get("ecb")
    assert ecb.base_url == "https://data-api.ecb.europa.eu/service"
    assert ecb.availableconstraint is False
    estat = providers.get("ESTAT")
    assert estat.base_url == "https://ec.europa.eu/eurostat/api/dissemination/sdmx/2.1"
    assert estat.structure_references == "descendants"
    assert estat.data_flow_ref == "id"
    assert all(p.notes for p in providers)


def test_override_merges_fields_and_adds_a_loopback_provider(tmp_path: Path) -> None:
    path = tmp_path / "providers.toml"
    path.write_text(
        """
[providers.OECD]
data_per_hour = 10

[providers.mirror]
name = "Local mirror"
base_url = "http://127.0.0.1:8765/rest/"
availableconstraint = true

[providers.ECB]
enabled = false
"""
    )
    providers = load_providers(path)
    assert providers.get("OECD").data_per_hour == 10
    assert providers.get("OECD").base_url == "https://sdmx.oecd.org/public/rest"
    mirror = providers.get("MIRROR")
    assert mirror.base_url == "http://127.0.0.1:8765/rest"
    assert mirror.origin == ("http", "127.0.0.1", 8765)
    with pytest.raises(InvalidRequestError, match="unknown provider 'ECB'"):
        providers.get("ECB")


@pytest.mark.parametrize(
    "url",
    [
        "http://sdmx.oecd.org/public/rest",
        "http://localhost:8080/rest",
        "http://127.0.0.1/rest",
        "http://10.0.0.5:8080/rest",
        "ftp://127.0.0.1:21/x",
        "https://user@sdmx.oecd.org/rest",
        "https://sdmx.oecd.org/rest?token=x",
        "https://sdmx.oecd.org/rest#x",
        "https:///rest",
        "file:///etc/passwd",
    ],
)
def test_unsafe_base_urls_are_refused(url: str) -> None:
    with pytest.raises(ValueError):
        check_base_url(url)


def test_bad_override_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "providers.toml"
    path.write_text('[providers.EVIL]\nbase_url = "http://198.51.100.7:80/rest"\n')
    with pytest.raises(ConfigError, match="EVIL"):
        load_providers(path)
    path.write_text('[providers.NEW]\nname = "no base"\n')
    with pytest.raises(ConfigError, match="base_url"):
        load_providers(path)
    path.write_text("[providers.OECD]\nunknown_field = 1\n")
    with pytest.raises(ConfigError, match="unknown_field"):
        load_providers(path)
    path.write_text("not toml [")
    with pytest.raises(ConfigError):
        load_providers(path)
    with pytest.raises(ConfigError):
        load_providers(tmp_path / "missing.toml")


def test_unknown_provider_lists_the_configured_ones() -> None:
    with pytest.raises(InvalidRequestError, match="ECB, ESTAT, OECD"):
        load_providers().get("IMF")


def test_the_override_file_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from governed_evidence.config import Settings

    path = tmp_path / "providers.toml"
    path.write_text("[providers.OECD]\ndata_per_hour = 5\n")
    monkeypatch.setenv("GOVERNED_EVIDENCE_SDMX_PROVIDERS", str(path))
    monkeypatch.setenv("GOVERNED_EVIDENCE_SDMX_TTL_DATA_S", "120")
    settings = Settings()
    assert settings.sdmx_providers == path and settings.sdmx_ttl_data_s == 120
    assert load_providers(settings.sdmx_providers).get("OECD").data_per_hour == 5
