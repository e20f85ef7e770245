"""``kgpu simulate``: where each pod lands, or exactly why it cannot."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from kgpu.cli import nodeview
from kgpu.cli.cost_view import by_option, section, workload_cost
from kgpu.cli.output import (
    PATH,
    ExitCode,
    catalog_option,
    emit,
    examples,
    handle_input_errors,
    headers_wanted,
    output_option,
    phase,
    summary_line,
    table,
    warn,
    warning_codes,
    warnings_footer,
)
from kgpu.errors import quote

if TYPE_CHECKING:
    from kgpu.model.inputs import Objects
    from kgpu.sim.provisioners.karpenter.overlay import NodeOverlay

REGION_LABEL = "topology.kubernetes.io/region"


@click.command(
    name="simulate",
    epilog=examples(
        (
            "the repository's example cluster and workloads",
            "kgpu simulate -c examples/cluster -w examples/workloads",
        ),
        (
            "a live cluster's nodes, pods and DaemonSets, plus a new job, as JSON",
            "kubectl get nodes,pods,ds -A -o json > snap.json && kgpu simulate -c snap.json -w train.yaml -o json",
        ),
        (
            "let a profile's pools provision nodes for what does not fit",
            "kgpu simulate -f kgpu.yaml -w train.yaml",
        ),
    ),
)
@click.option(
    "--cluster",
    "-c",
    "cluster",
    multiple=True,
    metavar="PATH",
    type=PATH,
    help="Nodes and running pods: YAML/JSON files, directories, or `kubectl get nodes,pods,ds -A -o json` "
    "(running DaemonSet pods are not created again); Karpenter NodePools and EC2NodeClasses there provision "
    "nodes.",
)
@click.option(
    "--workload",
    "-w",
    "workload",
    multiple=True,
    metavar="PATH",
    type=PATH,
    help="Workloads to place: Pod, Deployment, ReplicaSet, StatefulSet, Job, CronJob, DaemonSet, RayCluster.",
)
@click.option(
    "--profile",
    "-f",
    "profile",
    metavar="PATH",
    default=None,
    type=PATH,
    help="A cluster profile (kgpu.yaml): its pools provision nodes for pods that fit nowhere.",
)
@by_option
@catalog_option
@output_option("table", "wide", "json", "yaml", "name")
@handle_input_errors
def command(
    cluster: tuple[str, ...], workload: tuple[str, ...], profile: str | None, by: str, output: str,
    catalog: str | None,
) -> None:
    """Place pods on a cluster the way kube-scheduler would.

    Pods are queued by priority, then input order, and each goes to the feasible node with the best
    LeastAllocated + BalancedAllocation score (ties by node name). A pod that fits nowhere gets
    kube-scheduler's own message, e.g. "0/3 nodes are available: 1 node(s) had untolerated
    taint(s), 2 Insufficient nvidia.com/gpu.", and what preemption said; or it evicts pods of lower
    priority (shown as Preempted; those a controller owns come back as new pending pods).

    Exit status: 0 every pod placed, 1 some pod unschedulable, 2 bad input.
    """
    from kgpu.cli.files import load_objects
    from kgpu.sim.simulate import simulate

    notes: list[str] = []
    if not cluster and not profile and not workload:
        raise click.UsageError("give --cluster PATH (nodes and pods) and/or --profile kgpu.yaml")
    objects = load_objects(cluster)
    work = load_objects(workload)
    if cluster and not objects.nodes:
        # A valid cluster (Karpenter scaled to zero, a cluster being built): said, not refused.
        notes.append(
            f"{', '.join(cluster)}: no nodes: an empty cluster, where pods run only on nodes that NodePools "
            "in the input or --profile provision"
        )
    nodepools = objects.nodepools + work.nodepools
    if not cluster and not profile and not nodepools:
        raise click.UsageError(
            "give --cluster PATH (nodes and pods), --profile kgpu.yaml, or Karpenter NodePools in the input"
        )
    provisioner = None
    prof = None
    if profile:
        from kgpu.cli.profile_io import load_profile_file

        prof = load_profile_file(profile, catalog)
    region = _nodes_region(objects)
    if nodepools and prof is None and region is not None and not _priced(region):
        # A real region the price catalog lacks: the cluster is fine, only prices (and the offerings
        # Karpenter would choose from) are unknown. Placement on the nodes goes on; nothing is provisioned
        # at a made-up price.
        names = ", ".join(sorted({str(doc.get("metadata", {}).get("name")) for doc, _ in nodepools}))
        notes.append(
            f"region {quote(region)} (the nodes' topology.kubernetes.io/region) is not in kgpu's price catalog: "
            f"prices and offerings there are unknown, so NodePool(s) {names} provision nothing in this "
            f"simulation; pods that fit no existing node stay pending (priced regions: {', '.join(_priced_regions())})"
        )
    elif nodepools:
        # The cluster's own Karpenter NodePools (and EC2NodeClasses) provision too.
        from kgpu.model.profile import profile_with_nodepools

        prof, pool_notes = profile_with_nodepools(nodepools, {**objects.nodeclasses, **work.nodeclasses}, prof, region)
        notes.extend(pool_notes)
        if catalog and not profile:
            from kgpu.cli.profile_io import with_catalog

            prof = with_catalog(prof, None, catalog)
    overlays = _overlays(objects.nodeoverlays + work.nodeoverlays)
    if nodepools:
        from kgpu.model.gpus import unsized_shared_nodepools

        for name, label in unsized_shared_nodepools([d for d, _ in nodepools],
                                                    [d for d, _ in objects.nodeoverlays + work.nodeoverlays]):
            notes.append(
                f"NodePool {name}: its template labels select a device-plugin config ({label}); if that config "
                "shares or partitions the GPUs, each node advertises more than its physical GPUs, which Karpenter "
                "does not know without a NodeOverlay: it launches a node per GPU pod, and cannot place pods asking "
                "renamed or MIG resources. Give the pool a NodeOverlay with the capacity its nodes advertise "
                "(kgpu render writes one for a profile pool with sharing)"
            )
    if overlays and not any(p.kind == "karpenter" for p in (prof.pools if prof is not None else ())):
        notes.append(f"{len(overlays)} NodeOverlay(s) in the input and no Karpenter NodePool to apply them to")
    elif overlays:
        notes.append(
            f"{len(overlays)} NodeOverlay(s) from the input applied as Karpenter applies them with its NodeOverlay "
            "feature gate on (settings.featureGates.nodeOverlay: true); with the gate off (the default) Karpenter "
            "ignores them"
        )
    if prof is not None:
        from kgpu.sim.provisioners.provision import baseline_nodes, provisioner_for

        provisioner = provisioner_for(prof, daemonsets=objects.daemonsets + work.daemonsets, overlays=overlays)
        if not cluster:
            # No snapshot: the profile's static pools and node groups at their desired size are the cluster.
            objects.nodes.extend(baseline_nodes(prof))
    result = simulate(objects, work, provisioner=provisioner)
    result.warnings.extend(notes)
    for part in provisioner.parts if provisioner is not None else ():
        for name, why in sorted(getattr(part, "overlay_errors", {}).items()):
            result.warnings.append(f"NodeOverlay {name} left out, as Karpenter leaves it out: {why}")
    data = result.as_dict()
    # existing nodes priced as the node view prices them: the AWS catalog, with the profile's override rows
    price_of: nodeview.PriceOf = nodeview.catalog_price
    gpus_from = getattr(provisioner, "catalog", None)  # instance types' GPUs, for the cost split
    if prof is not None and prof.catalog.instance_types:
        from kgpu.sim.provisioners.pools import catalog_for

        gpus_from = merged = catalog_for(prof)
        price_of = lambda t, c, labels: nodeview.catalog_price(t, c, labels, merged)  # noqa: E731
    if gpus_from is None:
        from kgpu.catalog import aws_catalog

        gpus_from = aws_catalog()
    data["workload_cost"] = workload_cost(result, price_of, {**objects.owned, **work.owned}, prof, gpus_from)
    quota = kueue_quota(objects.kueue, ", ".join(cluster) if cluster else "the input")
    if quota is not None:
        data["cluster_queues"], kueue_warnings = quota
        result.warnings.extend(kueue_warnings)
    view = None
    if output in ("table", "wide") and headers_wanted():
        pool_of = nodeview.profile_pools(prof) if prof is not None else {}
        view = nodeview.pools(result.nodes, result.new_nodes, pool_of, price_of, dra_gpus=result.dra_gpus)
    owners = [p.pod.owner_name for p in result.placements]
    emit(
        data,
        output,
        lambda d: render_table(d, view, owners, by),
        wide=lambda d: render_wide(d, view, by),
        names=pod_names,
    )
    if output in ("table", "wide"):
        for warning in result.warnings:
            warn(warning)
    raise SystemExit(ExitCode.FINDINGS if result.unschedulable else ExitCode.OK)


def _overlays(docs: list[tuple[dict[str, Any], str]]) -> list[NodeOverlay]:
    """The input's NodeOverlays; a malformed one is bad input (InputError naming its file and field)."""
    from kgpu.sim.provisioners.karpenter.overlay import parse_overlay

    return [parse_overlay(doc, where) for doc, where in docs]


