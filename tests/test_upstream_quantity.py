"""resource.Quantity parsing, transcribed from apimachinery's own tests.

Upstream: kubernetes/kubernetes
``staging/src/k8s.io/apimachinery/pkg/api/resource/quantity_test.go``

- TestQuantityParse: the valid table (each also with a leading ``-`` and ``+``), the ``invalid`` list and
  the empty string;
- TestQuantityParseZero, TestQuantityCmp (string table);
- TestJSONWhitespace (``Quantity.UnmarshalJSON`` trims blanks, which is what manifests go through);
- TestNegativeValueRoundsAwayFromZero (``Value()`` / ``MilliValue()``).

Expected values are upstream's ``decQuantity(i, exponent, ...)``, i.e. ``i * 10**exponent``, written here as
exact fractions. ``maxAllowed`` is ``2**63 - 1`` (the cap ParseQuantity applies to BinarySI values).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from fractions import Fraction

import pytest

from kgpu.errors import InputError
from kgpu.model.quantity import milli_value, parse_quantity, value

MAX_ALLOWED = 2**63 - 1


def dec(i: int | float, exponent: int) -> Fraction:
    """upstream decQuantity(i, exponent, format): i * 10^exponent."""
    return Fraction(i) * Fraction(10) ** exponent


# quantity_test.go, TestQuantityParse, `table` (input -> expected value).
PARSE_TABLE: list[tuple[str, Fraction]] = [
    ("0", dec(0, 0)),
    ("0n", dec(0, 0)),
    ("0u", dec(0, 0)),
    ("0m", dec(0, 0)),
    ("0Ki", dec(0, 0)),
    ("0k", dec(0, 0)),
    ("0Mi", dec(0, 0)),
    ("0M", dec(0, 0)),
    ("0Gi", dec(0, 0)),
    ("0G", dec(0, 0)),
    ("0Ti", dec(0, 0)),
    ("0T", dec(0, 0)),
    # Quantity less numbers are allowed
    ("1", dec(1, 0)),
    # Binary suffixes
    ("1Ki", dec(1024, 0)),
    ("8Ki", dec(8 * 1024, 0)),
    ("7Mi", dec(7 * 1024**2, 0)),
    ("6Gi", dec(6 * 1024**3, 0)),
    ("5Ti", dec(5 * 1024**4, 0)),
    ("4Pi", dec(4 * 1024**5, 0)),
    ("3Ei", dec(3 * 1024**6, 0)),
    ("10Ti", dec(10 * 1024**4, 0)),
    ("100Ti", dec(100 * 1024**4, 0)),
    # Decimal suffixes
    ("5n", dec(5, -9)),
    ("4u", dec(4, -6)),
    ("3m", dec(3, -3)),
    ("9", dec(9, 0)),
    ("8k", dec(8, 3)),
    ("50k", dec(5, 4)),
    ("7M", dec(7, 6)),
    ("6G", dec(6, 9)),
    ("5T", dec(5, 12)),
    ("40T", dec(4, 13)),
    ("300T", dec(3, 14)),
    ("2P", dec(2, 15)),
    ("1E", dec(1, 18)),
    # Decimal exponents
    ("1E-3", dec(1, -3)),
    ("1e3", dec(1, 3)),
    ("1E6", dec(1, 6)),
    ("1e9", dec(1, 9)),
    ("1E12", dec(1, 12)),
    ("1e15", dec(1, 15)),
    ("1E18", dec(1, 18)),
    # Nonstandard but still parsable
    ("1e14", dec(1, 14)),
    ("1e13", dec(1, 13)),
    ("100.035k", dec(100035, 0)),
    # Things that look like floating point
    ("0.001", dec(1, -3)),
    ("0.0005k", dec(5, -1)),
    ("0.005", dec(5, -3)),
    ("0.05", dec(5, -2)),
    ("0.5", dec(5, -1)),
    ("0.00050k", dec(5, -1)),
    ("0.00500", dec(5, -3)),
    ("0.05000", dec(5, -2)),
    ("0.50000", dec(5, -1)),
    ("0.5e0", dec(5, -1)),
    ("0.5e-1", dec(5, -2)),
    ("0.5e-2", dec(5, -3)),
    ("10.035M", dec(10035, 3)),
    ("1.2e3", dec(12, 2)),
    ("1.3E+6", dec(13, 5)),
    ("1.40e9", dec(14, 8)),
    ("1.53E12", dec(153, 10)),
    ("1.6e15", dec(16, 14)),
    ("1.7E18", dec(17, 17)),
    ("9.01", dec(901, -2)),
    ("8.1k", dec(81, 2)),
    ("7.123456M", dec(7123456, 0)),
    ("6.987654321G", dec(6987654321, 0)),
    ("5.444T", dec(5444, 9)),
    ("40.1T", dec(401, 11)),
    ("300.2T", dec(3002, 11)),
    ("2.5P", dec(25, 14)),
    ("1.01E", dec(101, 16)),
    # Things that saturate/round
    ("3.001n", dec(4, -9)),
    ("1.1E-9", dec(2, -9)),
    ("0.0000000001", dec(1, -9)),
    ("0.0000000005", dec(1, -9)),
    ("0.00000000050", dec(1, -9)),
    ("0.5e-9", dec(1, -9)),
    ("0.9n", dec(1, -9)),
    ("0.00000012345", dec(124, -9)),
    ("0.00000012354", dec(124, -9)),
    ("9Ei", Fraction(MAX_ALLOWED)),
    ("9223372036854775807Ki", Fraction(MAX_ALLOWED)),
    ("12E", dec(12, 18)),
    # We'll accept fractional binary stuff, too.
    ("100.035Ki", dec(10243584, -2)),
    ("0.5Mi", dec(0.5 * 1024 * 1024, 0)),
    ("0.05Gi", dec(536870912, -1)),
    ("0.025Ti", dec(274877906944, -1)),
    # Things written by trolls
    ("0.000000000001Ki", dec(2, -9)),  # rounds up, changes format
    (".001", dec(1, -3)),
    (".0001k", dec(100, -3)),
    ("1.", dec(1, 0)),
    ("1.G", dec(1, 9)),
]


@pytest.mark.parametrize(("text", "expected"), PARSE_TABLE, ids=[t for t, _ in PARSE_TABLE])
def test_quantity_parse(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(("text", "expected"), PARSE_TABLE, ids=[t for t, _ in PARSE_TABLE])
def test_quantity_parse_negative(text: str, expected: Fraction) -> None:
    # TestQuantityParse: "Try the negative version of everything".
    assert parse_quantity("-" + text) == -expected


@pytest.mark.parametrize(("text", "expected"), PARSE_TABLE, ids=[t for t, _ in PARSE_TABLE])
def test_quantity_parse_explicit_plus(text: str, expected: Fraction) -> None:
    # TestQuantityParse: "Try everything with an explicit +".
    assert parse_quantity("+" + text) == expected


# quantity_test.go, TestQuantityParse, `invalid` list (plus the leading empty-string check). The two
# whitespace entries (" 1", "1 ") and "1e4294967297" are tested separately below.
INVALID = ["", "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-"]


@pytest.mark.parametrize("text", INVALID)
def test_quantity_parse_invalid(text: str) -> None:
    with pytest.raises(InputError):
        parse_quantity(text)


def test_quantity_parse_huge_exponent_is_rejected_quickly() -> None:
    """TestQuantityParse `invalid`: "1e4294967297" (an exponent outside int32) must be an error.

    Run in a child process with a time and memory cap: a parser that materialises 10**4294967297 would
    otherwise hang the test run.
    """
    code = textwrap.dedent(
        """
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))
        from kgpu.errors import InputError
        from kgpu.model.quantity import parse_quantity
        try:
            parse_quantity("1e4294967297")
        except InputError:
            print("INPUT_ERROR")
        else:
            print("ACCEPTED")
        """
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=10, env=dict(os.environ)
        )
    except subprocess.TimeoutExpired:
        pytest.fail("parse_quantity('1e4294967297') did not return within 10 s (upstream rejects it)")
    assert proc.stdout.strip() == "INPUT_ERROR", (proc.stdout, proc.stderr[-2000:])


# quantity_test.go, TestJSONWhitespace: Quantity.UnmarshalJSON trims blanks around the value, so manifests
# with " 1" / "1 " are accepted even though ParseQuantity itself (TestQuantityParse `invalid`) is not.
JSON_WHITESPACE: list[tuple[object, Fraction]] = [
    (" 1", Fraction(1)),
    ("1 ", Fraction(1)),
    (1, Fraction(1)),
    (10, Fraction(10)),
    (-1, Fraction(-1)),
]


@pytest.mark.parametrize(("raw", "expected"), JSON_WHITESPACE, ids=[repr(r) for r, _ in JSON_WHITESPACE])
def test_json_whitespace(raw: object, expected: Fraction) -> None:
    assert parse_quantity(raw) == expected


def test_quantity_parse_zero() -> None:
    # quantity_test.go, TestQuantityParseZero
    assert parse_quantity("0") == 0


# quantity_test.go, TestQuantityCmp, first table (x, y, sign of x - y).
CMP_TABLE = [("0", "0", 0), ("100m", "50m", 1), ("50m", "100m", -1), ("10000T", "100Gi", 1)]


@pytest.mark.parametrize(("x", "y", "expect"), CMP_TABLE)
def test_quantity_cmp(x: str, y: str, expect: int) -> None:
    a, b = parse_quantity(x), parse_quantity(y)
    assert (a > b) - (a < b) == expect


# quantity_test.go, TestNegativeValueRoundsAwayFromZero (input, Value(), MilliValue()).
VALUE_TABLE: list[tuple[str, int, int]] = [
    ("-.484785E-7466", -1, -1),
    (".484785E-7466", 1, 1),
    ("-.484785E-1", -1, -49),
    (".484785E-1", 1, 49),
    ("-0.0005", -1, -1),
    ("0.0005", 1, 1),
    ("-1500m", -2, -1500),
    ("1500m", 2, 1500),
    ("-9.5000000001Gi", -10200547329, -10200547328108),
    ("9.5000000001Gi", 10200547329, 10200547328108),
    ("-1", -1, -1000),
    ("1", 1, 1000),
    ("0", 0, 0),
]


@pytest.mark.parametrize(
    ("text", "want_value", "want_milli"), VALUE_TABLE, ids=[t for t, _, _ in VALUE_TABLE]
)
def test_value_and_milli_value_round_away_from_zero(text: str, want_value: int, want_milli: int) -> None:
    q = parse_quantity(text)
    assert (value(q), milli_value(q)) == (want_value, want_milli)
