"""``kgpu snapshot``: save a live cluster's scheduling state as one JSON file (read-only)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kgpu.cli.cluster_flags import access_from, cluster_options, end_progress, progress_printer
from kgpu.cli.output import examples, handle_input_errors

if TYPE_CHECKING:
    from kgpu.live.snapshot import Items, Spool


@click.command(
    name="snapshot",
    epilog=examples(
        ("the current context's cluster, every namespace", "kgpu snapshot -f cluster.json"),
        ("then: where would this job land, and why not", "kgpu simulate --cluster cluster.json --workload train.yaml"),
        ("one namespace's pods (nodes are always whole)", "kgpu snapshot --context prod -n ml -f ml.json"),
    ),
)
@click.option("-f", "--file", "file", metavar="FILE", type=click.Path(dir_okay=False, allow_dash=True),
              default=None, help="Write the snapshot here ('-' is stdout).  [default: -]")
@click.option("-o", "--output", "output", metavar="FORMAT|FILE", default=None,
              help="Output format: json (the only one: the snapshot is JSON). Any other value is a file name, "
              "as -f FILE.")
@click.option("--page-size", type=click.IntRange(1, 5000), default=500, show_default=True,
              help="Objects per list request (limit/continue paging).")
@cluster_options()
@handle_input_errors
def command(file: str | None, output: str | None, page_size: int, kubeconfig: str | None, context: str | None, namespace: str | None,
            all_namespaces: bool, request_timeout: float) -> None:
    """Save Nodes, Pods, DaemonSets, PriorityClasses, recent FailedScheduling/FailedCreate Events, the
    pods' Pulling/Pulled Events, the device plugin's config ConfigMaps and, where installed, Karpenter
    NodePools/NodeClaims/EC2NodeClasses/NodeOverlays, KubeRay RayClusters, DRA DeviceClasses/
    ResourceClaims/ResourceClaimTemplates/ResourceSlices and TKE ImageCaches as one JSON file that
    `kgpu simulate --cluster` and `kgpu doctor --snapshot` read. An optional kind the server does not serve
    is listed under metadata.absent; one RBAC forbids under metadata.forbidden, with a note.

    Read-only. Nothing secret is saved: container env values (but CUDA_VISIBLE_DEVICES and
    NVIDIA_VISIBLE_DEVICES), managedFields, last-applied-configuration,
    secret-bearing annotations and params (a RayCluster's redis-password) and the server URL's userinfo are
    stripped. Every namespace unless -n is given.

    Exit status: 0 written, 2 bad input or an API error (nothing written); 130 on Ctrl-C, 143 on SIGTERM,
    129 on SIGHUP.
    """
    from kgpu.cli.files import check_target, spool_beside
    from kgpu.live.snapshot import Spool

    target = _target(file, output)
    if target != "-":
        check_target(Path(target))  # before the listing, which may take minutes
    with spool_beside(target) as spooled:
        spool = Spool(spooled, where=target if target != "-" else "the spool file for standard output")
        head = take(access_from(kubeconfig, context, namespace, all_namespaces, request_timeout), page_size, spool)
        write(spool, head, target)
    meta = head["metadata"]
    counts = ", ".join(f"{n:,} {k}" for k, n in meta["counts"].items())
    where = "stdout" if target == "-" else target
    click.echo(f"snapshot of {meta['server']} ({meta['context'] or 'in-cluster'}): {counts} -> {where}", err=True)


def _target(file: str | None, output: str | None) -> str:
    """Where the snapshot goes: ``-f FILE``, or ``-o FILE`` (``-o json`` is the format, stdout)."""
    from kgpu.cli.output import FORMATS

    if output is not None and output.lower() in FORMATS:
        if output.lower() != "json":
            raise click.BadParameter(f"{output!r}: a snapshot is JSON; write it with -f FILE or to stdout",
                                     param_hint="'-o' / '--output'")
        output = None
    if output is not None and file is not None and output != file:
        raise click.UsageError("give the file once: -f FILE")
    return file or output or "-"


def fetch(access: Any, page_size: int = 500) -> dict[str, Any]:
    """The snapshot in memory (`kgpu doctor` without --snapshot)."""
    from kgpu.live.snapshot import ItemList

    items = ItemList()
    doc = take(access, page_size, items)
    doc["items"] = items.items
    return doc


def take(access: Any, page_size: int, items: Items) -> dict[str, Any]:
    """Resolve the cluster and list what the snapshot holds into ``items``; the document without them."""
    from kgpu.live.client import ApiClient
    from kgpu.live.kubeconfig import resolve
    from kgpu.live.snapshot import collect

    target = resolve(access)
    ns = None if access.all_namespaces or not access.namespace else target.namespace
    with ApiClient(target, timeout=access.request_timeout) as client:
        try:
            head = collect(client, items, ns, page_size=page_size, progress=progress_printer("listing"))
        finally:
            end_progress()
    for line in head["metadata"]["forbidden"]:
        click.echo(f"note: skipped, {line} (the checks that read it say nothing); grant it with "
                   "`kgpu render --target rbac`", err=True)
    for line in head["metadata"]["leftOut"]:
        click.echo(f"note: left out {line} (the API server served it, kgpu's readers refuse it as the API "
                   "server's validation would; the rest of the snapshot is usable, metadata.leftOut lists it)",
                   err=True)
    return head


def write(spool: Spool, head: dict[str, Any], output: str) -> None:
    """Write the snapshot, refused (exit 2, nothing written) when the readers would refuse it: to stdout
    once it is whole, to a file through a temporary sibling renamed into place."""
    from kgpu.cli.files import file_mode, write_atomic_with

    if output == "-":
        spool.write(head, sys.stdout.buffer)
        sys.stdout.flush()
    else:
        write_atomic_with(Path(output), lambda fh: spool.write(head, fh), file_mode(""))
