"""Reading Kueue objects' fields: each getter names the object and field in its InputError.

Kueue's objects arrive as plain dicts (``kubectl get -o json`` items). What the API server would refuse (the
CRD's schema and CEL rules, and the validating webhooks every Kueue install runs) is an InputError naming
the field; what Kueue itself tolerates and reports on (a flavor that does not exist, a cohort cycle) is
read as it is and becomes a result in ``kgpu.sim.queue``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from kgpu.errors import InputError, quote
from kgpu.model import wire
from kgpu.model.fields import list_at, mapping_at
from kgpu.model.load import parse_time
from kgpu.model.names import is_dns1123_subdomain, is_label_value, is_qualified_name
from kgpu.model.objects import LabelSelector, Taint
from kgpu.model.podspec import _label_selector

GROUP = "kueue.x-k8s.io"
VERSIONS = ("v1beta1", "v1beta2")
INT32_MAX = 2**31 - 1


class Obj:
    """One object being read: its dict, and where it is (``file: Kind name``) for errors."""

    __slots__ = ("doc", "kind", "name", "namespace", "version", "where")

    def __init__(self, doc: Mapping[str, Any], kind: str, where: str, *, namespaced: bool) -> None:
        self.doc = doc
        self.kind = kind
        meta = mapping_at(doc.get("metadata"), f"{where}: {kind}: metadata")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise InputError("object without metadata.name", where=f"{where}: {kind}: metadata.name")
        namespace = meta.get("namespace") or ""
        if not isinstance(namespace, str):
            raise InputError("must be a string", where=f"{where}: {kind} {name}: metadata.namespace")
        if namespaced and not namespace:
            namespace = "default"
        self.name = name
        self.namespace = namespace
        label = f"{namespace}/{name}" if namespaced else name
        self.where = f"{where}: {kind} {quote(label, 120)[1:-1]}"
        api_version = doc.get("apiVersion", "")
        self.version = api_version.rpartition("/")[2] if isinstance(api_version, str) else ""

    def at(self, path: str) -> str:
        return f"{self.where}: {path}"

    @property
    def meta(self) -> dict[str, Any]:
        return mapping_at(self.doc.get("metadata"), self.at("metadata"))

    @property
    def spec(self) -> dict[str, Any]:
        return mapping_at(self.doc.get("spec"), self.at("spec"))

    @property
    def status(self) -> dict[str, Any]:
        return mapping_at(self.doc.get("status"), self.at("status"))


def _join(where: str, key: str) -> str:
    """``where.key``, or ``where key`` after an object's name (``file: Kind name: key``)."""
    return f"{where} {key}" if where.endswith(":") else f"{where}.{key}"


def mapping(parent: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    return mapping_at(parent.get(key), _join(where, key))


def items(parent: Mapping[str, Any], key: str, where: str, *, max_items: int) -> list[Any]:
    """A list field, refused beyond the CRD's ``maxItems``."""
    values = list_at(parent.get(key), _join(where, key))
    if len(values) > max_items:
        raise InputError(
            f"Too many: {len(values)}: must have at most {max_items} items", where=_join(where, key)
        )
    return values


def string(parent: Mapping[str, Any], key: str, where: str, default: str = "") -> str:
    value = parent.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise InputError(f"must be a string, got {type(value).__name__}", where=_join(where, key))
    return value


def enum(parent: Mapping[str, Any], key: str, where: str, allowed: Iterable[str], default: str) -> str:
    value = string(parent, key, where, default)
    options = tuple(allowed)
    if value not in options:
        shown = ", ".join(f'"{o}"' for o in options)
        raise InputError(
            f"Unsupported value: {quote(value)}: supported values: {shown}", where=_join(where, key)
        )
    return value


def integer(parent: Mapping[str, Any], key: str, where: str, *, lo: int, hi: int = INT32_MAX) -> int | None:
    value = parent.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"must be an integer, got {quote(value)}", where=_join(where, key))
    if not lo <= value <= hi:
        raise InputError(f"{quote(value)}: must be between {lo} and {hi}, inclusive", where=_join(where, key))
    return value


def boolean(parent: Mapping[str, Any], key: str, where: str, default: bool) -> bool:
    value = parent.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InputError(f"must be a boolean, got {quote(value)}", where=_join(where, key))
    return value


def reference(parent: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> str:
    """A Kueue object reference (ClusterQueueReference, CohortReference, ResourceFlavorReference,
    LocalQueueName): a DNS-1123 subdomain of at most 253 characters."""
    value = string(parent, key, where)
    if not value:
        if required:
            raise InputError("Required value", where=_join(where, key))
        return ""
    if not is_dns1123_subdomain(value):
        raise InputError(
            f"{quote(value)}: must be a lowercase RFC 1123 subdomain of at most 253 characters",
            where=_join(where, key),
        )
    return value


def time_at(value: object, where: str) -> float | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InputError(f"must be an RFC 3339 time, got {quote(value)}", where=where)
    return parse_time(value, where)


def labels(value: object, where: str) -> dict[str, str]:
    """metav1 ValidateLabels: qualified-name keys, label values."""
    out = mapping_at(value, where)
    for key, val in out.items():
        if not isinstance(key, str) or not is_qualified_name(key):
            raise InputError(f"{quote(key)}: not a valid label key", where=where)
        if not isinstance(val, str) or not is_label_value(val):
            raise InputError(f"{quote(val)}: not a valid label value", where=_join(where, key))
    return out


def label_selector(value: object, where: str) -> LabelSelector | None:
    """metav1.LabelSelector: ``None`` (absent) selects nothing, ``{}`` everything (LabelSelectorAsSelector)."""
    if value is None:
        return None
    try:
        sel = msgspec.convert(mapping_at(value, where), wire.LabelSelector)
    except msgspec.ValidationError as exc:
        raise InputError(str(exc).partition(" - at ")[0], where=where) from None
    return _label_selector(sel, where)


TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def taints(values: list[Any], where: str) -> tuple[Taint, ...]:
    """corev1.Taint list as the ResourceFlavor webhook validates it (validateNodeTaints)."""
    out: list[Taint] = []
    seen: set[tuple[str, str]] = set()
    for i, raw in enumerate(values):
        at = f"{where}[{i}]"
        item = mapping_at(raw, at)
        key = string(item, "key", at)
        value = string(item, "value", at)
        effect = string(item, "effect", at)
        if not is_qualified_name(key):
            raise InputError(f"{quote(key)}: not a valid taint key", where=f"{at}.key")
        if not is_label_value(value):
            raise InputError(f"{quote(value)}: not a valid taint value", where=f"{at}.value")
        if effect not in TAINT_EFFECTS:
            raise InputError(
                "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
                where=f"{at}.effect",
            )
        if (key, effect) in seen:
            raise InputError("taints must be unique by key and effect pair", where=at)
        seen.add((key, effect))
        out.append(Taint(key, value, effect))
    return tuple(out)
