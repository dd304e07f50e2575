"""Providers are data: the bundled table plus an operator's TOML overrides, https or loopback only."""

from __future__ import annotations

from pathlib import Path

import pytest

from governed_evidence.errors import ConfigError, InvalidRequestError
from governed_evidence.sdmx.providers import DEFAULT_NO_RESULTS_MARKERS, check_base_url, load_providers


def test_bundled_providers_and_their_quirks() -> None:
    providers = load_providers()
    assert providers.ids() == ["BIS", "ECB", "ESTAT", "ILO", "IMF", "INSEE", "ISTAT", "OECD", "UNICEF"]
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
    with pytest.raises(InvalidRequestError, match="BIS, ECB, ESTAT, ILO, IMF, INSEE, ISTAT, OECD, UNICEF"):
        load_providers().get("NOPE")


def test_the_override_file_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from governed_evidence.config import Settings

    path = tmp_path / "providers.toml"
    path.write_text("[providers.OECD]\ndata_per_hour = 5\n")
    monkeypatch.setenv("GOVERNED_EVIDENCE_SDMX_PROVIDERS", str(path))
    monkeypatch.setenv("GOVERNED_EVIDENCE_SDMX_TTL_DATA_S", "120")
    settings = Settings()
    assert settings.sdmx_providers == path and settings.sdmx_ttl_data_s == 120
    assert load_providers(settings.sdmx_providers).get("OECD").data_per_hour == 5


PRIVATE_BASES = [
    "https://169.254.169.254/latest/meta-data",
    "https://10.0.0.5/rest",
    "https://10.255.255.255:8443/rest",
    "https://172.16.0.1/rest",
    "https://192.168.1.1/rest",
    "https://127.0.0.1/rest",
    "https://127.0.0.2:8443/rest",
    "https://100.64.0.1/rest",
    "https://0.0.0.0/rest",
    "https://[::1]/rest",
    "https://[::]/rest",
    "https://[fc00::1]/rest",
    "https://[fd12:3456::1]/rest",
    "https://[fe80::1]/rest",
    "https://[fe80::1%25eth0]/rest",
    "https://[::ffff:127.0.0.1]/rest",
    "https://[::ffff:a9fe:a9fe]/rest",
    "https://[64:ff9b::a9fe:a9fe]/rest",
    # Literal forms that resolvers read as IPv4 addresses.
    "https://127.1/rest",
    "https://2130706433/rest",
    "https://0x7f000001/rest",
    "https://0x7f.0.0.1/rest",
    "https://0177.0.0.1/rest",
    "https://169.254.169.254./rest",
    "https://localhost/rest",
    "https://LOCALHOST:8443/rest",
    "https://mirror.localhost/rest",
    "https://224.0.0.1/rest",
]


@pytest.mark.parametrize("url", PRIVATE_BASES)
def test_private_and_local_https_bases_are_refused(tmp_path: Path, url: str) -> None:
    path = tmp_path / "providers.toml"
    path.write_text(f'[providers.INTERNAL]\nbase_url = "{url}"\n')
    with pytest.raises(ConfigError, match="loopback, private or link-local") as info:
        load_providers(path)
    assert "allow_private_network" in str(info.value)
    with pytest.raises(ValueError, match="loopback, private or link-local"):
        check_base_url(url)


@pytest.mark.parametrize("url", ["https://10.0.0.5/rest", "https://[::1]:8443/rest", "https://localhost/rest"])
def test_a_private_base_is_accepted_only_with_the_explicit_opt_in(tmp_path: Path, url: str) -> None:
    path = tmp_path / "providers.toml"
    path.write_text(f'[providers.INTERNAL]\nbase_url = "{url}"\nallow_private_network = true\n')
    internal = load_providers(path).get("INTERNAL")
    assert internal.allow_private_network is True and internal.private_network_allowed is True
    assert internal.base_url == url


