"""SDMX behind a corporate network, over real sockets on 127.0.0.1: the deadline and the proxy.

- One deadline per tool call (``GOVERNED_EVIDENCE_SDMX_DEADLINE_S``): a silent provider
  whose per-attempt timeout is longer than the deadline fails within the deadline and a
  small margin, with no retry started; a Retry-After longer than what is left fails at once;
  a stale cached copy is still served when the deadline is reached.
- ``GOVERNED_EVIDENCE_SDMX_PROXY`` routes every request through the proxy (a plain http
  forward proxy run here, since the scripted provider is http), with its credentials sent
  to the proxy and kept out of every log line and error message.
- Environment proxy variables are ignored by design; when a provider cannot be reached
  while one is set, the error says so and names the setting, never the variable's value.
"""

from __future__ import annotations

import base64
import socket
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from governed_evidence.config import Settings
from governed_evidence.errors import ProviderUnavailableError
from governed_evidence.sdmx.service import SdmxService
from tests.hardening import figures
from tests.hardening.conftest import LogCapture
from tests.hardening.listener import Listener
from tests.hardening.test_sdmx_faults import (
    CATALOGUE_PATH,
    DATA_PATH,
    G20,
    KEY,
    STRUCTURE_PATH,
    Upstream,
    respond,
    silent,
)
from tests.sdmx.helpers import STRUCTURE_CT, fixture

G20_STRUCTURE = fixture("oecd_g20_prices_structure.xml")
#: The deadline the tests give a call, and what may pass beyond it (thread start-up, a
#: loaded CI machine): far below the per-attempt bound of 2 x 5 s the deadline must cut.
DEADLINE_S = 1.0
MARGIN_S = 1.0
PER_ATTEMPT_TIMEOUT_S = 5.0
#: The proxy's password: it must reach the proxy and nothing else.
SECRET = "pr0xy-pa55-7e41"


