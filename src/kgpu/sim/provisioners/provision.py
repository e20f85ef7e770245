"""Capacity that grows: one provisioner per profile, dispatching each pool to the autoscaler that owns it.

A pod that kube-scheduler could not place goes, in order, to the profile's Karpenter NodePools
(``kgpu.sim.provisioners.karpenter.solve``), its cluster-autoscaler node groups (``kgpu.sim.provisioners.cluster_autoscaler``) and its TKE super
nodes (``kgpu.sim.provisioners.tke.supernode``). Each of them adds real ``Node`` objects through ``Scheduler.add_node`` and
binds pods with the scheduler's own filters, so kube-scheduler's placement and messages stay one code path.
A pod none of them can take keeps kube-scheduler's message with every autoscaler's explanation appended.

This module only chooses and runs the provisioners; what they share is ``kgpu.sim.provisioners.pools``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kgpu.catalog import Catalog
from kgpu.model.objects import CPU, GPU, MEMORY, DaemonSet, Node, Pod
from kgpu.model.profile import Autoscaler, PoolKind, Profile
from kgpu.model.quantity import milli_value, parse_quantity, value
from kgpu.sim.cost import hourly_cost
from kgpu.sim.provisioners.cluster_autoscaler import ClusterAutoscaler, group_node
from kgpu.sim.provisioners.karpenter.disruption import consolidate
from kgpu.sim.provisioners.karpenter.overlay import NodeOverlay
from kgpu.sim.provisioners.karpenter.solve import Karpenter
from kgpu.sim.provisioners.pools import (
    Context,
    PoolProvisioner,
    catalog_coverage,
    catalog_for,
    first_known_type,
    group_names,
    node_taints,
    pool_zones,
    profile_daemonsets,
    validate,
)
from kgpu.sim.provisioners.scale_down import empty_gpu_nodes
from kgpu.sim.provisioners.tke.supernode import SuperNodes
from kgpu.sim.scheduler.scheduler import Scheduler
from kgpu.sim.sharing import pool_node

__all__ = [
    "ProfileProvisioner",
    "baseline_cost",
    "baseline_nodes",
    "catalog_for",
    "first_known_type",
    "provisioner_for",
    "validate",
]


class ProfileProvisioner:
    """The simulate ``Provisioner`` of a profile."""

    def __init__(
        self,
        profile: Profile,
        catalog: Catalog | None,
        daemonsets: Sequence[DaemonSet] = (),
        overlays: Sequence[NodeOverlay] = (),
    ) -> None:
        self.profile = profile
        self.catalog = catalog
        self.daemonsets: list[DaemonSet] = list(daemonsets)
        self.warnings: list[str] = []
        self.dra: Any = None  # kgpu.sim.scheduler.plugins.dynamicresources.DRA, set by simulate when it allocates claims
        self.parts: list[PoolProvisioner] = []
        kinds = {p.kind for p in profile.pools}
        if PoolKind.KARPENTER in kinds and catalog is not None:
            self.parts.append(Karpenter(profile, catalog, overlays=overlays))
        if (
            PoolKind.NODE_GROUP in kinds
            and catalog is not None
            and profile.autoscaler == Autoscaler.CLUSTER_AUTOSCALER
        ):
            self.parts.append(ClusterAutoscaler(profile, catalog))
        if PoolKind.TKE_SUPERNODE in kinds:
            self.parts.append(SuperNodes(profile))

    def provision(self, pending: Sequence[Pod], scheduler: Scheduler) -> dict[str, Any]:
        daemonsets = self.daemonsets + profile_daemonsets(self.profile, self.daemonsets)
        ctx = Context(scheduler, self.profile, self.catalog, daemonsets, dra=self.dra)
        todo = [p for p in pending if p.owner_kind != "DaemonSet" and not p.spec.node_name]
        explanations: dict[str, list[str]] = {p.key: [] for p in todo}
        claimed = [p for p in todo if self.dra is not None and p.spec.claim_refs]  # kgpu.sim.provisioners.dra_pools
        todo = [p for p in todo if not (self.dra is not None and p.spec.claim_refs)]
        karpenter: set[str] = set()  # pods Karpenter was asked for (kgpu.sim.unmodelled's KARPENTER rules)
        for part in self.parts:
            if not todo:
                break
            if part.name == "karpenter":
                karpenter.update(p.key for p in todo)
            notes = part.provision(todo, ctx)
            for key, note in notes.items():
                explanations[key].append(note)
            todo = [p for p in todo if p.key not in ctx.outcome]
        if claimed:
            todo += self._provision_claims(claimed, ctx, explanations)
        empty_dra = [n.name for n in ctx.new_nodes if not n.pods and n.pool in {p.name for p in self.profile.dra_pools}]
        for pod in todo:
            if empty_dra and pod.spec.request(GPU) and not explanations[pod.key]:
                explanations[pod.key].append(
                    f"{', '.join(empty_dra)} launched for it from a gpuAllocation: dra pool (the autoscaler counts the "
                    "instance type's GPUs), but NVIDIA's DRA driver publishes them as ResourceSlices, not as "
                    "nvidia.com/gpu: claim them with a ResourceClaim of DeviceClass gpu.nvidia.com"
                )
        if not self.parts:
            note = "no pool of this profile can add nodes (static pools, or no autoscaler)"
            for p in todo:
                explanations[p.key].append(note)
        for pod in todo:
            extra = "; ".join(explanations[pod.key])
            if extra:
                base = scheduler.explain_pod(pod)
                ctx.outcome[pod.key] = f"{base}; {extra}"
        out: dict[str, Any] = dict(ctx.outcome)
        cost = hourly_cost(ctx.new_nodes)
        extra_out: dict[str, Any] = {
            "summary": {"hourly_cost": cost["total"], "new_nodes": len(ctx.new_nodes)}
        }
        extra_out["cost"] = cost
        for part in self.parts:
            # what Karpenter launches is the result; where its disruption controller takes it is a second view
            if isinstance(part, Karpenter):
                steady = consolidate(part, ctx)
                if steady is not None:
                    extra_out["karpenter_consolidated"] = steady
        empty = empty_gpu_nodes(self.profile, scheduler, ctx.by_node)
        if empty:
            extra_out["scale_to_zero"] = empty
        if self.warnings:
            extra_out["profile_warnings"] = list(self.warnings)
        out["extra"] = extra_out
        out["new_nodes"] = ctx.new_nodes
        out["karpenter"] = karpenter
        out["dra_devices"] = ctx.dra_devices
        return out

    def _provision_claims(self, pods: list[Pod], ctx: Context, explanations: dict[str, list[str]]) -> list[Pod]:
        """Pods with resource claims: what each autoscaler does with them (kgpu.sim.provisioners.dra_pools), then, as
        kube-scheduler would once the new nodes publish their slices, each again over every node. Returns
        those still waiting."""
        from kgpu.sim.provisioners.dra_pools import KARPENTER_DRA
        from kgpu.sim.scheduler.plugins.dra_place import place

        for part in self.parts:
            left = [p for p in pods if p.key not in ctx.outcome]
            if part.name == "karpenter":
                for p in left:
                    explanations[p.key].append(KARPENTER_DRA)
            elif isinstance(part, ClusterAutoscaler):
                for key, note in part.provision_dra(left, ctx).items():
                    if note:
                        explanations[key].append(note)
        for pod in pods:
            if pod.key not in ctx.outcome and ctx.new_nodes:
                out = place(ctx.dra, ctx.scheduler, pod)
                if out.node is not None:
                    ctx.placed(pod, out.node)
                    ctx.dra_devices[pod.key] = out.devices
        return [p for p in pods if p.key not in ctx.outcome]

    def dra_documents(self, nodes: Sequence[Node], given: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
        """The DRA objects the profile adds to a simulation (kgpu.sim.provisioners.dra_pools.dra_documents)."""
        from kgpu.sim.provisioners.dra_pools import dra_documents

        return dra_documents(self.profile, self.catalog, nodes, given)


def provisioner_for(
    profile: Profile,
    catalog: Catalog | None = None,
    *,
    daemonsets: Sequence[DaemonSet] = (),
    overlays: Sequence[NodeOverlay] = (),
) -> ProfileProvisioner:
    """The provisioner of ``profile``'s pools; ``catalog`` defaults to the provider's (AWS for EKS).
    ``overlays``: Karpenter NodeOverlays from the input, applied with the profile's own."""
    if catalog is None:
        catalog = catalog_for(profile)
    warnings = validate(profile, catalog)
    prov = ProfileProvisioner(profile, catalog, daemonsets, overlays)
    prov.warnings = warnings + catalog_coverage(profile, catalog)
    return prov


