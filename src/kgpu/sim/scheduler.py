"""kube-scheduler's placement loop over a snapshot, fast enough for thousands of nodes.

For each pod, in queue order (priority, then input order), the scheduler filters every node with the
default filters (see ``kgpu.model.predicates``), scores the feasible ones with NodeResourcesFit's
LeastAllocated plus NodeResourcesBalancedAllocation (weight 1 each), and binds the pod to the best, ties
broken by node name (kube-scheduler picks among ties at random; a simulator must be reproducible).

What makes it fast is that identical pods form a *class* (same ``PodSpecInfo``):

- the node-only filters (unschedulable, nodeName, taints, affinity) run once per class and node, memoised
  on the parts of the node each filter reads;
- each class keeps a max-heap of its feasible nodes by score. When a pod lands on a node, the node's
  version moves on and a fresh entry is pushed into the heap of every class that can use the node; stale
  entries are dropped when they surface. A node that no longer fits a class is dropped from its heap for
  good, because during a simulation free resources only shrink;
- the "0/N nodes are available" message is kept per class and updated only for nodes that changed.

Not modelled (documented in docs/simulate.md): preemption, inter-pod affinity, topology spread, volume
filters, and the scheduler's sampling of a percentage of nodes in large clusters.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kgpu.model.objects import CPU, MEMORY, HostPort, Node, Pod, PodSpecInfo, Taint
from kgpu.model.predicates import (
    ERR_NODE_AFFINITY,
    ERR_NODE_NAME,
    ERR_NODE_PORTS,
    ERR_TAINTS,
    ERR_UNSCHEDULABLE,
    TAINT_NODE_UNSCHEDULABLE,
    affinity_matches,
    first_untolerated,
    insufficient_resources,
    ports_conflict,
    tolerated,
    unschedulable_message,
)

MAX_NODE_SCORE = 100
NO_NODES = "no nodes available to schedule pods"


@dataclass(slots=True)
class NodeState:
    """A node and what the simulation has put on it so far."""

    node: Node
    index: int
    requested: dict[str, int] = field(default_factory=dict)
    nonzero_cpu: int = 0
    nonzero_memory: int = 0
    pod_count: int = 0
    ports: list[HostPort] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    version: int = 0
    alloc_cpu: int = 0
    alloc_memory: int = 0
    alloc_pods: int = 0

    def __post_init__(self) -> None:
        a = self.node.allocatable
        self.alloc_cpu, self.alloc_memory, self.alloc_pods = a.get(CPU, 0), a.get(MEMORY, 0), a.get("pods", 0)

    @property
    def name(self) -> str:
        return self.node.name

    def add(self, pod: Pod) -> None:
        spec = pod.spec
        req = self.requested
        for k, v in spec.requests:
            req[k] = req.get(k, 0) + v
        self.nonzero_cpu += spec.nonzero_cpu
        self.nonzero_memory += spec.nonzero_memory
        self.pod_count += 1
        if spec.host_ports:
            self.ports.extend(spec.host_ports)
        self.pods.append(pod)
        self.version += 1

    def free(self, resource: str) -> int:
        return self.node.allocatable.get(resource, 0) - self.requested.get(resource, 0)


def fits(spec: PodSpecInfo, st: NodeState) -> bool:
    """The dynamic filters (NodePorts, NodeResourcesFit) as a yes/no, on the hot path."""
    if st.pod_count >= st.alloc_pods:
        return False
    alloc, req = st.node.allocatable, st.requested
    for k, v in spec.requests:
        if v > alloc.get(k, 0) - req.get(k, 0):
            return False
    return not (spec.host_ports and ports_conflict(spec.host_ports, st.ports))


def dynamic_reasons(spec: PodSpecInfo, st: NodeState) -> tuple[str, ...]:
    if spec.host_ports and ports_conflict(spec.host_ports, st.ports):
        return (ERR_NODE_PORTS,)
    return tuple(insufficient_resources(spec, st.node.allocatable, st.requested, st.pod_count))


def score(spec: PodSpecInfo, st: NodeState) -> int:
    """LeastAllocated (non-zero requests) + BalancedAllocation (actual requests), cpu and memory."""
    total = 0
    least = n = 0
    ac, am = st.alloc_cpu, st.alloc_memory
    if ac:
        r = st.nonzero_cpu + spec.nonzero_cpu
        least += (ac - r) * MAX_NODE_SCORE // ac if r <= ac else 0
        n += 1
    if am:
        r = st.nonzero_memory + spec.nonzero_memory
        least += (am - r) * MAX_NODE_SCORE // am if r <= am else 0
        n += 1
    if n:
        total += least // n
    if not spec.request(CPU) and not spec.request(MEMORY):
        # BalancedAllocation skips pods that request neither (PreScore returns Skip; kubernetes#129138).
        return total
    fractions = []
    if ac:
        fractions.append(min(1.0, float(st.requested.get(CPU, 0) + spec.request(CPU)) / float(ac)))
    if am:
        fractions.append(min(1.0, float(st.requested.get(MEMORY, 0) + spec.request(MEMORY)) / float(am)))
    std = abs((fractions[0] - fractions[1]) / 2) if len(fractions) == 2 else 0.0
    total += int((1 - std) * MAX_NODE_SCORE)
    return total


class _Class:
    """Scheduling state shared by every pod with the same spec."""

    __slots__ = ("dirty", "dyn", "dyn_counter", "feasible", "heap", "msg", "msg_epoch", "spec", "static_counter")

    def __init__(self, spec: PodSpecInfo) -> None:
        self.spec = spec
        self.heap: list[tuple[int, str, int, int]] = []
        self.feasible: list[int] = []
        self.static_counter: Counter[str] = Counter()
        self.dyn: dict[int, tuple[str, ...]] = {}
        self.dyn_counter: Counter[str] = Counter()
        self.dirty: set[int] = set()
        self.msg: str | None = None
        self.msg_epoch = -1


class StaticFilter:
    """The node-only filters for one pod spec, memoised on what each filter reads of a node."""

    def __init__(self, spec: PodSpecInfo) -> None:
        self.spec = spec
        self.tolerates_unschedulable = tolerated(spec.tolerations, Taint(TAINT_NODE_UNSCHEDULABLE, "", "NoSchedule"))
        self._taints: dict[tuple[Taint, ...], str | None] = {}
        self._affinity: dict[tuple[str | None, ...], bool] = {}
        keys = {k for k, _ in spec.node_selector}
        by_name = False
        if spec.affinity is not None:
            for term in spec.affinity.terms:
                keys.update(r.key for r in term.match_expressions)
                by_name = by_name or bool(term.match_fields)
        self._keys = tuple(sorted(keys))
        self._by_name = by_name
        self._trivial_affinity = not keys and spec.affinity is None

    def reason(self, node: Node) -> str | None:
        spec = self.spec
        if node.unschedulable and not self.tolerates_unschedulable:
            return ERR_UNSCHEDULABLE
        if spec.node_name and spec.node_name != node.name:
            return ERR_NODE_NAME
        if node.taints:
            hit = self._taints.get(node.taints, "")
            if hit == "":
                taint = first_untolerated(node.taints, spec.tolerations)
                hit = ERR_TAINTS if taint is not None else None
                self._taints[node.taints] = hit
            if hit is not None:
                return hit
        if self._trivial_affinity:
            return None
        labels = node.labels
        key = tuple(labels.get(k) for k in self._keys)
        if self._by_name:
            key += (node.name,)
        ok = self._affinity.get(key)
        if ok is None:
            ok = affinity_matches(spec, labels, node.name)
            self._affinity[key] = ok
        return None if ok else ERR_NODE_AFFINITY


@dataclass(slots=True)
class Decision:
    node: NodeState | None
    reason: str | None


class Scheduler:
    """Places pods one at a time onto a growing set of nodes."""

    def __init__(self, nodes: Iterable[Node], bound: Iterable[Pod] = ()) -> None:
        self.states: list[NodeState] = []
        self.by_name: dict[str, NodeState] = {}
        self._classes: dict[PodSpecInfo, _Class] = {}
        self._node_classes: list[list[_Class]] = []
        self.epoch = 0
        for node in nodes:
            self.add_node(node)
        for pod in bound:
            st = self.by_name.get(pod.node_name)
            if st is not None and not pod.terminated:
                st.add(pod)

    # --- nodes ---------------------------------------------------------------------------------------

    def add_node(self, node: Node) -> NodeState:
        st = NodeState(node, len(self.states))
        self.states.append(st)
        self.by_name[node.name] = st
        self._node_classes.append([])
        self.epoch += 1
        for cls in self._classes.values():
            self._consider(cls, StaticFilter(cls.spec), st)
        return st

    def _consider(self, cls: _Class, flt: StaticFilter, st: NodeState) -> None:
        reason = flt.reason(st.node)
        if reason is not None:
            cls.static_counter[reason] += 1
            return
        cls.feasible.append(st.index)
        self._node_classes[st.index].append(cls)
        cls.dirty.add(st.index)
        if fits(cls.spec, st):
            heapq.heappush(cls.heap, (-score(cls.spec, st), st.node.name, st.index, st.version))

    def _class(self, spec: PodSpecInfo) -> _Class:
        cls = self._classes.get(spec)
        if cls is not None:
            return cls
        cls = _Class(spec)
        self._classes[spec] = cls
        flt = StaticFilter(spec)
        counter = cls.static_counter
        entries = cls.heap
        score_memo: dict[tuple[int, ...], int] = {}
        for st in self.states:
            reason = flt.reason(st.node)
            if reason is not None:
                counter[reason] += 1
                continue
            cls.feasible.append(st.index)
            self._node_classes[st.index].append(cls)
            if fits(spec, st):
                key = (st.alloc_cpu, st.alloc_memory, st.nonzero_cpu, st.nonzero_memory,
                       st.requested.get(CPU, 0), st.requested.get(MEMORY, 0))
                s = score_memo.get(key)
                if s is None:
                    s = score_memo[key] = score(spec, st)
                entries.append((-s, st.node.name, st.index, st.version))
        heapq.heapify(entries)
        cls.dirty.update(cls.feasible)
        return cls

    # --- pods ----------------------------------------------------------------------------------------

    def place(self, pod: Pod) -> Decision:
        """Schedule one pod: bind it to the best node, or explain why no node fits."""
        spec = pod.spec
        if spec.scheduling_gates:
            return Decision(None, f"waiting for scheduling gates: {', '.join(spec.scheduling_gates)}")
        cls = self._class(spec)
        heap, states = cls.heap, self.states
        while heap:
            _, _, idx, version = heap[0]
            st = states[idx]
            if version != st.version:
                heapq.heappop(heap)
                continue
            if not fits(spec, st):
                heapq.heappop(heap)
                continue
            self.bind(pod, st)
            return Decision(st, None)
        return Decision(None, self.explain(cls))

    def bind(self, pod: Pod, st: NodeState) -> None:
        st.add(pod)
        self.epoch += 1
        for other in self._node_classes[st.index]:
            other.dirty.add(st.index)
            if fits(other.spec, st):
                heapq.heappush(other.heap, (-score(other.spec, st), st.node.name, st.index, st.version))

    def explain(self, cls: _Class) -> str:
        if cls.msg is not None and cls.msg_epoch == self.epoch:
            return cls.msg
        if not self.states:
            return NO_NODES
        for idx in cls.dirty:
            new = dynamic_reasons(cls.spec, self.states[idx])
            old = cls.dyn.get(idx, ())
            if new == old:
                continue
            for r in old:
                cls.dyn_counter[r] -= 1
            for r in new:
                cls.dyn_counter[r] += 1
            cls.dyn[idx] = new
        cls.dirty.clear()
        counts = cls.static_counter + cls.dyn_counter  # Counter addition drops zero counts
        cls.msg = unschedulable_message(len(self.states), counts)
        cls.msg_epoch = self.epoch
        return cls.msg

    def explain_pod(self, pod: Pod) -> str:
        return self.explain(self._class(pod.spec))

    def feasible_nodes(self, spec: PodSpecInfo) -> Sequence[int]:
        return self._class(spec).feasible
