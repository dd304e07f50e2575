"""The HTTP client: retries and Retry-After, byte caps, origins, headers; and a real loopback server."""

from __future__ import annotations

import email.utils
import gzip
import http.server
import json
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import httpx
import pytest
import structlog

from governed_evidence.config import Settings
from governed_evidence.errors import ProviderUnavailableError, ResponseTooLargeError, UnusableResponseError
from governed_evidence.sdmx.client import USER_AGENT, SdmxClient, parse_retry_after
from governed_evidence.sdmx.providers import load_providers
from governed_evidence.sdmx.service import SdmxService
from governed_evidence.sdmx.urls import catalogue_request, data_request
from governed_evidence.sdmx.validate import DatasetRef
from tests.sdmx.helpers import CSV_CT, STRUCTURE_CT, FakeClock, fixture

OECD = load_providers().get("OECD")
CATALOGUE = catalogue_request(OECD)


def _client(handler, clock: FakeClock, **kwargs: object) -> SdmxClient:  # type: ignore[no-untyped-def]
    return SdmxClient(
        transport=httpx.MockTransport(handler),
        sleep=clock.sleep,
        wall_clock=clock,
        max_retries=int(kwargs.pop("max_retries", 2)),  # type: ignore[arg-type]
        max_retry_wait_s=float(kwargs.pop("max_retry_wait_s", 20.0)),  # type: ignore[arg-type]
        deadline_s=float(kwargs.pop("deadline_s", 20.0)),  # type: ignore[arg-type]
    )


class Script:
    """Answers requests with the given responses in turn and counts budget checks."""

    def __init__(self, *responses: httpx.Response) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []
        self.attempts = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.responses.pop(0)

    def before_attempt(self) -> None:
        self.attempts += 1


OK = httpx.Response(200, headers={"content-type": STRUCTURE_CT}, content=fixture("estat_lfsa_egai2d_dataflow.xml"))


def test_429_then_success_honours_retry_after(clock: FakeClock) -> None:
    script = Script(httpx.Response(429, headers={"retry-after": "7"}), OK)
    response = _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=script.before_attempt)
    assert response.status == 200
    assert clock.sleeps == [7.0]
    # Each attempt spent budget.
    assert script.attempts == 2


def test_503_with_http_date_retry_after(clock: FakeClock) -> None:
    when = email.utils.formatdate(clock.now + 12, usegmt=True)
    script = Script(httpx.Response(503, headers={"retry-after": when}), OK)
    _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=script.before_attempt)
    assert clock.sleeps == [pytest.approx(12.0, abs=1.0)]


def test_503_without_retry_after_backs_off_exponentially_then_gives_up(clock: FakeClock) -> None:
    script = Script(httpx.Response(503), httpx.Response(502), httpx.Response(504))
    with pytest.raises(ProviderUnavailableError, match="HTTP 504"):
        _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=script.before_attempt)
    assert clock.sleeps == [1.0, 2.0]
    assert len(script.requests) == 3


def test_retry_after_beyond_the_cap_is_reported_not_slept(clock: FakeClock) -> None:
    script = Script(httpx.Response(429, headers={"retry-after": "3600"}), OK)
    with pytest.raises(ProviderUnavailableError, match="retry in 3600 s") as info:
        _client(script, clock, max_retry_wait_s=30).fetch(
            OECD, CATALOGUE, max_bytes=10**6, before_attempt=script.before_attempt
        )
    assert info.value.retry_after_s == 3600
    assert clock.sleeps == []
    assert len(script.requests) == 1


def test_transport_errors_are_retried_then_mapped(clock: FakeClock) -> None:
    calls: list[int] = []

    def failing(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(ProviderUnavailableError, match=r"could not be reached at .* \(ConnectError\)"):
        _client(failing, clock, max_retries=1).fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=lambda: None)
    assert len(calls) == 2


