"""Kueue's resource units and how it prints them (sigs.k8s.io/kueue v0.15.0 pkg/resources/requests.go).

Kueue counts every resource as an int64: cpu in millicores (``Quantity.MilliValue()``), everything else in
units (``Quantity.Value()``), both rounded up. Its messages print an amount back as a ``resource.Quantity``
(``ResourceQuantityString``): cpu as ``NewMilliQuantity(v, DecimalSI)``; memory, ephemeral-storage and
hugepages-* in binary form when it round-trips (``newCanonicalQuantity(v, BinarySI)``: ``4Gi``, but
1,000,000,000 bytes is ``1G``); anything else as ``NewQuantity(v, DecimalSI)`` (4,000 GPUs print ``4k``).
The canonical forms follow k8s.io/apimachinery/pkg/api/resource (quantity.go ``CanonicalizeBytes``,
amount.go ``AsCanonicalBytes`` / ``AsCanonicalBase1024Bytes``).
"""

from __future__ import annotations

from kgpu.model.quantity import resource_amount

CPU = "cpu"
PODS = "pods"

_DECIMAL_SUFFIX = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIX = {0: "", 1: "Ki", 2: "Mi", 3: "Gi", 4: "Ti", 5: "Pi", 6: "Ei"}


def resource_value(name: str, raw: object, where: str) -> int:
    """``resources.ResourceValue``: millicores for cpu, units (rounded up) for every other resource."""
    return resource_amount(raw, milli=name == CPU, where=where)


def _decimal(value: int, scale: int) -> str:
    """``value * 10**scale`` in canonical DecimalSI form (the exponent a multiple of 3, suffix by table)."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    amount = abs(value)
    exponent = scale
    while amount >= 10 and amount % 10 == 0:
        amount //= 10
        exponent += 1
    # Go's % keeps the sign of the dividend: exponents -2 and 1 take one factor of 10, -1 and 2 two.
    rem = exponent % 3
    if rem == 1:
        amount, exponent = amount * 10, exponent - 1
    elif rem == 2:
        amount, exponent = amount * 100, exponent - 2
    suffix = _DECIMAL_SUFFIX.get(exponent)
    if suffix is None:
        suffix = f"e{exponent}"
    return f"{sign}{amount}{suffix}"


def _binary(value: int) -> str:
    """newCanonicalQuantity(v, BinarySI).String(): base 1024 when it divides, else decimal."""
    if -1024 < value < 1024:
        return _decimal(value, 0)
    amount, times = abs(value), 0
    while amount >= 1024 and amount % 1024 == 0:
        amount //= 1024
        times += 1
    if times == 0:
        # "1000000000" re-parses as a DecimalSI quantity and prints as "1G".
        return _decimal(value, 0)
    return f"{'-' if value < 0 else ''}{amount}{_BINARY_SUFFIX[times]}"


def quantity_string(name: str, value: int) -> str:
    """``resources.ResourceQuantityString``: an amount in Kueue's units, printed as Kueue prints it."""
    if name == CPU:
        return _decimal(value, -3)
    if name in ("memory", "ephemeral-storage") or name.startswith("hugepages-"):
        return _binary(value)
    return _decimal(value, 0)
