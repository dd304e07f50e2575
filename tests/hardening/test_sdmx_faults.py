"""SDMX upstream faults over real sockets (a scripted provider on 127.0.0.1).

tests/sdmx already covers, through httpx.MockTransport: 429/502/503/504 with and without
Retry-After, transport errors, declared and streamed bodies over the cap, gzip bombs, DTDs
and entities, the OECD's "NoResultsFound" 404, stale copies, a tampered ledger, ledger rows
from the future and a corrupted cache header. What only a socket can do, or what was not
covered, is here: header and body drips, stalls, resets, truncated bodies, wrong content
types, plain-text and HTML 404 pages, a huge codelist, a ledger surviving a real process
restart, and more kinds of ledger damage. Every fault must give a bounded, clear answer.

Memory is shown bounded where it matters most, in a subprocess under an address-space limit
(``RLIMIT_AS``): gzip bombs of one and two layers served over a socket, and hostile XML and
CSV shapes (tiny elements, deep nesting, one huge tag, distinct names, wide rows) given to
every reader. A MemoryError there, or the process being killed, fails the test.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw
import pytest

from governed_evidence.config import Settings
from governed_evidence.errors import (
    NotFoundError,
    ProviderUnavailableError,
    RateLedgerError,
    RateLimitedError,
    ResponseTooLargeError,
    StatisticsError,
    UnusableResponseError,
)
from governed_evidence.sdmx.service import SdmxService
from tests.hardening import figures
from tests.hardening.listener import Listener
from tests.sdmx.helpers import CSV_CT, STRUCTURE_CT, FakeClock, fixture

REPO = Path(__file__).resolve().parents[2]
G20 = "OECD.SDD.TPS,DSD_G20_PRICES@DF_G20_PRICES,1.0"
KEY = "CHN.A.N.CPI.PA._T.N.GY"
CATALOGUE_PATH = "/rest/dataflow/all/all/latest"
STRUCTURE_PATH = "/rest/dataflow/OECD.SDD.TPS/DSD_G20_PRICES@DF_G20_PRICES/1.0"
DATA_PATH = "/rest/data/"
#: Read timeout per attempt for the faults that stall (drips, silence); an attempt is bounded
#: by twice this.
TIMEOUT_S = 0.5
#: Read timeout for the faults the provider answers at once (a status, a body). A loaded CI
#: machine (coverage tracing, parser children, drip threads of earlier cases) once took more
#: than 0.5 s to serve a 503 and turned it into a ReadTimeout; these cases test the answer,
#: not the timeout, so they get room.
ANSWERED_TIMEOUT_S = 5.0
#: Any fault must be answered within this many seconds (two attempts and their margins).
BOUND_S = 4 * TIMEOUT_S + 2.0

Behaviour = Callable[[socket.socket], None]


def _response(status: int, content_type: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    reason = {200: "OK", 404: "Not Found", 429: "Too Many Requests", 500: "Internal Server Error"}.get(status, "X")
    lines = [f"HTTP/1.1 {status} {reason}", f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\nConnection: close\r\n\r\n").encode() + body


def respond(status: int, content_type: str, body: bytes, **headers: str) -> Behaviour:
    def behave(conn: socket.socket) -> None:
        conn.sendall(_response(status, content_type, body, headers))

    return behave


def drip_headers(conn: socket.socket) -> None:
    """A status line and then one header byte every 50 ms, for ever."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Drip: ")
    while True:
        conn.sendall(b"a")
        time.sleep(0.05)


def drip_body(conn: socket.socket) -> None:
    """Headers, then a body of one byte every 50 ms (each byte well inside the read timeout)."""
    conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: {STRUCTURE_CT}\r\nContent-Length: 100000\r\n\r\n".encode())
    while True:
        conn.sendall(b"<")
        time.sleep(0.05)


def stall_after_headers(conn: socket.socket) -> None:
    conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: {STRUCTURE_CT}\r\nContent-Length: 5000\r\n\r\n".encode())
    time.sleep(30)


def silent(conn: socket.socket) -> None:
    time.sleep(30)


