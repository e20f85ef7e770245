"""``kgpu render``: profile -> every manifest of the GPU stack, checked for consistency, optionally validated.

Nothing is written unless everything rendered, agreed and (with --validate) validated: files go to a
temporary directory next to -o DIR first and are renamed into place at the end.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import click

from kgpu.cli.output import ExitCode, handle_input_errors
from kgpu.errors import InputError
from kgpu.render.stack import TARGETS


def write_tree_atomically(out_dir: Path, files: dict[str, str]) -> None:
    """Write every file to a temporary sibling directory, then rename them into ``out_dir``."""
    out_dir = out_dir.absolute()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.kgpu-", dir=out_dir.parent))
    try:
        for name, text in files.items():
            dest = tmp / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text, encoding="utf-8")
        if not out_dir.exists():
            os.rename(tmp, out_dir)
            return
        for name in files:
            dest = out_dir / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp / name, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@click.command("render")
@click.option("-f", "--file", "path", default=None, help="Profile to render (default kgpu.yaml).")
@click.option("--template", default=None, help="Render a built-in template instead of a file.")
@click.option(
    "--target", "targets", multiple=True, type=click.Choice(TARGETS), help="Only these targets (repeatable)."
)
@click.option(
    "-o",
    "--output-dir",
    "out_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Directory to write (default: stdout).",
)
@click.option(
    "--validate", "validate", is_flag=True, help="Validate every document against the upstream schemas."
)
@handle_input_errors
def command(
    path: str | None, template: str | None, targets: tuple[str, ...], out_dir: Path | None, validate: bool
) -> None:
    """Render every manifest of the GPU stack from a profile.

    One file per target (karpenter, eksctl, cluster-autoscaler values, device-plugin, workloads, kuberay,
    monitoring, onprem, rbac), documents in apply order. Refuses (exit 1, listing every problem) when the
    pieces disagree; bad profiles exit 2. Nothing is written unless everything succeeded.
    """
    from kgpu.cli.profile_cmd import read_profile_file
    from kgpu.model.profile import builtin_profile, load_profile_text
    from kgpu.render import consistency, onprem
    from kgpu.render.stack import VALUES_TARGETS, render_files, render_stack, select_targets

    if path and template:
        raise InputError("give either -f FILE or --template NAME, not both", where="render")
    if template:
        profile = builtin_profile(template)
    else:
        source = path or "kgpu.yaml"
        profile = load_profile_text(read_profile_file(source), source=source)
    if out_dir is not None and out_dir.exists() and not out_dir.is_dir():
        raise InputError("exists and is not a directory", where=str(out_dir))
    chosen = select_targets(profile, targets or None)

    problems = consistency.check(profile, render_stack(profile))
    for p in consistency.warnings(problems):
        click.echo(p.line(), err=True)
    errors = consistency.errors(problems)
    if errors:
        for p in errors:
            click.echo(p.line(), err=True)
        click.echo(f"{len(errors)} problem(s): the profile's pieces disagree; nothing written", err=True)
        raise SystemExit(ExitCode.FINDINGS)

    if validate:
        from kgpu.render.validate import validate_stack

        report = validate_stack(
            render_stack(profile, chosen),
            kubernetes_version=profile.cluster.kubernetes_version,
            skip_targets=VALUES_TARGETS,
        )
        for line in report.skipped:
            click.echo(f"note: not validated: {line}", err=True)
        if report.errors:
            for line in report.errors:
                click.echo(f"error: {line}", err=True)
            click.echo(f"{len(report.errors)} validation error(s); nothing written", err=True)
            raise SystemExit(ExitCode.FINDINGS)

    files = render_files(profile, chosen)
    if out_dir is None:
        click.echo("".join(files.values()), nl=False)
        return
    if "onprem" in chosen:
        for host_path, text in onprem.host_files(profile).items():
            files["onprem-files/" + host_path.lstrip("/")] = text
    write_tree_atomically(out_dir, files)
    click.echo(f"wrote {len(files)} file(s) to {out_dir}", err=True)
