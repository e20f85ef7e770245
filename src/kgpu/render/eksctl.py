"""eksctl ClusterConfig (eksctl.io/v1alpha5) for nodegroup pools, and cluster-autoscaler Helm values.

Decisions:

- Taints are always a list of ``{key, value, effect}``: the map form (``key: "value:Effect"``) is legacy,
  unmanaged-only, and fails eksctl's own JSON schema.
- A ``perZone`` pool becomes one node group per zone, ``<pool>-<zone suffix>``: cluster-autoscaler then
  scales each zone on its own and AZ rebalancing never terminates a GPU node to even out zones.
- Scale-from-zero needs the ASG to say what a node would look like: ``k8s.io/cluster-autoscaler/
  node-template/label/<key>: <value>`` and ``.../taint/<key>: <value>:<effect>``. With
  ``propagateAsgTags`` eksctl writes them from labels and taints; otherwise kgpu writes them. Managed node
  groups only reach the ASG through propagation, so they always get ``propagateASGTags: true``.
- Every unmanaged group under cluster-autoscaler carries the ``node-template/label/alpha.eksctl.io/
  nodegroup-name: <group>`` tag: eksctl puts that label on its nodes, and pods may select a group by it
  (propagation derives tags from the declared labels only, so kgpu writes this one itself).
- Spot: unmanaged groups use a mixed-instances policy (``price-capacity-optimized``), managed groups
  ``spot: true``. A pool listing both spot and on-demand keeps its minimum on-demand and the rest spot.
"""

from __future__ import annotations

from typing import Any

from kgpu.model.profile import Autoscaler, Pool, PoolKind, Profile
from kgpu.model.profile_nodes import AmiFamily, CapacityType
from kgpu.render import (
    EKSCTL_GROUP_LABEL,
    group_names,
    node_labels,
    pool_selector,
    pool_zones,
    storage,
    taints,
)

API = "eksctl.io/v1alpha5"
CA_PREFIX = "k8s.io/cluster-autoscaler"
LABEL_TAG = f"{CA_PREFIX}/node-template/label/"
TAINT_TAG = f"{CA_PREFIX}/node-template/taint/"
CA_EXPANDER = "least-waste"

_AMI_FAMILY = {
    AmiFamily.AL2023: "AmazonLinux2023",
    AmiFamily.AL2: "AmazonLinux2",
    AmiFamily.BOTTLEROCKET: "Bottlerocket",
    AmiFamily.BOTTLEROCKET_NVIDIA: "Bottlerocket",  # eksctl picks the NVIDIA variant for GPU types
    AmiFamily.UBUNTU: "Ubuntu2404",
}


def autodiscovery_tags(profile: Profile) -> dict[str, str]:
    return {f"{CA_PREFIX}/enabled": "true", f"{CA_PREFIX}/{profile.cluster.name}": "owned"}


def node_template_tags(labels: dict[str, str], taint_list: list[dict[str, str]]) -> dict[str, str]:
    """The cluster-autoscaler node-template tags describing nodes with these labels and taints."""
    tags = {f"{LABEL_TAG}{k}": v for k, v in sorted(labels.items())}
    for t in taint_list:
        tags[f"{TAINT_TAG}{t['key']}"] = f"{t.get('value', '')}:{t['effect']}"
    return tags


def effective_asg_tags(group: dict[str, Any]) -> dict[str, str]:
    """The tags the group's ASG ends up with: its own plus what propagateASGTags derives."""
    tags = dict(group.get("tags") or {})
    if group.get("propagateASGTags"):
        derived = node_template_tags(dict(group.get("labels") or {}), list(group.get("taints") or []))
        tags = {**derived, **tags}
    return tags


def _propagates(pool: Pool) -> bool:
    return pool.propagate_asg_tags or pool.managed


