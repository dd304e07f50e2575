"""Seams for the SDMX tests: recorded responses, a fake provider transport and a fake clock."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

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
    headers: dict[str, str] = field(default_factory=dict)


class FakeProviders:
    """A MockTransport handler that serves routes in order and records every request."""

    def __init__(self) -> None:
        self.routes: list[Route] = []
        self.requests: list[httpx.Request] = []
        #: Responses to give before the routes apply, one per request (for retry tests).
        self.queue: list[httpx.Response] = []

    def add(self, match: str, body: bytes, content_type: str = STRUCTURE_CT, status: int = 200, **headers: str) -> None:
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
