"""Identifiers, keys and periods are checked against narrow patterns before any URL exists."""

from __future__ import annotations

import re

import pytest

from governed_evidence.errors import InvalidRequestError
from governed_evidence.sdmx.validate import (
    DATASET_PATTERN,
    KEY_PATTERN,
    PERIOD_PATTERN,
    DatasetRef,
    parse_dataset_ref,
    validate_key,
    validate_period,
    validate_periods,
    validate_provider_id,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("OECD.SDD.NAD,DSD_NAMAIN1@DF_QNA,1.0", DatasetRef("OECD.SDD.NAD", "DSD_NAMAIN1@DF_QNA", "1.0")),
        ("OECD.SDD.NAD,DSD_NAMAIN1@DF_QNA", DatasetRef("OECD.SDD.NAD", "DSD_NAMAIN1@DF_QNA", "latest")),
        ("OECD.ENV.EPI,DSD_WATER_TREAT@DF_WATER_TREAT,", DatasetRef("OECD.ENV.EPI", "DSD_WATER_TREAT@DF_WATER_TREAT")),
        ("DSD_NAMAIN1@DF_QNA", DatasetRef(None, "DSD_NAMAIN1@DF_QNA")),
        ("EXR,1.0", DatasetRef(None, "EXR", "1.0")),
        ("ECB,EXR", DatasetRef("ECB", "EXR")),
        ("nama_10_gdp", DatasetRef(None, "nama_10_gdp")),
        # As providers print it in SDMX-CSV's DATAFLOW column.
        (
            "OECD.ECO.MPD:DSD_AN_HOUSE_PRICES@DF_HOUSE_PRICES(1.0)",
            DatasetRef("OECD.ECO.MPD", "DSD_AN_HOUSE_PRICES@DF_HOUSE_PRICES", "1.0"),
        ),
        ("  ESTAT,GOV_10Q_GGNFA,1.0  ", DatasetRef("ESTAT", "GOV_10Q_GGNFA", "1.0")),
    ],
)
def test_dataset_refs_parse(text: str, expected: DatasetRef) -> None:
    assert parse_dataset_ref(text) == expected


def test_dataset_ref_text_round_trips() -> None:
    ref = parse_dataset_ref("OECD.SDD.NAD,DSD_NAMAIN1@DF_QNA,1.0")
    assert ref.text == "OECD.SDD.NAD,DSD_NAMAIN1@DF_QNA,1.0"
    assert parse_dataset_ref(ref.text) == ref


