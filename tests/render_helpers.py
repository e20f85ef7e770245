"""Shared helpers for the render tests: profiles with one change, documents by kind, golden files."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kgpu.model.profile import Profile, builtin_profile, parse_profile

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE_GOLDEN = os.environ.get("UPDATE_GOLDEN") == "1"


def profile_data(template: str) -> dict[str, Any]:
    """A built-in template as plain camelCase data, ready to change and re-parse."""
    data: dict[str, Any] = builtin_profile(template).model_dump(by_alias=True, mode="json", exclude_none=True)
    return data


def changed(template: str, change: Callable[[dict[str, Any]], None]) -> Profile:
    data = profile_data(template)
    change(data)
    return parse_profile(data, source=f"<{template} changed>")


def pool_data(data: dict[str, Any], name: str) -> dict[str, Any]:
    for pool in data["pools"]:
        if pool["name"] == name:
            return pool  # type: ignore[no-any-return]
    raise KeyError(name)


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d.get("kind") == kind]


def named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    for d in of_kind(docs, kind):
        if d["metadata"]["name"] == name:
            return d
    raise KeyError(f"{kind} {name}")


def pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    """The pod spec inside a Pod, Deployment or Job."""
    if doc["kind"] == "Pod":
        return doc["spec"]  # type: ignore[no-any-return]
    return doc["spec"]["template"]["spec"]  # type: ignore[no-any-return]