def test_a_retry_after_past_the_call_deadline_fails_at_once(clock: FakeClock) -> None:
    script = Script(httpx.Response(429, headers={"retry-after": "9"}), OK)
    with pytest.raises(
        ProviderUnavailableError, match="asks to retry in 9 s, past this call's deadline of 5 s"
    ) as info:
        _client(script, clock, deadline_s=5).fetch(
            OECD, CATALOGUE, max_bytes=10**6, before_attempt=script.before_attempt
        )
    assert info.value.retry_after_s == 9
    assert "GOVERNED_EVIDENCE_SDMX_DEADLINE_S" in str(info.value)
    assert clock.sleeps == [] and len(script.requests) == 1 and script.attempts == 1


def test_a_backoff_that_leaves_no_time_for_the_retry_is_not_slept(clock: FakeClock) -> None:
    # Backoff 1 s, and a retry needs at least 1 s more: 1.5 s is not enough.
    script = Script(httpx.Response(503), OK)
    with pytest.raises(
        ProviderUnavailableError, match=r"a retry would not finish within this call's deadline of 1\.5 s"
    ):
        _client(script, clock, deadline_s=1.5).fetch(
            OECD, CATALOGUE, max_bytes=10**6, before_attempt=script.before_attempt
        )
    assert clock.sleeps == [] and len(script.requests) == 1


def test_a_transport_failure_with_no_time_to_retry_says_so(clock: FakeClock) -> None:
    def failing(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(
        ProviderUnavailableError, match=r"could not be reached at \S+ \(ConnectError\), and a retry would not"
    ):
        _client(failing, clock, deadline_s=1.5).fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=lambda: None)
    assert clock.sleeps == []


def test_one_deadline_covers_every_request_of_a_call(clock: FakeClock) -> None:
    """The service opens one deadline per tool call; a request after it has passed is not sent
    and spends no budget."""
    import time

    script = Script(OK, OK)
    client = _client(script, clock, deadline_s=0.2)
    with client.call() as deadline:
        assert deadline.seconds == 0.2
        client.fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=script.before_attempt)
        time.sleep(0.25)  # what parsing the first answer might take
        with pytest.raises(ProviderUnavailableError, match=r"deadline of 0\.2 s .* was reached"):
            client.fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=script.before_attempt)
    assert script.attempts == 1 and len(script.requests) == 1
    # Outside a call, each request has a deadline of its own.
    client.fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=script.before_attempt)
    assert script.attempts == 2


def test_other_statuses_are_returned_for_the_caller_to_judge(clock: FakeClock) -> None:
    script = Script(httpx.Response(404, headers={"content-type": "text/plain"}, content=b"NoResultsFound"))
    response = _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=lambda: None)
    assert (response.status, response.body) == (404, b"NoResultsFound")
    assert clock.sleeps == []


def test_requests_carry_user_agent_accept_and_gzip(clock: FakeClock) -> None:
    script = Script(OK)
    request = data_request(OECD, DatasetRef("OECD.SDD.NAD", "DSD_NAMAIN1@DF_QNA", "1.0"), "Q.FRA..B1GQ", None, None)
    _client(script, clock).fetch(OECD, request, max_bytes=10**6, before_attempt=lambda: None)
    sent = script.requests[0]
    assert sent.headers["user-agent"] == USER_AGENT and "governed-evidence/" in USER_AGENT
    assert sent.headers["accept"] == OECD.data_accept
    assert "gzip" in sent.headers["accept-encoding"]
    assert str(sent.url) == request.url


def _streamed(size: int, chunk: int = 64 * 1024, **headers: str) -> httpx.Response:
    def body() -> Iterator[bytes]:
        sent = 0
        while sent < size:
            sent += chunk
            yield b"x" * chunk

    return httpx.Response(200, headers={"content-type": CSV_CT, **headers}, content=body())


def test_streamed_body_over_the_cap_is_refused(clock: FakeClock) -> None:
    script = Script(_streamed(5 * 1024 * 1024))
    with pytest.raises(ResponseTooLargeError, match="narrow"):
        _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=1024 * 1024, before_attempt=lambda: None)


def test_declared_length_over_the_cap_is_refused_before_reading(clock: FakeClock) -> None:
    script = Script(httpx.Response(200, headers={"content-length": str(50 * 1024 * 1024)}, content=b"x" * 10))
    with pytest.raises(ResponseTooLargeError):
        _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=1024 * 1024, before_attempt=lambda: None)