HOSTILE = [
    "",
    " ",
    "../../etc/passwd",
    "EXR/../../admin",
    "EXR?format=json",
    "EXR#x",
    "EXR%2F..",
    "https://evil.example/x",
    "EXR EXR",
    "EXR\nEXR",
    "EXR\x00",
    "ÉXR",
    "a,b,c,d",
    "OECD..SDD,X,1.0",
    "X" * 201,
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_dataset_refs_are_refused(text: str) -> None:
    with pytest.raises(InvalidRequestError):
        parse_dataset_ref(text)


@pytest.mark.parametrize(
    "key", ["Q.FRA+DEU..B1GQ", ".A.HPI_RPI+HPI_YDH.", "M.USD.EUR.SP00.A", "all", "A", "...", "A.C0000X0350-0370"]
)
def test_keys_accepted(key: str) -> None:
    assert validate_key(key) == key
    assert re.match(KEY_PATTERN, key)


def test_surrounding_whitespace_is_trimmed_not_sent() -> None:
    assert parse_dataset_ref("EXR\n") == DatasetRef(None, "EXR")
    assert validate_key(" Q.FRA ") == "Q.FRA"


def test_empty_key_means_all() -> None:
    assert validate_key("") == "all"
    assert validate_key("  ") == "all"


@pytest.mark.parametrize(
    "key",
    [
        "Q/FRA",
        "Q.FRA?x=1",
        "Q.FRA+",
        "+FRA",
        "Q.FRA++DEU",
        "Q..%2e",
        "Q FRA",
        "Q.FRA;DROP",
        "Q." + "A" * 61,
        "x" * 1001,
    ],
)
def test_bad_keys_refused(key: str) -> None:
    with pytest.raises(InvalidRequestError, match="series key"):
        validate_key(key)


@pytest.mark.parametrize("key", ["A." * 40 + "A", "+".join(["A"] * 201), "A" * 61])
def test_key_size_limits(key: str) -> None:
    assert re.fullmatch(KEY_PATTERN, key)  # the shape is fine; the bounds are not
    with pytest.raises(InvalidRequestError, match="series key"):
        validate_key(key)


@pytest.mark.parametrize("period", ["2020", "2020-07", "2020-Q3", "2020-S1", "2020-W05", "2020-07-31"])
def test_periods_accepted(period: str) -> None:
    assert validate_period(period, "start_period") == period
    assert re.match(PERIOD_PATTERN, period)


@pytest.mark.parametrize(
    "period", ["20", "2020-13", "2020-Q5", "2020-00", "2020-07-32", "last year", "2020-07T00", "2020/07"]
)
def test_bad_periods_refused(period: str) -> None:
    with pytest.raises(InvalidRequestError, match="not a period"):
        validate_period(period, "start_period")


def test_periods_must_be_ordered() -> None:
    assert validate_periods("2015", "2020-Q4") == ("2015", "2020-Q4")
    assert validate_periods(None, " ") == (None, None)
    with pytest.raises(InvalidRequestError, match="after"):
        validate_periods("2021", "2020")


def test_provider_ids() -> None:
    assert validate_provider_id("oecd") == "OECD"
    for bad in ["", "OE CD", "https://x", "O/E", "1OECD", "X" * 33]:
        with pytest.raises(InvalidRequestError):
            validate_provider_id(bad)


def test_published_dataset_pattern_agrees_with_the_parser() -> None:
    assert re.match(DATASET_PATTERN, "OECD.SDD.NAD,DSD_NAMAIN1@DF_QNA,1.0")
    for text in HOSTILE[2:]:
        assert not re.fullmatch(DATASET_PATTERN, text)


@pytest.mark.parametrize(
    "period",
    ["２０２０", "٢٠٢٠", "2020-٠٧", "2020-Q３", "2020-07-٣١", "20２0", "2020-W٠5", "²⁰²⁰", "𝟐𝟎𝟐𝟎"],
)
def test_non_ascii_digits_are_not_periods(period: str) -> None:
    with pytest.raises(InvalidRequestError, match="not a period"):
        validate_period(period, "start_period")
    # The published pattern, read as JSON Schema reads it (\d is 0-9), refuses it too.
    assert not re.fullmatch(PERIOD_PATTERN, period, re.ASCII)


@pytest.mark.parametrize("text", ["EXR,١.٠", "ECB,EXR,１.0", "ECB:EXR(٣)", "ECB,EXR,1.０"])
def test_non_ascii_digits_are_not_versions(text: str) -> None:
    with pytest.raises(InvalidRequestError):
        parse_dataset_ref(text)
    assert not re.fullmatch(DATASET_PATTERN, text, re.ASCII)


def test_provider_identifiers_pass_the_caller_rules() -> None:
    from governed_evidence.sdmx.validate import provider_dataset_ref

    assert provider_dataset_ref("OECD.SDD.NAD", "DSD_NAMAIN1@DF_QNA", "1.0") == DatasetRef(
        "OECD.SDD.NAD", "DSD_NAMAIN1@DF_QNA", "1.0"
    )
    for agency, flow, version in [
        ("..", "X", "1.0"),
        ("A", "..", "1.0"),
        ("A", "X", ".."),
        ("A", "X", "../../admin"),
        ("A/B", "X", "1.0"),
        ("A", "X%2F..", "1.0"),
        ("A", "X", "١.٠"),
        ("", "X", "1.0"),
        ("A", "X", ""),
        ("A,B", "X", "1.0"),
        ("A", "X\u200b", "1.0"),
    ]:
        assert provider_dataset_ref(agency, flow, version) is None, (agency, flow, version)
