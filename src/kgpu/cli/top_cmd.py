"""``kgpu top``: GPUs per node and per pool of a live cluster or of a snapshot file (read-only).

The data is ``kgpu.live.top``'s (one GPU inventory per node, doctor's idea of a GPU node, prices as the node
view prices nodes), the tables ``kgpu.cli.topview``'s; ``--watch`` follows the API server's watches
(``kgpu.live.watch``) and redraws on each change, at most once a second.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from kgpu.cli.cluster_flags import access_from, cluster_options
from kgpu.cli.name_completion import complete_selector
from kgpu.cli.output import PATH, emit, examples, handle_input_errors, output_option

SORT_HELP = (
    "Order of the nodes: pool (then name; the default), name, gpu-free (most free first), gpu-req (most "
    "requested first), price (dearest first), idle (idle nodes first, dearest first), util (least utilised "
    "first, unknown last)."
)
REDRAW_SECONDS = 1.0  # --watch gathers the changes of this long into one redraw
UTIL_SECONDS = 15.0  # --watch asks Prometheus again after this long (a scrape interval)


@click.command(
    name="top",
    epilog=examples(
        ("GPUs of the current context's cluster, redrawn as it changes (Ctrl-C to stop)", "kgpu top --watch"),
        (
            "a snapshot's idle GPU nodes of one NodePool first, dearest first",
            "kgpu top -f snapshot.json -l karpenter.sh/nodepool=gpu --sort-by idle",
        ),
        (
            "with each node's GPU utilisation from the exporter, through Prometheus",
            "kgpu top --prometheus http://prometheus.monitoring:9090",
        ),
    ),
)
@click.option(
    "-f",
    "--file",
    "file",
    metavar="FILE",
    type=PATH,
    default=None,
    help="Read a snapshot (`kgpu snapshot -f FILE`) or `kubectl get nodes,pods -A -o json` output "
    "('-': standard input) instead of the live cluster.",
)
@click.option(
    "-l",
    "--selector",
    shell_complete=complete_selector,
    metavar="SELECTOR",
    default=None,
    help="Only nodes whose labels match this label selector, as kubectl's: "
    "'karpenter.sh/nodepool=gpu', 'nvidia.com/gpu.product in (NVIDIA-A10G,Tesla-T4)', '!spot'.",
)
@click.option(
    "--sort-by",
    type=click.Choice(("pool", "name", "gpu-free", "gpu-req", "price", "idle", "util")),
    default="pool",
    show_default=True,
    help=SORT_HELP,
)
@click.option(
    "-w",
    "--watch",
    is_flag=True,
    help="Keep the view open and redraw it as the cluster changes (a watch on the API server, not a "
    "list every second); Ctrl-C stops it.",
)
@click.option(
    "--prometheus",
    metavar="URL",
    default=None,
    help="Prometheus that scrapes kgpu's exporter (or dcgm-exporter): adds each node's and pool's GPU "
    "utilisation (an instant query of nvidia_smi_utilization_gpu_ratio, else DCGM_FI_DEV_GPU_UTIL). "
    "Unreachable: a note, the rest is shown.",
)
@click.option("--pools", "pools_only", is_flag=True, help="Only the pools table (node groups, NodePools).")
@click.option("--all-nodes", is_flag=True, help="Nodes without GPUs too.")
@click.option(
    "--page-size",
    type=click.IntRange(1, 5000),
    default=500,
    show_default=True,
    help="Objects per list request (limit/continue paging).",
)
@output_option("table", "wide", "json", "yaml", "name")
@cluster_options(all_namespaces=False, namespace=False)
@handle_input_errors
def command(
    file: str | None,
    selector: str | None,
    sort_by: str,
    watch: bool,
    prometheus: str | None,
    pools_only: bool,
    all_nodes: bool,
    page_size: int,
    output: str,
    kubeconfig: str | None,
    context: str | None,
    request_timeout: float,
) -> None:
    """GPU totals and use, per node and per pool: what `kubectl describe nodes` (Allocatable, Allocated
    resources) and `kubectl top nodes` show for CPU and memory, for nvidia.com/gpu, its .shared form, MIG
    devices and the GPUs NVIDIA's DRA driver publishes (dra:gpu, dra:mig-<profile>: devices of claims that
    pods hold), with each node's price and what is wrong with it.

    GPU is the node's GPU model and count, KIND how the GPUs are offered: whole, shared-xN (time-slicing
    replicas per GPU), mps-xN, mig (-o wide: mig-single, mig-mixed), dra, super-node (TKE: each pod buys
    its own GPUs). GPUS is what the pods bound to the node that have not finished request (as the scheduler sums them) over
    what it advertises, drawn as the node view draws it. UTIL is the exporter's average GPU utilisation on
    the node (--prometheus). $/H is the node's price from its instance type, capacity type and region (the
    AWS catalog; n/a when unknown); an Idle node (GPUs allocatable, none requested) costs it all for nothing.
    STATUS is Ready, NotReady, Cordoned, Idle or what is wrong with the GPUs: NoGPUs (a GPU instance that
    advertises none: no device plugin), PluginGone, GPUsUnhealthy, GPUsMissing, MIGPending, MIGFailed.
    Pools are Karpenter NodePools, EKS / eksctl node groups, GKE, AKS and TKE node pools (TKE super nodes:
    super-nodes), by their node labels.

    The table fits the terminal's width, names cut in the middle; -o wide adds instance and capacity types,
    free GPUs and idle cost, uncut. --no-headers prints the nodes' lines alone (the pools' with --pools),
    the node's name on each. -o json / -o yaml: the data (kgpu/cli/schemas/top.schema.json); -o name:
    node/NAME per node.

    Read-only: lists (and with --watch watches) nodes, pods, ResourceSlices and ResourceClaims (the
    kgpu-doctor ClusterRole of `kgpu render --target rbac` grants it).
    Exit status: 0 shown, 2 bad input or an API error; 130 on Ctrl-C (the way out of --watch), 143 on
    SIGTERM, 129 on SIGHUP.
    """
    from kgpu.cli.nodeview import catalog_price

    requirements = _requirements(selector)
    if watch and file:
        raise click.UsageError("--watch follows a live cluster; a file does not change (drop -f or --watch)")
    if watch and output.lower() not in ("table", "wide"):
        raise click.UsageError("--watch draws the table (-o table or -o wide)")

    def view(objects: Any, source: str, series: list[tuple[dict[str, str], float]] | None) -> dict[str, Any]:
        from kgpu.catalog.prices import AS_OF
        from kgpu.live.top import summarize

        nodes = objects.nodes
        if requirements is not None:
            from kgpu.cli.doctor_cmd import matching_nodes

            keep = set(matching_nodes({"items": nodes}, requirements))
            nodes = [n for n in nodes if (n.get("metadata") or {}).get("name") in keep]
        data = summarize(
            nodes,
            objects.pods,
            series,
            all_nodes=all_nodes,
            slices=objects.slices,
            claims=objects.claims,
            price_of=catalog_price,
            sort_by=sort_by,
        )
        data = {"source": source, "server": None, "selector": selector, "prices_as_of": AS_OF, **data}
        if pools_only and output.lower() != "name":
            data.pop("nodes")
        return data

    if file:
        from kgpu.cli.doctor_cmd import read_snapshot
        from kgpu.live.top import from_document

        doc, label = read_snapshot(file)
        objects = from_document(doc, label)
        data = view(objects, label, _utilisation(prometheus, request_timeout))
        _emit(data, output)
        return

    from kgpu.live.client import ApiClient
    from kgpu.live.kubeconfig import resolve
    from kgpu.live.top import read

    target = resolve(access_from(kubeconfig, context, None, False, request_timeout))
    if watch:
        _watch(target, view, output, page_size, selector, prometheus, request_timeout)
        return
    with ApiClient(target, timeout=request_timeout) as client:
        objects = read(client, page_size=page_size, label_selector=selector)
    if objects.note:
        click.echo(f"note: {objects.note}", err=True)
    data = view(objects, f"cluster {target.server}", _utilisation(prometheus, request_timeout))
    data["server"] = target.server
    _emit(data, output)


def _requirements(selector: str | None) -> Any:
    """kubectl's label selector, parsed as doctor's -l parses it; malformed: exit 2 naming the term."""
    if selector is None:
        return None
    from kgpu.cli.doctor_cmd import parse_selector

    try:
        return parse_selector(selector)
    except ValueError as exc:
        raise click.BadParameter(f"{exc} in {selector!r}", param_hint="'-l' / '--selector'") from None


def _utilisation(prometheus: str | None, timeout: float) -> list[tuple[dict[str, str], float]] | None:
    """The exporter's series through Prometheus (None without --prometheus); unreachable: a note, no series."""
    if not prometheus:
        return None
    from kgpu.live.kubeconfig import ClusterError
    from kgpu.live.prometheus import PrometheusClient
    from kgpu.live.top import utilization

    with PrometheusClient(prometheus, timeout=timeout) as prom:
        try:
            return utilization(prom.query)
        except ClusterError as exc:
            click.echo(f"note: no utilisation shown: {exc.message}", err=True)
            return None


