"""Loading a cluster profile from a file (or the built-in default)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
    from kgpu.sim.provisioners.provision import catalog_for, validate

    try:
        return validate(profile, catalog_for(profile))
    except InputError as exc:
        raise exc.within(source) from None


def _checked_rows(rows: list[Any], where: str) -> list[dict[str, Any]]:
    """Catalog override rows, merged once on their own so that a bad row names its own file or field."""
    from kgpu.catalog import aws_catalog

    try:
        aws_catalog(None, rows)
    except InputError as exc:
        raise exc.within(where) from None
    return list(rows)


def catalog_file_rows(path: str) -> list[dict[str, Any]]:
    """The rows of a catalog override file (CSV, or YAML read within the bounded reader's limits)."""
    from kgpu.cli.catalog_cmd import load_overrides

    return _checked_rows(load_overrides(path), path)


def with_catalog(profile: Profile, source: str | None, extra: str | None = None) -> Profile:
    """The profile with every catalog override row it names: inline ``catalog.instanceTypes``, then
    ``catalog.file`` (relative to the profile's folder), then ``--catalog FILE``. The pure layers read only
    the merged rows (:func:`kgpu.sim.provisioners.pools.catalog_for`)."""
    if not profile.catalog.instance_types and not profile.catalog.file and not extra:
        return profile
    from kgpu.model.profile import CatalogOverrides

    where = f"{source}: catalog.instanceTypes" if source else "catalog.instanceTypes"
    rows = _checked_rows(list(profile.catalog.instance_types), where)
    if profile.catalog.file:
        base = Path(source).parent if source else Path()
        rows += catalog_file_rows(str(base / profile.catalog.file))
    if extra:
        rows += catalog_file_rows(extra)
    merged = CatalogOverrides(file=profile.catalog.file, instance_types=rows)
    return profile.model_copy(update={"catalog": merged})


def load_profile_file(path: str | None, catalog: str | None = None) -> Profile:
    """``path`` None means the built-in default profile; ``catalog``: a ``--catalog FILE``."""
    if path is None:
        profile = with_catalog(builtin_profile(), None, catalog)
        if catalog:
            check_catalog_names(profile, catalog)
        return profile
    profile = with_catalog(load_profile_text(read_profile_text(path), source=path), path, catalog)
    check_catalog_names(profile, path)
    return profile