def test_gzip_bomb_is_measured_after_decompression(clock: FakeClock) -> None:
    bomb = gzip.compress(b"\0" * (8 * 1024 * 1024))
    assert len(bomb) < 64 * 1024
    script = Script(httpx.Response(200, headers={"content-encoding": "gzip", "content-type": CSV_CT}, content=bomb))
    with pytest.raises(ResponseTooLargeError):
        _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=1024 * 1024, before_attempt=lambda: None)


def test_undecodable_gzip_is_unusable(clock: FakeClock) -> None:
    script = Script(httpx.Response(200, headers={"content-encoding": "gzip"}, stream=httpx.ByteStream(b"not gzip")))
    with pytest.raises(UnusableResponseError, match="decompressed"):
        _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=1024, before_attempt=lambda: None)


def test_redirect_to_another_host_is_not_followed(clock: FakeClock) -> None:
    script = Script(httpx.Response(302, headers={"location": "https://evil.example/steal"}))
    with pytest.raises(UnusableResponseError, match="another host"):
        _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=1024, before_attempt=lambda: None)
    assert len(script.requests) == 1


def test_same_origin_redirect_is_followed(clock: FakeClock) -> None:
    script = Script(httpx.Response(301, headers={"location": "/public/rest/dataflow/all/all/1.0"}), OK)
    response = _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=lambda: None)
    assert response.status == 200
    assert str(script.requests[1].url) == "https://sdmx.oecd.org/public/rest/dataflow/all/all/1.0"


def test_requests_outside_the_provider_base_are_refused(clock: FakeClock) -> None:
    script = Script(OK)
    other = catalogue_request(load_providers().get("ECB"))
    with pytest.raises(UnusableResponseError, match="outside provider OECD"):
        _client(script, clock).fetch(OECD, other, max_bytes=1024, before_attempt=lambda: None)
    assert script.requests == []


def test_parse_retry_after() -> None:
    assert parse_retry_after("120", 0) == 120
    assert parse_retry_after(None, 0) is None
    assert parse_retry_after("soon", 0) is None
    assert parse_retry_after(email.utils.formatdate(1000, usegmt=True), 1010) == 0


def test_logs_never_contain_response_bodies_or_urls(clock: FakeClock) -> None:
    secret = b"<message:Structure>UNIQUE-BODY-MARKER</message:Structure>"
    script = Script(httpx.Response(503), httpx.Response(200, headers={"content-type": STRUCTURE_CT}, content=secret))
    with structlog.testing.capture_logs() as logs:
        _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=lambda: None)
    assert [e["status"] for e in logs if e["event"] == "sdmx_request"] == [503, 200]
    assert any(e.get("bytes") == len(secret) for e in logs)
    text = json.dumps(logs, default=str)
    assert "UNIQUE-BODY-MARKER" not in text
    assert "sdmx.oecd.org" not in text


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, tuple[str, bytes]]] = {}
    seen: ClassVar[list[tuple[str, str, str]]] = []

    def do_GET(self) -> None:
        self.seen.append((self.path, self.headers.get("User-Agent", ""), self.headers.get("Accept-Encoding", "")))
        for prefix, (content_type, body) in self.routes.items():
            if self.path.startswith(prefix):
                payload = gzip.compress(body)
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
        self.send_response(404)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"NoResultsFound")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def loopback() -> Iterator[str]:
    _Handler.routes = {}
    _Handler.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/rest"
    finally:
        server.shutdown()
        server.server_close()


