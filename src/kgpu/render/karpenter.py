"""Karpenter v1: one NodePool (karpenter.sh/v1) + one EC2NodeClass (karpenter.k8s.aws/v1) per karpenter pool.

Decisions:

- Ranges become ``Gt``/``Lt`` on Karpenter's well-known integer labels (``instance-generation`` min 5 ->
  ``Gt 4``); ``instance-gpu-memory`` is in MiB, the profile speaks GiB per GPU. Karpenter's CRD requires
  ``Gt``/``Lt`` values to be non-negative integers, so a minimum of 0 emits nothing.
- AL2023 GPU pools use the plain ``al2023@latest`` alias: Karpenter picks the accelerated (NVIDIA) variant
  per instance type. Bottlerocket NVIDIA uses ``bottlerocket@latest`` likewise. Ubuntu and Custom have no
  alias in v1, so they select AMIs by the cluster's discovery tag with ``amiFamily: Custom``.
- Bottlerocket has a small OS volume (/dev/xvda) and a data volume (/dev/xvdb) that holds images; the
  pool's volume size goes to the data volume.
- Subnets and security groups are found by the ``karpenter.sh/discovery: <cluster>`` tag, the node role is
  ``KarpenterNodeRole-<cluster>`` (the names of Karpenter's getting-started CloudFormation).
- A pool's own ``amiSelectorTerms`` (an alias, an AMI id, a name pattern such as the Deep Learning AMI's with
  its owner, or tags), ``role`` or ``instanceProfile``, subnet and security-group selector terms and
  ``userData`` replace those defaults for existing clusters. Terms without an alias need ``amiFamily`` in the
  EC2NodeClass: the pool's family (Ubuntu, which Karpenter v1 dropped, becomes Custom); a Custom family
  without userData is a profile error, because Karpenter then writes no bootstrap at all.
"""

from __future__ import annotations

from typing import Any

from kgpu.model.profile import Pool, PoolKind, Profile
from kgpu.model.profile_nodes import AmiFamily
from kgpu.render import MANAGED_BY, node_labels, taints

NODEPOOL_API = "karpenter.sh/v1"
NODECLASS_API = "karpenter.k8s.aws/v1"
DISCOVERY_TAG = "karpenter.sh/discovery"
DEFAULT_BUDGETS = [{"nodes": "10%"}]

_ALIAS = {
    AmiFamily.AL2023: "al2023@latest",
    AmiFamily.AL2: "al2@latest",
    AmiFamily.BOTTLEROCKET: "bottlerocket@latest",
    AmiFamily.BOTTLEROCKET_NVIDIA: "bottlerocket@latest",
}


def render(profile: Profile) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for pool in profile.pools:
        if pool.kind != PoolKind.KARPENTER:
            continue
        docs.append(nodeclass(profile, pool))
        docs.append(nodepool(profile, pool))
        docs.extend(nodeoverlays(profile, pool))
    return docs


OVERLAY_API = "karpenter.sh/v1alpha1"


def nodeoverlays(profile: Profile, pool: Pool) -> list[dict[str, Any]]:
    """NodeOverlays (karpenter.sh/v1alpha1) for a shared pool: per group of its instance types, the capacity
    the device plugin will advertise, merged over the type's when Karpenter simulates (feature gate
    ``NodeOverlay``, which the chart values turn on); without one Karpenter counts physical GPUs."""
    if pool.sharing is None or not pool.sharing.node_overlay:
        return []
    from kgpu.sim.provisioners.pools import catalog_for
    from kgpu.sim.sharing import overlay_groups

    groups = overlay_groups(pool, catalog_for(profile))
    out = []
    for i, (capacity, types) in enumerate(groups):
        name = f"{pool.name}-gpu-sharing" + (f"-{i + 1}" if len(groups) > 1 else "")
        out.append(
            {
                "apiVersion": OVERLAY_API,
                "kind": "NodeOverlay",
                "metadata": {"name": name, "labels": dict(MANAGED_BY)},
                "spec": {
                    "requirements": [
                        {"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool.name]},
                        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types},
                    ],
                    "capacity": {k: str(v) for k, v in sorted(capacity.items())},
                },
            }
        )
    return out


def overlay_feature_gate(profile: Profile) -> bool:
    """Whether a pool renders NodeOverlays: the Karpenter chart then needs ``settings.featureGates.nodeOverlay``."""
    return any(p.kind == PoolKind.KARPENTER and p.sharing is not None and p.sharing.node_overlay for p in profile.pools)


