"""The role hash Kueue names a pod group's PodSets by, byte for byte as Kueue v0.15.0 computes it.

A pod group (``kueue.x-k8s.io/pod-group-name``) becomes one Workload whose PodSets are the group's *roles*:
pods with the same admission-relevant shape. Kueue names each PodSet by the first 8 hex digits of the
SHA-256 of that shape, encoded by Go's ``encoding/json`` (sigs.k8s.io/kueue pkg/util/pod/pod.go:
``GenerateRoleHash``, ``SpecShape``, ``ContainersShape``)::

    {"spec": {"initContainers": [{"resources": {"requests": ...}, "ports": ...}], "containers": [...],
              "nodeSelector": ..., "affinity": ..., "tolerations": ..., "runtimeClassName": ...,
              "priority": ..., "topologySpreadConstraints": ..., "overhead": ..., "resourceClaims": ...}}

Go marshals a ``map`` with its keys sorted and a ``struct`` in field declaration order, leaving out
``omitempty`` fields that are empty; a nil slice, map or pointer is ``null``. So the hash depends on the
k8s.io/api field order of each type below (``_STRUCTS``, read from k8s.io/api v0.34 core/v1/types.go and
apimachinery meta/v1/types.go), on Go's string escaping (``<``, ``>``, ``&``, U+2028 and U+2029 escaped), and on
``resource.Quantity``'s canonical string (``quantity_string``: "1000m" is "1", "1024Mi" is "1Gi"; a string that
is already canonical is kept as written, k8s.io/apimachinery pkg/api/resource/quantity.go ``ParseQuantity``,
``CanonicalizeBytes``, amount.go ``AsCanonicalBytes``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from kgpu.errors import InputError, quote
from kgpu.model.quantity import parse_quantity

# --- resource.Quantity's string form ------------------------------------------------------------------------

_DEC_SUFFIX = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_DEC_EXPONENT = {v: k for k, v in _DEC_SUFFIX.items()}
_BIN_SUFFIX = {0: "", 10: "Ki", 20: "Mi", 30: "Gi", 40: "Ti", 50: "Pi", 60: "Ei"}
_BIN_EXPONENT = {v: k for k, v in _BIN_SUFFIX.items() if v}
_PARTS = re.compile(r"([+-]?)0*([0-9]*)(?:\.([0-9]*))?(.*)")
_INT64 = 2**63 - 1


def _format(suffix: str) -> tuple[str, int]:
    """(format, exponent) of a suffix, as suffixHandler.interpret reads it."""
    if suffix in _DEC_EXPONENT:
        return "DecimalSI", _DEC_EXPONENT[suffix]
    if suffix in _BIN_EXPONENT:
        return "BinarySI", _BIN_EXPONENT[suffix]
    return "DecimalExponent", int(suffix[1:])


def _kept_as_written(text: str) -> bool:
    """ParseQuantity's fast path: an int64 amount already in canonical form keeps the string it was parsed from."""
    m = _PARTS.fullmatch(text)
    if m is None:
        return False
    num, denom, suffix = m.group(2) or "0", m.group(3) or "", m.group(4)
    fmt, exponent = _format(suffix)
    if fmt == "BinarySI":
        if exponent < 0 or denom:
            return False
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
        value = int(num)
        return precision >= 0 and (value << exponent) <= _INT64 and exponent % 10 == 0 and value & 7 != 0
    precision = 18 - (len(num) + len(denom))
    scale = exponent - len(denom)
    shifted = num + denom
    if precision < 0 or scale < -9 or int(shifted) > _INT64:
        return False
    return math.fmod(scale, 3) == 0 and not shifted.endswith("000") and shifted[0] != "0"


def _remove_factors(n: int, base: int) -> tuple[int, int]:
    times = 0
    while n != 0 and n % base == 0:
        n //= base
        times += 1
    return n, times


def quantity_string(raw: object, where: str = "") -> str:
    """The string Go's json.Marshal writes for a resource.Quantity read from ``raw`` (a string or a number)."""
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise InputError(f"quantity must be a string or a number, got {quote(raw)}", where=where)
    text = raw.strip() if isinstance(raw, str) else json.dumps(raw)
    value = parse_quantity(text, where=where)
    if text == "0":
        return "0"
    m = _PARTS.fullmatch(text)
    fmt = _format(m.group(4))[0] if m is not None else "DecimalSI"
    if _kept_as_written(text):
        return text
    if value == 0:
        return "0"
    if fmt == "BinarySI" and (-1024 < value < 1024 or value.denominator != 1):
        fmt = "DecimalSI"
    if fmt == "BinarySI":
        mantissa, times = _remove_factors(int(value), 1024)
        return f"{mantissa}{_BIN_SUFFIX.get(times * 10, '')}"
    # decimal: all factors of ten into the exponent, then down to a multiple of three
    scaled = value * 10**9
    assert isinstance(scaled, Fraction) and scaled.denominator == 1  # parse_quantity keeps nano precision
    mantissa, times = _remove_factors(int(scaled), 10)
    exponent = times - 9
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    if fmt == "DecimalExponent":
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    return f"{mantissa}{_DEC_SUFFIX.get(exponent, '')}"