def test_a_real_loopback_provider_end_to_end(loopback: str, tmp_path: Path) -> None:
    """A local mirror over real sockets: gzip on the wire, parsing by what comes back."""
    _Handler.routes = {
        "/rest/dataflow/all/all/latest": (STRUCTURE_CT, fixture("oecd_g20_prices_structure.xml")),
        "/rest/dataflow/OECD.SDD.TPS/": (STRUCTURE_CT, fixture("oecd_g20_prices_structure.xml")),
        "/rest/data/": ("application/vnd.sdmx.data+csv; charset=utf-8", fixture("oecd_g20_prices_data.csv")),
    }
    providers = tmp_path / "providers.toml"
    providers.write_text(f'[providers.MIRROR]\nbase_url = "{loopback}"\navailableconstraint = false\n')
    settings = Settings(
        db=tmp_path / "none.sqlite", sdmx_cache_path=tmp_path / "cache.sqlite", sdmx_providers=providers
    )
    service = SdmxService.from_settings(settings)
    try:
        found = service.search_datasets("consumer price indices", provider="MIRROR")
        assert found.results[0].dataset == "OECD.SDD.TPS,DSD_G20_PRICES@DF_G20_PRICES,1.0"
        described = service.describe_dataset(found.results[0].dataset, provider="MIRROR")
        assert described.key_template.startswith("REF_AREA.FREQ.METHODOLOGY")
        data = service.get_data(described.dataset, "CHN.A.N.CPI.PA._T.N.GY", provider="MIRROR", max_rows=5)
        assert data.total_rows == 41 and data.returned_rows == 5
        assert (
            data.source_url == f"{loopback}/data/OECD.SDD.TPS,DSD_G20_PRICES@DF_G20_PRICES,1.0/CHN.A.N.CPI.PA._T.N.GY"
        )
    finally:
        service.close()
    assert [path.split("?")[0] for path, _, _ in _Handler.seen] == [
        "/rest/dataflow/all/all/latest",
        "/rest/dataflow/OECD.SDD.TPS/DSD_G20_PRICES@DF_G20_PRICES/1.0",
        "/rest/data/OECD.SDD.TPS,DSD_G20_PRICES@DF_G20_PRICES,1.0/CHN.A.N.CPI.PA._T.N.GY",
    ]
    assert all(ua == USER_AGENT and "gzip" in enc for _, ua, enc in _Handler.seen)


def test_zlib_is_available_for_deflate() -> None:
    # httpx decodes "deflate" with zlib; the client advertises it, so it must work here.
    assert zlib.decompress(zlib.compress(b"ok")) == b"ok"


# -- content codings: one layer at most, and only the ones asked for -----------------------


def _encoded(body: bytes, encoding: str) -> httpx.Response:
    return httpx.Response(
        200, headers={"content-type": STRUCTURE_CT, "content-encoding": encoding}, stream=httpx.ByteStream(body)
    )


_PAYLOAD = fixture("estat_lfsa_egai2d_dataflow.xml")


@pytest.mark.parametrize(
    ("encoding", "wire"),
    [
        ("gzip", gzip.compress(_PAYLOAD)),
        ("x-gzip", gzip.compress(_PAYLOAD)),
        ("GZIP", gzip.compress(_PAYLOAD)),
        ("deflate", zlib.compress(_PAYLOAD)),
        # Some servers send raw deflate without the zlib wrapper.
        ("deflate", zlib.compress(_PAYLOAD, wbits=-15)),
        ("identity", _PAYLOAD),
        ("", _PAYLOAD),
    ],
)
def test_one_content_coding_is_decoded(clock: FakeClock, encoding: str, wire: bytes) -> None:
    script = Script(_encoded(wire, encoding))
    response = _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=lambda: None)
    assert response.body == _PAYLOAD


@pytest.mark.parametrize("encoding", ["gzip, gzip", "gzip,deflate", "deflate, gzip", "gzip, identity, gzip"])
def test_more_than_one_content_coding_is_refused(clock: FakeClock, encoding: str) -> None:
    twice = gzip.compress(gzip.compress(_PAYLOAD))
    script = Script(_encoded(twice, encoding))
    with pytest.raises(UnusableResponseError, match="more than one content-coding"):
        _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=lambda: None)


@pytest.mark.parametrize("encoding", ["br", "zstd", "compress", "x-compress", "gzip;q=1", "bogus"])
def test_a_content_coding_not_asked_for_is_refused(clock: FakeClock, encoding: str) -> None:
    script = Script(_encoded(_PAYLOAD, encoding))
    with pytest.raises(UnusableResponseError, match="content-coding"):
        _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=lambda: None)


