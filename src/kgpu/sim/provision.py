"""Capacity that grows: one provisioner per profile, dispatching each pool to the autoscaler that owns it.

A pod that kube-scheduler could not place goes, in order, to the profile's Karpenter NodePools
(``kgpu.sim.karpenter``), its cluster-autoscaler node groups (``kgpu.sim.autoscaler``) and its TKE super
nodes (``kgpu.sim.supernode``). Each of them adds real ``Node`` objects through ``Scheduler.add_node`` and
binds pods with the scheduler's own filters, so kube-scheduler's placement and messages stay one code path.
A pod none of them can take keeps kube-scheduler's message with every autoscaler's explanation appended.

This module only chooses and runs the provisioners; what they share is ``kgpu.sim.pools``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kgpu.catalog import Catalog
from kgpu.model.objects import CPU, MEMORY, DaemonSet, Node, Pod
from kgpu.model.profile import Autoscaler, PoolKind, Profile
from kgpu.model.quantity import milli_value, parse_quantity, value
from kgpu.sim.autoscaler import ClusterAutoscaler, group_node
from kgpu.sim.consolidation import empty_gpu_nodes
from kgpu.sim.cost import hourly_cost
from kgpu.sim.karpenter import Karpenter
from kgpu.sim.pools import (
    Context,
    PoolProvisioner,
    catalog_for,
    first_known_type,
    group_names,
    node_taints,
    pool_zones,
    profile_daemonsets,
    validate,
)
from kgpu.sim.scheduler import Scheduler
from kgpu.sim.sharing import pool_node
from kgpu.sim.supernode import SuperNodes

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
        self, profile: Profile, catalog: Catalog | None, daemonsets: Sequence[DaemonSet] = ()
    ) -> None:
        self.profile = profile
        self.catalog = catalog
        self.daemonsets: list[DaemonSet] = list(daemonsets)
        self.warnings: list[str] = []
        self.parts: list[PoolProvisioner] = []
        kinds = {p.kind for p in profile.pools}
        if PoolKind.KARPENTER in kinds and catalog is not None:
            self.parts.append(Karpenter(profile, catalog))
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
        ctx = Context(scheduler, self.profile, self.catalog, daemonsets)
        todo = [p for p in pending if p.owner_kind != "DaemonSet" and not p.spec.node_name]
        explanations: dict[str, list[str]] = {p.key: [] for p in todo}
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
            # what Karpenter launches is the result; where consolidation takes it is a second view
            steady = getattr(part, "consolidation", None)
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
        return out


def provisioner_for(
    profile: Profile, catalog: Catalog | None = None, *, daemonsets: Sequence[DaemonSet] = ()
) -> ProfileProvisioner:
    """The provisioner of ``profile``'s pools; ``catalog`` defaults to the provider's (AWS for EKS)."""
    if catalog is None:
        catalog = catalog_for(profile)
    warnings = validate(profile, catalog)
    prov = ProfileProvisioner(profile, catalog, daemonsets)
    prov.warnings = warnings
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
                    alloc["nvidia.com/gpu"] = n.gpus
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
    return nodes