def reset(conn: socket.socket) -> None:
    """Close with SO_LINGER 0: the client gets a TCP RST instead of an answer."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def reset_mid_body(conn: socket.socket) -> None:
    conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: {STRUCTURE_CT}\r\nContent-Length: 5000\r\n\r\n<mes".encode())
    time.sleep(0.05)
    reset(conn)


def close_without_answer(conn: socket.socket) -> None:
    return None


def truncated(content_type: str, body: bytes, declared: int) -> Behaviour:
    """A Content-Length larger than what is sent before the connection closes."""

    def behave(conn: socket.socket) -> None:
        head = f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {declared}\r\n\r\n"
        conn.sendall(head.encode() + body)

    return behave


def truncated_chunked(conn: socket.socket) -> None:
    conn.sendall(
        f"HTTP/1.1 200 OK\r\nContent-Type: {STRUCTURE_CT}\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
        + b"400\r\n<message:Structure"
    )


def streamed(content_type: str, size: int) -> Behaviour:
    """A chunked body of ``size`` bytes (no Content-Length to refuse it by)."""

    def behave(conn: socket.socket) -> None:
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
        piece = b"x" * 65536
        with contextlib.suppress(OSError):
            for _ in range(size // len(piece)):
                conn.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
            conn.sendall(b"0\r\n\r\n")

    return behave


@dataclass
class Upstream:
    """A scripted HTTP/1.1 provider: behaviours by path prefix, requests recorded."""

    routes: dict[str, Behaviour] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.listener = Listener(self._handle)
        self.port = self.listener.port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/rest"

    def _handle(self, conn: socket.socket) -> None:
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            path = data.split(b" ", 2)[1].decode()
            self.requests.append(path)
            for prefix in sorted(self.routes, key=len, reverse=True):
                if path.startswith(prefix):
                    self.routes[prefix](conn)
                    return
            conn.sendall(_response(404, "text/plain", b"NoResultsFound"))
        except OSError:
            pass  # the client gave up: exactly what a drip or a stall is for
        finally:
            conn.close()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    yield server
    server.close()


def _service(tmp_path: Path, upstream: Upstream, name: str = "s", **overrides: Any) -> SdmxService:
    providers = tmp_path / f"providers-{name}.toml"
    budget = overrides.pop("budget", "")
    providers.write_text(f'[providers.MIRROR]\nbase_url = "{upstream.base_url}"\navailableconstraint = false\n{budget}')
    values: dict[str, Any] = {
        "db": tmp_path / "no-index.sqlite",
        "sdmx_cache_path": tmp_path / f"cache-{name}.sqlite",
        "sdmx_providers": providers,
        "sdmx_timeout_s": ANSWERED_TIMEOUT_S,
        "sdmx_max_retries": 1,
    }
    clock = overrides.pop("clock", time.time)
    values.update(overrides)
    return SdmxService.from_settings(Settings(**values), sleep=lambda seconds: None, clock=clock)


CALLS: dict[str, Callable[[SdmxService], Any]] = {
    "catalogue": lambda s: s.search_datasets("prices", provider="MIRROR"),
    "structure": lambda s: s.describe_dataset(G20, provider="MIRROR"),
    "data": lambda s: s.get_data(G20, KEY, provider="MIRROR", max_rows=5),
}
PATHS = {"catalogue": CATALOGUE_PATH, "structure": STRUCTURE_PATH, "data": DATA_PATH}

_HTML = b"<!DOCTYPE html><html><body><h1>Service maintenance</h1><p>Back soon.</p></body></html>"
_G20_STRUCTURE = fixture("oecd_g20_prices_structure.xml")
_G20_DATA = fixture("oecd_g20_prices_data.csv")
_BILLION_LAUGHS = (
    b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;">'
    b'<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;">]><message:Structure xmlns:message="http://www.sdmx.org/resources/'
    b'sdmxml/schemas/v2_1/message">&lol3;</message:Structure>'
)
_XXE = (
    b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><message:Structure '
    b'xmlns:message="http://www.sdmx.org/resources/sdmxml/schemas/v2_1/message">&xxe;</message:Structure>'
)

#: The behaviours that hold the connection open without finishing: only the read timeout ends them.
STALLS: frozenset[Behaviour] = frozenset({drip_headers, drip_body, stall_after_headers, silent})

#: name -> (request kind, behaviour, expected error, words its message must contain)
FAULTS: dict[str, tuple[str, Behaviour, type[Exception], str]] = {
    "header drip": ("catalogue", drip_headers, ProviderUnavailableError, "could not be reached"),
    "body drip": ("structure", drip_body, ProviderUnavailableError, "could not be reached"),
    "stall after headers": ("structure", stall_after_headers, ProviderUnavailableError, "could not be reached"),
    "no answer at all": ("data", silent, ProviderUnavailableError, "could not be reached"),
    "connection reset": ("catalogue", reset, ProviderUnavailableError, "could not be reached"),
    "reset mid-body": ("structure", reset_mid_body, ProviderUnavailableError, "could not be reached"),
    "closed without an answer": ("data", close_without_answer, ProviderUnavailableError, "could not be reached"),
    "truncated body (Content-Length)": (
        "structure",
        truncated(STRUCTURE_CT, _G20_STRUCTURE[:3000], len(_G20_STRUCTURE)),
        ProviderUnavailableError,
        "could not be reached",
    ),
    "truncated chunked body": ("catalogue", truncated_chunked, ProviderUnavailableError, "could not be reached"),
    "complete answer, truncated XML": (
        "structure",
        respond(200, STRUCTURE_CT, _G20_STRUCTURE[: len(_G20_STRUCTURE) // 2]),
        UnusableResponseError,
        "not well-formed",
    ),
    "complete answer, CSV cut mid-row": (
        "data",
        respond(200, CSV_CT, _G20_DATA[: _G20_DATA.index(b"\n", 2000) + 25]),
        UnusableResponseError,
        "",
    ),
    "HTML page as a structure": ("structure", respond(200, "text/html", _HTML), UnusableResponseError, "expected"),
    "HTML page as a catalogue": ("catalogue", respond(200, "text/html", _HTML), UnusableResponseError, "expected"),
    "HTML page as data": ("data", respond(200, "text/html; charset=utf-8", _HTML), UnusableResponseError, "format"),
    "CSV content type, XML body": ("data", respond(200, CSV_CT, _G20_STRUCTURE), UnusableResponseError, ""),
    "XML content type, CSV body": ("structure", respond(200, STRUCTURE_CT, _G20_DATA), UnusableResponseError, ""),
    "octet-stream data": ("data", respond(200, "application/octet-stream", b"\x00\x01\x02"), UnusableResponseError, ""),
    # Without a content type the body decides (a structure would be read); this one is nothing.
    "no content type": ("structure", respond(200, "", b"\x00\x01 not an SDMX message"), UnusableResponseError, ""),
    "plain-text 404 for a structure": (
        "structure",
        respond(404, "text/plain", b"Not Found"),
        NotFoundError,
        "HTTP 404",
    ),
    "HTML 404 for the catalogue": ("catalogue", respond(404, "text/html", _HTML), NotFoundError, "HTTP 404"),
    "plain-text 404 for data (not NoResultsFound)": (
        "data",
        respond(404, "text/plain", b"Resource not found"),
        NotFoundError,
        "HTTP 404",
    ),
    "500": (
        "structure",
        respond(500, "text/plain", b"java.lang.NullPointerException at ..."),
        ProviderUnavailableError,
        "HTTP 500",
    ),
    "503 twice": ("data", respond(503, "text/plain", b"busy"), ProviderUnavailableError, "HTTP 503"),
    "429 asking for an hour": (
        "catalogue",
        respond(429, "text/plain", b"slow down", **{"Retry-After": "3600"}),
        ProviderUnavailableError,
        "retry in 3600 s",
    ),
    "body over the byte cap (chunked)": (
        "structure",
        streamed(STRUCTURE_CT, 3 * 1024 * 1024),
        ResponseTooLargeError,
        "narrow",
    ),
    "entity expansion": ("structure", respond(200, STRUCTURE_CT, _BILLION_LAUGHS), UnusableResponseError, "DTD"),
    "external entity": ("catalogue", respond(200, STRUCTURE_CT, _XXE), UnusableResponseError, "DTD"),
}


@pytest.mark.parametrize("name", list(FAULTS))
def test_each_upstream_fault_has_a_bounded_clear_answer(tmp_path: Path, upstream: Upstream, name: str) -> None:
    kind, behaviour, expected, words = FAULTS[name]
    upstream.routes[PATHS[kind]] = behaviour
    if kind == "data":
        # get_data peeks at a cached structure first; give it a good one.
        upstream.routes[STRUCTURE_PATH] = respond(200, STRUCTURE_CT, _G20_STRUCTURE)
    stalls = behaviour in STALLS
    timeout = TIMEOUT_S if stalls else ANSWERED_TIMEOUT_S
    service = _service(tmp_path, upstream, sdmx_max_bytes_structure=1024 * 1024, sdmx_timeout_s=timeout)
    started = time.monotonic()
    try:
        with pytest.raises(expected) as info:
            CALLS[kind](service)
    finally:
        service.close()
    elapsed = time.monotonic() - started
    message = str(info.value)
    assert words in message
    assert elapsed < (BOUND_S if stalls else 4 * ANSWERED_TIMEOUT_S + 2.0), f"{name}: answered after {elapsed:.1f} s"
    # Provider text is untrusted: no body content is echoed back.
    for body_text in ("NullPointerException", "Service maintenance", "slow down", "passwd", "Resource not found"):
        assert body_text not in message
    assert upstream.requests, "the fault was really served over the socket"
    figures.add("sdmx faults: injected over sockets", 1)
    figures.put("sdmx faults: slowest answer to a fault (s)", max(figures.FIGURES.get(
        "sdmx faults: slowest answer to a fault (s)", 0.0), round(elapsed, 2)))  # fmt: skip


def test_429_with_a_short_retry_after_is_honoured_then_served(tmp_path: Path, upstream: Upstream) -> None:
    answers = iter(
        [respond(429, "text/plain", b"", **{"Retry-After": "1"}), respond(200, STRUCTURE_CT, _G20_STRUCTURE)]
    )
    upstream.routes[STRUCTURE_PATH] = lambda conn: next(answers)(conn)
    service = _service(tmp_path, upstream)
    try:
        described = CALLS["structure"](service)
    finally:
        service.close()
    assert described.key_template.startswith("REF_AREA")
    assert [p.split("?")[0] for p in upstream.requests] == [STRUCTURE_PATH, STRUCTURE_PATH]
    figures.add("sdmx faults: injected over sockets", 1)


def test_a_failing_provider_serves_the_stale_copy_flagged(tmp_path: Path, upstream: Upstream) -> None:
    upstream.routes[STRUCTURE_PATH] = respond(200, STRUCTURE_CT, _G20_STRUCTURE)
    upstream.routes[DATA_PATH] = respond(200, CSV_CT, _G20_DATA)
    clock = FakeClock(time.time())
    service = _service(tmp_path, upstream, clock=clock, sdmx_ttl_data_s=60, sdmx_timeout_s=TIMEOUT_S)
    try:
        fresh = CALLS["data"](service)
        assert fresh.stale is False and fresh.total_rows == 41
        clock.advance(600)
        for fault in (reset, respond(500, "text/plain", b"down"), drip_headers):
            upstream.routes[DATA_PATH] = fault
            stale = CALLS["data"](service)
            assert (stale.stale, stale.from_cache, stale.total_rows) == (True, True, 41)
            assert stale.stale_age_seconds == 600 and "cached copy" in stale.hints[0]
            figures.add("sdmx faults: injected over sockets", 1)
    finally:
        service.close()


def _codelist_structure(codes: int) -> bytes:
    """The G20 structure with the REF_AREA codelist it names (OECD CL_AREA 1.1) holding ``codes`` codes."""
    items = "".join(
        f'<structure:Code id="C{i:06d}"><common:Name xml:lang="en">Area {i}</common:Name></structure:Code>'
        for i in range(codes)
    )
    block = (
        '<structure:Codelists><structure:Codelist id="CL_AREA" agencyID="OECD" version="1.1">'
        f'<common:Name xml:lang="en">Reference area</common:Name>{items}</structure:Codelist></structure:Codelists>'
    )
    text = _G20_STRUCTURE.decode()
    end = text.index("</message:Structures>")
    return (text[:end] + block + text[end:]).encode()


def test_a_huge_codelist_is_bounded(tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch) -> None:
    """90,000 codes: answered with max_codes of them; past the code bound: refused, not parsed on."""
    from governed_evidence.sdmx import structure

    body = _codelist_structure(90_000)
    upstream.routes[STRUCTURE_PATH] = respond(200, STRUCTURE_CT, body)
    service = _service(tmp_path, upstream)
    started = time.monotonic()
    try:
        described = service.describe_dataset(G20, provider="MIRROR", max_codes=30)
    finally:
        service.close()
    elapsed = time.monotonic() - started
    area = described.dimensions[0]
    assert area.id == "REF_AREA" and area.total_codes == 90_000
    assert len(area.codes) == 30 and area.truncated and area.codes[0].name == "Area 0"
    assert len(described.model_dump_json()) < 200_000
    assert elapsed < 30
    monkeypatch.setattr(structure, "MAX_CODES", 80_000)
    again = _service(tmp_path, upstream, name="bounded")
    try:
        with pytest.raises(ResponseTooLargeError):
            again.describe_dataset(G20, provider="MIRROR")
    finally:
        again.close()
    figures.add("sdmx faults: injected over sockets", 2)
    figures.put("sdmx faults: seconds to describe a 90,000-code codelist", round(elapsed, 1))


# -- the rate ledger -----------------------------------------------------------------------

SPEND_TWO = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from governed_evidence.config import Settings
    from governed_evidence.sdmx.service import SdmxService

    settings = Settings(db=Path(sys.argv[1]), sdmx_cache_path=Path(sys.argv[2]), sdmx_providers=Path(sys.argv[3]))
    service = SdmxService.from_settings(settings)
    for key in ("CHN.A.N.CPI.PA._T.N.GY", "IND.A.N.CPI.PA._T.N.GY"):
        service.get_data("OECD.SDD.TPS,DSD_G20_PRICES@DF_G20_PRICES,1.0", key, provider="MIRROR", max_rows=5)
    service.close()
    print("spent")
    """
)
TIGHT = "data_per_hour = 2\nstructure_per_hour = 50\n"


