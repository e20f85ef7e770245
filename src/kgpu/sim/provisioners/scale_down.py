"""Scale to zero: GPU nodes left empty, who removes them, and when.

A GPU node with no pod but DaemonSet pods is empty. Karpenter removes it when its NodePool's
``consolidationPolicy`` allows (both WhenEmpty and WhenEmptyOrUnderutilized remove empty nodes) after
``consolidateAfter`` (``Never`` keeps it). cluster-autoscaler removes it after ``--scale-down-unneeded-time``
(10m by default) unless the group is at its minSize. Static pools and nodes no pool owns stay.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kgpu.model.objects import GPU
from kgpu.model.profile import Pool, PoolKind, Profile
from kgpu.sim.provisioners.pools import (
    LABEL_EKS_GROUP,
    LABEL_EKSCTL_GROUP,
    LABEL_NODEPOOL,
    NewNode,
    group_names,
)
from kgpu.sim.scheduler.scheduler import Scheduler

SCALE_DOWN_UNNEEDED_TIME = "10m"


def _owner(profile: Profile, labels: Mapping[str, str], node: str) -> Pool | None:
    pool_name = labels.get(LABEL_NODEPOOL)
    group = labels.get(LABEL_EKSCTL_GROUP) or labels.get(LABEL_EKS_GROUP)
    for pool in profile.pools:
        if pool_name and pool.kind == PoolKind.KARPENTER and pool.name == pool_name:
            return pool
        if group and pool.kind == PoolKind.NODE_GROUP and group in group_names(profile, pool):
            return pool
        if pool.kind == PoolKind.STATIC and any(n.name == node for n in pool.nodes):
            return pool
    return None


def empty_gpu_nodes(
    profile: Profile, scheduler: Scheduler, new: Mapping[str, NewNode]
) -> list[dict[str, Any]]:
    """Every empty GPU node, with the pool and rule that removes it (or why it stays)."""
    out: list[dict[str, Any]] = []
    dra = bool(profile.dra_pools)  # their nodes advertise no nvidia.com/gpu: NVIDIA's DRA driver publishes them
    for st in scheduler.states:
        if st.node.allocatable.get(GPU, 0) <= 0:
            owner = _owner(profile, st.node.labels, st.name) if dra else None
            if owner is None or owner.gpu_allocation != "dra" or not owner.is_gpu:
                continue
        if any(p.owner_kind != "DaemonSet" for p in st.pods):
            continue
        pool = _owner(profile, st.node.labels, st.name)
        entry: dict[str, Any] = {"node": st.name, "new": st.name in new, "pool": pool.name if pool else None}
        made = new.get(st.name)
        if made is not None:
            entry["hourly_price"] = made.hourly_price
        if pool is None:
            entry.update(removed_by=None, after=None, why="no pool of the profile owns this node")
        elif pool.kind == PoolKind.KARPENTER:
            after = pool.consolidation.after
            if after == "Never":
                entry.update(removed_by=None, after=None, why=f"nodepool {pool.name}: consolidateAfter Never")
            else:
                entry.update(
                    removed_by="karpenter",
                    after=after,
                    why=f"nodepool {pool.name}: consolidationPolicy {pool.consolidation.policy}",
                )
        elif pool.kind == PoolKind.NODE_GROUP:
            group = st.node.labels.get(LABEL_EKSCTL_GROUP) or st.node.labels.get(LABEL_EKS_GROUP) or pool.name
            size = sum(
                1
                for s in scheduler.states
                if group in (s.node.labels.get(LABEL_EKSCTL_GROUP), s.node.labels.get(LABEL_EKS_GROUP))
            )
            if size <= pool.min_size:
                entry.update(
                    removed_by=None, after=None, why=f"node group {group} is at minSize {pool.min_size}"
                )
            else:
                entry.update(
                    removed_by="cluster-autoscaler",
                    after=SCALE_DOWN_UNNEEDED_TIME,
                    why=f"node group {group}: scale-down-unneeded-time",
                )
        else:
            entry.update(removed_by=None, after=None, why=f"pool {pool.name} ({pool.kind}) does not scale")
        out.append(entry)
    return out
