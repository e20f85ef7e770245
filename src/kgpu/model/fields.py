"""Typed access to the fields of an object read as plain JSON/YAML: the wrong type is an InputError naming
where it was found (the caller's ``where``), an absent field the empty value."""

from __future__ import annotations

from typing import Any

from kgpu.errors import InputError, quote


def mapping_at(value: Any, where: str) -> dict[str, Any]:
    """``value`` as a mapping: ``{}`` when absent; the object itself (not a copy) when it is one."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"must be a mapping, got {type(value).__name__}", where=where)
    return value


def list_at(value: Any, where: str) -> list[Any]:
    """``value`` as a list: ``[]`` when absent; the list itself when it is one."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"must be a list, got {type(value).__name__}", where=where)
    return value


def text_at(value: Any, where: str) -> str:
    """``value`` as a string field: ``""`` when absent; anything else is what the API server's decoder
    refuses (a number where Kubernetes' type is a string)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(f"must be a string, got {quote(value)}", where=where)
    return value


def texts_at(value: Any, where: str) -> tuple[str, ...]:
    """``value`` as a list of strings: ``()`` when absent; an item that is not a string names its index."""
    out = []
    for i, v in enumerate(list_at(value, where)):
        if not isinstance(v, str):
            raise InputError(f"must be a string, got {quote(v)}", where=f"{where}[{i}]")
        out.append(v)
    return tuple(out)