def test_the_ledger_survives_a_real_process_restart(tmp_path: Path, upstream: Upstream) -> None:
    upstream.routes[STRUCTURE_PATH] = respond(200, STRUCTURE_CT, _G20_STRUCTURE)
    upstream.routes[DATA_PATH] = respond(200, CSV_CT, _G20_DATA)
    service = _service(tmp_path, upstream, budget=TIGHT)  # writes the providers file and the cache tables
    service.close()
    out = subprocess.run(
        [sys.executable, "-c", SPEND_TWO, str(tmp_path / "no-index.sqlite"), str(tmp_path / "cache-s.sqlite"),
         str(tmp_path / "providers-s.toml")],
        capture_output=True, text=True, timeout=60, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert out.returncode == 0 and "spent" in out.stdout, out.stderr[-2000:]
    data_requests = [p for p in upstream.requests if p.startswith(DATA_PATH)]
    assert len(data_requests) == 2
    restarted = _service(tmp_path, upstream, budget=TIGHT)
    try:
        with pytest.raises(RateLimitedError, match="budget of 2 data requests per hour"):
            restarted.get_data(G20, "BRA.A.N.CPI.PA._T.N.GY", provider="MIRROR")
        mirror = next(p for p in restarted.status().providers if p.provider == "MIRROR")
        assert (mirror.data_used_last_hour, mirror.data_per_hour) == (2, 2)
    finally:
        restarted.close()
    assert len([p for p in upstream.requests if p.startswith(DATA_PATH)]) == 2, "no request after the restart"
    figures.add("sdmx faults: process restarts with a spent budget", 1)


def _damage_view(path: Path) -> None:
    conn = apsw.Connection(str(path))
    conn.execute(
        "DROP TABLE sdmx_rate_ledger; CREATE VIEW sdmx_rate_ledger(provider, bucket, at) AS "
        "SELECT 'MIRROR', 'data', 1.0"
    )
    conn.close()


def _damage_types(path: Path) -> None:
    conn = apsw.Connection(str(path))
    conn.execute(
        "DROP TABLE sdmx_rate_ledger; CREATE TABLE sdmx_rate_ledger(provider, bucket, at);"
        "INSERT INTO sdmx_rate_ledger VALUES ('MIRROR', 'data', NULL), ('MIRROR', 'data', x'00ff'), "
        "('MIRROR', 'structure', 'soon'), ('MIRROR', 'structure', 1e300)"
    )
    conn.close()


def _damage_truncate(path: Path) -> None:
    with path.open("r+b") as fh:
        fh.truncate(path.stat().st_size // 2)


def _damage_pages(path: Path) -> None:
    """Overwrite every page after the first with garbage (the header still says SQLite)."""
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536
    for offset in range(page, len(data), page):
        data[offset : offset + 64] = b"\xde\xad\xbe\xef" * 16
    path.write_bytes(bytes(data))


def _damage_garbage(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "ledger replaced by a view": _damage_view,
    "ledger rows of the wrong type or from the future": _damage_types,
    "file truncated to half": _damage_truncate,
    "pages overwritten": _damage_pages,
    "whole file random bytes": _damage_garbage,
}


@pytest.mark.parametrize("name", list(DAMAGE))
def test_a_damaged_ledger_fails_closed(tmp_path: Path, upstream: Upstream, name: str) -> None:
    """(Removing the ledger, its table or its file, is an operator's reset and is not damage.)"""
    upstream.routes[CATALOGUE_PATH] = respond(200, STRUCTURE_CT, _G20_STRUCTURE)
    upstream.routes[STRUCTURE_PATH] = respond(200, STRUCTURE_CT, _G20_STRUCTURE)
    upstream.routes[DATA_PATH] = respond(200, CSV_CT, _G20_DATA)
    first = _service(tmp_path, upstream, budget=TIGHT)
    first.get_data(G20, KEY, provider="MIRROR", max_rows=5)
    first.close()
    sent = len(upstream.requests)
    DAMAGE[name](tmp_path / "cache-s.sqlite")
    service = _service(tmp_path, upstream, budget=TIGHT)
    try:
        for call in (
            lambda: service.get_data(G20, "IND.A.N.CPI.PA._T.N.GY", provider="MIRROR"),
            lambda: service.search_datasets("prices", provider="MIRROR"),
        ):
            with pytest.raises(StatisticsError) as info:
                call()
            # Refused before sending: never "unlimited", never a silent reset of the budget.
            assert isinstance(info.value, RateLedgerError), f"{type(info.value).__name__}: {info.value}"
        status = service.status()
        assert status.usable is False and status.problem
    finally:
        service.close()
    assert len(upstream.requests) == sent, "a request was sent with a damaged ledger"
    figures.add("sdmx faults: ledger damages failing closed", 1)


def test_a_damaged_statistics_schema_in_the_index_does_not_stop_the_server(tmp_path: Path, upstream: Upstream) -> None:
    """The SDMX tables live in the index file when it is writable: damage there must leave the
    documents serving and the statistics tools refusing, not crash the server at start-up."""
    from governed_evidence.config import Classification
    from governed_evidence.ingest.pipeline import ingest_corpus
    from governed_evidence.mcp.status import combined_status
    from governed_evidence.search.service import SearchService
    from tests.helpers import HashEmbedder, small_corpus

    db = tmp_path / "index.sqlite"
    embedder = HashEmbedder()
    ingest_corpus(small_corpus(tmp_path / "corpus"), db, embedder, ceiling=Classification.PUBLIC, progress=None)
    first = _service(tmp_path, upstream, db=db, sdmx_cache_path=None)
    assert first.status().location == "index"
    first.close()
    _damage_view(db)
    service = _service(tmp_path, upstream, db=db, sdmx_cache_path=None)  # must not raise
    documents = SearchService(db, ceiling=Classification.PUBLIC, embedder_factory=lambda: embedder)
    try:
        status = combined_status(documents, service)
        assert status.ok and status.statistics_cache is not None
        assert status.statistics_cache.usable is False and "damaged" in (status.statistics_cache.problem or "")
        assert documents.search("train fares", confidence_level="normal").results
        with pytest.raises(RateLedgerError):
            service.search_datasets("prices", provider="MIRROR")
    finally:
        service.close()
        documents.reader.close()
    assert upstream.requests == []
    figures.add("sdmx faults: ledger damages failing closed", 1)


# -- memory: decompression and parsing under an address-space limit ------------------------

BOMB_FETCH = """
    from pathlib import Path
    from governed_evidence.config import Settings
    from governed_evidence.errors import StatisticsError
    from governed_evidence.sdmx.service import SdmxService

    work, headroom = Path(sys.argv[1]), int(sys.argv[2])
    settings = Settings(
        db=work / "no-index.sqlite", sdmx_cache_path=work / "cache.sqlite", sdmx_providers=work / "providers.toml",
        sdmx_max_retries=0, sdmx_timeout_s=20,
    )
    service = SdmxService.from_settings(settings)
    service.status()  # the cache file is open before the limit applies
    for provider in sys.argv[3:]:
        limit_address_space(headroom)
        try:
            service.search_datasets("prices", provider=provider)
            outcome = "served"
        except StatisticsError as exc:
            outcome = f"{type(exc).__name__}: {exc}"
        except MemoryError:
            outcome = "MemoryError"
        finally:
            unlimit_address_space()
        print(f"{provider} | {outcome}", flush=True)
    service.close()
"""
#: Address space a fetch may add: a few hundred MB above the interpreter's baseline.
BOMB_HEADROOM = 256 * 1024 * 1024


def _two_encoding_lines(body: bytes) -> Behaviour:
    def behave(conn: socket.socket) -> None:
        head = (
            f"HTTP/1.1 200 OK\r\nContent-Type: {STRUCTURE_CT}\r\nContent-Encoding: gzip\r\nContent-Encoding: gzip\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        conn.sendall(head.encode() + body)

    return behave


def test_gzip_bombs_leave_memory_bounded(tmp_path: Path, upstream: Upstream) -> None:
    """A two-layer gzip of 8 GiB is a few KB on the wire; a one-layer one of 4 GiB, 4 MB."""
    from tests.sdmx.helpers import gzip_bomb, run_bounded

    double = gzip_bomb(8 << 30, layers=2)
    single = gzip_bomb(4 << 30)
    assert len(double) < 20_000
    upstream.routes["/double/"] = respond(200, STRUCTURE_CT, double, **{"Content-Encoding": "gzip, gzip"})
    upstream.routes["/twice/"] = _two_encoding_lines(double)
    upstream.routes["/single/"] = respond(200, STRUCTURE_CT, single, **{"Content-Encoding": "gzip"})
    upstream.routes["/brotli/"] = respond(200, STRUCTURE_CT, double, **{"Content-Encoding": "br"})
    base = f"http://127.0.0.1:{upstream.port}"
    (tmp_path / "providers.toml").write_text(
        "".join(
            f'[providers.{name.upper()}]\nbase_url = "{base}/{name}"\n'
            for name in ("double", "twice", "single", "brotli")
        )
    )
    out = run_bounded(BOMB_FETCH, str(tmp_path), str(BOMB_HEADROOM), "DOUBLE", "TWICE", "SINGLE", "BROTLI")
    assert out.returncode == 0, out.stderr[-3000:]
    outcomes = dict(line.split(" | ", 1) for line in out.stdout.splitlines())
    assert set(outcomes) == {"DOUBLE", "TWICE", "SINGLE", "BROTLI"}, out.stdout
    for provider in ("DOUBLE", "TWICE"):
        assert outcomes[provider].startswith("UnusableResponseError:"), outcomes
        assert "more than one content-coding" in outcomes[provider]
    assert outcomes["BROTLI"].startswith("UnusableResponseError:") and "content-coding" in outcomes["BROTLI"]
    assert outcomes["SINGLE"].startswith("ResponseTooLargeError:") and "limit of 64 MiB" in outcomes["SINGLE"]
    assert {p.split("/")[1] for p in upstream.requests} == {"double", "twice", "single", "brotli"}
    figures.add("sdmx faults: injected over sockets", 4)
    figures.add("sdmx faults: decompression bombs under an address-space limit", 4)


HOSTILE_PARSE = """
    import gc
    from governed_evidence.errors import StatisticsError
    from governed_evidence.sdmx.catalogue import parse_catalogue
    from governed_evidence.sdmx.data import parse_data
    from governed_evidence.sdmx.structure import parse_structure
    from tests.sdmx.helpers import HOSTILE_CSV_SHAPES, HOSTILE_XML_SHAPES, hostile_csv, hostile_xml

    size, headroom = int(sys.argv[1]), int(sys.argv[2])
    READERS = {
        "catalogue": parse_catalogue,
        "structure": parse_structure,
        "generic": lambda body: parse_data("generic", body, keep=200, max_rows=200_000),
        "structurespecific": lambda body: parse_data("structurespecific", body, keep=200, max_rows=200_000),
        "csv": lambda body: parse_data("csv", body, keep=200, max_rows=200_000),
    }
    cases = [(r, s) for r in READERS if r != "csv" for s in HOSTILE_XML_SHAPES]
    cases += [("csv", s) for s in HOSTILE_CSV_SHAPES]
    # Whatever a first parse imports or compiles is in the baseline, not in the headroom.
    for reader, shape in cases:
        try:
            READERS[reader](hostile_csv(shape, 4096) if reader == "csv" else hostile_xml(reader, shape, 4096))
        except StatisticsError:
            pass
    for reader, shape in cases:
        body = hostile_csv(shape, size) if reader == "csv" else hostile_xml(reader, shape, size)
        gc.collect()
        limit_address_space(headroom)
        try:
            READERS[reader](body)
            outcome = "parsed"
        except StatisticsError as exc:
            outcome = type(exc).__name__
        except MemoryError:
            outcome = "MemoryError"
        finally:
            unlimit_address_space()
        del body
        print(f"{reader} {shape} | {outcome}", flush=True)
"""
#: Size of each hostile body, and the address space its parse may add on top of holding it.
HOSTILE_SIZE = 4 * 1024 * 1024
PARSE_HEADROOM = 4 * HOSTILE_SIZE + 32 * 1024 * 1024


def test_hostile_bodies_parse_in_memory_bounded_by_their_size() -> None:
    """Tiny elements, deep nesting, one huge tag, distinct names, many small items, wide CSV:
    each reader answers (parsed or refused) within a small multiple of the body's size."""
    from tests.sdmx.helpers import HOSTILE_CSV_SHAPES, HOSTILE_XML_SHAPES, run_bounded

    out = run_bounded(HOSTILE_PARSE, str(HOSTILE_SIZE), str(PARSE_HEADROOM), timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    outcomes = dict(line.split(" | ", 1) for line in out.stdout.splitlines())
    assert len(outcomes) == 4 * len(HOSTILE_XML_SHAPES) + len(HOSTILE_CSV_SHAPES), out.stdout
    bad = {
        case: outcome
        for case, outcome in outcomes.items()
        if outcome not in ("parsed", "ResponseTooLargeError", "UnusableResponseError")
    }
    assert bad == {}, out.stdout
    figures.add("sdmx faults: hostile bodies parsed under an address-space limit", len(outcomes))