def _nodes_region(objects: Objects) -> str | None:
    """The cluster's region, from its nodes' topology.kubernetes.io/region (the first, sorted)."""
    regions = sorted({n.labels[REGION_LABEL] for n in objects.nodes if REGION_LABEL in n.labels})
    return regions[0] if regions else None


def _priced_regions() -> tuple[str, ...]:
    from kgpu.catalog.aws import aws_catalog

    return aws_catalog().regions


def _priced(region: str) -> bool:
    return region in _priced_regions()


def pod_names(data: dict[str, Any]) -> list[str]:
    """-o name: `pod/NAME`, as kubectl prints it."""
    return [f"pod/{p['name']}" for p in data["pods"]]


def kueue_quota(objects: list[dict[str, Any]], source: str) -> tuple[list[dict[str, Any]], list[str]] | None:
    """Quota use per ClusterQueue, flavor and resource as Kueue holds it now (what it admits at once
    included; ``kgpu queue`` says when the rest starts), and settle's warnings; None without a ClusterQueue."""
    if not any(o.get("kind") == "ClusterQueue" for o in objects):
        return None
    from kgpu.cli.queue_cmd import quota_rows
    from kgpu.sim.queue.admission import settle

    settled = settle(objects, source=source)
    pending = sum(u.pending for u in settled.cluster_queues.values())
    notes = [f"Kueue: {pending} Workload(s) pending quota (kgpu queue says why and when they start)"] if pending else []
    return quota_rows(settled), [*settled.warnings, *notes]


