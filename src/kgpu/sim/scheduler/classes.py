"""The node state and the pod classes of kube-scheduler's placement loop (kgpu.sim.scheduler.scheduler's
docstring explains how they make it fast): ``NodeState``, a node with what its pods request and the host
ports they hold; NodeResourcesFit's filter and the LeastAllocated + BalancedAllocation score of one pod spec
on one node (``fits``, ``score``); the *filter group* of classes that share their node-only filters, each
node filtered once (``StaticFilter``, memoised on the parts of the node each filter reads); and the *class*
of identical pods with its heap of feasible nodes, or its score array in array mode
(kgpu.sim.scheduler.arrays)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kgpu.model.objects import CPU, EPHEMERAL, MEMORY, HostPort, Node, Pod, PodSpecInfo, Taint
from kgpu.model.predicates import (
    ERR_NODE_AFFINITY,
    ERR_NODE_NAME,
    ERR_NODE_PORTS,
    ERR_PREFILTER_NODE_AFFINITY,
    ERR_TAINTS,
    ERR_TOO_MANY_PODS,
    ERR_UNSCHEDULABLE,
    TAINT_NODE_UNSCHEDULABLE,
    affinity_matches,
    first_untolerated,
    insufficient,
    insufficient_resources,
    ports_conflict,
    prefilter_node_names,
    tolerated,
)
from kgpu.sim.scheduler.plugins.scoring import (
    MAX_NODE_SCORE,
    untolerated_prefer_no_schedule,
)
from kgpu.sim.scheduler.plugins.topology import needs_filters

NO_NODES = "no nodes available to schedule pods"
# Classes beyond this many use array mode (a heap per class is cheaper when there are few).
ARRAY_AFTER = 24
# Quantities array mode computes with (x100 must fit an int64); larger ones stay on the heap path.
ARRAY_LIMIT = 1 << 52
# Up to this many nodes bound since a class's last turn are re-scored one by one, not in numpy.
SMALL_REFRESH = 8


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
    req_cpu: int = 0  # requested[CPU] and requested[MEMORY], read on every score
    req_memory: int = 0
    available: dict[str, int] = field(default_factory=dict)  # allocatable minus requested

    def __post_init__(self) -> None:
        a = self.node.allocatable
        self.alloc_cpu, self.alloc_memory, self.alloc_pods = a.get(CPU, 0), a.get(MEMORY, 0), a.get("pods", 0)
        self.available = {k: v - self.requested.get(k, 0) for k, v in a.items()}
        self.req_cpu, self.req_memory = self.requested.get(CPU, 0), self.requested.get(MEMORY, 0)

    @property
    def name(self) -> str:
        return self.node.name

    def add(self, pod: Pod) -> None:
        spec = pod.spec
        req, free = self.requested, self.available
        for k, v in spec.requests:
            req[k] = req.get(k, 0) + v
            free[k] = free.get(k, 0) - v
        self.req_cpu, self.req_memory = req.get(CPU, 0), req.get(MEMORY, 0)
        self.nonzero_cpu += spec.nonzero_cpu
        self.nonzero_memory += spec.nonzero_memory
        self.pod_count += 1
        if spec.host_ports:
            self.ports.extend(spec.host_ports)
        self.pods.append(pod)
        self.version += 1

    def remove(self, pod: Pod) -> None:
        """Take ``pod`` (this very object) off the node: the inverse of ``add``."""
        pods = self.pods
        for i, p in enumerate(pods):
            if p is pod:
                del pods[i]
                break
        else:
            raise ValueError(f"{pod.key} is not on node {self.name}")
        spec = pod.spec
        req, free = self.requested, self.available
        for k, v in spec.requests:
            req[k] = req.get(k, 0) - v
            free[k] = free.get(k, 0) + v
        self.req_cpu, self.req_memory = req.get(CPU, 0), req.get(MEMORY, 0)
        self.nonzero_cpu -= spec.nonzero_cpu
        self.nonzero_memory -= spec.nonzero_memory
        self.pod_count -= 1
        for port in spec.host_ports:
            self.ports.remove(port)
        self.version += 1

    def free(self, resource: str) -> int:
        return self.available.get(resource, 0)


def gated(spec: PodSpecInfo) -> str:
    return f"waiting for scheduling gates: {', '.join(spec.scheduling_gates)}"


def fits(spec: PodSpecInfo, st: NodeState) -> bool:
    """The dynamic filters (NodePorts, NodeResourcesFit) as a yes/no, on the hot path."""
    if st.pod_count >= st.alloc_pods:
        return False
    free = st.available
    for k, v in spec.requests:
        if v > free.get(k, 0):
            return False
    return not (spec.host_ports and ports_conflict(spec.host_ports, st.ports))


def dynamic_reasons(spec: PodSpecInfo, st: NodeState) -> tuple[str, ...]:
    if spec.host_ports and ports_conflict(spec.host_ports, st.ports):
        return (ERR_NODE_PORTS,)
    return tuple(insufficient_resources(spec, st.node.allocatable, st.requested, st.pod_count))


def _dynamic_reasons(cls: _Class, st: NodeState) -> tuple[str, ...]:
    """``dynamic_reasons`` with the class's requests sorted once."""
    spec = cls.spec
    if spec.host_ports and ports_conflict(spec.host_ports, st.ports):
        return (ERR_NODE_PORTS,)
    alloc, req = st.node.allocatable, st.requested
    out = [text for k, v, text in cls.reqs if v > alloc.get(k, 0) - req.get(k, 0)]
    if st.pod_count + 1 > st.alloc_pods:
        out.insert(0, ERR_TOO_MANY_PODS)
    return tuple(out)


