"""kube-scheduler's placement loop over a snapshot, fast enough for thousands of nodes and pod specs.

For each pod, in queue order (priority, then input order), the scheduler filters every node with the
default filters (see ``kgpu.model.predicates``), scores the feasible ones with the default profile's score
plugins and weights: NodeResourcesFit's LeastAllocated plus NodeResourcesBalancedAllocation (weight 1 each,
``_score``), TaintToleration (3) and NodeAffinity (2) (``kgpu.sim.scheduler.plugins.scoring``), and binds the pod to the best,
ties broken by node name (kube-scheduler picks among ties at random; a simulator must be reproducible).

What makes it fast is that identical pods form a *class* (same ``PodSpecInfo``), and that real clusters
have hundreds of classes, so nothing a bind or a new node costs may grow with their number:

- the node-only filters (unschedulable, nodeName, taints, affinity) run once per *filter group* (classes
  with the same tolerations, selector, affinity and nodeName) and node, memoised on the parts of the node
  each filter reads; a new node is filtered when a class next needs an answer, not when it is added;
- each class keeps a max-heap of its feasible nodes keyed by score. An entry whose node has changed since
  it was pushed is *stale*; it is re-scored when it surfaces, and a node that no longer fits the class is
  dropped for good, because during a simulation free resources only shrink. This is exact only if a stale
  key is never below the node's current score. LeastAllocated only falls as pods land; BalancedAllocation
  can rise, but by at most ``50 * |cpu fraction - memory fraction|`` of the landing pod (plus one for
  rounding), while LeastAllocated falls by at least the landing pod's share of the node. ``bind`` checks
  that inequality for every class at once from the pod and the node alone (``_cannot_raise``); when it
  does not hold (a pod under ~1 % of the node, or a node whose non-zero requests near its allocatable),
  the node is re-scored for every class that can use it, as before;
- with more than ``ARRAY_AFTER`` classes that still costs one re-score per class and bind at the top of
  every heap, because all classes want the same emptiest nodes. So from then on a class keeps the exact
  score of every node in a numpy array instead (*array mode*): at its turn it re-scores, in one vectorised
  step, the nodes bound since its previous turn (a log of binds), takes the argmax, and breaks ties by
  name rank. A bind costs the same whatever the number of classes; a turn costs a few array operations
  over the binds since the class's last turn and one argmax over the nodes. The integer and float
  operations are those of ``_score``, so results stay exact; classes with host ports, and quantities whose
  x100 would not fit an int64, stay on the heap path;
- TaintToleration and NodeAffinity score the node object only (PreferNoSchedule taints the class does not
  tolerate, the weights of its preferred terms the node matches), but kube-scheduler normalises them over
  the nodes feasible *now*, which shrink as nodes fill: a node's total then depends on the others, and no
  heap key or kept array entry stays valid. Where those raw scores are the same on every node that passes
  the class's filters (no PreferNoSchedule taint, no preferred terms: the common case), they add the same
  constant to every node and the ranking is LeastAllocated + BalancedAllocation's, so nothing above
  changes. Otherwise the class *varies*: it keeps the raw scores per node and, at each of its turns,
  normalises them over the nodes that fit and adds them, vectorised in array mode (such a class enters
  array mode whatever the number of classes) or by a loop over its feasible nodes (host ports). The check
  is per filter group for taints and per class for preferred terms, over the nodes taken in so far; a
  joining node can make a class vary, never the reverse. The exact path below scores the same way;
- the "0/N nodes are available" message is kept per class and updated only for the nodes bound since the
  class last asked (a log of binds, intersected with the class's feasible nodes); in array mode it is
  counted over the arrays.

Pods that PodTopologySpread or InterPodAffinity filter or score (their own spread constraints or pod
(anti-)affinity, or a placed pod's required anti-affinity, required affinity or preferred term that
matches them) break the assumption above: their feasibility and scores depend on where other pods land.
They take an *exact path*: the node-only filters come from their filter group as usual; their class keeps
its scores in array mode whatever the number of classes (its array stays exact for LeastAllocated +
BalancedAllocation, as for any class); at each pod the two topology filters run over every node at once
(``kgpu.sim.scheduler.plugins.topology``: per-domain counts that every bind updates, node domains as integer arrays), the
static normalised plugins and the topology scores are added over the nodes that pass, and the best is
taken. Classes that cannot use arrays (host ports) loop over their feasible nodes instead. Every other pod
keeps the fast path; a bind costs a look at the counters whose selectors its pod's labels can match.

Preemption (``kgpu.sim.scheduler.plugins.defaultpreemption``) is the one thing that makes free resources grow: ``unbind`` evicts a
pod, puts its node on the bind log (messages and array scores are re-computed for it as for a bind) and on
a log of *grown* nodes, and each class re-admits the grown nodes at its next turn, before it looks at its
heap or arrays: a heap class pushes an exact entry for every grown node it had taken in (its older
entries are then superseded, so a node it had dropped comes back and no key is left below the node's
score), an array class re-scores them. A bind or a turn costs nothing more when nothing was evicted; the
topology counters take the eviction as a negative bind.

Not modelled (documented in docs/simulate.md): the default topology spreading of pods without
constraints, ImageLocality, volume filters, and the scheduler's sampling of a percentage of nodes in large
clusters.
"""

from __future__ import annotations

