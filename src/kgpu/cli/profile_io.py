"""Loading a cluster profile from a file (or the built-in default)."""

from __future__ import annotations

from kgpu.cli.files import read_text
from kgpu.model.profile import Profile, builtin_profile, load_profile_text


def load_profile_file(path: str | None) -> Profile:
    """``path`` None means the built-in default profile."""
    if path is None:
        return builtin_profile()
    return load_profile_text(read_text(path), source=path)