@dataclass
class ForwardProxy:
    """A plain http forward proxy on 127.0.0.1: records each request line and its
    Proxy-Authorization, then relays the request to its target (or, with ``answer`` False,
    closes the connection without a word)."""

    answer: bool = True
    requests: list[tuple[str, str | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.listener = Listener(self._handle, backlog=16)
        self.port = self.listener.port

    def url(self, credentials: str = "") -> str:
        return f"http://{credentials}127.0.0.1:{self.port}"

    def _handle(self, conn: socket.socket) -> None:
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                head += chunk
            lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
            method, target, version = lines[0].split(" ", 2)
            headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
            auth = next((v for k, v in headers.items() if k.lower() == "proxy-authorization"), None)
            self.requests.append((f"{method} {target}", auth))
            if not self.answer:
                return
            parts = urllib.parse.urlsplit(target)
            path = parts.path + (f"?{parts.query}" if parts.query else "")
            kept = [line for line in lines[1:] if not line.lower().startswith("proxy-")]
            with socket.create_connection((parts.hostname or "", parts.port or 80), timeout=10) as up:
                up.sendall(("\r\n".join([f"{method} {path} {version}", *kept]) + "\r\n\r\n").encode("latin-1"))
                while chunk := up.recv(65536):
                    conn.sendall(chunk)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def provider() -> Iterator[Upstream]:
    server = Upstream()
    yield server
    server.close()


@pytest.fixture
def proxy() -> Iterator[ForwardProxy]:
    server = ForwardProxy()
    yield server
    server.close()


@pytest.fixture
def no_environment_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    from governed_evidence.sdmx.transport import ENVIRONMENT_PROXY_VARIABLES

    for name in ENVIRONMENT_PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _service(tmp_path: Path, base_url: str, name: str = "s", **overrides: Any) -> SdmxService:
    providers = tmp_path / f"providers-{name}.toml"
    providers.write_text(f'[providers.MIRROR]\nbase_url = "{base_url}"\navailableconstraint = false\n')
    values: dict[str, Any] = {
        "db": tmp_path / "no-index.sqlite",
        "sdmx_cache_path": tmp_path / f"cache-{name}.sqlite",
        "sdmx_providers": providers,
        "sdmx_timeout_s": PER_ATTEMPT_TIMEOUT_S,
        "sdmx_deadline_s": DEADLINE_S,
        "sdmx_max_retries": 2,
    }
    values.update(overrides)
    # Real sleeps: the waits between attempts must count against the deadline.
    return SdmxService.from_settings(Settings(**values), sleep=time.sleep)


def _closed_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = int(probe.getsockname()[1])
    probe.close()
    return port


# -- one deadline per tool call ------------------------------------------------------------


@pytest.mark.parametrize("tool", ["search_datasets", "get_data"])
def test_a_silent_provider_fails_within_the_call_deadline(
    tmp_path: Path, provider: Upstream, no_environment_proxy: None, tool: str
) -> None:
    """Per attempt the provider would get 2 x 5 s, three times: the call ends at 1 s instead.
    get_data asks twice (the structure, answered at once, then the data), under one deadline."""
    provider.routes[CATALOGUE_PATH] = silent
    provider.routes[STRUCTURE_PATH] = respond(200, STRUCTURE_CT, G20_STRUCTURE)
    provider.routes[DATA_PATH] = silent
    service = _service(tmp_path, provider.base_url)
    started = time.monotonic()
    try:
        with pytest.raises(ProviderUnavailableError) as info:
            if tool == "search_datasets":
                service.search_datasets("prices", provider="MIRROR")
            else:
                service.get_data(G20, KEY, provider="MIRROR", max_rows=5)
    finally:
        service.close()
    elapsed = time.monotonic() - started
    message = str(info.value)
    assert elapsed < DEADLINE_S + MARGIN_S, f"{elapsed:.2f} s: {message}"
    assert "deadline of 1 s (GOVERNED_EVIDENCE_SDMX_DEADLINE_S) was reached" in message
    # A retry that cannot finish before the deadline is not started.
    silent_path = CATALOGUE_PATH if tool == "search_datasets" else DATA_PATH
    assert len([p for p in provider.requests if p.startswith(silent_path)]) == 1, provider.requests
    figures.add("sdmx network: silent providers cut at the call deadline", 1)
    slowest = "sdmx network: slowest answer to a silent provider under a 1 s deadline (s)"
    figures.put(slowest, max(figures.FIGURES.get(slowest, 0.0), round(elapsed, 2)))


def test_a_stale_copy_is_served_when_the_deadline_is_reached(tmp_path: Path, provider: Upstream) -> None:
    provider.routes[CATALOGUE_PATH] = respond(200, STRUCTURE_CT, G20_STRUCTURE)
    service = _service(tmp_path, provider.base_url, sdmx_ttl_catalogue_s=0)
    try:
        first = service.search_datasets("prices", provider="MIRROR")
        assert not first.from_cache and first.results
        provider.routes[CATALOGUE_PATH] = silent
        started = time.monotonic()
        stale = service.search_datasets("prices", provider="MIRROR")
        elapsed = time.monotonic() - started
    finally:
        service.close()
    assert elapsed < DEADLINE_S + MARGIN_S
    assert (stale.from_cache, stale.stale) == (True, True)
    assert stale.results == first.results
    assert stale.hints[0].startswith("Served from a cached copy")
    figures.add("sdmx network: stale copies served at the call deadline", 1)


def test_a_retry_after_longer_than_the_time_left_fails_at_once(tmp_path: Path, provider: Upstream) -> None:
    """5 s is within the honoured cap (20 s) but not within the call's 2 s: no sleep, no retry."""
    provider.routes[CATALOGUE_PATH] = respond(429, "text/plain", b"slow down", **{"Retry-After": "5"})
    service = _service(tmp_path, provider.base_url, sdmx_deadline_s=2.0, sdmx_timeout_s=PER_ATTEMPT_TIMEOUT_S)
    started = time.monotonic()
    try:
        with pytest.raises(ProviderUnavailableError) as info:
            service.search_datasets("prices", provider="MIRROR")
    finally:
        service.close()
    elapsed = time.monotonic() - started
    assert elapsed < 1.0, f"{elapsed:.2f} s"
    assert str(info.value) == (
        "provider MIRROR is busy (HTTP 429) and asks to retry in 5 s, past this call's deadline of 2 s "
        "(GOVERNED_EVIDENCE_SDMX_DEADLINE_S); try again later"
    )
    assert info.value.retry_after_s == 5
    assert provider.requests == [CATALOGUE_PATH]
    figures.add("sdmx network: Retry-After past the deadline answered at once", 1)


# -- the configured proxy --------------------------------------------------------------------


def test_the_configured_proxy_carries_every_request(
    tmp_path: Path, provider: Upstream, proxy: ForwardProxy, no_environment_proxy: None
) -> None:
    provider.routes[CATALOGUE_PATH] = respond(200, STRUCTURE_CT, G20_STRUCTURE)
    provider.routes[STRUCTURE_PATH] = respond(200, STRUCTURE_CT, G20_STRUCTURE)
    service = _service(tmp_path, provider.base_url, sdmx_proxy=proxy.url(f"alice:{SECRET}@"))
    try:
        found = service.search_datasets("prices", provider="MIRROR")
        described = service.describe_dataset(G20, provider="MIRROR")
    finally:
        service.close()
    assert found.results[0].dataset == G20 and described.dataset == G20
    login = "Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode()
    origin = f"http://127.0.0.1:{provider.port}"
    assert [(line.split("?")[0], auth) for line, auth in proxy.requests] == [
        (f"GET {origin}{CATALOGUE_PATH}", login),
        (f"GET {origin}{STRUCTURE_PATH}", login),
    ]
    # Through the proxy, and only through it; the proxy's login went no further.
    assert [path.split("?")[0] for path in provider.requests] == [CATALOGUE_PATH, STRUCTURE_PATH]
    figures.add("sdmx network: requests carried by the configured proxy", 2)


def test_the_proxy_password_is_in_no_log_line_and_no_error(
    tmp_path: Path, provider: Upstream, captured_logs: LogCapture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy closes every connection: the failure is reported and logged, the password never.
    An environment proxy set beside it is not mentioned, since the configured one was used."""
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    silent_proxy = ForwardProxy(answer=False)
    service = _service(
        tmp_path, provider.base_url, sdmx_proxy=silent_proxy.url(f"alice:{SECRET}@"), sdmx_deadline_s=10,
        sdmx_max_retries=1,
    )  # fmt: skip
    try:
        with pytest.raises(ProviderUnavailableError) as info:
            service.search_datasets("prices", provider="MIRROR")
        status = service.status().model_dump_json()
    finally:
        service.close()
        silent_proxy.close()
    message = str(info.value)
    assert "could not be reached" in message and "HTTPS_PROXY" not in message
    assert len(silent_proxy.requests) == 2 and provider.requests == []
    lines = captured_logs.lines()
    assert any('"sdmx_request"' in line for line in lines)
    for text in (message, status, *lines):
        assert SECRET not in text and "alice" not in text, text


# -- environment proxies are ignored ---------------------------------------------------------


def test_environment_proxies_are_ignored(
    tmp_path: Path, provider: Upstream, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy"):
        monkeypatch.setenv(name, proxy.url())
    provider.routes[CATALOGUE_PATH] = respond(200, STRUCTURE_CT, G20_STRUCTURE)
    service = _service(tmp_path, provider.base_url)
    try:
        assert service.search_datasets("prices", provider="MIRROR").results
    finally:
        service.close()
    assert provider.requests == [CATALOGUE_PATH] and proxy.requests == []


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "http_proxy", "ALL_PROXY"])
def test_an_unreachable_provider_names_the_ignored_environment_proxy(
    tmp_path: Path, no_environment_proxy: None, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, f"http://bob:{SECRET}@corp-proxy.example:8080")
    service = _service(tmp_path, f"http://127.0.0.1:{_closed_port()}/rest", sdmx_max_retries=0)
    try:
        with pytest.raises(ProviderUnavailableError) as info:
            service.search_datasets("prices", provider="MIRROR")
    finally:
        service.close()
    message = str(info.value)
    assert message.startswith("provider MIRROR could not be reached at 127.0.0.1:")
    assert "(ConnectError); try again later. " in message
    assert f"{variable} is set, but this server ignores proxies from the environment by design" in message
    assert "set GOVERNED_EVIDENCE_SDMX_PROXY" in message
    assert SECRET not in message and "corp-proxy" not in message and "bob" not in message


def test_an_unreachable_provider_without_an_environment_proxy_mentions_none(
    tmp_path: Path, no_environment_proxy: None
) -> None:
    service = _service(tmp_path, f"http://127.0.0.1:{_closed_port()}/rest", sdmx_max_retries=0)
    try:
        with pytest.raises(ProviderUnavailableError) as info:
            service.search_datasets("prices", provider="MIRROR")
    finally:
        service.close()
    message = str(info.value)
    assert message.startswith("provider MIRROR could not be reached at 127.0.0.1:")
    assert message.endswith(
        "(ConnectError); try again later. "
        "If this network reaches the internet only through a proxy, set GOVERNED_EVIDENCE_SDMX_PROXY"
    )
    assert "is set, but this server ignores" not in message


def test_a_silent_provider_past_the_deadline_names_the_ignored_environment_proxy(
    tmp_path: Path, provider: Upstream, no_environment_proxy: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", f"http://bob:{SECRET}@corp-proxy.example:8080")
    provider.routes[CATALOGUE_PATH] = silent
    service = _service(tmp_path, provider.base_url)
    try:
        with pytest.raises(ProviderUnavailableError) as info:
            service.search_datasets("prices", provider="MIRROR")
    finally:
        service.close()
    message = str(info.value)
    assert "was reached" in message and "HTTPS_PROXY is set" in message and "GOVERNED_EVIDENCE_SDMX_PROXY" in message
    assert SECRET not in message and "corp-proxy" not in message