def _tags(profile: Profile, pool: Pool) -> dict[str, str]:
    tags: dict[str, str] = {}
    if profile.autoscaler == Autoscaler.CLUSTER_AUTOSCALER:
        tags.update(autodiscovery_tags(profile))
        if not _propagates(pool):
            # the selector adds the eksctl group-name label when workloads can only select the group by it
            labels = {**pool_selector(pool), **node_labels(pool)}
            tags.update(node_template_tags(labels, taints(pool)))
    if profile.autoscaler == Autoscaler.CLUSTER_AUTOSCALER and pool.sharing is not None:
        tags.update(_shared_resource_tags(profile, pool))
    tags.update(pool.asg_tags)
    return dict(sorted(tags.items()))


def _shared_resource_tags(profile: Profile, pool: Pool) -> dict[str, str]:
    """``node-template/resources/<name>`` tags: what a shared group's nodes advertise, for scale from zero
    (cluster-autoscaler otherwise counts the type's physical GPUs)."""
    from kgpu.sim.provisioners.pools import catalog_for, first_known_type
    from kgpu.sim.sharing import resource_tags

    catalog = catalog_for(profile)
    if catalog is None:
        return {}
    return resource_tags(pool, catalog.get(first_known_type(catalog, pool)))


# What eksctl attaches to a node role by default; listing attachPolicyARNs replaces them, so they come first.
DEFAULT_NODE_POLICIES = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
)


def _iam(profile: Profile, pool: Pool) -> dict[str, Any]:
    """withAddonPolicies from the pool (autoScaler under cluster-autoscaler), and the pool's extra managed
    policies after eksctl's defaults (eksctl attaches only the listed ARNs once attachPolicyARNs is set)."""
    names = set(pool.iam_addon_policies)
    if profile.autoscaler == Autoscaler.CLUSTER_AUTOSCALER:
        names.add("autoScaler")
    iam: dict[str, Any] = {}
    if pool.iam_policy_arns:
        extra = [a for a in pool.iam_policy_arns if a not in DEFAULT_NODE_POLICIES]
        iam["attachPolicyARNs"] = [*DEFAULT_NODE_POLICIES, *extra]
    if names:
        iam["withAddonPolicies"] = {n: True for n in sorted(names)}
    return iam


def _group(profile: Profile, pool: Pool, name: str, zones: list[str]) -> dict[str, Any]:
    group: dict[str, Any] = {"name": name}
    family = _AMI_FAMILY.get(AmiFamily(pool.ami_family))
    if family:
        group["amiFamily"] = family
    spot = CapacityType.SPOT in pool.capacity_types
    on_demand = CapacityType.ON_DEMAND in pool.capacity_types
    if pool.managed:
        group["instanceTypes"] = list(pool.instance_types)
        if spot and not on_demand:
            group["spot"] = True
    elif len(pool.instance_types) == 1 and not spot:
        group["instanceType"] = pool.instance_types[0]
    else:
        dist: dict[str, Any] = {"instanceTypes": list(pool.instance_types)}
        if spot:
            dist["onDemandBaseCapacity"] = pool.min_size if on_demand else 0
            dist["onDemandPercentageAboveBaseCapacity"] = 0
            dist["spotAllocationStrategy"] = "price-capacity-optimized"
        else:
            dist["onDemandBaseCapacity"] = 0
            dist["onDemandPercentageAboveBaseCapacity"] = 100
        group["instancesDistribution"] = dist
    max_size = pool.max_size if pool.max_size is not None else max(pool.min_size, pool.desired_size or 0, 1)
    group["minSize"] = pool.min_size
    group["maxSize"] = max_size
    group["desiredCapacity"] = pool.desired_size if pool.desired_size is not None else pool.min_size
    if zones:
        group["availabilityZones"] = list(zones)
    group["volumeSize"] = pool.volume_size_gib
    group["volumeType"] = "gp3"
    group["volumeEncrypted"] = True
    group["privateNetworking"] = True
    labels = node_labels(pool)
    if labels:
        group["labels"] = labels
    if pool.taints:
        group["taints"] = taints(pool)
    if _propagates(pool):
        group["propagateASGTags"] = True
    tags = _tags(profile, pool)
    if profile.autoscaler == Autoscaler.CLUSTER_AUTOSCALER and not pool.managed:
        # eksctl labels every node of an unmanaged group alpha.eksctl.io/nodegroup-name=<group>; the tag lets
        # cluster-autoscaler see that label from zero, so pods may select a group by it (asgTags still win)
        tags = dict(sorted({f"{LABEL_TAG}{EKSCTL_GROUP_LABEL}": name, **tags}.items()))
    if tags:
        group["tags"] = tags
    iam = _iam(profile, pool)
    if iam:
        group["iam"] = iam
    return group


