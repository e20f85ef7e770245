"""``kgpu run``: the GPU smoke test every guide runs by hand, on any provider, with a verdict."""

from __future__ import annotations

import secrets
from typing import Any

import click

from kgpu.cli.cluster_flags import access_from, cluster_options
from kgpu.cli.name_completion import complete_any_gpu_types
from kgpu.cli.output import (
    ExitCode,
    emit_json,
    emit_yaml,
    examples,
    handle_input_errors,
    no_headers_option,
    style,
    table,
)
from kgpu.errors import InputError


@click.command(
    name="run",
    context_settings={"ignore_unknown_options": False},
    epilog=examples(
        ("CUDA vector-add on one GPU (prints 'Test PASSED')", "kgpu run"),
        ("ten vector-add pods at once, on the profile's GPU pool", "kgpu run --count 10 -f kgpu.yaml"),
        ("your own image on a T4 or V100, kept for inspection", "kgpu run --image my/img:1 --gpu-type T4,V100 --keep -- python check.py"),
    ),
)
@click.option("--test", "test_name", type=click.Choice(["vector-add", "nvidia-smi", "torch"]), default="vector-add",
              show_default=True, help="Which smoke test (ignored with --image).")
@click.option("--image", metavar="IMAGE", help="Run this image instead (with the command after --); passes on exit 0.")
@click.option("--gpus", type=click.IntRange(0, 64), default=1, show_default=True, help="nvidia.com/gpu limit per pod.")
@click.option("--gpu-type", metavar="T1,T2", shell_complete=complete_any_gpu_types, help="Only these GPU types (TKE: the gpu-type annotation; "
              "elsewhere node affinity on nvidia.com/gpu.product or karpenter.k8s.aws/instance-gpu-name).")
@click.option("-f", "--profile", "profile", metavar="PATH", type=click.Path(dir_okay=False),
              help="Land on this profile's GPU pool: its tolerations, selectors or TKE annotations.")
@click.option("--pool", metavar="NAME", help="Which GPU pool of the profile (default: the first).")
@click.option("--count", type=click.IntRange(1, 100), default=1, show_default=True, help="Pods to run at once.")
@click.option("--keep", is_flag=True, help="Do not delete the pods afterwards.")
@click.option("--timeout", type=click.FloatRange(1, 86400), default=600, show_default=True, metavar="SECONDS",
              help="Fail if the pods have not finished by then.")
@click.option("--dry-run", is_flag=True, help="Print the pod(s) and create nothing.")
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"], case_sensitive=False), default="table",
              metavar="FORMAT", help="Output format: table (default: progress, then a verdict per pod), json or "
              "yaml (the verdicts; progress goes to stderr). With --dry-run: the pods, as yaml (default) or json.")
@no_headers_option
@click.argument("command_args", nargs=-1, metavar="[-- COMMAND...]")
@cluster_options(all_namespaces=False)
@handle_input_errors
def command(test_name: str, image: str | None, gpus: int, gpu_type: str | None, profile: str | None,
            pool: str | None, count: int, keep: bool, timeout: float, dry_run: bool, output: str,
            command_args: tuple[str, ...], kubeconfig: str | None, context: str | None, namespace: str | None,
            request_timeout: float) -> None:
    """Create GPU test pods, show why they wait (the scheduler's reasons, image pulls), stream their log,
    decide pass or fail, and delete them (also on failure, timeout or Ctrl-C) unless --keep.

    Passes when: vector-add prints "Test PASSED"; nvidia-smi exits 0; torch reports
    torch.cuda.is_available() True; your --image exits 0.

    Exit status: 0 every pod passed, 1 some pod failed or timed out, 2 bad input, an API error or a pod
    that could not be deleted; 130 on Ctrl-C, 143 on SIGTERM, 129 on SIGHUP (the pods are deleted first).
    """
    from kgpu.render.smoketest import SmokeTest, builtin, smoke_pod

    output = output.lower()

    the_pool = _pool(profile, pool) if profile else None
    from kgpu.model.profile import PoolKind

    tke = the_pool is not None and the_pool.kind == PoolKind.TKE_SUPERNODE
    if command_args and not image:
        raise InputError("a command after -- needs --image", where="kgpu run")
    test = SmokeTest("image", image, tuple(command_args)) if image else builtin(test_name, tke=tke)
    types = tuple(t.strip() for t in gpu_type.split(",") if t.strip()) if gpu_type else ()
    run_id = secrets.token_hex(3)
    ns = namespace or "default"
    if dry_run and namespace is not None:
        from kgpu.live.kubeconfig import check_namespace

        check_namespace(namespace, "-n/--namespace")
    if not dry_run:
        from kgpu.live.kubeconfig import resolve

        target = resolve(access_from(kubeconfig, context, namespace, False, request_timeout))
        ns = target.namespace
    pods = [smoke_pod(test, name=f"kgpu-{test.name}-{run_id}" + (f"-{i}" if count > 1 else ""), namespace=ns,
                      gpus=gpus, pool=the_pool, gpu_types=types, run_id=run_id) for i in range(count)]
    if dry_run:
        if output == "json":
            emit_json(pods[0] if count == 1 else {"apiVersion": "v1", "kind": "List", "items": pods})
        else:
            import yaml

            click.echo(yaml.safe_dump_all(pods, sort_keys=False), nl=False)
        return
    from kgpu.live.client import ApiClient
    from kgpu.live.run import run

    say = (lambda line: click.echo(line, err=True)) if output != "table" else click.echo
    with ApiClient(target, timeout=request_timeout) as client:
        # Ctrl-C, SIGTERM and SIGHUP end here as exceptions after the pods were deleted (kgpu.cli.main).
        outcomes = run(client, pods, test, timeout=timeout, keep=keep, say=say)
    passed = sum(o.passed for o in outcomes)
    report = {"test": test.name, "passed": passed, "failed": len(outcomes) - passed,
              "pods": [o.as_dict() for o in outcomes]}
    if output == "json":
        emit_json(report)
    elif output == "yaml":
        emit_yaml(report)
    else:
        rows = [(style("PASS", fg="green") if o.passed else style("FAIL", fg="red", bold=True), f"pod/{o.name}",
                 o.node or "<none>", o.reason) for o in outcomes]
        click.echo(table(("RESULT", "POD", "NODE", "REASON"), rows))
        click.echo(f"{passed}/{len(outcomes)} passed")
    left = [o for o in outcomes if o.left_behind]
    if left:
        names = " ".join(o.name for o in left)
        raise InputError(f"{len(left)} test pod(s) could not be deleted: {left[0].left_behind}",
                         hint=f"delete them with `kubectl delete pod -n {ns} {names}`")
    raise SystemExit(ExitCode.OK if passed == len(outcomes) else ExitCode.FINDINGS)


def _pool(path: str, name: str | None) -> Any:
    from kgpu.cli.profile_io import load_profile_file

    prof = load_profile_file(path)
    pools = list(prof.gpu_pools)
    if not pools:
        raise InputError("the profile has no GPU pool", where=path)
    if name is None:
        return pools[0]
    for p in pools:
        if p.name == name:
            return p
    raise InputError(f"no GPU pool named {name!r} (GPU pools: {', '.join(p.name for p in pools)})",
                     where=f"{path}: --pool")
