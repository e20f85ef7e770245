"""The simulation's starting state from Kueue's objects: the cohort tree, each ClusterQueue's status, the
resource groups as the snapshot holds them (sigs.k8s.io/kueue v0.15.0 pkg/cache/scheduler/cache.go,
clusterqueue.go ``updateQueueStatus`` / ``inactiveReason`` / ``updateLabelKeys``, snapshot.go,
pkg/cache/hierarchy).

A Cohort exists when an object names it or a ClusterQueue or Cohort points to it (an implicit Cohort has
no quota of its own). A Cohort whose chain of parents loops (``hierarchy.HasCycle``) is left out of the
snapshot, and so are the ClusterQueues under it: Kueue keeps them active but answers their heads
"ClusterQueue x is inactive". A ClusterQueue is inactive (the cache's status) when it is stopped or names
a ResourceFlavor or AdmissionCheck that does not exist or is not active; its Active condition then reads
"Can't admit new workloads: references missing ResourceFlavor(s): a,b." as Kueue writes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kgpu.model.kueue import ClusterQueue, KueueObjects
from kgpu.sim.queue.flavors import Group
from kgpu.sim.queue.state import CQState, Queue
from kgpu.sim.queue.tree import Node, accumulate, quotas_of, set_heights


@dataclass(slots=True)
class Tree:
    cqs: dict[str, CQState]
    cohorts: dict[str, Node]
    nodes: list[Node]
    groups: dict[str, dict[str, Group]]  # ClusterQueue -> resource -> its group
    requeue_groups: dict[str, list[str]]  # ClusterQueue -> the ClusterQueues whose inadmissible it requeues
    cyclic: set[str] = field(default_factory=set)


def _status(cq: ClusterQueue, k: KueueObjects) -> tuple[bool, str, str]:
    """updateQueueStatus and inactiveReason: (active, reason, message) of the Active condition."""
    reasons, messages = [], []
    if cq.stop_policy != "None":
        reasons.append("Stopped")
        messages.append("is stopped")
    missing = [name for name in cq.flavor_names if name not in k.flavors]
    if missing:
        reasons.append("FlavorNotFound")
        messages.append(f"references missing ResourceFlavor(s): {','.join(missing)}")
    checks = sorted(set(cq.admission_checks))
    absent = [c for c in checks if c not in k.admission_checks]
    if absent:
        reasons.append("AdmissionCheckNotFound")
        messages.append(f"references missing AdmissionCheck(s): {','.join(absent)}")
    inactive = [c for c in checks if c in k.admission_checks and not k.admission_checks[c]]
    if inactive:
        reasons.append("AdmissionCheckInactive")
        messages.append(f"references inactive AdmissionCheck(s): {','.join(inactive)}")
    if not reasons:
        return True, "Ready", "Can admit new workloads"
    return False, reasons[0], f"Can't admit new workloads: {', '.join(messages)}."


def _groups(cq: ClusterQueue, k: KueueObjects) -> dict[str, Group]:
    out: dict[str, Group] = {}
    for rg in cq.resource_groups:
        keys = frozenset(
            key for f in rg.flavors if f.name in k.flavors for key in k.flavors[f.name].node_labels
        )
        group = Group(rg, frozenset(rg.covered), keys)
        for res in rg.covered:
            out[res] = group
    return out


def _has_cycle(name: str, parents: Mapping[str, str]) -> bool:
    seen: set[str] = set()
    while parents.get(name):
        if name in seen:
            return True
        seen.add(name)
        name = parents[name]
    return False


def build(k: KueueObjects) -> Tree:
    parents = {name: c.parent for name, c in k.cohorts.items()}
    names = (
        set(parents)
        | {p for p in parents.values() if p}
        | {cq.cohort for cq in k.cluster_queues.values() if cq.cohort}
    )
    for name in names:
        parents.setdefault(name, "")
    cyclic = {name for name in names if _has_cycle(name, parents)}
    cohorts = {name: Node(name, is_cq=False) for name in sorted(names) if name not in cyclic}
    members: dict[str, list[Node]] = {}
    for name, node in cohorts.items():
        cohort = k.cohorts.get(name)
        if cohort is not None:
            node.quotas = quotas_of(cohort.resource_groups)
        parent = parents[name]
        if parent:
            node.parent = cohorts[parent]
            cohorts[parent].child_cohorts.append(node)
            members.setdefault(parent, []).append(node)

    cqs: dict[str, CQState] = {}
    groups: dict[str, dict[str, Group]] = {}
    for name in sorted(k.cluster_queues):
        spec = k.cluster_queues[name]
        node = Node(name, is_cq=True)
        node.quotas = quotas_of(spec.resource_groups)
        node.subtree = {fr: q.nominal for fr, q in node.quotas.items()}
        active, reason, message = _status(spec, k)
        state = CQState(spec, node, Queue(), active, active, reason, message)
        if spec.cohort:
            if spec.cohort in cyclic:
                state.in_snapshot = False
            else:
                parent_node = cohorts[spec.cohort]
                node.parent = parent_node
                members.setdefault(spec.cohort, []).append(node)
                if active:
                    parent_node.child_cqs.append(node)
        cqs[name] = state
        groups[name] = _groups(spec, k)
    for node in cohorts.values():
        if node.parent is None:
            accumulate(node, members)
            set_heights(node)

    # QueueInadmissibleWorkloads over the root Cohort's subtree: one list per tree, shared by its queues.
    trees: dict[int, list[str]] = {}
    for name, state in cqs.items():
        if state.node.parent is not None:
            trees.setdefault(id(state.node.root()), []).append(name)
    requeue: dict[str, list[str]] = {}
    for name, state in cqs.items():
        if state.node.parent is not None:
            requeue[name] = trees[id(state.node.root())]
        else:
            requeue[name] = [] if state.spec.cohort in cyclic else [name]
    nodes = [*cohorts.values(), *(s.node for s in cqs.values())]
    return Tree(cqs, cohorts, nodes, groups, requeue, cyclic)
