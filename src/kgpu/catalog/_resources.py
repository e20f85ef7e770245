"""Read the catalog's own data files (package data, never the user's files)."""

from __future__ import annotations

from importlib import resources


def read_text(name: str) -> str:
    return resources.files("kgpu.catalog").joinpath("data", name).read_text(encoding="utf-8")
