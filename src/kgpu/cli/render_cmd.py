"""``kgpu render``: profile -> every manifest of the GPU stack, checked for consistency, optionally validated.

Standard output carries only what ``kubectl apply -f -`` accepts (cluster objects, in apply order), so
``kgpu render | kubectl apply -f -`` works; eksctl's ClusterConfig and Helm values are files for other tools
and go only to ``--output-dir``. A directory also gets a ``kustomization.yaml`` listing the manifests, for
``kubectl apply -k`` and GitOps controllers (Argo CD, Flux) pointed at the folder.

Both set up the cluster's infrastructure only: the example workloads and GPU test pods
(``stack.ON_REQUEST``) start GPU pods the moment they are applied, so they come to standard output and into
``kustomization.yaml`` only when asked (``--target workloads`` or ``--with-workloads``); ``--output-dir``
still writes their file for review, outside the kustomization.

Nothing is written unless everything rendered, agreed and (with --validate) validated: files go to a
temporary directory next to the output directory first and are renamed into place at the end.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kgpu.cli.output import (
    PATH,
    ExitCode,
    catalog_option,
    examples,
    format_or_old_path,
    handle_input_errors,
    require_extra,
    to_json,
)
from kgpu.errors import InputError
from kgpu.render.stack import FILE_NAMES, ON_REQUEST, TARGETS

if TYPE_CHECKING:
    from kgpu.model.profile import Profile

FORMATS = ("yaml", "json", "name")
# Targets whose files are not Kubernetes objects: other tools read them.
NOT_FOR_APPLY = {
    "eksctl": "eksctl's ClusterConfig (eksctl create cluster -f)",
    "cluster-autoscaler": "Helm values (helm install -f)",
    "karpenter-chart": "Helm values (helm upgrade -f)",
    "node-termination-handler": "Helm values (helm install -f)",
    "kuberay-operator": "Helm values (helm install -f)",
    "device-plugin-chart": "Helm values (helm upgrade -i -f)",
    "dra-driver-chart": "Helm values (helm upgrade -i -f)",
    "interruption-queue": "a CloudFormation template (aws cloudformation deploy)",
}
KUSTOMIZATION = "kustomization.yaml"


def object_name(doc: dict[str, Any]) -> str:
    """kubectl's -o name: kind.group/name (core kinds without a group), lower case."""
    api = str(doc.get("apiVersion", ""))
    group = api.rpartition("/")[0] if "/" in api else ""
    kind = str(doc.get("kind", "")).lower()
    name = (doc.get("metadata") or {}).get("name", "")
    return f"{kind}.{group}/{name}" if group else f"{kind}/{name}"


