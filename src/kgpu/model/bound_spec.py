"""A bound pod's spec, read once per shape (kgpu.model.load reads a cluster's pods through it): a bound pod's
spec names its node (``nodeName``; a DaemonSet's pod also in its node affinity's ``matchFields``), so no two
specs are the same bytes; with the node name replaced by a placeholder, the pods of one controller share one
reading, and each gets its own node back."""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace

import msgspec

from kgpu.errors import InputError
from kgpu.model import wire
from kgpu.model.objects import (
    NodeSelector,
    PodSpecInfo,
    Requirement,
    Resources,
    Term,
)
from kgpu.model.podspec import (
    spec_info,
)

_SPEC = msgspec.json.Decoder(wire.PodSpec)


# What stands for a bound pod's node name while its spec is read (_bound_spec): a NUL, which no node name
# holds; a spec that already holds one is read whole.
_HOLE = "\x00"


_HOLE_JSON = b'"\\u0000"'


_SPEC_FIELDS = tuple(f.name for f in fields(PodSpecInfo))


def _holes(value: object) -> int:
    """How many strings in ``value`` (tuples and dataclasses, as PodSpecInfo nests them) hold _HOLE."""
    if isinstance(value, str):
        return int(_HOLE in value)
    if isinstance(value, tuple | frozenset):
        return sum(_holes(v) for v in value)
    if is_dataclass(value):
        return sum(_holes(getattr(value, f.name)) for f in fields(value))
    return 0


def _read_shape(shape: bytes, replaced: int) -> tuple[PodSpecInfo, Resources] | None:
    """``spec_info`` of a bound pod's spec with its node name replaced ``replaced`` times by _HOLE, when every
    replacement is the spec's ``nodeName`` or a whole ``matchFields`` value (else None)."""
    try:
        info, limits = spec_info(_SPEC.decode(shape), "")
    except (msgspec.DecodeError, msgspec.ValidationError, InputError, RecursionError, UnicodeDecodeError):
        return None
    if info.node_name != _HOLE or _holes(limits):
        return None
    if any(_holes(getattr(info, f)) for f in _SPEC_FIELDS if f not in ("node_name", "affinity")):
        return None
    fields_holes = 0
    for t in info.affinity.terms if info.affinity is not None else ():
        if _holes(t.match_expressions):
            return None
        for r in t.match_fields:
            if _holes(r.values):
                if r.values != (_HOLE,):
                    return None
                fields_holes += 1
    return (info, limits) if 1 + fields_holes == replaced else None


def bound_spec(key: bytes, node: str, shapes: dict[bytes, tuple[PodSpecInfo, Resources] | None]
               ) -> tuple[PodSpecInfo, Resources] | None:
    """The ``spec_info`` of a bound pod's spec JSON ``key`` that names its node ``node``: a bound pod's spec names
    its node (``nodeName``; a DaemonSet's pod also in its node affinity's ``matchFields``), so no two are the
    same bytes. The spec is read once per *shape* (``shapes`` keeps them), the node name replaced by _HOLE, and
    each pod gets it with its own node put back. Only when the name stands nowhere else in the spec (every
    replacement must land in ``nodeName`` or a ``matchFields`` value, strings kgpu reads as they are): a name
    that is also, say, a resource name or a selector value could be read differently as _HOLE. None otherwise
    (the caller then reads the spec whole, errors included)."""
    if not node or b"\\u0000" in key:
        return None
    token = msgspec.json.encode(node)
    shape = key.replace(token, _HOLE_JSON)
    if shape not in shapes:
        shapes[shape] = _read_shape(shape, key.count(token))
    entry = shapes[shape]
    if entry is None:
        return None
    info, limits = entry
    affinity = info.affinity
    if affinity is not None and any(r.values == (_HOLE,) for t in affinity.terms for r in t.match_fields):
        affinity = NodeSelector(tuple(
            Term(t.match_expressions, tuple(
                Requirement(r.key, r.operator, (node,)) if r.values == (_HOLE,) else r for r in t.match_fields
            ))
            for t in affinity.terms
        ))
    return replace(info, node_name=node, affinity=affinity), limits
