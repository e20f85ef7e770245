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
from collections import Counter
from collections.abc import Iterable, Sequence

from kgpu.model.objects import CPU, MEMORY, Node, Pod, PodSpecInfo
from kgpu.model.predicates import (
    ERR_AFFINITY_CONFLICT,
    filter_reasons,
    unschedulable_message,
)
from kgpu.sim.scheduler.arrays import ArrayMode, _NodeArrays
from kgpu.sim.scheduler.classes import (
    ARRAY_AFTER,
    NO_NODES,
    Decision,
    NodeState,
    StaticFilter,
    _Class,
    _dynamic_reasons,
    _filter_key,
    _FilterGroup,
    _score,
    dynamic_reasons,
    fits,
    gated,
    score,
)
from kgpu.sim.scheduler.plugins.scoring import (
    MAX_NODE_SCORE,
    STATIC_PLUGINS,
    normalized_total,
    preferred_weight,
)
from kgpu.sim.scheduler.plugins.topology import Topology, needs_filters


class Scheduler(ArrayMode):
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
            extra = normalized_total(
                STATIC_PLUGINS, [[r[i] for r in raws] for i in range(len(STATIC_PLUGINS))]
            )
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


__all__ = [
    "ARRAY_AFTER",
    "NO_NODES",
    "Decision",
    "NodeState",
    "Scheduler",
    "StaticFilter",
    "_score",
    "dynamic_reasons",
    "fits",
    "gated",
    "score",
]