def render_wide(data: dict[str, Any], view: list[nodeview.Pool] | None = None, by: str = "workload") -> str:
    """One row per pod with the provisioned node's pool, instance type, capacity type and zone (and its
    warnings, when some pod has any)."""
    flagged = any(p.get("warnings") for p in data["pods"])
    dra = any(p.get("devices") for p in data["pods"])  # DRA: the devices allocated for the pod's claims
    rows = [
        (
            p["namespace"],
            p["name"],
            phase(p["phase"]),
            p["node"] or "-",
            p.get("pool") or "-",
            p.get("instance_type") or "-",
            p.get("capacity_type") or "-",
            p.get("zone") or "-",
            *((",".join(d["device"] for d in p.get("devices", ())) or "-",) if dra else ()),
            *((warning_codes(p) or "-",) if flagged else ()),
            p["reason"] or "",
        )
        for p in data["pods"]
    ]
    headers: tuple[str, ...] = ("NAMESPACE", "POD", "PHASE", "NODE", "POOL", "INSTANCE TYPE", "CAPACITY", "ZONE")
    headers += ("DEVICES",) if dra else ()
    headers += ("WARNINGS", "REASON") if flagged else ("REASON",)
    out = [table(headers, rows)]
    if headers_wanted():
        out += warnings_footer(data["pods"])
        out += ["", nodeview.render(view)] if view else []
        out += nodeview.shared_cost(data.get("shared_gpus") or [], wide=True)
        out += section(data.get("workload_cost"), by, wide=True)
        out += ["", summary_line(data["summary"])]
    return "\n".join(out)


