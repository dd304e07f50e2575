"""Seams for the SDMX tests: recorded responses, a fake provider transport and a fake clock."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import http.server
import json
import os
import subprocess
import sys
import textwrap
import threading
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastmcp import Client, FastMCP

from governed_evidence.config import Classification, Settings
from governed_evidence.mcp.calls import Calls, stdio_caller
from governed_evidence.mcp.statistics import register_statistics_tools
from governed_evidence.sdmx.service import SdmxService

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "sdmx"
SHARED = REPO.parent / "shared" / "data" / "sdmx"

STRUCTURE_CT = "application/vnd.sdmx.structure+xml;version=2.1"
GENERIC_CT = "application/vnd.sdmx.genericdata+xml;version=2.1"
SS_CT = "application/vnd.sdmx.structurespecificdata+xml;version=2.1"
CSV_CT = "application/vnd.sdmx.data+csv; charset=utf-8"

MES = "http://www.sdmx.org/resources/sdmxml/schemas/v2_1/message"
STR = "http://www.sdmx.org/resources/sdmxml/schemas/v2_1/structure"

# Recorded responses that live only in ../shared (their repositories state no licence).
OECD_HOUSE_STRUCTURE = "OECD/belgski-Belgium/datasets/house_price_indicators/structure.xml"
OECD_HOUSE_DATA = "OECD/belgski-Belgium/datasets/house_price_indicators/data.csv"
OECD_ACTUAL = "OECD/sdmx-test-data/OECD/actualconstraint-0.xml"
OECD_JSON = "OECD/isakskogstad-OECD-MCP/dataflow-response.json"
ECB_STRUCTURE_FULL = "ECB/sdmx-test-data/ECB_EXR/1/structure-full.xml"
ECB_DSD_ONLY = "ECB/sdmx-test-data/ECB_EXR/1/structure.xml"
ECB_DATA = "ECB/sdmx-test-data/ECB_EXR/1/M.USD.EUR.SP00.A.xml"
ESTAT_GOV = "ESTAT/sdmx-test-data/ESTAT/GOV_10Q_GGNFA.xml"
ESTAT_NRG_STRUCTURE = "ESTAT/bis-med-it-pysdmx/tests/io/xml/sdmx21/reader/samples/estat_metadata.xml"
ESTAT_LFSA_DSD = "ESTAT/knifflig-sdmxflow/tests/data/sdmx/estat/lfsa_egai2d/raw/datastructure_descendants.xml"
ESTAT_NAMA = "ESTAT/sdmx-test-data/ESTAT/NAMA_10_GDP-ss.xml"
ESTAT_FOOTER = "ESTAT/sdmx-test-data/ESTAT/footer2.xml"
SPC_ACTUAL = "SPC/sdmx-test-data/SPC/actualconstraint-0.xml"


#: A checkout of khaeru/sdmx-test-data (the sdmx1 client's recorded responses), named by
#: this variable as sdmx1's own tests name it. Its files are read from ../shared first (laid
#: out as ``<PROVIDER>/sdmx-test-data/<path>``, see its MANIFEST.md), else from here.
SDMX_TEST_DATA = os.environ.get("SDMX_TEST_DATA")


def sdmx_test_data(provider: str, path: str) -> bytes:
    """A file of khaeru/sdmx-test-data (no licence stated, so never copied into this repository).

    Looked for in ``../shared/data/sdmx/<provider>/sdmx-test-data/<path>``, then under
    ``$SDMX_TEST_DATA``; the test skips, naming both places, when neither has it.
    """
    candidates = [SHARED / provider / "sdmx-test-data" / path]
    if SDMX_TEST_DATA:
        candidates.append(Path(SDMX_TEST_DATA) / path)
    for candidate in candidates:
        if candidate.is_file():
            return candidate.read_bytes()
    pytest.skip(
        f"recorded response not available: khaeru/sdmx-test-data {path} (looked in ../shared/data/sdmx/{provider}/"
        "sdmx-test-data/ and $SDMX_TEST_DATA)"
    )


def recorded(provider: str, path: str) -> tuple[str, str, bytes]:
    """A response recorded by requests-cache in khaeru/sdmx-test-data/recorded: (URL, Content-Type, body)."""
    record = json.loads(sdmx_test_data(provider, path))
    return str(record["url"]), str(record["headers"]["Content-Type"]), base64.b64decode(record["_content"])


def fixture(name: str) -> bytes:
    """A file copied into tests/fixtures/sdmx (see PROVENANCE.md)."""
    return (FIXTURES / name).read_bytes()


def shared(relative: str) -> bytes:
    """A recorded response from ../shared/data/sdmx; the test skips when it is absent."""
    path = SHARED / relative
    if not path.is_file():
        pytest.skip(f"shared SDMX file not available: {relative}")
    return path.read_bytes()


def catalogue_of(*bodies: bytes) -> bytes:
    """A catalogue message made of the real ``Dataflow`` definitions found in ``bodies``."""
    ET.register_namespace("message", MES)
    ET.register_namespace("structure", STR)
    root = ET.Element(f"{{{MES}}}Structure")
    ET.SubElement(root, f"{{{MES}}}Header")
    flows = ET.SubElement(ET.SubElement(root, f"{{{MES}}}Structures"), f"{{{STR}}}Dataflows")
    for body in bodies:
        for flow in ET.fromstring(body).iter(f"{{{STR}}}Dataflow"):
            if flow.get("id"):
                flows.append(flow)
    return ET.tostring(root, xml_declaration=True, encoding="utf-8")


@dataclass
class Route:
    """Answer requests whose URL contains ``match`` (path and query)."""

    match: str
    status: int = 200
    body: bytes = b""
    content_type: str = STRUCTURE_CT
    headers: dict[str, str | bytes] = field(default_factory=dict)


class FakeProviders:
    """A MockTransport handler that serves routes in order and records every request."""

    def __init__(self) -> None:
        self.routes: list[Route] = []
        self.requests: list[httpx.Request] = []
        #: Responses to give before the routes apply, one per request (for retry tests).
        self.queue: list[httpx.Response] = []

    def add(
        self, match: str, body: bytes, content_type: str = STRUCTURE_CT, status: int = 200, **headers: str | bytes
    ) -> None:
        self.routes.insert(0, Route(match, status, body, content_type, dict(headers)))

    def urls(self) -> list[str]:
        return [str(r.url) for r in self.requests]

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.queue:
            return self.queue.pop(0)
        url = str(request.url)
        for route in self.routes:
            if route.match in url:
                return httpx.Response(
                    route.status,
                    headers={"content-type": route.content_type, **route.headers},
                    content=route.body,
                )
        return httpx.Response(404, headers={"content-type": "text/plain"}, content=b"NoResultsFound")

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handler)


class LocalProvider:
    """``fake``'s routes served over real sockets on 127.0.0.1 (an ``http://127.0.0.1:PORT`` base).

    Paths are matched without the base (``/rest``), as the MockTransport routes are; each
    request's path is recorded in ``fake.requests`` as an httpx request. A context manager.
    """

    def __init__(self, fake: FakeProviders) -> None:
        self.fake = fake
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = f"http://127.0.0.1:{outer.port}{self.path}"
                response = outer.fake.handler(httpx.Request("GET", url))
                body = response.content
                self.send_response(response.status_code)
                for name, value in response.headers.items():
                    if name.lower() not in ("content-length", "content-encoding", "transfer-encoding"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port: int = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/rest"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> LocalProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class FakeClock:
    def __init__(self, start: float = 1_750_000_000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        # Waiting moves the clock, as it would in production.
        self.sleeps.append(seconds)
        self.now += seconds


# -- hostile bodies and a memory-bounded subprocess ------------------------------------------

GENERIC_NS = "http://www.sdmx.org/resources/sdmxml/schemas/v2_1/data/generic"
COM = "http://www.sdmx.org/resources/sdmxml/schemas/v2_1/common"

#: reader -> (document start, a unit's start tag, its end tag, document end)
_CONTAINERS: dict[str, tuple[bytes, bytes, bytes, bytes]] = {
    "catalogue": (
        f'<m:Structure xmlns:m="{MES}" xmlns:s="{STR}" xmlns:c="{COM}"><m:Header/><m:Structures><s:Dataflows>'.encode(),
        b'<s:Dataflow id="D" agencyID="A" version="1.0">',
        b"</s:Dataflow>",
        b"</s:Dataflows></m:Structures></m:Structure>",
    ),
    "structure": (
        f'<m:Structure xmlns:m="{MES}" xmlns:s="{STR}" xmlns:c="{COM}"><m:Header/><m:Structures><s:Codelists>'
        '<s:Codelist id="CL" agencyID="A" version="1.0">'.encode(),
        b'<s:Code id="C">',
        b"</s:Code>",
        b"</s:Codelist></s:Codelists></m:Structures></m:Structure>",
    ),
    "generic": (
        f'<m:GenericData xmlns:m="{MES}" xmlns:g="{GENERIC_NS}"><m:Header/><m:DataSet><g:Series>'.encode(),
        b'<g:Obs><g:ObsDimension value="2020"/>',
        b"</g:Obs>",
        b"</g:Series></m:DataSet></m:GenericData>",
    ),
    "structurespecific": (
        f'<m:StructureSpecificData xmlns:m="{MES}"><m:Header/><m:DataSet><Series A="1">'.encode(),
        b'<Obs TIME_PERIOD="2020" OBS_VALUE="1">',
        b"</Obs>",
        b"</Series></m:DataSet></m:StructureSpecificData>",
    ),
}
#: Shapes that turn few bytes into many parser objects.
HOSTILE_XML_SHAPES = ("flat", "in-unit", "deep", "one-tag", "names", "items")
HOSTILE_CSV_SHAPES = ("wide-header", "wide-row", "long-line")


def _repeat(make: bytes, room: int) -> bytes:
    """``make % i`` for i = 0, 1, ... until ``room`` bytes are filled."""
    parts: list[bytes] = []
    used = 0
    i = 0
    while used < room:
        part = make % i
        parts.append(part)
        used += len(part)
        i += 1
    return b"".join(parts)


def hostile_xml(reader: str, shape: str, size: int) -> bytes:
    """About ``size`` bytes of well-formed SDMX-ML for ``reader`` that is cheap on the wire, dear in memory."""
    head, open_unit, close_unit, tail = _CONTAINERS[reader]
    room = size - len(head) - len(tail) - len(open_unit) - len(close_unit)
    if shape == "flat":  # many tiny elements beside the units
        middle = b"<x/>" * (room // 4)
    elif shape == "in-unit":  # many tiny elements inside one unit
        middle = open_unit + b"<x/>" * (room // 4) + close_unit
    elif shape == "deep":
        depth = room // 7
        middle = b"<x>" * depth + b"</x>" * depth
    elif shape == "one-tag":  # one start tag with distinct attributes
        middle = b"<x" + _repeat(b' a%x=""', room) + b"/>"
    elif shape == "names":  # distinct element names
        middle = _repeat(b"<a%x/>", room)
    elif shape == "items":  # the smallest units the reader keeps something of
        unit = {
            "catalogue": b'<s:Dataflow id="D%x"/>',
            "structure": b'<s:Code id="C%x"/>',
            "generic": b'<g:Obs><g:ObsDimension value="%x"/></g:Obs>',
            "structurespecific": b'<Obs TIME_PERIOD="%x"/>',
        }[reader]
        middle = _repeat(unit, room)
    else:
        raise ValueError(shape)
    return head + middle + tail


def hostile_csv(shape: str, size: int) -> bytes:
    """About ``size`` bytes of SDMX-CSV that costs many objects per byte."""
    header = b"DATAFLOW,REF_AREA,TIME_PERIOD,OBS_VALUE\n"
    if shape == "wide-header":
        return b"DATAFLOW,OBS_VALUE" + b",X" * ((size - 20) // 2) + b"\n"
    if shape == "wide-row":
        return header + b"," * (size - len(header)) + b"\n"
    if shape == "long-line":  # a quoted field spanning most of the body
        return header + b'A,"' + b"x" * (size - len(header) - 10) + b'",2020,1\n'
    raise ValueError(shape)


#: Prepended to scripts run by :func:`run_bounded`.
BOUNDED_PREAMBLE = '''
import gc
import resource
import sys

_UNLIMITED = resource.getrlimit(resource.RLIMIT_AS)


def address_space() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))


def limit_address_space(headroom: int) -> None:
    """From now on this process may grow by ``headroom`` bytes of address space, no more."""
    resource.setrlimit(resource.RLIMIT_AS, (address_space() + headroom, _UNLIMITED[1]))


def unlimit_address_space() -> None:
    # After a MemoryError the failed parse's garbage may still be in reference cycles.
    try:
        gc.collect()
    except MemoryError:
        pass
    resource.setrlimit(resource.RLIMIT_AS, _UNLIMITED)
'''


def run_bounded(script: str, *args: str, timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
    """Run ``script`` (which calls ``limit_address_space``) in a fresh interpreter from the repository."""
    if not Path("/proc/self/status").is_file():
        pytest.skip("needs /proc/self/status to measure the address space")
    return subprocess.run(
        [sys.executable, "-c", BOUNDED_PREAMBLE + textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def gzip_bomb(expanded: int, layers: int = 1) -> bytes:
    """Gzip of ``expanded`` zero bytes (any size, built without holding them), wrapped ``layers`` times.

    The innermost stream is repeated full-flush blocks without a trailer: a reader that
    honours its cap never gets that far, and one that does not runs out of memory first.
    """
    block = b"\0" * (1 << 20)
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    again = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    body = first + again * max(0, expanded // len(block) - 1)
    for _ in range(layers - 1):
        body = gzip.compress(body, 9)
    return body


@contextlib.contextmanager
def local_services(
    tmp_path: Path, local: LocalProvider, providers: Callable[[str], str]
) -> Iterator[Callable[[], SdmxService]]:
    """Makers of services whose providers.toml is ``providers(origin)`` (``origin`` is the
    local server's ``http://127.0.0.1:port``), all sharing one cache file; each service made
    is closed afterwards."""
    made: list[SdmxService] = []

    def build() -> SdmxService:
        file = tmp_path / f"providers-{len(made)}.toml"
        file.write_text(providers(f"http://127.0.0.1:{local.port}"), encoding="utf-8")
        settings = Settings(
            db=tmp_path / "no-index.sqlite",
            sdmx_cache_path=tmp_path / "sdmx-cache.sqlite",
            sdmx_providers=file,
            sdmx_max_retries=0,
        )
        service = SdmxService.from_settings(settings, sleep=lambda _: None)
        made.append(service)
        return service

    try:
        yield build
    finally:
        for service in made:
            service.close()


def call_statistics_tools(
    service: SdmxService, *calls: tuple[str, dict[str, Any]], raise_on_error: bool = True
) -> list[Any]:
    """Each ``(tool, arguments)`` through a real MCP client of the statistics tools, in order
    (a tool error is returned as the result instead of raised when ``raise_on_error`` is false)."""
    app = FastMCP("test", mask_error_details=True)
    levels = SimpleNamespace(ceiling=Classification.PUBLIC)
    register_statistics_tools(app, service, Calls(levels, anonymous=stdio_caller(Classification.PUBLIC)))  # type: ignore[arg-type]

    async def body() -> list[Any]:
        async with Client(app) as client:
            return [await client.call_tool(tool, args, raise_on_error=raise_on_error) for tool, args in calls]

    return asyncio.run(body())