def groups(profile: Profile, pool: Pool) -> list[dict[str, Any]]:
    if pool.per_zone:
        zones = pool_zones(profile, pool)
        return [_group(profile, pool, n, [z]) for n, z in zip(group_names(profile, pool), zones, strict=True)]
    return [_group(profile, pool, pool.name, list(pool.zones))]


def render(profile: Profile) -> list[dict[str, Any]]:
    pools = [p for p in profile.pools if p.kind == PoolKind.NODE_GROUP]
    if not pools:
        return []
    meta: dict[str, Any] = {
        "name": profile.cluster.name,
        "region": profile.cluster.region,
        "version": profile.cluster.kubernetes_version,
        "tags": {"kgpu.dev/profile": profile.metadata.name},
    }
    config: dict[str, Any] = {"apiVersion": API, "kind": "ClusterConfig", "metadata": meta}
    if profile.cluster.zones:
        config["availabilityZones"] = list(profile.cluster.zones)
    config["iam"] = {"withOIDC": True}
    unmanaged = [g for p in pools if not p.managed for g in groups(profile, p)]
    managed = [g for p in pools if p.managed for g in groups(profile, p)]
    if unmanaged:
        config["nodeGroups"] = unmanaged
    if managed:
        config["managedNodeGroups"] = managed
    addons = storage.eksctl_addons(profile)  # the CSI drivers of the profile's persistent volumes
    if addons:
        config["addons"] = addons
    return [config]


def render_autoscaler_values(profile: Profile) -> list[dict[str, Any]]:
    """Values for the kubernetes/autoscaler ``cluster-autoscaler`` Helm chart (auto-discovery on AWS).

    ``balance-similar-node-groups`` keeps per-zone GPU groups the same size; cluster-autoscaler already
    ignores the eksctl/EKS node group name labels when comparing groups. ``skip-nodes-with-system-pods:
    false`` lets it remove a GPU node whose only pods are DaemonSet/kube-system ones.
    """
    if profile.autoscaler != Autoscaler.CLUSTER_AUTOSCALER or not any(
        p.kind == PoolKind.NODE_GROUP for p in profile.pools
    ):
        return []
    extra: dict[str, Any] = {}
    if any(p.kind == PoolKind.NODE_GROUP for p in profile.dra_pools):
        # DRA pools: cluster-autoscaler simulates claims only with this flag (off by default)
        extra["enable-dynamic-resource-allocation"] = True
    return [
        {
            "cloudProvider": "aws",
            "awsRegion": profile.cluster.region,
            "autoDiscovery": {"clusterName": profile.cluster.name},
            "extraArgs": {
                "expander": CA_EXPANDER,
                "balance-similar-node-groups": True,
                "skip-nodes-with-system-pods": False,
                "skip-nodes-with-local-storage": False,
                "scale-down-enabled": True,
                "scale-down-unneeded-time": "10m",
                "scale-down-delay-after-add": "10m",
                **extra,
            },
            "rbac": {"serviceAccount": {"create": True, "name": "cluster-autoscaler"}},
        }
    ]