# --- Go's encoding/json over the k8s.io/api types the shape holds ------------------------------------------

# (json name, kind, omitempty); kind: str, int, bool, strlist, strmap, quantities, or a struct name
_F = tuple[str, str, bool]
_STRUCTS: dict[str, tuple[_F, ...]] = {
    "ContainerPort": (
        ("name", "str", True),
        ("hostPort", "int", True),
        ("containerPort", "int", False),
        ("protocol", "str", True),
        ("hostIP", "str", True),
    ),
    "Toleration": (
        ("key", "str", True),
        ("operator", "str", True),
        ("value", "str", True),
        ("effect", "str", True),
        ("tolerationSeconds", "*int", True),
    ),
    "Affinity": (
        ("nodeAffinity", "*NodeAffinity", True),
        ("podAffinity", "*PodAffinity", True),
        ("podAntiAffinity", "*PodAffinity", True),
    ),
    "NodeAffinity": (
        ("requiredDuringSchedulingIgnoredDuringExecution", "*NodeSelector", True),
        ("preferredDuringSchedulingIgnoredDuringExecution", "[]PreferredSchedulingTerm", True),
    ),
    "NodeSelector": (("nodeSelectorTerms", "[]NodeSelectorTerm", False),),
    "NodeSelectorTerm": (
        ("matchExpressions", "[]NodeSelectorRequirement", True),
        ("matchFields", "[]NodeSelectorRequirement", True),
    ),
    "NodeSelectorRequirement": (
        ("key", "str", False),
        ("operator", "str", False),
        ("values", "strlist", True),
    ),
    "PreferredSchedulingTerm": (("weight", "int", False), ("preference", "NodeSelectorTerm", False)),
    "PodAffinity": (  # PodAntiAffinity has the same fields
        ("requiredDuringSchedulingIgnoredDuringExecution", "[]PodAffinityTerm", True),
        ("preferredDuringSchedulingIgnoredDuringExecution", "[]WeightedPodAffinityTerm", True),
    ),
    "PodAffinityTerm": (
        ("labelSelector", "*LabelSelector", True),
        ("namespaces", "strlist", True),
        ("topologyKey", "str", False),
        ("namespaceSelector", "*LabelSelector", True),
        ("matchLabelKeys", "strlist", True),
        ("mismatchLabelKeys", "strlist", True),
    ),
    "WeightedPodAffinityTerm": (("weight", "int", False), ("podAffinityTerm", "PodAffinityTerm", False)),
    "LabelSelector": (
        ("matchLabels", "strmap", True),
        ("matchExpressions", "[]LabelSelectorRequirement", True),
    ),
    "LabelSelectorRequirement": (
        ("key", "str", False),
        ("operator", "str", False),
        ("values", "strlist", True),
    ),
    "TopologySpreadConstraint": (
        ("maxSkew", "int", False),
        ("topologyKey", "str", False),
        ("whenUnsatisfiable", "str", False),
        ("labelSelector", "*LabelSelector", True),
        ("minDomains", "*int", True),
        ("nodeAffinityPolicy", "*str", True),
        ("nodeTaintsPolicy", "*str", True),
        ("matchLabelKeys", "strlist", True),
    ),
    "PodResourceClaim": (
        ("name", "str", False),
        ("resourceClaimName", "*str", True),
        ("resourceClaimTemplateName", "*str", True),
    ),
}
_ZERO: dict[str, object] = {"str": "", "int": 0, "bool": False}
_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_GO_ESCAPE = re.compile("[<>&\u2028\u2029]")


def _go_string(value: str) -> str:
    return _GO_ESCAPE.sub(lambda m: _GO_ESCAPES[m.group()], json.dumps(value, ensure_ascii=False))


def _expect(value: object, typ: type | tuple[type, ...], what: str, where: str) -> None:
    if not isinstance(value, typ) or (isinstance(value, bool) and typ is int):
        raise InputError(f"must be {what}, got {quote(value)}", where=where)


