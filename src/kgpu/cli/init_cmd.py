"""``kgpu init``: write a commented cluster profile from a built-in template."""

from __future__ import annotations

from pathlib import Path

import click

from kgpu.cli.files import write_atomic
from kgpu.cli.output import handle_input_errors
from kgpu.errors import InputError
from kgpu.model.profile import DEFAULT_TEMPLATE, TEMPLATES


@click.command("init")
@click.option(
    "-t",
    "--template",
    "template",
    type=click.Choice(TEMPLATES),
    default=DEFAULT_TEMPLATE,
    show_default=True,
    help="Which seed cluster to start from.",
)
@click.option(
    "-o",
    "--output",
    "output",
    default="kgpu.yaml",
    show_default=True,
    help="Profile file to write ('-' for stdout).",
)
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@handle_input_errors
def command(template: str, output: str, force: bool) -> None:
    """Write a commented cluster profile (kgpu.yaml) from a template.

    Templates: eks-karpenter (Karpenter NodePools), eks-eksctl (eksctl spot node groups +
    cluster-autoscaler), onprem (existing GPU hosts), tke-supernode (Tencent TKE super nodes),
    kuberay (EKS node groups for a KubeRay cluster).
    """
    from kgpu.model.profile import builtin_profile, template_text

    text = template_text(template)
    builtin_profile(template)  # a template that does not load is a bug: fail before writing
    if output == "-":
        click.echo(text, nl=False)
        return
    path = Path(output)
    if path.exists() and not force:
        raise InputError("file exists, not overwriting", where=str(path), hint="use --force to replace it")
    if path.is_dir():
        raise InputError("is a directory", where=str(path))
    write_atomic(path, text)
    click.echo(f"wrote {path} (template {template}); next: kgpu render -f {path} -o manifests/", err=True)