def _key(doc: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = doc.get("metadata") or {}
    return (
        str(doc.get("apiVersion")),
        str(doc.get("kind")),
        str(meta.get("namespace", "")),
        str(meta.get("name")),
    )


def dedupe(stack: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """Drop an object a previous target already rendered identically (two targets share a Namespace).

    kubectl would apply it twice, harmlessly; kustomize refuses a resource listed twice.
    """
    seen: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    out: dict[str, list[dict[str, Any]]] = {}
    for target, docs in stack.items():
        kept = []
        for doc in docs:
            key = _key(doc)
            if target not in NOT_FOR_APPLY and seen.get(key) == doc:
                continue
            if target not in NOT_FOR_APPLY:
                seen.setdefault(key, doc)
            kept.append(doc)
        out[target] = kept
    return out


def kustomization(files: list[str]) -> str:
    import yaml

    doc = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": files}
    head = "# kgpu: the manifests of this directory, for `kubectl apply -k` and GitOps controllers.\n"
    return head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


@click.command(
    "render",
    epilog=examples(
        ("apply the stack straight from the profile", "kgpu render -f kgpu.yaml | kubectl apply -f -"),
        (
            "every file (eksctl config and Helm values too) plus a kustomization.yaml",
            "kgpu render -f kgpu.yaml --output-dir manifests/ --validate",
        ),
        ("what would be applied, one kind/name per line", "kgpu render --template onprem -o name"),
    ),
)
@click.option("-f", "--file", "path", type=PATH, default=None, help="Profile to render (default kgpu.yaml).")
@click.option("--template", default=None, help="Render a built-in template instead of a file.")
@catalog_option
@click.option(
    "--target", "targets", multiple=True, type=click.Choice(TARGETS), help="Only these targets (repeatable)."
)
@click.option(
    "-d",
    "--output-dir",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Write one file per target and a kustomization.yaml here (default: objects to stdout).",
)
@click.option(
    "-o",
    "--output",
    "output",
    metavar="FORMAT",
    default="yaml",
    help="Standard output's format: yaml (default), json (a v1 List), name (kind.group/name per line).",
)
@click.option(
    "--with-workloads",
    "with_workloads",
    is_flag=True,
    help="Also the example GPU workloads and test pods (target workloads), which start GPU pods when applied.",
)
@click.option(
    "--validate", "validate", is_flag=True, help="Validate every document against the upstream schemas."
)
@handle_input_errors
def command(
    path: str | None,
    template: str | None,
    targets: tuple[str, ...],
    out_dir: Path | None,
    output: str,
    with_workloads: bool,
    validate: bool,
    catalog: str | None,
) -> None:
    """Render every manifest of the GPU stack from a profile.

    Without --output-dir, the cluster objects (everything `kubectl apply` accepts) go to standard
    output in apply order: the infrastructure only, unless --target workloads or --with-workloads asks for
    the example GPU workloads and test pods too. With it, one file per target (karpenter with its chart values and interruption
    queue, eksctl with cluster-autoscaler and node-termination-handler values, device-plugin, workloads,
    kuberay with the operator's values, monitoring, onprem with the host bootstrap, rbac) and a
    kustomization.yaml listing the manifests (workloads.yaml is written, listed only when asked). Refuses (exit 1, listing every problem) when the pieces disagree; bad profiles exit 2.
    Nothing is written unless everything succeeded.
    """
    from kgpu.cli.files import exists, is_dir, write_tree
    from kgpu.cli.profile_cmd import read_profile_file
    from kgpu.cli.profile_io import check_catalog_names, with_catalog
    from kgpu.model.profile import builtin_profile, load_profile_text
    from kgpu.render import consistency, onprem
    from kgpu.render.stack import (
        VALUES_TARGETS,
        dump_documents,
        file_header,
        render_stack,
        select_targets,
        target_notes,
    )

    chosen_format, old_dir = format_or_old_path(output, FORMATS, verb="kgpu render", new_flag="--output-dir")
    if old_dir is not None:
        if out_dir is not None:
            raise InputError("give the directory once", where="-o", hint=f"--output-dir {out_dir}")
        out_dir = Path(old_dir)
    output = chosen_format or "yaml"
    if out_dir is not None and output != "yaml":
        raise click.UsageError(f"-o {output} is for standard output; --output-dir writes YAML files")
    if path and template:
        raise InputError("give either -f FILE or --template NAME, not both", where="render")
    if template:
        profile = with_catalog(builtin_profile(template), None, catalog)
        if catalog:
            check_catalog_names(profile, catalog)
    else:
        source = path or "kgpu.yaml"
        profile = with_catalog(load_profile_text(read_profile_file(source), source=source), source, catalog)
        check_catalog_names(profile, source)
    if out_dir is not None and exists(out_dir, str(out_dir)) and not is_dir(out_dir, str(out_dir)):
        raise InputError("exists and is not a directory", where=str(out_dir))
    chosen = select_targets(profile, targets or None)
    # asked for: by name, or by the switch; otherwise rendered (and checked) but not applied
    held = [t for t in chosen if t in ON_REQUEST and t not in targets and not with_workloads]

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
        require_extra("validate", "kgpu render --validate")
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

    if out_dir is None:
        _to_stdout(profile, [t for t in chosen if t not in held], output, explicit=bool(targets))
        if held:
            import sys

            sys.stdout.flush()  # a failing standard output is the one line to print, not this note
        for t in held:
            click.echo(
                f"note: left out {ON_REQUEST[t]}: they start GPU pods; add --with-workloads (or --target {t})",
                err=True,
            )
        return
    stack = dedupe(render_stack(profile, chosen))
    files = {
        FILE_NAMES[t]: file_header(profile, t, target_notes(profile, t)) + dump_documents(docs)
        for t, docs in stack.items()
    }
    resources = [FILE_NAMES[t] for t in chosen if t not in NOT_FOR_APPLY and t not in held]
    if resources:
        files[KUSTOMIZATION] = kustomization(resources)

    if "onprem" in chosen:
        for host_path, text in onprem.host_files(profile).items():
            files["onprem-files/" + host_path.lstrip("/")] = text
    write_tree(out_dir, files)
    for t in held:  # after the write: a failed one says only why it failed
        click.echo(
            f"note: {FILE_NAMES[t]} is not in {KUSTOMIZATION}: it starts GPU pods ({ON_REQUEST[t]}); "
            f"apply it on purpose (kubectl apply -f {out_dir / FILE_NAMES[t]}), or list it with --with-workloads",
            err=True,
        )
    click.echo(f"wrote {len(files)} file(s) to {out_dir}", err=True)


def _to_stdout(profile: Profile, chosen: list[str], output: str, *, explicit: bool) -> None:
    """Cluster objects only, across targets, in apply order; other tools' files are named on stderr.

    Asked for explicitly and alone (``--target eksctl``), a non-object target is printed as it is.
    """
    from kgpu.render.sort import apply_order
    from kgpu.render.stack import dump_documents, file_header, render_stack

    objects = [t for t in chosen if t not in NOT_FOR_APPLY]
    others = [t for t in chosen if t in NOT_FOR_APPLY]
    if explicit and not objects:
        objects, others = others, []
        click.echo("note: not Kubernetes objects: do not pipe this into kubectl apply", err=True)
    stack = dedupe(render_stack(profile, objects))
    docs = [doc for t in objects for doc in stack[t]]
    if not (explicit and set(objects) <= set(NOT_FOR_APPLY)):
        docs = apply_order(docs)
    for t in others:
        click.echo(
            f"note: left out {FILE_NAMES[t]}: {NOT_FOR_APPLY[t]}; write it with --output-dir DIR", err=True
        )
    if output == "name":
        for doc in docs:
            click.echo(object_name(doc))
    elif output == "json":
        click.echo(to_json({"apiVersion": "v1", "kind": "List", "items": docs}))
    else:
        head = file_header(profile, ", ".join(objects), [])
        click.echo(head + dump_documents(docs), nl=False)
