"""resource.Quantity, parsed the way apimachinery parses it.

Grammar (k8s.io/apimachinery/pkg/api/resource/quantity.go)::

    <quantity>        ::= <signedNumber><suffix>
    <signedNumber>    ::= [+-] <digits> | [+-] <digits>.<digits> | [+-] .<digits> | [+-] <digits>.
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>   (an integer)

Values are exact (``Fraction``); ``value`` and ``milli_value`` round up like Quantity.Value() and
Quantity.MilliValue(), which is what the scheduler compares. ``40G`` is 40*10^9 and ``40Gi`` is 40*2^30:
both valid and different; ``40GB`` is an error, never zero.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

from kgpu.errors import InputError, quote

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_NUMBER = re.compile(r"([+-]?)(\d*)(?:\.(\d*))?")
_EXPONENT = re.compile(r"[eE]([+-]?\d+)")
_NANO = Fraction(1, 10**9)
_MAX_INT64 = 2**63 - 1
_INT32 = range(-(2**31), 2**31)
_MAX_EXPONENT = 1000  # 10**1000 exceeds every resource; larger exponents are refused rather than expanded
MAX_DIGITS = 100  # no resource needs more; Python refuses to convert numbers of over 4,300 digits
MAX_INT64 = _MAX_INT64


@lru_cache(maxsize=4096)
def _parse_text(text: str) -> Fraction:
    m = _NUMBER.match(text)
    assert m is not None  # the pattern matches the empty prefix
    sign, whole, frac = m.group(1), m.group(2), m.group(3)
    if not whole and not frac:
        raise ValueError("a quantity starts with a number")
    if len(whole) + len(frac or "") > MAX_DIGITS:
        raise ValueError(f"more than {MAX_DIGITS} digits")
    suffix = text[m.end() :]
    number = Fraction(int(whole or "0"))
    if frac:
        number += Fraction(int(frac), 10 ** len(frac))
    if suffix in _BINARY:
        # apimachinery caps binary-suffixed values at the largest int64.
        value = min(number * _BINARY[suffix], Fraction(_MAX_INT64))
    elif suffix in _DECIMAL:
        value = number * _DECIMAL[suffix]
    else:
        e = _EXPONENT.fullmatch(suffix)
        if e is None or int(e.group(1)) not in _INT32:
            raise ValueError(f"unknown suffix {quote(suffix)}")
        exponent = int(e.group(1))
        if number == 0:
            value = Fraction(0)
        elif exponent > _MAX_EXPONENT:
            raise ValueError(f"exponent {exponent} is too large")
        elif exponent < -(_MAX_EXPONENT + len(whole)):
            value = _NANO  # far below nano precision: rounds up to 1n, as below
        else:
            value = number * Fraction(10) ** exponent
    # apimachinery keeps at most nano precision, rounding up ("0.1n" is 1n).
    if value.denominator != 1 and (value / _NANO).denominator != 1:
        value = Fraction(math.ceil(value / _NANO)) * _NANO
    return -value if sign == "-" else value


def parse_quantity(raw: object, *, where: str = "") -> Fraction:
    """Parse a quantity as found in JSON/YAML (a string, or a bare number)."""
    if isinstance(raw, bool) or raw is None:
        raise InputError(f"quantity must be a string or a number, got {quote(raw)}", where=where)
    if isinstance(raw, int):
        return Fraction(raw)
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise InputError(f"invalid quantity {quote(raw)}", where=where)
        text = repr(raw)
    elif isinstance(raw, str):
        text = raw.strip()
    else:
        raise InputError(f"quantity must be a string or a number, got {type(raw).__name__}", where=where)
    try:
        return _parse_text(text)
    except ValueError as exc:
        raise InputError(
            f"invalid quantity {quote(raw)}: {exc}",
            where=where,
            hint="use a number with n, u, m, k, M, G, T, P, E or Ki, Mi, Gi, Ti, Pi, Ei",
        ) from None


def resource_amount(raw: object, *, milli: bool = False, where: str = "") -> int:
    """A resource amount as the scheduler counts it: ``Value()``, or ``MilliValue()`` for cpu; >= 0.

    Both are int64 in Kubernetes, and apimachinery lets a larger Quantity overflow them silently (ScaledValue
    "might overflow"); here a negative amount or one beyond int64 is an input error instead.
    """
    q = parse_quantity(raw, where=where)
    if q < 0:
        raise InputError(f"must be greater than or equal to 0, got {quote(raw)}", where=where)
    amount = milli_value(q) if milli else value(q)
    if amount > _MAX_INT64:
        unit = "millicores" if milli else "units"
        raise InputError(f"{quote(raw)} is too large: more than 2^63-1 {unit} (int64)", where=where)
    return amount


def _away_from_zero(x: Fraction) -> int:
    return math.ceil(x) if x >= 0 else -math.ceil(-x)


def value(q: Fraction) -> int:
    """Quantity.Value(): the integer value, rounded away from zero."""
    return _away_from_zero(q)


def milli_value(q: Fraction) -> int:
    """Quantity.MilliValue(): the value in thousandths, rounded away from zero."""
    return _away_from_zero(q * 1000)


def format_cpu(milli: int) -> str:
    """Millicores in the canonical form kubectl shows (``500m``, ``4``)."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def format_bytes(n: int) -> str:
    """Bytes in the largest binary suffix that divides them exactly, else the largest that fits."""
    for suffix, size in reversed(_BINARY.items()):
        if n >= size and n % size == 0:
            return f"{n // size}{suffix}"
    for suffix, size in reversed(_BINARY.items()):
        if n >= size:
            return f"{n / size:.1f}{suffix}"
    return str(n)