import heapq
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kgpu.model.objects import CPU, EPHEMERAL, MEMORY, HostPort, Node, Pod, PodSpecInfo, Taint
from kgpu.model.predicates import (
    ERR_AFFINITY_CONFLICT,
    ERR_NODE_AFFINITY,
    ERR_NODE_NAME,
    ERR_NODE_PORTS,
    ERR_PREFILTER_NODE_AFFINITY,
    ERR_TAINTS,
    ERR_TOO_MANY_PODS,
    ERR_UNSCHEDULABLE,
    TAINT_NODE_UNSCHEDULABLE,
    affinity_matches,
    filter_reasons,
    first_untolerated,
    insufficient,
    insufficient_resources,
    ports_conflict,
    prefilter_node_names,
    tolerated,
    unschedulable_message,
)
from kgpu.sim.scheduler.plugins.scoring import (
    MAX_NODE_SCORE,
    NODE_AFFINITY,
    STATIC_PLUGINS,
    normalized_total,
    preferred_weight,
    untolerated_prefer_no_schedule,
)
from kgpu.sim.scheduler.plugins.topology import REASONS as TOPOLOGY_REASONS
from kgpu.sim.scheduler.plugins.topology import Topology, needs_filters

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


class Scheduler:
    """Places pods one at a time onto a growing set of nodes."""

    def __init__(
        self, nodes: Iterable[Node], bound: Iterable[Pod] = (), *, array_after: int = ARRAY_AFTER
    ) -> None:
        self.states: list[NodeState] = []
        self._array_after = array_after
        self._arrays: _NodeArrays | None = None
        self.by_name: dict[str, NodeState] = {}
        self._classes: dict[PodSpecInfo, _Class] = {}
        self._groups: dict[tuple[object, ...], _FilterGroup] = {}
        self._node_classes: list[list[_Class]] = []  # per node, the classes that have taken it in
        self._log: list[int] = []  # node index of every bind and eviction, in order
        self._grown: list[int] = []  # node index of every eviction (the node's free resources grew)
        # node index of every bind that may raise a score (see _cannot_raise) and of every eviction
        self._raised: list[int] = []
        self._ranks: tuple[list[int], list[int]] = ([], [])  # see name_ranks
        # Over every class so far: the largest non-zero cpu/memory request, and the largest excess of the
        # non-zero request over the actual one (containers without requests count 100m / 200Mi).
        self._max_nz = [0, 0]
        self._max_excess = [0, 0]
        self.topology = Topology(self.states)
        for node in nodes:
            self.add_node(node)
        for pod in bound:
            st = self.by_name.get(pod.node_name)
            if st is not None and not pod.terminated:
                st.add(pod)
                self.topology.bound(pod, st)

    # --- nodes ---------------------------------------------------------------------------------------

    def add_node(self, node: Node) -> NodeState:
        """A node joins; classes filter it the next time they place a pod or explain."""
        st = NodeState(node, len(self.states))
        self.states.append(st)
        self.by_name[node.name] = st
        self._node_classes.append([])
        if self._arrays is not None:
            self._arrays.add(st)
        return st

    def _catch_up(self, cls: _Class) -> None:
        """Take in the nodes added since the class last looked: filter, score, push."""
        group = cls.group
        if group.seen < len(self.states):
            group.catch_up(self.states, self.by_name)
        feasible = group.feasible
        if cls.pos == len(feasible):
            return
        states, heap, latest, node_classes, new = (
            self.states,
            cls.heap,
            cls.latest,
            self._node_classes,
            cls.new,
        )
        nz_cpu, nz_memory, req_cpu, req_memory = cls.score_key
        memo: dict[tuple[int, ...], int] = {}
        fresh = not heap
        for idx in feasible[cls.pos :]:
            st = states[idx]
            node_classes[idx].append(cls)
            new.append(idx)
            # Unfit nodes are dropped when they surface; scoring them here costs less than checking.
            key = (
                st.alloc_cpu,
                st.alloc_memory,
                st.nonzero_cpu,
                st.nonzero_memory,
                st.req_cpu,
                st.req_memory,
            )
            s = memo.get(key)
            if s is None:
                s = memo[key] = _score(nz_cpu, nz_memory, req_cpu, req_memory, st)
            latest[idx] = st.version
            entry = (-s, st.node.name, idx, st.version)
            if fresh:
                heap.append(entry)
            else:
                heapq.heappush(heap, entry)
        if fresh:
            heapq.heapify(heap)
        cls.pos = len(feasible)

    def _new_class(self, spec: PodSpecInfo) -> _Class:
        key = _filter_key(spec)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _FilterGroup(spec)
        cls = self._classes[spec] = _Class(spec, group)
        cls.log_pos = len(self._log)
        cls.grown_pos = len(self._grown)
        nz_cpu, nz_memory, req_cpu, req_memory = cls.score_key
        mx, ex = self._max_nz, self._max_excess
        mx[0], mx[1] = max(mx[0], nz_cpu), max(mx[1], nz_memory)
        ex[0], ex[1] = max(ex[0], nz_cpu - req_cpu), max(ex[1], nz_memory - req_memory)
        return cls

    def _class(self, spec: PodSpecInfo, cls: _Class | None = None) -> _Class:
        """The class of ``spec`` (``cls`` when the caller looked it up), caught up with the nodes."""
        if cls is None:
            cls = self._classes.get(spec)
            if cls is None:
                cls = self._new_class(spec)
        if not cls.varies:
            group = cls.group
            if group.seen < len(self.states):
                group.catch_up(self.states, self.by_name)
            if group.prefer_varies or (spec.preferred and self._affinity_varies(cls)):
                cls.varies = True
                if cls.scores is not None or self._array_ok(spec):
                    self._to_array_mode(cls)  # (again) from scratch: every node taken in with its raw scores
        if cls.scores is None and len(self._classes) > self._array_after and self._array_ok(spec):
            self._to_array_mode(cls)
        if cls.scores is not None and not (self._arrays and self._arrays.ok):
            # a node too large for int64 arithmetic joined: back to the heap, every node taken in again
            cls.scores, cls.raws, cls.pos, cls.msg, cls.log_pos = None, None, 0, None, len(self._log)
        if cls.scores is not None:
            self._catch_up_array(cls)
        elif cls.pos < len(cls.group.feasible) or cls.group.seen < len(self.states):
            self._catch_up(cls)
        if cls.grown_pos < len(self._grown):
            self._readmit(cls)
        return cls

    def _readmit(self, cls: _Class) -> None:
        """Take back the nodes evicted from since the class's last turn, with their exact score now."""
        grown = set(self._grown[cls.grown_pos :])
        cls.grown_pos = len(self._grown)
        if cls.scores is not None:
            import numpy as np

            assert self._arrays is not None
            fset = cls.group.feasible_set
            rows = np.array(sorted(i for i in grown if i in fset), dtype=np.int64)
            if len(rows):
                cls.scores[rows] = self._arrays.scores(cls, rows)
            return
        states, latest, heap = self.states, cls.latest, cls.heap
        for idx in grown:
            if idx in latest:  # taken in by this class (its filter group passes the node)
                st = states[idx]
                latest[idx] = st.version
                heapq.heappush(heap, (-_score(*cls.score_key, st), st.node.name, idx, st.version))

    # --- normalised score plugins ------------------------------------------------------------------------

    def _affinity_varies(self, cls: _Class) -> bool:
        """Take in NodeAffinity's raw score of the feasible nodes added since; True when it differs between
        them (only then can preferred terms change a ranking)."""
        feasible = cls.group.feasible
        for idx in feasible[cls.affinity_pos :]:
            cls.affinity_values.add(self._affinity_score(cls, idx))
        cls.affinity_pos = len(feasible)
        return len(cls.affinity_values) > 1

    def _affinity_score(self, cls: _Class, idx: int) -> int:
        """NodeAffinity's raw score, memoised on the labels (and name) the preferred terms read."""
        raw = cls.affinity_raw.get(idx)
        if raw is not None:
            return raw
        node = self.states[idx].node
        preferred = cls.spec.preferred
        keys, by_name = cls.affinity_keys
        key: tuple[str | None, ...] = tuple(node.labels.get(k) for k in keys)
        if by_name:
            key += (node.name,)
        raw = cls.affinity_memo.get(key)
        if raw is None:
            raw = cls.affinity_memo[key] = preferred_weight(preferred, node.labels, node.name)
        cls.affinity_raw[idx] = raw
        return raw

    def _static_raws(self, cls: _Class, idx: int) -> tuple[int, int]:
        """The raw scores of STATIC_PLUGINS (TaintToleration, NodeAffinity) of a feasible node."""
        return cls.group.prefer.get(idx, 0), self._affinity_score(cls, idx) if cls.spec.preferred else 0

    def _best(self, cls: _Class, feasible: list[NodeState], pod: Pod | None = None) -> NodeState:
        """The best of the nodes that pass every filter for the pod: LeastAllocated + BalancedAllocation plus
        the normalised plugins (with ``pod``, PodTopologySpread's and InterPodAffinity's too), highest total
        first, then node name."""
        key = cls.score_key
        topo = self.topology.scores(pod, feasible) if pod is not None and len(feasible) > 1 else None
        if topo is None and not (cls.group.prefer_varies or cls.spec.preferred):
            # TaintToleration's raw score is the same on every feasible node and NodeAffinity's is 0: they add
            # a constant
            return min(feasible, key=lambda st: (-_score(*key, st), st.node.name))
        extra = [0] * len(feasible)
        if cls.group.prefer_varies or cls.spec.preferred:
            raws = [self._static_raws(cls, st.index) for st in feasible]
            extra = normalized_total(STATIC_PLUGINS, [[r[i] for r in raws] for i in range(len(STATIC_PLUGINS))])
        if topo is not None:
            extra = [a + b for a, b in zip(extra, topo, strict=True)]
        best = min(
            range(len(feasible)),
            key=lambda i: (-(_score(*key, feasible[i]) + extra[i]), feasible[i].node.name),
        )
        return feasible[best]

    def _place_varying(self, pod: Pod, cls: _Class) -> Decision:
        """A varying class on the heap path (host ports, or quantities too large for array mode): every
        feasible node that fits is scored and normalised, as kube-scheduler does."""
        spec, states = pod.spec, self.states
        fit = [states[idx] for idx in cls.group.feasible if fits(spec, states[idx])]
        if not fit:
            return Decision(None, self.explain(cls))
        st = self._best(cls, fit)
        self.bind(pod, st)
        return Decision(st, None)

    # --- pods ----------------------------------------------------------------------------------------

    def before_plugins(self, pod: Pod) -> str | None:
        """What kube-scheduler says before any plugin runs: the pod waits for its scheduling gates, or there
        is no node (for the placements outside ``place``: kgpu.sim.scheduler.plugins.dynamicresources, kgpu.sim.scheduler.plugins.volumebinding)."""
        if pod.spec.scheduling_gates:
            return gated(pod.spec)
        return None if self.states else NO_NODES

    def place(self, pod: Pod) -> Decision:
        """Schedule one pod: bind it to the best node, or explain why no node fits."""
        spec = pod.spec
        if spec.scheduling_gates:
            return Decision(None, gated(spec))
        cls = self._classes.get(spec)
        if cls is None:
            cls = self._new_class(spec)
        if cls.topology or self.topology.matched_by_existing(pod):
            return self._place_exact(pod, cls)
        cls = self._class(spec, cls)
        if cls.scores is not None:
            return self._place_array(pod, cls)
        if cls.varies:
            return self._place_varying(pod, cls)
        heap, states, latest = cls.heap, self.states, cls.latest
        nz_cpu, nz_memory, req_cpu, req_memory = cls.score_key
        heappop, heapreplace = heapq.heappop, heapq.heapreplace
        while heap:
            _, name, idx, version = heap[0]
            st = states[idx]
            if version != st.version:
                if version == latest[idx]:
                    # stale: re-score and let the new entry sink from the top (fit is checked on top)
                    version = latest[idx] = st.version
                    heapreplace(
                        heap, (-_score(nz_cpu, nz_memory, req_cpu, req_memory, st), name, idx, version)
                    )
                else:  # superseded by a newer entry
                    heappop(heap)
                continue
            if not fits(spec, st):
                heappop(heap)
                continue
            self.bind(pod, st)
            return Decision(st, None)
        return Decision(None, self.explain(cls))

    def bind(self, pod: Pod, st: NodeState) -> None:
        st.add(pod)
        self._log.append(st.index)
        self.topology.bound(pod, st)
        if self._arrays is not None:
            self._arrays.bound(pod.spec, st)
        if self._cannot_raise(pod.spec, st):
            return
        self._raised.append(st.index)
        version, name, idx = st.version, st.node.name, st.index
        memo: dict[tuple[int, int, int, int], int] = {}
        for other in self._node_classes[idx]:
            if other.scores is None and not other.varies and fits(other.spec, st):
                s = memo.get(other.score_key)
                if s is None:
                    s = memo[other.score_key] = _score(*other.score_key, st)
                other.latest[idx] = version
                heapq.heappush(other.heap, (-s, name, idx, version))

    def unbind(self, pod: Pod, st: NodeState) -> None:
        """Evict ``pod`` from ``st`` (preemption): the node's free resources grow. Classes re-admit the node
        at their next turn (``_readmit``); messages and array scores see it through the bind log."""
        st.remove(pod)
        self._log.append(st.index)
        self._grown.append(st.index)
        self._raised.append(st.index)
        self.topology.unbound(pod, st)
        if self._arrays is not None:
            self._arrays.bound(pod.spec, st)

    def _cannot_raise(self, spec: PodSpecInfo, st: NodeState) -> bool:
        """True when ``spec`` landing on ``st`` (already added) cannot raise the node's score for any class
        that still fits it, so the stale heap entries stay upper bounds (see the module docstring).

        LeastAllocated is floor((floor(100 (A_cpu - N_cpu)/A_cpu) + floor(100 (A_mem - N_mem)/A_mem)) / 2)
        over non-zero requests N (the class's own included); it falls by at least
        floor((floor(100 n_cpu/A_cpu) + floor(100 n_mem/A_mem)) / 2) for the landing pod's non-zero
        requests n, unless a class's N exceeds A (the term is clamped at 0). BalancedAllocation is
        int(100 - 50 |F_cpu - F_mem|) over actual requests, so it rises by at most
        floor(50 |r_cpu/A_cpu - r_mem/A_mem|) + 1 (fractions are <= 1 for a class that fits). With one of
        cpu/memory unallocatable BalancedAllocation is constant and LeastAllocated cannot rise.
        """
        ac, am = st.alloc_cpu, st.alloc_memory
        if not ac or not am:
            return True
        k_cpu = spec.nonzero_cpu * MAX_NODE_SCORE // ac
        k_memory = spec.nonzero_memory * MAX_NODE_SCORE // am
        # A fitting class has request <= free, so its non-zero request is at most free + the largest excess.
        free_cpu = ac - st.req_cpu
        free_memory = am - st.req_memory
        mx, ex = self._max_nz, self._max_excess
        if st.nonzero_cpu + min(mx[0], free_cpu + ex[0]) > ac:
            k_cpu = 0
        if st.nonzero_memory + min(mx[1], free_memory + ex[1]) > am:
            k_memory = 0
        fall = (k_cpu + k_memory) // 2
        r_cpu, r_memory = spec.request(CPU), spec.request(MEMORY)
        rise = int(50.0 * abs(r_cpu / ac - r_memory / am) + 1e-9) + 1
        return fall >= rise

    def explain(self, cls: _Class) -> str:
        if not self.states:
            return NO_NODES
        if cls.group.flt.names is not None and not cls.group.flt.names:
            return f"0/{len(self.states)} nodes are available: {ERR_AFFINITY_CONFLICT}."
        if cls.scores is not None:
            return self._explain_array(cls)
        self._catch_up(cls)
        log = self._log
        changed: set[int] | list[int] = cls.new
        if cls.log_pos < len(log):
            changed = cls.group.feasible_set.intersection(log[cls.log_pos :])
            changed.update(cls.new)
            cls.log_pos = len(log)
        if cls.msg is not None and not changed and cls.msg_nodes == len(self.states):
            return cls.msg
        states, dyn, counter = self.states, cls.dyn, cls.dyn_counter
        for idx in changed:
            new = _dynamic_reasons(cls, states[idx])
            old = dyn.get(idx, ())
            if new == old:
                continue
            for r in old:
                counter[r] -= 1
            for r in new:
                counter[r] += 1
            dyn[idx] = new
        cls.new = []
        counts = cls.group.static_counter + counter  # Counter addition drops zero counts
        cls.msg = unschedulable_message(len(self.states), counts)
        cls.msg_nodes = len(self.states)
        return cls.msg

    def admits(self, pod: Pod, st: NodeState) -> bool:
        """Whether every filter, PodTopologySpread and InterPodAffinity included, lets ``pod`` onto ``st`` now:
        for provisioners that bind a pod to the node they launched for it."""
        if filter_reasons(pod.spec, st.node, st.requested, st.pod_count, st.ports) is not None:
            return False
        cls = self._classes.get(pod.spec)
        constrained = cls.topology if cls is not None else needs_filters(pod.spec)
        if not constrained and not self.topology.matched_by_existing(pod):
            return True
        return self.topology.prepare(pod).reason(st.node) is None

    def explain_pod(self, pod: Pod) -> str:
        cls = self._classes.get(pod.spec) or self._new_class(pod.spec)
        if cls.topology or self.topology.matched_by_existing(pod):
            if self._exact_in_array(cls):
                return self._evaluate_array(pod, cls, always=True)[1]
            return self._evaluate(pod, cls, always=True)[1]
        return self.explain(self._class(pod.spec, cls))

    # --- the exact path: pods that PodTopologySpread or InterPodAffinity filter --------------------------

    def _evaluate(self, pod: Pod, cls: _Class, always: bool = False) -> tuple[list[NodeState], str]:
        """Every filter on the class's statically feasible nodes, then PodTopologySpread and InterPodAffinity
        on the nodes that fit: the feasible nodes, and the message when there are none (``always``: the
        message over the nodes that fail, whether or not some pass)."""
        if not self.states:
            return [], NO_NODES
        spec = pod.spec
        group = cls.group
        if group.flt.names is not None and not group.flt.names:
            return [], f"0/{len(self.states)} nodes are available: {ERR_AFFINITY_CONFLICT}."
        if group.seen < len(self.states):
            group.catch_up(self.states, self.by_name)
        topo = self.topology.prepare(pod)
        reason = topo.reason
        states = self.states
        feasible: list[NodeState] = []
        counter: Counter[str] = Counter()
        for idx in group.feasible:
            st = states[idx]
            if not fits(spec, st):
                counter.update(_dynamic_reasons(cls, st))
                continue
            why = reason(st.node)
            if why is not None:
                counter[why] += 1
                continue
            feasible.append(st)
        if feasible and not always:
            return feasible, ""
        return feasible, unschedulable_message(len(states), group.static_counter + counter)

    def _exact_in_array(self, cls: _Class) -> bool:
        """An exact-path class keeps its scores in array mode whatever the number of classes (when its
        quantities allow), so each of its pods costs a few vectorised passes over the nodes."""
        if cls.scores is None and self._array_after != sys.maxsize and self._array_ok(cls.spec):
            self._to_array_mode(cls)
        if cls.scores is not None:
            self._class(cls.spec, cls)  # catch up the array, or step back to heaps
        return cls.scores is not None

    def _evaluate_array(self, pod: Pod, cls: _Class, always: bool = False) -> tuple[Any, str]:
        """``_evaluate`` over the class's score array: the nodes that pass every filter (a mask), or the
        message when none does (or ``always``)."""
        import numpy as np

        n = len(self.states)
        if not n:
            return None, NO_NODES
        group = cls.group
        if group.flt.names is not None and not group.flt.names:
            return None, f"0/{n} nodes are available: {ERR_AFFINITY_CONFLICT}."
        self._refresh_array(cls)
        view = cls.scores[:n]
        fit = view >= 0
        if not fit.any():
            # No node passes the node-only filters and has room: the topology filters run on none of them,
            # and the message is the class's, kept while nothing is bound (what leaves pods pending fast).
            return None, self._explain_array(cls)
        code = self.topology.prepare(pod).codes(self.topology.domain_ids)
        ok = fit & (code == 0)
        if not always and ok.any():
            return ok, ""
        arrays = self._arrays
        assert arrays is not None
        counts = group.static_counter + arrays.reasons(cls, np.array(group.feasible, dtype=np.int64))
        for c, k in enumerate(np.bincount(code[fit], minlength=len(TOPOLOGY_REASONS)).tolist()):
            if c and k:
                counts[TOPOLOGY_REASONS[c]] += k
        return (ok if ok.any() else None), unschedulable_message(n, counts)

    def _place_exact_array(self, pod: Pod, cls: _Class) -> Decision:
        ok, message = self._evaluate_array(pod, cls)
        if ok is None:
            return Decision(None, message)
        st = self._best_array(pod, cls, ok)
        self.bind(pod, st)
        return Decision(st, None)

    def _best_array(self, pod: Pod, cls: _Class, ok: Any) -> NodeState:
        """The best of the nodes where ``ok`` holds (each passes every filter for the pod), from the class's
        score array: ``_best`` vectorised (the same integer and float operations)."""
        import numpy as np

        n = len(self.states)
        view = cls.scores[:n]
        arrays = self._arrays
        assert arrays is not None
        if cls.raws is not None:
            # varying class: TaintToleration and NodeAffinity normalised over the nodes that pass every filter
            view = view.copy()
            for plugin, raw in zip(STATIC_PLUGINS, cls.raws, strict=True):
                if plugin is NODE_AFFINITY and not cls.spec.preferred:
                    continue  # 0 on every node
                view += plugin.weight * plugin.normalize_array(raw[:n], ok)
        if self.topology.scored(pod):
            idx = np.flatnonzero(ok)
            totals = view[idx]
            extra = self.topology.scores_at(pod, idx) if len(idx) > 1 else None
            if extra is not None:
                totals = totals + extra
            ties = np.flatnonzero(totals == totals.max())
            best = ties[0] if len(ties) == 1 else ties[arrays.name_rank(self.states)[idx[ties]].argmin()]
            st = self.states[int(idx[best])]
        else:
            masked = np.where(ok, view, -1)
            top = int(masked.argmax())
            ties = np.flatnonzero(masked == masked[top])
            if len(ties) > 1:
                top = int(ties[arrays.name_rank(self.states)[ties].argmin()])
            st = self.states[top]
        return st

    def _place_exact(self, pod: Pod, cls: _Class) -> Decision:
        """A pod whose placement depends on where other pods run: every node checked and scored for it."""
        if self._exact_in_array(cls):
            return self._place_exact_array(pod, cls)
        feasible, message = self._evaluate(pod, cls)
        if not feasible:
            return Decision(None, message)
        best = self._best(cls, feasible, pod)
        self.bind(pod, best)
        return Decision(best, None)

    def fit_mask(self, pod: Pod) -> Any:
        """The node-only filters, NodePorts and NodeResourcesFit as a numpy bool per node, from the class's
        score array; None when the class cannot keep one (host ports, quantities numpy cannot hold)."""
        if not self.states or self._array_after == sys.maxsize:
            return None
        cls = self._classes.get(pod.spec) or self._new_class(pod.spec)
        if not self._exact_in_array(cls):
            return None
        self._refresh_array(cls)
        return cls.scores[: len(self.states)] >= 0

    def resource_reasons(self, spec: PodSpecInfo, idx: Any) -> Counter[str]:
        """NodeResourcesFit's reasons over the nodes ``idx`` (a numpy array), counted, for a class
        ``fit_mask`` gave an array."""
        assert self._arrays is not None
        return self._arrays.reasons(self._classes[spec], idx)

    def passing(self, pod: Pod) -> Any:
        """Every filter the scheduler runs (the node-only ones, NodePorts and NodeResourcesFit, and for a pod
        on the exact path PodTopologySpread and InterPodAffinity) as a numpy bool per node, from the class's
        score array; None when the class cannot keep one (``fit_mask``)."""
        ok = self.fit_mask(pod)
        if ok is None:
            return None
        if ok.any() and self.needs_exact(pod):
            ok &= self.topology.prepare(pod).codes(self.topology.domain_ids) == 0
        return ok

    def best_in(self, pod: Pod, ok: Any) -> NodeState:
        """The best-scored of the nodes where ``ok`` holds (each passes every filter for the pod), after
        ``passing`` gave the pod's class an array."""
        cls = self._classes[pod.spec]
        assert cls.scores is not None
        return self._best_array(pod, cls, ok)

    def best_of(self, pod: Pod, feasible: list[NodeState]) -> NodeState:
        """The best-scored of ``feasible``, nodes that passed every filter for ``pod`` (kgpu.sim.scheduler.plugins.dynamicresources: a pod
        with resource claims, whose nodes DynamicResources filtered too; volumebinding: a pod with volumes).
        From the class's score array when it keeps one (a class can from any turn on: ``_exact_in_array``)."""
        cls = self._class(pod.spec)
        if len(feasible) > 1 and self._exact_in_array(cls):
            import numpy as np

            self._refresh_array(cls)
            ok = np.zeros(len(self.states), dtype=bool)
            ok[np.fromiter((st.index for st in feasible), dtype=np.int64, count=len(feasible))] = True
            return self._best_array(pod, cls, ok)
        return self._best(cls, feasible, pod)

    def feasible_nodes(self, spec: PodSpecInfo) -> Sequence[int]:
        """Indexes of the nodes that pass ``spec``'s node-only filters, in node order. The class is known
        (its requests count in ``_cannot_raise``) but its heap is not built: the caller keeps its own."""
        cls = self._classes.get(spec)
        if cls is None:
            cls = self._new_class(spec)
        group = cls.group
        if group.seen < len(self.states):
            group.catch_up(self.states, self.by_name)
        return group.feasible

    def static_counts(self, spec: PodSpecInfo) -> Counter[str]:
        """How many nodes each node-only filter rejects for ``spec`` (a copy): the nodes outside
        ``feasible_nodes``, each under its first failing filter's reason."""
        self.feasible_nodes(spec)
        return Counter(self._classes[spec].group.static_counter)

    def needs_exact(self, pod: Pod) -> bool:
        """Whether PodTopologySpread or InterPodAffinity can reject the pod somewhere (the exact path)."""
        return self.topology.needs_exact(pod)

    @property
    def log_length(self) -> int:
        """How many binds and evictions so far."""
        return len(self._log)

    def changed_since(self, position: int) -> list[int]:
        """Node indexes of the binds and evictions after the first ``position`` ones."""
        return self._log[position:]

    def name_ranks(self) -> tuple[list[int], list[int]]:
        """Per node index its rank in node-name order (the tie-break among equal scores), and per rank the
        node index; new lists once nodes have joined since (callers compare them with ``is``)."""
        ranks, order = self._ranks
        if len(ranks) != len(self.states):
            states = self.states
            order = sorted(range(len(states)), key=lambda i: states[i].node.name)
            ranks = [0] * len(order)
            for r, i in enumerate(order):
                ranks[i] = r
            self._ranks = (ranks, order)
        return self._ranks

    @property
    def raised_length(self) -> int:
        """How many binds that may raise a node's score, and evictions, so far."""
        return len(self._raised)

    def raised_since(self, position: int) -> list[int]:
        """Node indexes of the binds that may raise a score and of the evictions after the first
        ``position`` ones: after any other bind a node's score for every class that still fits it is at
        most what it was (``_cannot_raise``), so a heap entry stays an upper bound."""
        return self._raised[position:]

    # --- array mode: many classes -----------------------------------------------------------------------

    def _array_ok(self, spec: PodSpecInfo) -> bool:
        """Array mode needs integers numpy holds exactly; host ports stay on the heap path."""
        if spec.host_ports:
            return False
        limit = ARRAY_LIMIT
        if max(spec.nonzero_cpu, spec.nonzero_memory, *(v for _, v in spec.requests), 0) >= limit:
            return False
        if self._arrays is None:
            big = (
                max(st.alloc_cpu, st.alloc_memory, st.nonzero_cpu, st.nonzero_memory) for st in self.states
            )
            if any(v >= limit for v in big):
                self._array_after = sys.maxsize
                return False
            self._arrays = _NodeArrays(self.states)
        if not self._arrays.ok:
            self._array_after = sys.maxsize
        return self._arrays.ok

    def _to_array_mode(self, cls: _Class) -> None:
        """From now on the class keeps every node's exact score in an array and re-scores, at each of its
        turns, the nodes bound since its last one: no work per bind, whatever the number of classes."""
        import numpy as np

        assert self._arrays is not None
        for name, _ in cls.spec.requests:
            self._arrays.track(name)
        cls.heap, cls.latest = [], {}  # bind skips the class in the node lists it is still in
        cls.scores = np.full(max(16, len(self.states)), -1, dtype=np.int64)
        if cls.varies:
            cls.raws = [np.zeros(len(cls.scores), dtype=np.int64) for _ in STATIC_PLUGINS]
            cls.extra_cache = {}
        cls.pos = 0
        cls.vec_log_pos = self._arrays.log_n
        cls.msg, cls.log_pos = None, -1  # from now on log_pos counts the arrays' log

    def _catch_up_array(self, cls: _Class) -> None:
        import numpy as np

        arrays = self._arrays
        assert arrays is not None
        group = cls.group
        if group.seen < len(self.states):
            group.catch_up(self.states, self.by_name)
        if len(cls.scores) < len(self.states):
            size = max(len(self.states), 2 * len(cls.scores))
            grown = np.full(size, -1, dtype=np.int64)
            grown[: len(cls.scores)] = cls.scores
            cls.scores = grown
            if cls.raws is not None:
                for i, raw in enumerate(cls.raws):
                    cls.raws[i] = np.zeros(size, dtype=np.int64)
                    cls.raws[i][: len(raw)] = raw
        feasible = group.feasible
        if cls.pos < len(feasible):
            fresh = np.array(feasible[cls.pos :], dtype=np.int64)
            cls.scores[fresh] = arrays.scores(cls, fresh)
            if cls.raws is not None:
                cls.extra_cache = {}
                raws = [self._static_raws(cls, idx) for idx in feasible[cls.pos :]]
                for i, raw in enumerate(cls.raws):
                    raw[fresh] = [r[i] for r in raws]
            cls.new.extend(feasible[cls.pos :])
            cls.pos = len(feasible)

    def _explain_array(self, cls: _Class) -> str:
        import numpy as np

        self._catch_up_array(cls)
        arrays = self._arrays
        assert arrays is not None
        if cls.msg is not None and cls.log_pos == arrays.log_n and cls.msg_nodes == len(self.states):
            return cls.msg
        feasible = np.array(cls.group.feasible, dtype=np.int64)
        counts = cls.group.static_counter + arrays.reasons(cls, feasible)
        cls.msg = unschedulable_message(len(self.states), counts)
        cls.msg_nodes, cls.log_pos = len(self.states), arrays.log_n
        cls.new = []
        return cls.msg

    def _place_array(self, pod: Pod, cls: _Class) -> Decision:
        import numpy as np

        arrays = self._arrays
        assert arrays is not None
        scores = cls.scores
        self._refresh_array(cls)
        n = len(self.states)
        view = scores[:n]
        if cls.raws is not None and n:
            # varying class: add the normalised plugins over the nodes that are feasible now. DefaultNormalizeScore
            # depends only on the largest raw score among them, which rarely changes: the weighted sum is kept
            # per such maxima (and number of nodes) until the class takes in new nodes.
            fit = view >= 0
            used = [
                (p, raw[:n])
                for p, raw in zip(STATIC_PLUGINS, cls.raws, strict=True)
                if p is not NODE_AFFINITY or cls.spec.preferred
            ]
            tops = (n, *(int(raw.max(where=fit, initial=0)) for _, raw in used))
            extra = cls.extra_cache.get(tops)
            if extra is None:
                extra = cls.extra_cache[tops] = sum(p.weight * p.normalize_array(raw, fit) for p, raw in used)
            view = np.where(fit, view + extra, -1)
        best = int(view.argmax()) if n else 0
        if not n or view[best] < 0:
            return Decision(None, self.explain(cls))
        ties = np.flatnonzero(view == view[best])
        if len(ties) > 1:
            best = int(ties[arrays.name_rank(self.states)[ties].argmin()])
        st = self.states[best]
        self.bind(pod, st)
        return Decision(st, None)

    def _refresh_array(self, cls: _Class) -> None:
        """Re-score, in the class's array, the nodes bound since its last turn."""
        arrays = self._arrays
        assert arrays is not None
        scores = cls.scores
        n_log = arrays.log_n
        if cls.vec_log_pos < n_log:
            changed = arrays.log[cls.vec_log_pos : n_log]
            cls.vec_log_pos = n_log
            if len(changed) <= SMALL_REFRESH:
                # A class placing its pods one after another sees a node or two change between its turns:
                # _score and fits on those, the same integer and float operations as arrays.scores.
                states, spec = self.states, cls.spec
                nz_cpu, nz_memory, req_cpu, req_memory = cls.score_key
                for idx in changed.tolist():
                    if scores[idx] >= 0:  # infeasible and unfit nodes stay out for good
                        st = states[idx]
                        scores[idx] = _score(nz_cpu, nz_memory, req_cpu, req_memory, st) if fits(spec, st) else -1
                return
            changed = changed[scores[changed] >= 0]  # infeasible and unfit nodes stay out for good
            if len(changed):
                scores[changed] = arrays.scores(cls, changed)


