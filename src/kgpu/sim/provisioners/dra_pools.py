"""Profile pools with ``gpuAllocation: dra``: what each autoscaler does with a pod that claims devices, and
the DRA objects the profile's own nodes bring.

A node of a DRA pool runs NVIDIA's DRA driver and no device plugin; what it publishes when it joins is
:mod:`kgpu.sim.provisioners.dra_nodes`'s. The profile's baseline nodes (plan) and the chart's DeviceClasses
come with the simulation's DRA state from the start (``dra_documents``), unless the input has its own.

The autoscalers (the versions ``make conformance`` pins):

- Karpenter v1.8 rejects a pod with resource claims before any scheduling simulation while its
  ``--ignore-dra-requests`` option (``IGNORE_DRA_REQUESTS``) is on, which it is by default
  (``pkg/controllers/provisioning/scheduling/scheduler.go``: ``NewDRAError``; the event reads
  ``Failed to schedule pod, <error>``). It launches nothing for the pod; the pod can still land on a node
  launched for other pods, once that node's driver publishes its slices.
- cluster-autoscaler (with ``--enable-dynamic-resource-allocation``, which ``kgpu render`` sets for DRA node
  groups) simulates the claim on the group's template node. A group with a node copies that node's
  ResourceSlices into the template (devices free); an empty group's template comes from its cloud
  provider, and the AWS provider's carries no slices (the gap kubernetes/autoscaler#10277 describes for
  externalgrpc, #7724 for Cluster API): the claim cannot be allocated there and the group never scales
  from zero for the pod.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kgpu.catalog import Catalog, InstanceType
from kgpu.catalog.dra import device_classes
from kgpu.errors import InputError
from kgpu.model.objects import Node, Pod
from kgpu.model.profile import Pool, PoolKind, Profile
from kgpu.sim.provisioners.dra_nodes import SOURCE, slices_for

# karpenter v1.8.0 pkg/controllers/provisioning/scheduling/scheduler.go (Scheduler.add) and events.go
KARPENTER_DRA_ERROR = "pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter"
KARPENTER_DRA = (
    f"karpenter: Failed to schedule pod, {KARPENTER_DRA_ERROR} (its --ignore-dra-requests option, on by default, "
    "skips pods with resource claims: it launches no node for them)"
)


def pool_of(profile: Profile, node: Node) -> Pool | None:
    """The profile pool a node belongs to, by the label its provisioner sets (or its name, static)."""
    from kgpu.sim.provisioners.pools import LABEL_EKS_GROUP, LABEL_EKSCTL_GROUP, LABEL_NODEPOOL, group_names

    for pool in profile.pools:
        if pool.kind == PoolKind.KARPENTER and node.labels.get(LABEL_NODEPOOL) == pool.name:
            return pool
        if pool.kind == PoolKind.NODE_GROUP:
            names = group_names(profile, pool)
            if node.labels.get(LABEL_EKSCTL_GROUP) in names or node.labels.get(LABEL_EKS_GROUP) in names:
                return pool
        if pool.kind == PoolKind.STATIC and any(n.name == node.name for n in pool.nodes):
            return pool
    return None


def dra_documents(profile: Profile, catalog: Catalog | None, nodes: Sequence[Node],
                  given: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    """What a profile with DRA pools adds to the simulation's DRA objects: the chart's DeviceClasses (those
    the input lacks) and the slices of the profile's own nodes of DRA pools (plan's baseline nodes; a
    snapshot's nodes publish their own)."""
    if not profile.dra_pools:
        return []
    have = {(d.get("metadata") or {}).get("name") for d in given if d.get("kind") == "DeviceClass"}
    out: list[tuple[dict[str, Any], str]] = [(dc, SOURCE) for dc in device_classes() if dc["metadata"]["name"] not in have]
    published = {(d.get("spec") or {}).get("nodeName") for d in given if d.get("kind") == "ResourceSlice"}
    for node in nodes:
        if node.source != SOURCE or node.name in published:
            continue
        pool = pool_of(profile, node)
        if pool is None or pool.gpu_allocation != "dra":
            continue
        itype = _itype(profile, pool, node, catalog)
        if itype is not None:
            out += [(s, SOURCE) for s in slices_for(node.name, pool, itype)]
    return out


def _itype(profile: Profile, pool: Pool, node: Node, catalog: Catalog | None) -> InstanceType | None:
    name = node.labels.get("node.kubernetes.io/instance-type", "")
    if pool.kind == PoolKind.STATIC:
        static = next((n for n in pool.nodes if n.name == node.name), None)
        name = (static.instance_type if static else "") or name
        if not name and static is not None and static.gpus and static.gpu_name:
            from kgpu.catalog.dra import gpu_facts

            facts = gpu_facts(static.gpu_name, 0)  # a static node names its GPU, not a type
            if facts is None:
                return None
            return InstanceType(node.name, "", "", 0, "", "amd64", 0, 0, gpu_name=static.gpu_name.lower(),
                                gpu_count=static.gpus, gpu_memory_mib=int(facts["memory_mib"]),
                                gpu_display_name=static.gpu_name)
    if not name or catalog is None:
        return None
    try:
        return catalog.get(name)
    except InputError:  # a type the catalog lacks publishes nothing kgpu can describe
        return None


def claims_pod(pod: Pod) -> bool:
    return bool(pod.spec.claim_refs)