def test_public_bases_need_no_opt_in_and_the_loopback_http_form_implies_it(tmp_path: Path) -> None:
    providers = load_providers()
    assert not any(p.private_network_allowed for p in providers)
    path = tmp_path / "providers.toml"
    path.write_text('[providers.MIRROR]\nbase_url = "http://127.0.0.1:8765/rest"\n')
    assert load_providers(path).get("MIRROR").private_network_allowed is True


def test_a_provider_declares_which_formats_to_ask_for(tmp_path: Path) -> None:
    from governed_evidence.sdmx.urls import catalogue_request, data_request, structure_request
    from governed_evidence.sdmx.validate import DatasetRef

    path = tmp_path / "providers.toml"
    path.write_text(
        '[providers.JSONONLY]\nbase_url = "https://stats.example.org/rest"\ndefault_agency = "X"\n'
        'data_accept = "application/vnd.sdmx.data+json;version=1.0.0"\n'
        'structure_accept = "application/vnd.sdmx.structure+json;version=2.0.0"\n'
    )
    provider = load_providers(path).get("JSONONLY")
    ref = DatasetRef("X", "FLOW", "1.0")
    assert catalogue_request(provider).accept == "application/vnd.sdmx.structure+json;version=2.0.0"
    assert structure_request(provider, ref).accept == "application/vnd.sdmx.structure+json;version=2.0.0"
    assert data_request(provider, ref, "all", None, None).accept == "application/vnd.sdmx.data+json;version=1.0.0"
    for bad in ("text/xml\\r\\nX-Injected: 1", "not a media type", "application/é"):
        path.write_text(f'[providers.OECD]\nstructure_accept = "{bad}"\n')
        with pytest.raises(ConfigError, match="structure_accept"):
            load_providers(path)


def test_a_data_format_must_be_an_ascii_word(tmp_path: Path) -> None:
    path = tmp_path / "providers.toml"
    for bad in ("csv²", "csvé", "csv file", "csv&x=1"):
        path.write_text(f'[providers.OECD]\ndata_format = "{bad}"\n')
        with pytest.raises(ConfigError, match="data_format"):
            load_providers(path)


def test_no_results_markers_are_provider_data(tmp_path: Path) -> None:
    providers = load_providers()
    oecd = providers.get("OECD")
    # Read from providers.toml, kept lower-case, matched without regard to case.
    assert oecd.no_results_markers == ("noresultsfound", "no results found", "norecordsfound", "no records found")
    assert oecd.says_no_results(b"NoResultsFound")
    assert oecd.says_no_results(b"Error: No Records Found.")
    assert not oecd.says_no_results(b"Resource not found")
    # Only the start of a body is looked at.
    assert not oecd.says_no_results(b" " * 4096 + b"NoResultsFound")
    # A provider that does not say otherwise keeps the words every provider was read with.
    assert providers.get("ECB").no_results_markers == DEFAULT_NO_RESULTS_MARKERS
    assert providers.get("ESTAT").no_results_markers == DEFAULT_NO_RESULTS_MARKERS
    path = tmp_path / "providers.toml"
    path.write_text('[providers.MIRROR]\nbase_url = "http://127.0.0.1:8765/rest"\nno_results_markers = []\n')
    mirror = load_providers(path).get("MIRROR")
    assert mirror.no_results_markers == ()
    assert not mirror.says_no_results(b"NoResultsFound")


@pytest.mark.parametrize(
    "value",
    [
        '[""]',
        '["   "]',
        '["Keine Ergebnisse für"]',
        '["no\\nresults"]',
        '["' + "x" * 65 + '"]',
        str(["m"] * 17),
        '"NoResultsFound"',
    ],
)
def test_no_results_markers_must_be_a_short_list_of_ascii_words(tmp_path: Path, value: str) -> None:
    path = tmp_path / "providers.toml"
    path.write_text(f"[providers.OECD]\nno_results_markers = {value}\n")
    with pytest.raises(ConfigError, match="no_results_markers"):
        load_providers(path)