def score(spec: PodSpecInfo, st: NodeState) -> int:
    """LeastAllocated (non-zero requests) + BalancedAllocation (actual requests), cpu and memory."""
    return _score(spec.nonzero_cpu, spec.nonzero_memory, spec.request(CPU), spec.request(MEMORY), st)


def _score(nz_cpu: int, nz_memory: int, req_cpu: int, req_memory: int, st: NodeState) -> int:
    total = 0
    least = n = 0
    ac, am = st.alloc_cpu, st.alloc_memory
    if ac:
        r = st.nonzero_cpu + nz_cpu
        least += (ac - r) * MAX_NODE_SCORE // ac if r <= ac else 0
        n += 1
    if am:
        r = st.nonzero_memory + nz_memory
        least += (am - r) * MAX_NODE_SCORE // am if r <= am else 0
        n += 1
    if n:
        total += least // n
    if not req_cpu and not req_memory:
        # BalancedAllocation skips pods that request neither (PreScore returns Skip; kubernetes#129138).
        return total
    if ac and am:
        f_cpu = min(1.0, float(st.req_cpu + req_cpu) / float(ac))
        f_memory = min(1.0, float(st.req_memory + req_memory) / float(am))
        std = abs((f_cpu - f_memory) / 2)
    else:
        std = 0.0
    total += int((1 - std) * MAX_NODE_SCORE)
    return total


class _FilterGroup:
    """The node-only filters of every class with the same tolerations, selector, affinity and nodeName:
    which nodes pass, and why the others do not. Nodes are filtered up to ``seen``, when asked."""

    __slots__ = (
        "_prefer_memo",
        "feasible",
        "feasible_set",
        "flt",
        "prefer",
        "prefer_counts",
        "seen",
        "static_counter",
    )

    def __init__(self, spec: PodSpecInfo) -> None:
        self.flt = StaticFilter(spec)
        self.feasible: list[int] = []
        self.feasible_set: set[int] = set()
        self.static_counter: Counter[str] = Counter()
        self.seen = 0
        # TaintToleration's raw score (untolerated PreferNoSchedule taints) of the feasible nodes where it is
        # not 0, and every value it takes over them: with one value it cannot change any ranking.
        self.prefer: dict[int, int] = {}
        self.prefer_counts: set[int] = set()
        self._prefer_memo: dict[tuple[Taint, ...], int] = {}

    def catch_up(self, states: Sequence[NodeState], by_name: Mapping[str, NodeState] | None = None) -> None:
        reason = self.flt.reason
        counter, feasible, fset = self.static_counter, self.feasible, self.feasible_set
        memo, prefer, counts = self._prefer_memo, self.prefer, self.prefer_counts
        tolerations = self.flt.spec.tolerations
        todo: Iterable[int] = range(self.seen, len(states))
        names = self.flt.names
        if names is not None and by_name is not None and len(by_name) == len(states):
            # Pinned by NodeAffinity's PreFilter (a DaemonSet's pod): the nodes outside the names are counted,
            # not filtered one by one; names are unique, so each named node has one index.
            picked = sorted(
                st.index for st in (by_name.get(n) for n in names) if st is not None and st.index >= self.seen
            )
            outside = len(states) - self.seen - len(picked)
            if outside:
                counter[ERR_PREFILTER_NODE_AFFINITY] += outside
            todo = picked
        for idx in todo:
            node = states[idx].node
            why = reason(node)
            if why is None:
                feasible.append(idx)
                fset.add(idx)
                taints = node.taints
                if taints:
                    c = memo.get(taints)
                    if c is None:
                        c = memo[taints] = untolerated_prefer_no_schedule(taints, tolerations)
                    if c:
                        prefer[idx] = c
                    counts.add(c)
                else:
                    counts.add(0)
            else:
                counter[why] += 1
        self.seen = len(states)

    @property
    def prefer_varies(self) -> bool:
        return len(self.prefer_counts) > 1


