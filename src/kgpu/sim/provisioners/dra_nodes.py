"""What a node of a ``gpuAllocation: dra`` pool publishes when it joins the simulation.

A node of a DRA pool runs NVIDIA's DRA driver and no device plugin: it advertises no ``nvidia.com/gpu``
and publishes the ResourceSlice ``kgpu.catalog.dra.node_slices`` generates for its instance type's GPUs
(in MIG mode the layout of the pool's ``nvidia.com/mig.config`` label). Nodes the provisioners launch
publish theirs when they join (``kgpu.sim.provisioners.pools.Context.launch``), and cluster-autoscaler's
template of a group with nodes publishes its slices once; what the autoscalers do with a pod that claims
devices is :mod:`kgpu.sim.provisioners.dra_pools`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kgpu.catalog import InstanceType
from kgpu.catalog.dra import node_slices
from kgpu.model.nvidia import GPU, LABEL_MIG_CONFIG
from kgpu.model.objects import Node
from kgpu.model.profile import Pool

SOURCE = "<profile>"


def mig_layout_of(pool: Pool, itype: InstanceType) -> dict[str, int] | None:
    """MIG devices per GPU for a DRA pool whose nodes the MIG manager partitions (the pool's
    ``nvidia.com/mig.config`` label, a mig-parted config name), None otherwise."""
    config = pool.labels.get(LABEL_MIG_CONFIG)
    if not config:
        return None
    from kgpu.catalog.mig import mig_layout

    try:
        return mig_layout(config, itype.gpu_display_name or itype.gpu_name) or None
    except ValueError:  # no MIG on this GPU, or a config it cannot take: mig-parted fails, full GPUs stay
        return None


def slices_for(node_name: str, pool: Pool, itype: InstanceType) -> list[dict[str, Any]]:
    """The ResourceSlices NVIDIA's driver publishes on a node of ``itype`` in ``pool``."""
    if not itype.gpu_count or not itype.gpu_name:
        return []
    return node_slices(node_name, itype.gpu_name, itype.gpu_count, itype.gpu_memory_mib, mig=mig_layout_of(pool, itype))


def _read(docs: Iterable[dict[str, Any]]) -> list[Any]:
    from kgpu.model.dra import read

    return read([(d, SOURCE) for d in docs]).slices


def publish_node(ctx: Any, node: Node, pool: Pool, instance_type: str) -> None:
    """A DRA pool's node as it joins: nvidia.com/gpu not advertised; its slices published to the
    simulation's DRA state (``ctx``: kgpu.sim.provisioners.pools.Context)."""
    if GPU in node.allocatable:
        node.allocatable = {k: v for k, v in node.allocatable.items() if k != GPU}
    if ctx.dra is None or ctx.catalog is None:
        return
    ctx.dra.publish(_read(slices_for(node.name, pool, ctx.catalog.get(instance_type))))


def publish_template(dra: Any, name: str, pool: Pool, itype: InstanceType) -> None:
    """Slices for a scratch node name (cluster-autoscaler's template of a group with nodes), once."""
    if name not in dra._by_node:
        dra.publish(_read(slices_for(name, pool, itype)))