def _encode(value: object, kind: str, where: str) -> str:
    if kind.startswith("*"):  # a pointer: null when absent, else the value (even a zero value)
        return "null" if value is None else _encode(value, kind[1:], where)
    if value is None:
        # nil slices and maps are null; an absent struct or scalar is its zero value
        if kind.startswith("[]") or kind in ("strlist", "strmap", "quantities"):
            return "null"
        if kind in _ZERO:
            return json.dumps(_ZERO[kind])
        return _encode({}, kind, where)
    if kind == "str":
        _expect(value, str, "a string", where)
        assert isinstance(value, str)
        return _go_string(value)
    if kind == "int":
        _expect(value, int, "an integer", where)
        return str(value)
    if kind == "bool":
        _expect(value, bool, "true or false", where)
        return "true" if value else "false"
    if kind == "strlist":
        _expect(value, list, "a list", where)
        assert isinstance(value, list)
        return "[" + ",".join(_encode(v, "str", f"{where}[{i}]") for i, v in enumerate(value)) + "]"
    if kind in ("strmap", "quantities"):
        _expect(value, dict, "a mapping", where)
        assert isinstance(value, dict)
        items = []
        for k in sorted(value):
            _expect(k, str, "a string key", where)
            text = quantity_string(value[k], f"{where}.{k}") if kind == "quantities" else value[k]
            items.append(f"{_go_string(k)}:{_encode(text, 'str', f'{where}.{k}')}")
        return "{" + ",".join(items) + "}"
    if kind.startswith("[]"):
        _expect(value, list, "a list", where)
        assert isinstance(value, list)
        return "[" + ",".join(_encode(v, kind[2:], f"{where}[{i}]") for i, v in enumerate(value)) + "]"
    _expect(value, dict, "a mapping", where)
    assert isinstance(value, dict)
    parts = []
    for name, fkind, omitempty in _STRUCTS[kind]:
        field = value.get(name)
        if omitempty and _empty(field, fkind):
            continue
        parts.append(f"{_go_string(name)}:{_encode(field, fkind, f'{where}.{name}')}")
    return "{" + ",".join(parts) + "}"


def _empty(value: object, kind: str) -> bool:
    """encoding/json's isEmptyValue: false, 0, "", a nil pointer, an empty slice or map (never a struct)."""
    if value is None:
        return True
    if kind.startswith("*"):
        return False
    if kind in _ZERO:
        return value == _ZERO[kind] and type(value) is type(_ZERO[kind])
    if kind.startswith("[]") or kind in ("strlist", "strmap", "quantities"):
        return isinstance(value, list | dict) and not value
    return False


def _containers(containers: object, where: str) -> str:
    if containers is None:
        return "null"
    _expect(containers, list, "a list", where)
    assert isinstance(containers, list)
    if not containers:  # ContainersShape appends to a nil slice: no containers is null, not []
        return "null"
    out = []
    for i, c in enumerate(containers):
        at = f"{where}[{i}]"
        _expect(c, dict, "a mapping", at)
        resources = c.get("resources") or {}
        _expect(resources, dict, "a mapping", f"{at}.resources")
        requests = _encode(resources.get("requests"), "quantities", f"{at}.resources.requests")
        ports = _encode(c.get("ports"), "[]ContainerPort", f"{at}.ports")
        out.append(f'{{"ports":{ports},"resources":{{"requests":{requests}}}}}')
    return "[" + ",".join(out) + "]"


def shape_json(spec: Mapping[str, Any], where: str = "spec") -> str:
    """``json.Marshal(map[string]any{"spec": SpecShape(spec)})`` for a pod spec read from JSON or YAML."""
    fields = {  # SpecShape's keys; a Go map is written with its keys sorted
        "affinity": _encode(spec.get("affinity"), "*Affinity", f"{where}.affinity"),
        "containers": _containers(spec.get("containers"), f"{where}.containers"),
        "initContainers": _containers(spec.get("initContainers"), f"{where}.initContainers"),
        "nodeSelector": _encode(spec.get("nodeSelector"), "strmap", f"{where}.nodeSelector"),
        "overhead": _encode(spec.get("overhead"), "quantities", f"{where}.overhead"),
        "priority": _encode(spec.get("priority"), "*int", f"{where}.priority"),
        "resourceClaims": _encode(
            spec.get("resourceClaims"), "[]PodResourceClaim", f"{where}.resourceClaims"
        ),
        "runtimeClassName": _encode(spec.get("runtimeClassName"), "*str", f"{where}.runtimeClassName"),
        "tolerations": _encode(spec.get("tolerations"), "[]Toleration", f"{where}.tolerations"),
        "topologySpreadConstraints": _encode(
            spec.get("topologySpreadConstraints"),
            "[]TopologySpreadConstraint",
            f"{where}.topologySpreadConstraints",
        ),
    }
    return '{"spec":{' + ",".join(f'"{k}":{v}' for k, v in sorted(fields.items())) + "}}"


def role_hash(spec: Mapping[str, Any], where: str = "spec") -> str:
    """GenerateRoleHash: the first 8 hex digits of the SHA-256 of the spec's shape."""
    return hashlib.sha256(shape_json(spec, where).encode()).hexdigest()[:8]