def test_data_after_the_compressed_body_is_refused(clock: FakeClock) -> None:
    script = Script(_encoded(gzip.compress(_PAYLOAD) + gzip.compress(b"<more/>"), "gzip"))
    with pytest.raises(UnusableResponseError, match="decompressed"):
        _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=lambda: None)


def test_a_truncated_compressed_body_is_refused(clock: FakeClock) -> None:
    wire = gzip.compress(_PAYLOAD)
    script = Script(_encoded(wire[: len(wire) // 2], "gzip"))
    with pytest.raises(UnusableResponseError, match="decompressed"):
        _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=lambda: None)


def test_a_compressed_error_body_is_cut_at_its_limit(clock: FakeClock) -> None:
    from tests.sdmx.helpers import gzip_bomb

    script = Script(
        httpx.Response(404, headers={"content-encoding": "gzip"}, stream=httpx.ByteStream(gzip_bomb(1 << 30)))
    )
    response = _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=lambda: None)
    assert response.status == 404 and len(response.body) == 64 * 1024


def test_a_non_ascii_content_length_is_not_a_crash(clock: FakeClock) -> None:
    script = Script(
        httpx.Response(200, headers={"content-type": STRUCTURE_CT, "content-length": "²".encode()}, content=b"<x/>")
    )
    response = _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=lambda: None)
    assert response.body == b"<x/>"


# -- Retry-After is read totally -------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "9" * 309,  # overflows a float
        "9" * 5000,  # longer than int() reads
        "²",  # a digit to str.isdigit, not to int()
        "٣",  # an Arabic-Indic digit
        "1²",
        "１２",  # fullwidth
        "-1",
        "1e3",
        "inf",
        "nan",
        "",
        "Mon, 99 Foo 99999 99:99:99 GMT",
        "Fri, 31 Dec 99999 23:59:59 GMT",
        "Thu, 01 Jan 0001 00:00:00 GMT",
        "Fri, ²1 Dec 2027 23:59:59 GMT",
    ],
)
def test_parse_retry_after_never_raises(value: str) -> None:
    wait = parse_retry_after(value, 1_750_000_000.0)
    assert wait is None or 0 <= wait < 10**10


def test_parse_retry_after_reads_plain_seconds_only() -> None:
    assert parse_retry_after(" 30 ", 0) == 30
    assert parse_retry_after("9" * 309, 0) is None
    assert parse_retry_after("²", 0) is None
    assert parse_retry_after("١٢", 0) is None


# -- redirects stay under the provider's base ------------------------------------------------


@pytest.mark.parametrize(
    "location",
    [
        "/admin",
        "/public/other/dataflow/all/all/latest",
        "/public/restricted/dataflow",  # shares the prefix's characters, not its path
        "/public/rest/../../admin",
        "/public/rest/%2e%2e/%2E%2E/admin",
        "/public/rest/dataflow/%2e%2e%2f%2e%2e%2fadmin",
        "/public/rest/dataflow\\..\\..\\admin",
        "https://sdmx.oecd.org:8443/public/rest/dataflow/all/all/latest",
        "http://sdmx.oecd.org/public/rest/dataflow/all/all/latest",
        "//evil.example/public/rest/x",
    ],
)
def test_redirects_outside_the_provider_base_are_refused(clock: FakeClock, location: str) -> None:
    script = Script(httpx.Response(302, headers={"location": location}), OK)
    with pytest.raises(UnusableResponseError, match="outside"):
        _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=1024, before_attempt=lambda: None)
    assert len(script.requests) == 1


def test_a_relative_redirect_under_the_base_is_followed(clock: FakeClock) -> None:
    script = Script(httpx.Response(302, headers={"location": "latest?detail=full"}), OK)
    response = _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=lambda: None)
    assert response.status == 200
    assert str(script.requests[1].url) == "https://sdmx.oecd.org/public/rest/dataflow/all/all/latest?detail=full"


