"""Loading a cluster profile from a file (or the built-in default)."""

from __future__ import annotations

from kgpu.cli.files import read_text
from kgpu.errors import InputError
from kgpu.model.profile import Profile, builtin_profile, load_profile_text


def read_profile_text(path: str) -> str:
    try:
        return read_text(path)
    except InputError as exc:
        if exc.message == "no such file or directory":
            raise InputError("no such file", where=path, hint="create one with `kgpu init`") from None
        raise


def check_catalog_names(profile: Profile, source: str) -> list[str]:
    """The profile's instance types and GPU names against the catalog, errors located in ``source``.

    Field validation cannot see the catalog; without this an unknown node-group instance type would pass
    `profile validate` and fail later in render or plan without naming the file. Returns warnings.
    """
    from kgpu.sim.provision import catalog_for, validate

    try:
        return validate(profile, catalog_for(profile))
    except InputError as exc:
        raise exc.within(source) from None


def load_profile_file(path: str | None) -> Profile:
    """``path`` None means the built-in default profile."""
    if path is None:
        return builtin_profile()
    profile = load_profile_text(read_profile_text(path), source=path)
    check_catalog_names(profile, path)
    return profile
