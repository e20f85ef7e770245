"""``kgpu init``: write a commented cluster profile from a built-in template."""

from __future__ import annotations

from pathlib import Path

import click

from kgpu.cli.files import exists, is_dir, write_atomic
from kgpu.cli.output import PATH, emit, examples, format_or_old_path, handle_input_errors
from kgpu.errors import InputError
from kgpu.model.profile import DEFAULT_TEMPLATE, TEMPLATES

FORMATS = ("yaml", "json")


@click.command(
    "init",
    epilog=examples(
        (
            "kgpu.yaml for EKS + Karpenter, then its manifests",
            "kgpu init && kgpu render --output-dir manifests/",
        ),
        (
            "eksctl spot node groups + cluster-autoscaler, to another file",
            "kgpu init -t eks-eksctl -f clusters/dev.yaml",
        ),
        ("look at the on-prem template without writing anything", "kgpu init -t onprem -o yaml | less"),
    ),
)
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
    "-f",
    "--file",
    "file",
    type=PATH,
    default=None,
    help="Profile file to write ('-' for standard output).  [default: kgpu.yaml]",
)
@click.option(
    "-o",
    "--output",
    "output",
    metavar="FORMAT",
    default=None,
    help="Print the profile instead of writing a file: yaml (with its comments) or json.",
)
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@handle_input_errors
def command(template: str, file: str | None, output: str | None, force: bool) -> None:
    """Write a commented cluster profile (kgpu.yaml) from a template.

    Templates: eks-karpenter (Karpenter NodePools), eks-eksctl (eksctl spot node groups +
    cluster-autoscaler), onprem (existing GPU hosts), tke-supernode (Tencent TKE super nodes),
    kuberay (EKS node groups for a KubeRay cluster), kueue-two-teams (Karpenter spot and on-demand GPU
    pools shared by two teams through Kueue).
    """
    from kgpu.model.profile import builtin_profile, template_text

    if output is not None:
        output, old_path = format_or_old_path(
            output, FORMATS, verb="kgpu init", new_flag="-f", suffixes=(".yaml", ".yml", ".json")
        )
        if old_path is not None:
            if file is not None:
                raise InputError("give the file once", where="-o", hint=f"-f {file}")
            file = old_path
    text = template_text(template)
    profile = builtin_profile(template)  # a template that does not load is a bug: fail before writing
    if output == "json":
        emit(profile.model_dump(mode="json", by_alias=True, exclude_none=True), "json", str)
        return
    if output is not None or file == "-":
        click.echo(text, nl=False)
        return
    path = Path(file or "kgpu.yaml")
    if (exists(path, str(path)) or path.is_symlink()) and not force:
        raise InputError("file exists, not overwriting", where=str(path), hint="use --force to replace it")
    if is_dir(path, str(path)):
        raise InputError("is a directory", where=str(path))
    write_atomic(path, text)
    click.echo(
        f"wrote {path} (template {template}); next: kgpu render -f {path} --output-dir manifests/", err=True
    )