def test_a_request_with_dot_segments_is_refused_before_it_is_sent(clock: FakeClock) -> None:
    from governed_evidence.sdmx.urls import SdmxRequest

    script = Script(OK)
    sneaky = SdmxRequest("OECD", "structure", "https://sdmx.oecd.org/public/rest/dataflow/../../../admin", "x")
    with pytest.raises(UnusableResponseError, match="outside provider OECD"):
        _client(script, clock).fetch(OECD, sneaky, max_bytes=1024, before_attempt=lambda: None)
    assert script.requests == []


# -- a host name that resolves to a private address ------------------------------------------


def test_a_name_resolving_to_a_private_address_is_not_connected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from governed_evidence.sdmx import origin as origin_module

    connected: list[str] = []

    def resolve(host: str, port: object, *args: object, **kwargs: object) -> list[tuple[object, ...]]:
        return [(2, 1, 6, "", ("169.254.169.254", 443)), (2, 1, 6, "", ("93.184.215.14", 443))]

    def connect(*args: object, **kwargs: object) -> object:
        connected.append(str(args))
        raise OSError("no connections in this test")

    monkeypatch.setattr(origin_module.socket, "getaddrinfo", resolve)
    monkeypatch.setattr(origin_module.socket, "create_connection", connect)
    providers = tmp_path / "providers.toml"
    providers.write_text('[providers.NAMED]\nbase_url = "https://stats.example.test/rest"\n')
    named = load_providers(providers).get("NAMED")
    client = SdmxClient(max_retries=0, sleep=lambda s: None)
    try:
        with pytest.raises(ProviderUnavailableError, match="private") as info:
            client.fetch(named, catalogue_request(named), max_bytes=1024, before_attempt=lambda: None)
    finally:
        client.close()
    assert "169.254" not in str(info.value)
    assert connected == []


@pytest.mark.parametrize(
    "broken",
    [
        {"content-encoding": "br"},
        {"content-encoding": "gzip, gzip"},
        {"content-encoding": "gzip"},  # with a body that is not gzip
    ],
)
def test_an_error_status_survives_a_body_it_cannot_decode(clock: FakeClock, broken: dict[str, str]) -> None:
    script = Script(httpx.Response(503, headers=broken, stream=httpx.ByteStream(b"not compressed")), OK)
    response = _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=lambda: None)
    assert response.status == 200 and len(script.requests) == 2


def test_an_empty_compressed_redirect_is_followed(clock: FakeClock) -> None:
    redirect = httpx.Response(
        302, headers={"location": "latest?detail=full", "content-encoding": "gzip"}, stream=httpx.ByteStream(b"")
    )
    script = Script(redirect, OK)
    response = _client(script, clock).fetch(OECD, CATALOGUE, max_bytes=10**6, before_attempt=lambda: None)
    assert response.status == 200 and len(script.requests) == 2


ONE_CHUNK_BOMB = """
    import httpx
    from governed_evidence.errors import StatisticsError
    from governed_evidence.sdmx.client import SdmxClient
    from governed_evidence.sdmx.providers import load_providers
    from governed_evidence.sdmx.urls import catalogue_request
    from tests.sdmx.helpers import gzip_bomb

    bomb = gzip_bomb(4 << 30)  # 4 GiB of zeros in about 4 MB, arriving as one chunk
    answer = lambda request: httpx.Response(200, headers={"content-encoding": "gzip"}, stream=httpx.ByteStream(bomb))
    client = SdmxClient(transport=httpx.MockTransport(answer), max_retries=0)
    oecd = load_providers().get("OECD")
    limit_address_space(int(sys.argv[1]))
    try:
        client.fetch(oecd, catalogue_request(oecd), max_bytes=64 << 20, before_attempt=lambda: None)
        print("served")
    except StatisticsError as exc:
        print(type(exc).__name__)
    except MemoryError:
        print("MemoryError")
"""


def test_one_compressed_chunk_is_decoded_a_bounded_step_at_a_time() -> None:
    """However much one received chunk expands to, decoding it costs at most the cap."""
    from tests.sdmx.helpers import run_bounded

    out = run_bounded(ONE_CHUNK_BOMB, str(256 * 1024 * 1024))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["ResponseTooLargeError"]
