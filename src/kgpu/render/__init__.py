"""Profile -> manifests, one pure module per target.

Every renderer takes a :class:`kgpu.model.profile.Profile` and returns a list of plain dicts (we only
render these objects, we do not reason about them), built in a fixed key order so that output is
byte-for-byte deterministic. :mod:`kgpu.render.stack` puts the targets together, sorts documents into
apply order and dumps them as YAML; :mod:`kgpu.render.consistency` checks that the pieces agree and
:mod:`kgpu.render.validate` checks them against the upstream schemas.

The helpers below are the single place where a pool's taints, labels and node selector are turned into
Kubernetes fields, which is what keeps the NodePool, the device plugin and every workload in step: change a
taint in the profile and all three change together.
"""

from __future__ import annotations

from typing import Any

from kgpu.model.nvidia import GPU
from kgpu.model.profile import Pool, PoolKind, Profile
from kgpu.model.profile_nodes import AmiFamily

# Label kgpu puts on pools whose AMI ships the NVIDIA device plugin built in (Bottlerocket NVIDIA), so the
# DaemonSet's node affinity can keep away from them: two plugins on one node fight over the kubelet socket.
DEVICE_PLUGIN_LABEL = "kgpu.dev/device-plugin"
DEVICE_PLUGIN_BUILTIN = "builtin"
POOL_ANNOTATION = "kgpu.dev/pool"
MANAGED_BY = {"app.kubernetes.io/managed-by": "kgpu"}
GPU_RESOURCE = GPU

# Labels that the node's provisioner sets on every node of a pool (Karpenter: karpenter.sh/nodepool;
# eksctl: alpha.eksctl.io/nodegroup-name for unmanaged groups, eks.amazonaws.com/nodegroup for managed).
KARPENTER_POOL_LABEL = "karpenter.sh/nodepool"
EKSCTL_GROUP_LABEL = "alpha.eksctl.io/nodegroup-name"
EKS_MANAGED_GROUP_LABEL = "eks.amazonaws.com/nodegroup"


def uses_device_plugin_daemonset(pool: Pool) -> bool:
    """Whether the pool's GPU nodes need kgpu's device-plugin DaemonSet.

    ``auto`` means yes for GPU pools, except Bottlerocket NVIDIA (plugin built in) and TKE super nodes
    (virtual nodes that expose nvidia.com/gpu themselves and run no DaemonSets).
    """
    if not pool.is_gpu or pool.kind == PoolKind.TKE_SUPERNODE:
        return False
    if pool.device_plugin == "none" or pool.gpu_allocation == "dra":  # the DRA driver publishes them
        return False
    if pool.device_plugin == "daemonset":
        return True
    return not pool.device_plugin_builtin


def node_labels(pool: Pool) -> dict[str, str]:
    """The labels kgpu asks the pool's provisioner to put on its nodes (sorted)."""
    labels = dict(pool.labels)
    if pool.ami_family == AmiFamily.BOTTLEROCKET_NVIDIA and pool.device_plugin != "daemonset":
        labels[DEVICE_PLUGIN_LABEL] = DEVICE_PLUGIN_BUILTIN
    return dict(sorted(labels.items()))


def group_names(profile: Profile, pool: Pool) -> list[str]:
    """The eksctl node group names of a pool: one per zone (``<pool>-<zone suffix>``) when perZone."""
    if pool.kind != PoolKind.NODE_GROUP or not pool.per_zone:
        return [pool.name]
    return [f"{pool.name}-{zone_suffix(z)}" for z in pool_zones(profile, pool)]


def pool_zones(profile: Profile, pool: Pool) -> list[str]:
    return list(pool.zones or profile.cluster.zones)


def zone_suffix(zone: str) -> str:
    """``us-west-2a`` -> ``a``; ``ap-guangzhou-3`` -> ``3``: what tells zones of one region apart."""
    region_like = zone.rstrip("abcdefghijklmnopqrstuvwxyz")
    tail = zone[len(region_like) :]
    return tail or zone.rsplit("-", 1)[-1]


def pool_selector(pool: Pool) -> dict[str, str]:
    """The nodeSelector that targets the pool's nodes: its own labels, else the provisioner's pool label."""
    if pool.labels:
        return dict(sorted(pool.labels.items()))
    if pool.kind == PoolKind.KARPENTER:
        return {KARPENTER_POOL_LABEL: pool.name}
    if pool.kind == PoolKind.NODE_GROUP and not pool.per_zone:
        return {EKS_MANAGED_GROUP_LABEL if pool.managed else EKSCTL_GROUP_LABEL: pool.name}
    return {}


def tolerations(pool: Pool) -> list[dict[str, str]]:
    """Tolerations for every taint of the pool, narrowest form (Equal on key/value/effect)."""
    return [t.toleration() for t in pool.taints]


def taints(pool: Pool) -> list[dict[str, str]]:
    return [t.as_k8s() for t in pool.taints]


def metadata(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    for key, value in extra.items():
        if value:
            meta[key] = value
    return meta


def gpu_pools_needing_plugin(profile: Profile) -> list[Pool]:
    return [p for p in profile.pools if uses_device_plugin_daemonset(p)]
