"""``kgpu profile``: the profile's JSON Schema, and validation reporting every error with its field path."""

from __future__ import annotations

import json
from typing import Any

import click

from kgpu.cli.output import PATH, ExitCode, emit, examples, handle_input_errors, output_option
from kgpu.errors import InputError, one_line


@click.group(
    "profile",
    epilog=examples(
        ("check a profile, every error with its field path", "kgpu profile validate -f kgpu.yaml"),
        ("the JSON Schema, for editors", "kgpu profile schema > kgpu.schema.json"),
    ),
)
def command() -> None:
    """Inspect cluster profiles (JSON Schema, validation)."""


@command.command(
    "schema",
    epilog=examples(
        ("for editors (yaml-language-server) and CI", "kgpu profile schema > kgpu.schema.json"),
        ("as YAML", "kgpu profile schema -o yaml"),
    ),
)
@output_option("json", "yaml", default="json")
def schema(output: str) -> None:
    """Print the profile's JSON Schema (for editors and CI)."""
    from kgpu.model.profile import profile_json_schema

    if output == "json":
        click.echo(json.dumps(profile_json_schema(), indent=2, sort_keys=True))
    else:
        emit(profile_json_schema(), output, str)


def read_profile_file(path: str) -> str:
    from kgpu.cli.profile_io import read_profile_text

    return read_profile_text(path)


@command.command(
    "validate",
    epilog=examples(
        ("the profile in this directory", "kgpu profile validate"),
        ("a profile elsewhere, in CI", "kgpu profile validate -f clusters/prod/kgpu.yaml"),
    ),
)
@click.option(
    "-f", "--file", "path", type=PATH, default="kgpu.yaml", show_default=True, help="Profile to check."
)
@output_option("table", "json", "yaml")
@handle_input_errors
def validate(path: str, output: str) -> None:
    """Check a profile and print every error with its field path (exit 2 if any).

    With -o json or yaml the verdict is also printed as data: {file, valid, profile, pools, gpu_pools,
    errors, warnings}; the errors still go to stderr, one line each, and the exit status is the same.
    """
    from pydantic import ValidationError

    from kgpu.model.profile import Profile, all_validation_errors
    from kgpu.model.safeyaml import load_document

    data = load_document(read_profile_file(path), path)
    if not isinstance(data, dict):
        raise InputError(
            "a profile is a mapping (apiVersion, kind, metadata, provider, pools, ...)", where=path
        )
    verdict: dict[str, Any] = {"file": path, "valid": False, "profile": None, "pools": 0, "gpu_pools": 0,
                               "errors": [], "warnings": []}
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        for line in all_validation_errors(exc):
            click.echo(f"error: {one_line(f'{path}: {line}', 1000)}", err=True)
            verdict["errors"].append(one_line(line, 1000))
        if output != "table":
            emit(verdict, output, str)
        raise SystemExit(ExitCode.INPUT) from None
    from kgpu.cli.profile_io import check_catalog_names

    for warning in check_catalog_names(profile, path):
        click.echo(f"warning: {path}: {warning}", err=True)
        verdict["warnings"].append(warning)
    gpu = len(profile.gpu_pools)
    verdict.update(valid=True, profile=profile.metadata.name, pools=len(profile.pools), gpu_pools=gpu)
    if output != "table":
        emit(verdict, output, str)
        return
    click.echo(f"ok: {path}: profile {profile.metadata.name}, {len(profile.pools)} pools ({gpu} GPU)")