def _emit(data: dict[str, Any], output: str) -> None:
    from kgpu.cli import topview
    from kgpu.cli.output import headers_wanted

    if output.lower() in ("table", "wide") and not headers_wanted() and not data.get("nodes", data["pools"]):
        return  # --no-headers and nothing to list: no line (wc -l says 0)
    emit(data, output, topview.render, wide=lambda d: topview.render(d, wide=True), names=topview.names)


def _watch(
    target: Any,
    view: Any,
    output: str,
    page_size: int,
    selector: str | None,
    prometheus: str | None,
    timeout: float,
) -> None:
    """Follow the watches and redraw on each change until Ctrl-C (KeyboardInterrupt: exit 130 in main)."""
    import threading

    from kgpu.cli import topview
    from kgpu.cli.output import echo
    from kgpu.live.client import NODE, POD, RESOURCECLAIM, RESOURCESLICE
    from kgpu.live.kubeconfig import ClusterError
    from kgpu.live.top import from_watch
    from kgpu.live.watch import Cluster, follow, wait_change

    cluster = Cluster()
    started = [threading.Event() for _ in range(2)]
    try:
        follow(
            target,
            cluster,
            NODE,
            timeout=timeout,
            page_size=page_size,
            label_selector=selector,
            started=started[0],
        )
        follow(target, cluster, POD, timeout=timeout, page_size=page_size, started=started[1])
        for kind in (RESOURCESLICE, RESOURCECLAIM):
            follow(target, cluster, kind, timeout=timeout, page_size=page_size, optional=True)
        for event in started:
            event.wait()
        for needed in (NODE.kind, POD.kind):  # the first list failed: one line, as without --watch
            if needed not in cluster.objects:
                raise ClusterError(
                    cluster.notes.get(needed, "").removesuffix("; trying again") or "no answer"
                )
        screen = sys.stdout.isatty()
        series, asked = None, 0.0
        while True:
            if prometheus and time.monotonic() - asked >= UTIL_SECONDS:
                series, asked = _utilisation(prometheus, timeout), time.monotonic()
            objects = from_watch(cluster)
            data = view(objects, f"cluster {target.server}", series)
            data["server"] = target.server
            text = topview.render(data, wide=output.lower() == "wide")
            note = objects.note
            stamp = f"{time.strftime('%H:%M:%S')}  watching {target.server}; Ctrl-C to stop"
            if note:
                stamp += f"\nnote: {note}"
            echo(("\x1b[H\x1b[2J" if screen else "\n") + stamp + "\n\n" + text)
            wait_change(cluster, REDRAW_SECONDS, UTIL_SECONDS if prometheus else None)
    finally:
        cluster.stopped.set()
