"""Small readings every document reader needs (kgpu.model.load and the readers beside it): an object named in
an error (its kind, namespace and name, even from JSON that decodes no further), an RFC 3339 time as Unix
seconds, and the closest names for a did-you-mean."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from datetime import UTC
from typing import Any

import msgspec

from kgpu.errors import InputError, quote
from kgpu.model import wire


def parse_time(text: str, where: str) -> float:
    """An RFC 3339 time (metav1.Time) as Unix seconds."""
    from datetime import datetime

    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"not an RFC 3339 time: {quote(text)}", where=where) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


class _Identity(msgspec.Struct, rename="camel"):
    kind: str = "object"
    metadata: wire.ObjectMeta = msgspec.field(default_factory=wire.ObjectMeta)


_IDENTITY = msgspec.json.Decoder(_Identity)


def _identity(raw: msgspec.Raw) -> Any:
    """Just enough of a JSON object to name it in an error; {} when even that does not decode."""
    try:
        ident = _IDENTITY.decode(raw)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        return {}
    return {"kind": ident.kind, "metadata": {"name": ident.metadata.name, "namespace": ident.metadata.namespace}}


def _describe(doc: Any, label: str) -> str:
    if isinstance(doc, dict):
        kind = doc.get("kind", "object")
        meta: dict[str, Any] = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
        name = meta.get("name") or f"({label})"
        ns = meta.get("namespace") or "default"
        return f"{kind} {name}" if kind in ("Node", "PriorityClass") else f"{kind} {ns}/{name}"
    return label


def closest(name: str, options: Iterable[str], n: int = 3) -> list[str]:
    return difflib.get_close_matches(name, list(options), n=n, cutoff=0.5)
