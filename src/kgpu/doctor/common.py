"""Small helpers shared by the checks: YAML fix snippets, lists of names, tolerations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from kgpu.model.objects import Taint


def snippet(data: Any) -> str:
    """A YAML fragment to paste, block style, keys in the order given."""
    text: str = yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    return text.rstrip("\n")


def names(items: Sequence[str], limit: int = 5) -> str:
    """'a, b, c' or 'a, b, c, d, e and 7 more'."""
    if len(items) <= limit:
        return ", ".join(items)
    return f"{', '.join(items[:limit])} and {len(items) - limit} more"


def toleration_for(taint: Taint) -> dict[str, str]:
    """The narrowest toleration of a taint (what kgpu render writes too)."""
    if taint.value:
        return {"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect}
    return {"key": taint.key, "operator": "Exists", "effect": taint.effect}