def requirements(profile: Profile, pool: Pool) -> list[dict[str, Any]]:
    """The NodePool's requirements: shorthand and native, as ``Pool.karpenter_requirements`` builds them."""
    return pool.karpenter_requirements()


def nodepool(profile: Profile, pool: Pool) -> dict[str, Any]:
    template_meta: dict[str, Any] = {}
    labels = node_labels(pool)
    if labels:
        template_meta["labels"] = labels
    template_spec: dict[str, Any] = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": pool.node_class},
        "requirements": requirements(profile, pool),
    }
    if pool.taints:
        template_spec["taints"] = taints(pool)
    template: dict[str, Any] = {}
    if template_meta:
        template["metadata"] = template_meta
    template["spec"] = template_spec
    spec: dict[str, Any] = {
        "template": template,
        "disruption": {
            "consolidationPolicy": pool.consolidation.policy,
            "consolidateAfter": pool.consolidation.after,
            "budgets": [dict(b) for b in DEFAULT_BUDGETS],
        },
    }
    if pool.limits:
        spec["limits"] = {k: str(v) for k, v in sorted(pool.limits.items())}
    if pool.weight is not None:
        spec["weight"] = pool.weight
    return {
        "apiVersion": NODEPOOL_API,
        "kind": "NodePool",
        "metadata": {"name": pool.name, "labels": dict(MANAGED_BY)},
        "spec": spec,
    }


def _block_devices(pool: Pool) -> list[dict[str, Any]]:
    def ebs(size: int) -> dict[str, Any]:
        return {
            "volumeSize": f"{size}Gi",
            "volumeType": "gp3",
            "encrypted": True,
            "deleteOnTermination": True,
        }

    if pool.ami_family in (AmiFamily.BOTTLEROCKET, AmiFamily.BOTTLEROCKET_NVIDIA):
        return [
            {"deviceName": "/dev/xvda", "ebs": ebs(4)},
            {"deviceName": "/dev/xvdb", "ebs": ebs(pool.volume_size_gib)},
        ]
    return [{"deviceName": "/dev/xvda", "rootVolume": True, "ebs": ebs(pool.volume_size_gib)}]


_NODECLASS_FAMILY = {
    AmiFamily.AL2023: "AL2023",
    AmiFamily.AL2: "AL2",
    AmiFamily.BOTTLEROCKET: "Bottlerocket",
    AmiFamily.BOTTLEROCKET_NVIDIA: "Bottlerocket",
}


def _terms(terms: list[Any]) -> list[dict[str, Any]]:
    return [t.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True) for t in terms]


def nodeclass(profile: Profile, pool: Pool) -> dict[str, Any]:
    cluster = profile.cluster.name
    discovery = [{"tags": {DISCOVERY_TAG: cluster}}]
    family = AmiFamily(pool.ami_family)
    alias = _ALIAS.get(family)
    spec: dict[str, Any] = {}
    if pool.ami_selector_terms:
        terms = _terms(pool.ami_selector_terms)
        if not any("alias" in t for t in terms):
            spec["amiFamily"] = _NODECLASS_FAMILY.get(family, "Custom")
        spec["amiSelectorTerms"] = terms
    elif alias is None:
        spec["amiFamily"] = "Custom"
        spec["amiSelectorTerms"] = [{"tags": {DISCOVERY_TAG: cluster}}]
    else:
        spec["amiSelectorTerms"] = [{"alias": alias}]
    if pool.instance_profile:
        spec["instanceProfile"] = pool.instance_profile
    else:
        spec["role"] = pool.role or f"KarpenterNodeRole-{cluster}"
    spec["subnetSelectorTerms"] = _terms(pool.subnet_selector_terms) or [dict(t) for t in discovery]
    spec["securityGroupSelectorTerms"] = _terms(pool.security_group_selector_terms) or [
        dict(t) for t in discovery
    ]
    if pool.user_data:
        spec["userData"] = pool.user_data
    spec["blockDeviceMappings"] = _block_devices(pool)
    spec["metadataOptions"] = {"httpTokens": "required", "httpPutResponseHopLimit": 1}
    spec["tags"] = {"kgpu.dev/pool": pool.name}
    return {
        "apiVersion": NODECLASS_API,
        "kind": "EC2NodeClass",
        "metadata": {"name": pool.node_class, "labels": dict(MANAGED_BY)},
        "spec": spec,
    }