def _group_name(pod: dict[str, Any], owner: str = "") -> str:
    """The name a group of alike pods is shown by: their controller's (``web-7d9f8b6c5`` for the pods
    ``web-7d9f8b6c5-x2x4z``), else the name without a numeric suffix (deploy-0, deploy-1 ... as deploy)."""
    if owner:
        return owner
    name: str = pod["name"]
    base, _, idx = name.rpartition("-")
    return base if idx.isdigit() else name


def render_table(data: dict[str, Any], view: list[nodeview.Pool] | None = None, owners: Sequence[str] = (),
                 by: str = "workload") -> str:
    """Pods grouped when alike (same controller, phase, node, reason and warnings), then the reasons in
    full, and what the warning codes mean. ``owners``: each pod's controller name ("" for none), in the
    order of ``data["pods"]``.

    One pass over the pods: each group keeps its first pod, so the table takes time linear in the pods
    however many groups there are (40,000 pending pods of one ReplicaSet, each its own name)."""
    groups: dict[tuple[str, str, str, str | None, str | None, str], tuple[dict[str, Any], list[str]]] = {}
    for n, pod in enumerate(data["pods"]):
        key = (
            pod["namespace"],
            _group_name(pod, owners[n] if n < len(owners) else ""),
            pod["phase"],
            pod["node"],
            pod["reason"],
            warning_codes(pod),
        )
        group = groups.get(key)
        if group is None:
            groups[key] = (pod, [pod["name"]])
        else:
            group[1].append(pod["name"])
    flagged = any(codes for *_, codes in groups)
    rows = []
    reasons: dict[str, int] = {}
    for (ns, base, ph, node, reason, codes), (extra, names) in groups.items():
        label = names[0] if len(names) == 1 else f"{base} (x{len(names)})"
        note = ""
        if reason:
            note = f"[{reasons.setdefault(reason, len(reasons) + 1)}]"
        where = node or "-"
        if extra.get("instance_type"):
            where = f"{node} ({extra['instance_type']} {extra.get('capacity_type', '')})".replace(" )", ")")
        rows.append((ns, label, phase(ph), where, note, *((codes or "-",) if flagged else ())))
    headers = ("NAMESPACE", "POD", "PHASE", "NODE", "WHY") + (("WARNINGS",) if flagged else ())
    out = [table(headers, rows)]
    if not headers_wanted():  # rows only, for grep and wc
        return out[0]
    if reasons:
        out.append("")
        for reason, n in reasons.items():
            out.append(f"[{n}] {reason}")
    out += warnings_footer(data["pods"])
    if view:
        out += ["", nodeview.render(view)]
    out += nodeview.shared_cost(data.get("shared_gpus") or [])
    out += nodeview.consolidated(data.get("karpenter_consolidated"))
    out += section(data.get("workload_cost"), by)
    if data.get("cluster_queues"):
        from kgpu.cli.queue_view import quota_table

        out += ["", quota_table(data["cluster_queues"])]
    out.append("")
    out.append(summary_line(data["summary"]))
    return "\n".join(out)