def baseline_cost(profile: Profile, catalog: Catalog | None = None) -> float:
    """Hourly price of the node groups' baseline nodes (static pools: their ``hourlyPrice``)."""
    if catalog is None:
        catalog = catalog_for(profile)
    total = 0.0
    for pool in profile.pools:
        if pool.kind == PoolKind.STATIC:
            total += sum(n.hourly_price or 0.0 for n in pool.nodes)
        elif pool.kind == PoolKind.NODE_GROUP and catalog is not None:
            size = pool.desired_size if pool.desired_size is not None else pool.min_size
            groups = len(group_names(profile, pool)) if pool.per_zone else 1
            zones = pool_zones(profile, pool) or [""]
            price = group_node(profile, pool, pool.name, zones[0], "x", catalog)[2] or 0.0
            total += price * size * groups
    return round(total, 4)


def baseline_nodes(profile: Profile, catalog: Catalog | None = None) -> list[Node]:
    """Nodes a profile has before any pod arrives: static pools' nodes, and node groups at their desired
    (else minimum) size. ``kgpu plan`` adds them as the cluster when none is given."""
    if catalog is None:
        catalog = catalog_for(profile)
    nodes: list[Node] = []
    for pool in profile.pools:
        if pool.kind == PoolKind.STATIC:
            for n in pool.nodes:
                labels = {"kubernetes.io/hostname": n.name, **pool.labels, **n.labels}
                alloc: dict[str, int] = {"pods": 110}
                if n.cpu is not None:
                    alloc[CPU] = milli_value(
                        parse_quantity(n.cpu, where=f"pools[{pool.name}].nodes[{n.name}].cpu")
                    )
                if n.memory is not None:
                    alloc[MEMORY] = value(
                        parse_quantity(n.memory, where=f"pools[{pool.name}].nodes[{n.name}].memory")
                    )
                if n.gpus:
                    alloc[GPU] = n.gpus
                alloc.setdefault("ephemeral-storage", 100 * 1024**3)
                if n.instance_type and catalog is not None and (CPU not in alloc or MEMORY not in alloc):
                    for k, v in catalog.get(n.instance_type).allocatable().items():
                        alloc.setdefault(k, v)
                if n.gpus and pool.sharing is not None:  # what the plugin advertises, GFD's labels
                    alloc, labels = pool_node(pool, n.gpu_name or "", n.gpus, alloc, labels)
                nodes.append(Node(n.name, labels, alloc, node_taints(pool), source="<profile>"))
        elif pool.kind == PoolKind.NODE_GROUP and catalog is not None:
            size = pool.desired_size if pool.desired_size is not None else pool.min_size
            names = group_names(profile, pool)
            zones = pool_zones(profile, pool) or [""]
            for i in range(size):
                if pool.per_zone:
                    for gname, zone in zip(names, zones, strict=False):
                        nodes.append(
                            group_node(profile, pool, gname, zone, f"{gname}-base-{i + 1}", catalog)[0]
                        )
                else:
                    zone = zones[i % len(zones)]
                    nodes.append(
                        group_node(profile, pool, names[0], zone, f"{names[0]}-base-{i + 1}", catalog)[0]
                    )
    from kgpu.sim.provisioners.dra_pools import pool_of

    for node in nodes:  # a DRA pool's node advertises no nvidia.com/gpu: its driver publishes the GPUs
        owner = pool_of(profile, node)
        if owner is not None and owner.gpu_allocation == "dra" and GPU in node.allocatable:
            node.allocatable = {k: v for k, v in node.allocatable.items() if k != GPU}
    return nodes