class _Class:
    """Scheduling state shared by every pod with the same spec."""

    __slots__ = (
        "affinity_keys",
        "affinity_memo",
        "affinity_pos",
        "affinity_raw",
        "affinity_values",
        "dyn",
        "dyn_counter",
        "extra_cache",
        "group",
        "grown_pos",
        "heap",
        "latest",
        "log_pos",
        "msg",
        "msg_nodes",
        "new",
        "pos",
        "raws",
        "reqs",
        "score_key",
        "scores",
        "spec",
        "topology",
        "varies",
        "vec_log_pos",
    )

    def __init__(self, spec: PodSpecInfo, group: _FilterGroup) -> None:
        self.spec = spec
        self.group = group
        self.score_key = (spec.nonzero_cpu, spec.nonzero_memory, spec.request(CPU), spec.request(MEMORY))
        # requests with their "Insufficient" text, in the order insufficient_resources sorts them
        order = {CPU: 1, MEMORY: 2, EPHEMERAL: 3}
        self.reqs = tuple(
            sorted(
                ((k, v, insufficient(k)) for k, v in spec.requests), key=lambda r: (order.get(r[0], 4), r[2])
            )
        )
        self.heap: list[tuple[int, str, int, int]] = []
        self.latest: dict[int, int] = {}  # node index -> version of its newest heap entry
        self.pos = 0  # how many of the group's feasible nodes this class has taken in
        self.new: list[int] = []  # feasible nodes taken in since the message was last built
        self.dyn: dict[int, tuple[str, ...]] = {}
        self.dyn_counter: Counter[str] = Counter()
        self.log_pos = 0
        self.msg: str | None = None
        self.msg_nodes = -1
        self.scores: Any = None  # array mode: exact score of every node, -1 where infeasible or unfit
        self.vec_log_pos = 0
        self.grown_pos = 0  # how much of the scheduler's log of grown nodes (evictions) the class has seen
        # Normalised score plugins (kgpu.sim.scheduler.plugins.scoring). A class *varies* once its feasible nodes differ in a
        # static plugin's raw score: the heap and array invariants hold only for scores that do not depend on
        # which other nodes are feasible, so such a class re-normalises over its feasible nodes at each turn.
        self.varies = False
        self.raws: list[Any] | None = None  # array mode, varies: raw score of every node, per static plugin
        self.extra_cache: dict[tuple[int, ...], Any] = {}  # array mode, varies: see _place_array
        self.affinity_raw: dict[int, int] = {}  # NodeAffinity's raw score per feasible node (preferred terms)
        self.affinity_values: set[int] = set()
        self.affinity_pos = 0
        self.affinity_memo: dict[tuple[str | None, ...], int] = {}
        keys = sorted({r.key for p in spec.preferred for r in p.term.match_expressions})
        self.affinity_keys = (tuple(keys), any(p.term.match_fields for p in spec.preferred))
        # PodTopologySpread or InterPodAffinity filter or score every pod of the class: the exact path
        self.topology = needs_filters(spec)


class StaticFilter:
    """The node-only filters for one pod spec, memoised on what each filter reads of a node."""

    def __init__(self, spec: PodSpecInfo) -> None:
        self.spec = spec
        self.tolerates_unschedulable = tolerated(
            spec.tolerations, Taint(TAINT_NODE_UNSCHEDULABLE, "", "NoSchedule")
        )
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
        self.names = prefilter_node_names(spec)

    def reason(self, node: Node) -> str | None:
        spec = self.spec
        if self.names is not None and node.name not in self.names:
            return ERR_PREFILTER_NODE_AFFINITY  # outside NodeAffinity's PreFilter result: not filtered
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


def _filter_key(spec: PodSpecInfo) -> tuple[object, ...]:
    return (spec.tolerations, spec.node_selector, spec.affinity, spec.node_name)


@dataclass(slots=True)
class Decision:
    node: NodeState | None
    reason: str | None
