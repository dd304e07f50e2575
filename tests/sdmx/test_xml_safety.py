"""Hostile and malformed XML is refused by every reader, and never cached or logged."""

from __future__ import annotations

import pytest

from governed_evidence.errors import ResponseTooLargeError, UnusableResponseError
from governed_evidence.sdmx.catalogue import parse_catalogue
from governed_evidence.sdmx.data import parse_data
from governed_evidence.sdmx.formats import detect
from governed_evidence.sdmx.structure import parse_structure
from tests.sdmx.helpers import GENERIC_CT, STRUCTURE_CT, FakeProviders, hostile_xml

STRUCTURE_OPEN = (
    b'<message:Structure xmlns:message="http://www.sdmx.org/resources/sdmxml/schemas/v2_1/message" '
    b'xmlns:structure="http://www.sdmx.org/resources/sdmxml/schemas/v2_1/structure" '
    b'xmlns:common="http://www.sdmx.org/resources/sdmxml/schemas/v2_1/common">'
)

BILLION_LAUGHS = (
    b'<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
    + b"".join(
        b' <!ENTITY lol%d "%s">\n'
        % (i, b"".join(b"&lol%s;" % (str(i - 1).encode() if i > 1 else b"") for _ in range(10)))
        for i in range(1, 10)
    )
    + b"]>\n"
    + STRUCTURE_OPEN
    + b'<message:Structures><structure:Dataflows><structure:Dataflow id="X" agencyID="A" version="1.0">'
    + b"<common:Name>&lol9;</common:Name></structure:Dataflow></structure:Dataflows></message:Structures>"
    + b"</message:Structure>"
)
EXTERNAL_ENTITY = (
    b'<?xml version="1.0"?>\n<!DOCTYPE m [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>\n'
    + STRUCTURE_OPEN
    + b'<message:Structures><structure:Dataflows><structure:Dataflow id="X" agencyID="A" version="1.0">'
    + b"<common:Name>&xxe;</common:Name></structure:Dataflow></structure:Dataflows></message:Structures>"
    + b"</message:Structure>"
)
EXTERNAL_DTD = (
    b'<?xml version="1.0"?>\n<!DOCTYPE m SYSTEM "http://127.0.0.1:9/evil.dtd">\n'
    + STRUCTURE_OPEN
    + b"</message:Structure>"
)
PARAMETER_ENTITY = (
    b'<?xml version="1.0"?>\n<!DOCTYPE m [<!ENTITY % remote SYSTEM "http://127.0.0.1:9/x"> %remote;]>\n'
    + STRUCTURE_OPEN
    + b"</message:Structure>"
)
TRUNCATED = STRUCTURE_OPEN + b"<message:Structures><structure:Dataflows><structure:Dataf"
NOT_XML = b"<html><body>Service temporarily unavailable</body>"

HOSTILE = {
    "billion_laughs": BILLION_LAUGHS,
    "external_entity": EXTERNAL_ENTITY,
    "external_dtd": EXTERNAL_DTD,
    "parameter_entity": PARAMETER_ENTITY,
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_xml_is_refused_by_every_reader(name: str) -> None:
    body = HOSTILE[name]
    with pytest.raises(UnusableResponseError, match="DTD or entities"):
        parse_structure(body)
    with pytest.raises(UnusableResponseError, match="DTD or entities"):
        parse_catalogue(body)
    with pytest.raises(UnusableResponseError, match="DTD or entities"):
        detect("application/xml", body)
    with pytest.raises(UnusableResponseError, match="DTD or entities"):
        parse_data("generic", body, keep=10, max_rows=100)


@pytest.mark.parametrize("body", [TRUNCATED, NOT_XML, b"", b"\xff\xfe\x00garbage"])
def test_malformed_xml_is_refused(body: bytes) -> None:
    with pytest.raises(UnusableResponseError):
        parse_structure(body)
    with pytest.raises(UnusableResponseError):
        parse_catalogue(body)


def test_hostile_structure_from_a_provider_is_an_error_and_not_cached(make_service, fake: FakeProviders) -> None:  # type: ignore[no-untyped-def]
    fake.add("/dataflow/all/all/latest", BILLION_LAUGHS, STRUCTURE_CT)
    service = make_service()
    with pytest.raises(UnusableResponseError):
        service.search_datasets("house prices")
    with pytest.raises(UnusableResponseError):
        service.search_datasets("house prices")
    # Not cached: the second call asked the provider again.
    assert len(fake.requests) == 2
    assert service.status().entries == 0


def test_hostile_data_from_a_provider_is_refused(make_service, fake: FakeProviders) -> None:  # type: ignore[no-untyped-def]
    fake.add("/data/", EXTERNAL_ENTITY.replace(b"Structure", b"GenericData"), GENERIC_CT)
    service = make_service()
    with pytest.raises(UnusableResponseError, match="DTD or entities"):
        service.get_data("ECB,EXR,1.0", "M.USD.EUR.SP00.A", provider="ECB")


@pytest.mark.parametrize(
    ("shape", "error", "words"),
    [
        ("deep", UnusableResponseError, "nests deeper"),
        ("one-tag", UnusableResponseError, "single tag"),
        ("names", UnusableResponseError, "distinct names"),
        ("in-unit", ResponseTooLargeError, "holds more"),
        ("flat", ResponseTooLargeError, "more elements"),
    ],
)
@pytest.mark.parametrize("reader", ["catalogue", "structure", "generic", "structurespecific"])
def test_each_bound_of_the_xml_reader_refuses_clearly(
    monkeypatch: pytest.MonkeyPatch, reader: str, shape: str, error: type[Exception], words: str
) -> None:
    """What a hostile body is refused for (tests/hardening measures the memory it is kept to)."""
    from governed_evidence.sdmx import xml

    # Smaller element bounds keep the test quick; the shapes are as large as the real bounds need.
    monkeypatch.setattr(xml, "MAX_ELEMENTS", 50_000)
    monkeypatch.setattr(xml, "MAX_UNIT_ELEMENTS", 5_000)
    body = hostile_xml(reader, shape, 1536 * 1024)
    read = {
        "catalogue": parse_catalogue,
        "structure": parse_structure,
        "generic": lambda b: parse_data("generic", b, keep=10, max_rows=10**6),
        "structurespecific": lambda b: parse_data("structurespecific", b, keep=10, max_rows=10**6),
    }[reader]
    with pytest.raises(error, match=words):
        read(body)


def test_a_csv_with_more_columns_than_sdmx_csv_is_refused() -> None:
    header = b",".join(b"C%d" % i for i in range(2000)) + b",OBS_VALUE\n"
    with pytest.raises(UnusableResponseError, match="more columns"):
        parse_data("csv", header + b",".join([b"x"] * 2001) + b"\n", keep=10, max_rows=100)


def test_a_comment_or_text_is_not_a_token_that_stalls_the_reader() -> None:
    """Text streams out of the parser as it is read; only one unbroken token is bounded."""
    flow = (
        STRUCTURE_OPEN + b'<message:Structures><structure:Dataflows><structure:Dataflow id="X" agencyID="A" '
        b'version="1.0"><common:Name xml:lang="en">' + b"word " * 600_000 + b"</common:Name></structure:Dataflow>"
        b"</structure:Dataflows></message:Structures></message:Structure>"
    )
    (row,) = parse_catalogue(flow)
    assert row.name.startswith("word word") and len(row.name) <= 500
    with pytest.raises(UnusableResponseError, match="single tag or comment"):
        parse_catalogue(flow.replace(b"<message:Structures>", b"<!--" + b"x" * 2_000_000 + b"-->", 1))
