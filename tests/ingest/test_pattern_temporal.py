"""Rust-regex translation and the engine's temporal literal grammar."""

from __future__ import annotations

import pyarrow as pa
import pytest

from omnigraph_spark.errors import DataError
from omnigraph_spark.ingest import STRICTER_THAN_ENGINE
from omnigraph_spark.ingest.pattern import matches, translate
from omnigraph_spark.ingest.temporal import parse_date_strings, parse_datetime_strings


@pytest.mark.parametrize(
    "pattern,value,expected",
    [
        ("b", "abc", True),  # unanchored search
        ("^abc$", "abc\n", False),  # $ is end of text, not before a final newline
        (r"^\d$", "٣", True),  # Unicode digits
        (r"^\w+$", "é_1", True),
        (r"\s", "a\u2003b", True),
        (r"\s", "a\x1cb", False),  # not White_Space (Python's \s would match)
        (r"(?i)ABC", "xabcx", True),
        (r"^\u00e9$", "é", True),
        (r"^\x{1F600}$", "😀", True),
        (r"^[[:digit:]]+$", "123", True),
        (r"(?<name>a)+?", "aa", True),
        (r"^a{2,3}$", "aaaa", False),
        (r"\.", "a.b", True),
    ],
)
def test_semantics(pattern, value, expected):
    assert matches(pa.array([value]), translate(pattern, "T.p")).to_pylist() == [expected]


@pytest.mark.parametrize(
    "pattern",
    [
        r"\bword",
        r"\Bx",
        r"a(?=b)",
        r"(?<=a)b",
        r"(a)\1",
        r"\Z",
        r"[a-z&&[^b]]",
        r"[a[b]]",
        r"(?x) a b",
        r"\p{Greek}",
        r"a{2",
        r"(?>a)",
        r"\e",
        "\\",
        r"[abc",
    ],
)
def test_rejected_patterns(pattern):
    with pytest.raises(DataError) as e:
        translate(pattern, "T.p")
    assert e.value.code == "CHECK_PATTERN_INVALID" and "T.p" in str(e.value)


@pytest.mark.parametrize(
    "text,days",
    [
        ("1970-01-01", 0),
        ("1970-1-2", 1),
        ("19700103", 2),
        ("1969-12-31", -1),
        ("2000-02-29", 11016),
        ("0001-01-01", -719162),
    ],
)
def test_date_literals(text, days):
    out, bad = parse_date_strings(pa.array([text]))
    assert bad.to_pylist() == [False] and out.cast(pa.int32()).to_pylist() == [days]


@pytest.mark.parametrize(
    "text",
    [
        "1900-02-29",
        "2020-13-01",
        "2020-00-10",
        "20-01-01",
        "+2020-01-01",
        "2020/01/01",
        "2020-01-01T00:00:00",
        " 2020-01-01",
        "",
    ],
)
def test_bad_date_literals(text):
    out, bad = parse_date_strings(pa.array([text, None]))
    assert bad.to_pylist() == [True, False] and out.to_pylist() == [None, None]


@pytest.mark.parametrize(
    "text,ms",
    [
        ("1970-01-01T00:00:01", 1000),
        ("1970-01-01 00:00:01.5", 1500),
        ("1970-01-01t000001Z", 1000),
        ("1970-01-01T01:00:00+01", 0),
        ("1970-01-01T00:00:00 -0100", 3_600_000),
        ("1970-01-01T00:00:00.123000000", 123),
        ("1970-1-1", 0),
    ],
)
def test_datetime_literals(text, ms):
    out, bad = parse_datetime_strings(pa.array([text]))
    assert bad.to_pylist() == [False] and out.cast(pa.int64()).to_pylist() == [ms]


@pytest.mark.parametrize(
    "text",
    [
        "1970-01-01T00:00:60",
        "1970-01-01T24:00:00",
        "1970-01-01T00:00",
        "1970-01-01T00:00:00.",
        "1970-01-01T00:00:00+01:60",
        "1970-01-01T00:00:00 UTC",
        "1970-01-01T00:00:00.0001",
    ],
)
def test_bad_datetime_literals(text):
    _, bad = parse_datetime_strings(pa.array([text]))
    assert bad.to_pylist() == [True]


def test_policy_list_is_documented():
    import omnigraph_spark.ingest.policy as policy

    assert len(STRICTER_THAN_ENGINE) >= 10 and all(isinstance(s, str) for s in STRICTER_THAN_ENGINE)
    assert "STRICTER_THAN_ENGINE" in policy.__doc__