class _NodeArrays:
    """Every node's allocatable, requests and free resources as numpy arrays, kept current on each bind."""

    def __init__(self, states: Sequence[NodeState]) -> None:
        import numpy as np

        self.np = np
        self.n = 0
        cap = max(64, 2 * len(states))
        self.cols: dict[str, Any] = {
            k: np.zeros(cap, dtype=np.int64) for k in ("ac", "am", "nzc", "nzm", "rc", "rm", "pods")
        }
        self.free: dict[str, Any] = {}
        self.states = states
        self.ok = True
        self.log = np.zeros(1024, dtype=np.int64)  # node index of every bind since the arrays exist
        self.log_n = 0
        self._rank: Any = None
        self._rank_n = -1
        for st in states:
            self.add(st)

    def _grow(self, need: int) -> None:
        np = self.np
        for table in (self.cols, self.free):
            for k, arr in table.items():
                if len(arr) < need:
                    grown = np.zeros(max(need, 2 * len(arr)), dtype=np.int64)
                    grown[: len(arr)] = arr
                    table[k] = grown

    def add(self, st: NodeState) -> None:
        i = st.index
        self._grow(i + 1)
        if max(st.alloc_cpu, st.alloc_memory) >= ARRAY_LIMIT:
            self.ok = False
        self.n = max(self.n, i + 1)
        self._set(st)
        for name, arr in self.free.items():
            arr[i] = st.available.get(name, 0)

    def _set(self, st: NodeState) -> None:
        c, i = self.cols, st.index
        c["ac"][i], c["am"][i] = st.alloc_cpu, st.alloc_memory
        c["nzc"][i], c["nzm"][i] = st.nonzero_cpu, st.nonzero_memory
        c["rc"][i], c["rm"][i] = st.req_cpu, st.req_memory
        c["pods"][i] = st.alloc_pods - st.pod_count

    def track(self, name: str) -> None:
        """Keep ``name``'s free amount per node (a class that requests it is in array mode)."""
        if name in self.free:
            return
        np = self.np
        arr = np.zeros(len(self.cols["ac"]), dtype=np.int64)
        self.free[name] = arr
        for st in self.states:
            arr[st.index] = st.available.get(name, 0)

    def bound(self, spec: PodSpecInfo, st: NodeState) -> None:
        """``spec`` was bound to ``st`` or evicted from it: log the node and copy its new figures."""
        if self.log_n == len(self.log):
            grown = self.np.zeros(2 * len(self.log), dtype=self.np.int64)
            grown[: self.log_n] = self.log
            self.log = grown
        self.log[self.log_n] = st.index
        self.log_n += 1
        self._set(st)
        for name, _ in spec.requests:
            arr = self.free.get(name)
            if arr is not None:
                arr[st.index] = st.available.get(name, 0)

    def reasons(self, cls: _Class, feasible: Any) -> Counter[str]:
        """NodeResourcesFit's reasons over the class's feasible nodes, counted (no host ports here)."""
        out: Counter[str] = Counter()
        n = int((self.cols["pods"][feasible] <= 0).sum())
        if n:
            out[ERR_TOO_MANY_PODS] = n
        for name, amount, text in cls.reqs:
            n = int((self.free[name][feasible] < amount).sum())
            if n:
                out[text] += n
        return out

    def name_rank(self, states: Sequence[NodeState]) -> Any:
        if self._rank_n != len(states):
            np = self.np
            order = sorted(range(len(states)), key=lambda i: states[i].node.name)
            rank = np.empty(len(states), dtype=np.int64)
            rank[np.array(order, dtype=np.int64)] = np.arange(len(states), dtype=np.int64)
            self._rank, self._rank_n = rank, len(states)
        return self._rank

    def scores(self, cls: _Class, idx: Any) -> Any:
        """``_score`` of the class on the nodes ``idx``, exactly (same integer and float operations), and
        -1 where the class does not fit (NodeResourcesFit; host-port classes never come here)."""
        np = self.np
        c = self.cols
        nz_cpu, nz_memory, req_cpu, req_memory = cls.score_key
        ac, am = c["ac"][idx], c["am"][idx]
        has_c, has_m = ac > 0, am > 0
        safe_c, safe_m = np.where(has_c, ac, 1), np.where(has_m, am, 1)
        r = c["nzc"][idx] + nz_cpu
        least_c = np.where(has_c & (r <= ac), (ac - r) * MAX_NODE_SCORE // safe_c, 0)
        r = c["nzm"][idx] + nz_memory
        least_m = np.where(has_m & (r <= am), (am - r) * MAX_NODE_SCORE // safe_m, 0)
        count = has_c.astype(np.int64) + has_m.astype(np.int64)
        total = np.where(count > 0, (least_c + least_m) // np.where(count > 0, count, 1), 0)
        if req_cpu or req_memory:
            f_cpu = np.minimum(1.0, (c["rc"][idx] + req_cpu).astype(np.float64) / safe_c.astype(np.float64))
            f_memory = np.minimum(
                1.0, (c["rm"][idx] + req_memory).astype(np.float64) / safe_m.astype(np.float64)
            )
            std = np.where(has_c & has_m, np.abs((f_cpu - f_memory) / 2), 0.0)
            total = total + np.trunc((1 - std) * MAX_NODE_SCORE).astype(np.int64)
        fit = c["pods"][idx] > 0
        for name, amount in cls.spec.requests:
            fit &= self.free[name][idx] >= amount
        return np.where(fit, total, -1)
