"""``kgpu top``: GPUs per node and per pool of a live cluster: allocatable, requested, used (read-only)."""

from __future__ import annotations

from typing import Any

import click

from kgpu.cli.cluster_flags import access_from, cluster_options
from kgpu.cli.output import emit, examples, handle_input_errors, output_option, table
from kgpu.model.sharing import GPU


@click.command(
    name="top",
    epilog=examples(
        ("GPUs of the current context's cluster, per node and pool", "kgpu top"),
        ("with each node's GPU utilisation from the exporter, through Prometheus",
         "kgpu top --prometheus http://prometheus.monitoring:9090"),
        ("the node groups / NodePools only, as JSON", "kgpu top --pools -o json"),
    ),
)
@click.option("--prometheus", metavar="URL", default=None,
              help="Prometheus that scrapes kgpu's exporter (or dcgm-exporter): adds each node's and pool's GPU "
              "utilisation (an instant query of nvidia_smi_utilization_gpu_ratio, else DCGM_FI_DEV_GPU_UTIL). "
              "Unreachable: a note, the rest is shown.")
@click.option("--pools", "pools_only", is_flag=True, help="Only the pools table (node groups, NodePools).")
@click.option("--all-nodes", is_flag=True, help="Nodes without GPUs too.")
@click.option("--page-size", type=click.IntRange(1, 5000), default=500, show_default=True,
              help="Objects per list request (limit/continue paging).")
@output_option("table", "json", "yaml")
@cluster_options(all_namespaces=False, namespace=False)
@handle_input_errors
def command(prometheus: str | None, pools_only: bool, all_nodes: bool, page_size: int, output: str,
            kubeconfig: str | None, context: str | None, request_timeout: float) -> None:
    """GPU totals and use, per node and per pool: what `kubectl describe nodes` (Allocatable, Allocated
    resources) and `kubectl top nodes` show for CPU and memory, for nvidia.com/gpu, its .shared form, MIG
    devices and the GPUs NVIDIA's DRA driver publishes (dra:gpu, dra:mig-<profile>; REQ: devices of claims
    that pods hold).

    ALLOC is the node's allocatable, REQ what the pods bound to it that have not finished ask (as
    the scheduler sums them), FREE the difference, UTIL the exporter's average GPU utilisation on the node (with
    --prometheus). Pools are Karpenter NodePools, EKS / eksctl node groups, GKE, AKS and TKE node pools, by
    their node labels, with their nodes, instance types and capacity types.

    GPU is the node's GPU model and count, KIND how the GPUs are offered: whole, time-slicing/mps xN (replicas
    per GPU), mig single/mixed, dra.

    Read-only: lists nodes, pods, ResourceSlices and ResourceClaims (the kgpu-doctor ClusterRole of `kgpu render --target rbac` grants it).
    Exit status: 0 shown, 2 bad input or an API error; 130 on Ctrl-C, 143 on SIGTERM, 129 on SIGHUP.
    """
    from kgpu.live.client import ApiClient
    from kgpu.live.kubeconfig import ClusterError, resolve
    from kgpu.live.prometheus import PrometheusClient
    from kgpu.live.top import read, read_dra, summarize, utilization

    access = access_from(kubeconfig, context, None, False, request_timeout)
    prom = PrometheusClient(prometheus, timeout=request_timeout) if prometheus else None
    target = resolve(access)
    with ApiClient(target, timeout=request_timeout) as client:
        nodes, pods = read(client, page_size=page_size)
        slices, claims, note = read_dra(client, page_size=page_size)
    if note:
        click.echo(f"note: {note}", err=True)
    series = None
    if prom is not None:
        with prom:
            try:
                series = utilization(prom.query)
            except ClusterError as exc:
                click.echo(f"note: no utilisation shown: {exc.message}", err=True)
    data = summarize(nodes, pods, series, all_nodes=all_nodes, slices=slices, claims=claims)
    data["server"] = target.server
    if pools_only:
        data.pop("nodes")
    emit(data, output, render_table)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _short(resource: str) -> str:
    return resource.removeprefix("nvidia.com/")


def render_table(data: dict[str, Any]) -> str:
    parts = []
    util = data.get("prometheus")
    if "nodes" in data:
        rows = []
        for n in data["nodes"]:
            resources = n["resources"] or {GPU: {"allocatable": 0, "requested": 0}}
            for i, (r, v) in enumerate(resources.items()):
                free = v["allocatable"] - v["requested"]
                gpu = f"{n.get('gpuProduct') or '-'}" + (f" x{n['gpuCount']}" if n.get("gpuCount") else "")
                row = [n["node"] if i == 0 else "", n["pool"] if i == 0 else "", n["instanceType"] if i == 0 else "",
                       gpu if i == 0 else "", n.get("gpuKind", "-") if i == 0 else "",
                       _short(r), v["allocatable"], v["requested"], free if free >= 0 else f"{free} (over)"]
                if util:
                    row.append(_pct(n["utilization"]) if i == 0 else "")
                rows.append(row)
        headers = ["NODE", "POOL", "INSTANCE-TYPE", "GPU", "KIND", "RESOURCE", "ALLOC", "REQ", "FREE"] + (
            ["UTIL"] if util else [])
        parts.append(table(headers, rows) if rows else "no GPU nodes")
    rows = []
    for p in data["pools"]:
        for i, (r, v) in enumerate((p["resources"] or {GPU: {"allocatable": 0, "requested": 0}}).items()):
            first = i == 0
            row = [p["pool"] if first else "", p["source"] or "-" if first else "", p["nodes"] if first else "",
                   ",".join(p["instanceTypes"]) or "-" if first else "", ",".join(p["capacityTypes"]) or "-" if first else "",
                   _short(r), v["allocatable"], v["requested"]]
            if util:
                row.append(_pct(p["utilization"]) if first else "")
            rows.append(row)
    headers = ["POOL", "SOURCE", "NODES", "INSTANCE-TYPES", "CAPACITY", "RESOURCE", "ALLOC", "REQ"] + (["UTIL"] if util else [])
    if rows:
        parts.append(table(headers, rows))
    return "\n\n".join(parts)
