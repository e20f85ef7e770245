"""kube-scheduler's DefaultPreemption (the PostFilter plugin): evict lower-priority pods to make room.

When a pod fits no node, kube-scheduler v1.34 (pkg/scheduler/framework/preemption/preemption.go and
plugins/defaultpreemption/default_preemption.go; behaviour transcribed, not code):

1. a pod whose ``preemptionPolicy`` is ``Never`` is not eligible ("not eligible due to
   preemptionPolicy=Never.");
2. the *potential* nodes are those whose filter status is Unschedulable, i.e. removing pods could help:
   the first failing filter is NodePorts, NodeResourcesFit with no request above the node's whole
   allocatable (``Unresolvable`` in fit.go), PodTopologySpread's skew, or InterPodAffinity's anti-affinity
   (the pod's own or a running pod's). NodeUnschedulable, NodeName, TaintToleration, NodeAffinity (and
   nodes outside NodeAffinity's PreFilter result), a missing topology label and unmet pod affinity are
   UnschedulableAndUnresolvable;
3. on each potential node, ``SelectVictimsOnNode``: every pod of lower priority is removed (the topology
   counts too, as the PreFilter extensions' RemovePod); if the pod still does not pass every filter, the
   node's status is the filters' reasons ("Insufficient cpu"), and with no such pod at all it is "No
   preemption victims found for incoming pod". Otherwise the removed pods are put back one at a time, most
   important first (priority, then the older), and each that leaves the pod fitting stays (a *reprieve*);
   the others are the victims;
4. ``pickOneNodeForPreemption`` among the nodes with victims: fewest PodDisruptionBudget violations, the
   lowest highest-victim priority, the smallest sum of victim priorities (each plus 2^31), the fewest
   victims, the latest start time of the highest-priority victims, then the first;
5. no node with victims: the pod's message gets "preemption: 0/N nodes are available: ..." over every
   node's status, "Preemption is not helpful for scheduling" for the nodes that were not potential.

DynamicResources' PostFilter runs before DefaultPreemption's (DRA is on by default since v1.34): for a pod
without ResourceClaims it says "no new claims to deallocate", and the scheduler joins the two statuses with
", " (``postfilter_words``), so a real FailedScheduling event reads "... untolerated taint(s). no new claims
to deallocate, preemption: 0/3 nodes are available: ...".

kgpu's differences, all documented in docs/simulate.md:

- PodDisruptionBudgets are not modelled: every victim counts as non-violating;
- start times: a pod's ``status.startTime`` when the input has one; a pod placed by this simulation (or
  without one) starts "now", after all of them, as kube-scheduler's GetPodStartTime says. Equal start
  times go to the pod bound to the node first, and the last tie-break of step 4 is the node name, where
  kube-scheduler takes whichever node its parallel dry run listed first;
- kube-scheduler dry-runs from a random offset and stops once it has max(100, 10 % of the potential
  nodes) candidates; kgpu does the same from the first node in node order;
- the victims are deleted at once and the preemptor is bound to the nominated node, where kube-scheduler
  waits for their graceful termination and schedules the preemptor again (it then takes the nominated
  node first). Pods queued in between see the node as the preemptor will leave it.

Cost: a pod at or below the lowest priority of every pod bound or queued is answered from node counts
alone; otherwise it looks only at nodes holding a pod of lower priority (kept from the bind log). Its
class's resolvable nodes are computed once, vectorised, as nodes join; a class that failed keeps its
message until a node changes. Pods on the scheduler's exact path (topology spread, pod affinity) are
checked node by node with the victims taken out of the topology counts for the trial.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kgpu.model.objects import HostPort, Pod, PodSpecInfo
from kgpu.model.predicates import (
    ERR_NODE_PORTS,
    ERR_POD_AFFINITY,
    ERR_SPREAD_LABEL,
    insufficient_resources,
    ports_conflict,
    unschedulable_message,
)
from kgpu.sim.scheduler.scheduler import NodeState, Scheduler, dynamic_reasons, fits

# InterPodAffinity and PodTopologySpread statuses that removing pods cannot resolve
_UNRESOLVABLE_TOPOLOGY = (ERR_POD_AFFINITY, ERR_SPREAD_LABEL)

NEVER = "Never"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
# DefaultPreemptionArgs defaults: minCandidateNodesPercentage 10, minCandidateNodesAbsolute 100.
MIN_CANDIDATE_PERCENTAGE = 10
MIN_CANDIDATE_ABSOLUTE = 100
# DynamicResources' PostFilter status for a pod without ResourceClaims (dynamicresources.go)
DRA_NO_CLAIMS = "no new claims to deallocate"
_PRIORITY_OFFSET = 2**31  # math.MaxInt32 + 1: every term of the sum of victim priorities is >= 0


def postfilter_words(preemption: str) -> str:
    """The PostFilter part of a FailedScheduling message: DynamicResources' status, then DefaultPreemption's."""
    return f"{DRA_NO_CLAIMS}, {preemption}"


def filters_part(message: str) -> str:
    """A scheduler message without its PostFilter part (an older scheduler, or one without DRA, may have
    written either or neither of the two statuses)."""
    for start in (f" {DRA_NO_CLAIMS}, ", " preemption: "):
        head, sep, _ = message.partition(start)
        if sep:
            return head
    return message


@dataclass(slots=True)
class Candidate:
    """A node and the pods to evict from it, most important first."""

    node: NodeState
    victims: list[Pod]
    pdb_violations: int = 0
    key: tuple[int, int, int, int, float, str] | None = None  # ``rank``, once computed


@dataclass(slots=True)
class Outcome:
    """What PostFilter did: evicted ``victims`` from ``node`` and bound the pod there, or, when ``node`` is
    None, the words it adds to the pod's message (``"preemption: ..."``; empty when it did not run)."""

    node: NodeState | None = None
    victims: list[Pod] = field(default_factory=list)
    message: str = ""


def num_candidates(potential: int) -> int:
    """calculateNumCandidates: 10 % of the potential nodes, at least 100, at most all of them."""
    n = potential * MIN_CANDIDATE_PERCENTAGE // 100
    return min(max(n, MIN_CANDIDATE_ABSOLUTE), potential)


def start(pod: Pod) -> float:
    """GetPodStartTime: status.startTime, else now (later than any given time)."""
    return math.inf if pod.start_time is None else pod.start_time


def rank(c: Candidate) -> tuple[int, int, int, int, float, str]:
    """pickOneNodeForPreemption's criteria in order, smallest best, with the node name as the last one."""
    highest = max(p.priority for p in c.victims)
    total = sum(p.priority + _PRIORITY_OFFSET for p in c.victims)
    # GetEarliestPodStartTime over the highest-priority victims; the latest such time wins
    earliest = min(start(p) for p in c.victims if p.priority == highest)
    return (c.pdb_violations, highest, total, len(c.victims), -earliest, c.node.name)


def pick_one_node(candidates: Sequence[Candidate]) -> Candidate:
    """pickOneNodeForPreemption."""
    for c in candidates:
        if c.key is None:
            c.key = rank(c)
    return min(candidates, key=lambda c: c.key or ())


class _Fit:
    """A node's requests, pod count and ports with some pods taken off, for the dry run."""

    __slots__ = ("count", "ports", "requested", "st")

    def __init__(self, st: NodeState) -> None:
        self.st = st
        self.requested = dict(st.requested)
        self.count = st.pod_count
        self.ports: list[HostPort] = list(st.ports)

    def remove(self, pod: Pod) -> None:
        req = self.requested
        for k, v in pod.spec.requests:
            req[k] = req.get(k, 0) - v
        self.count -= 1
        for port in pod.spec.host_ports:
            self.ports.remove(port)

    def add(self, pod: Pod) -> None:
        req = self.requested
        for k, v in pod.spec.requests:
            req[k] = req.get(k, 0) + v
        self.count += 1
        self.ports.extend(pod.spec.host_ports)

    def reasons(self, spec: PodSpecInfo) -> list[str]:
        """NodePorts then NodeResourcesFit, as ``scheduler.dynamic_reasons`` (the static filters pass)."""
        if spec.host_ports and ports_conflict(spec.host_ports, self.ports):
            return [ERR_NODE_PORTS]
        return insufficient_resources(spec, self.st.node.allocatable, self.requested, self.count)

    def fits(self, spec: PodSpecInfo) -> bool:
        """``not reasons(spec)``, without building them."""
        if self.count + 1 > self.st.alloc_pods:
            return False
        alloc, req = self.st.node.allocatable, self.requested
        for k, v in spec.requests:
            if v > alloc.get(k, 0) - req.get(k, 0):
                return False
        return not (spec.host_ports and ports_conflict(spec.host_ports, self.ports))


def select_victims(pod: Pod, st: NodeState) -> tuple[list[Pod] | None, list[str]]:
    """SelectVictimsOnNode: (victims, []) when evicting them lets ``pod`` fit, else (None, the node's
    status reasons). ``st.pods`` is in bind order."""
    prio = pod.priority
    order = {id(p): i for i, p in enumerate(st.pods)}
    potential = [p for p in st.pods if p.priority < prio]
    if not potential:
        return None, [NO_VICTIMS]
    fit = _Fit(st)
    for p in potential:
        fit.remove(p)
    why = fit.reasons(pod.spec)
    if why:
        return None, why
    # MoreImportantPod: higher priority first, then the earlier start; equal starts by bind order.
    potential.sort(key=lambda p: (-p.priority, start(p), order[id(p)]))
    victims = []
    for p in potential:  # no PodDisruptionBudgets: every pod is non-violating
        fit.add(p)
        if not fit.fits(pod.spec):
            fit.remove(p)
            victims.append(p)
    return victims, []


def select_victims_exact(pod: Pod, st: NodeState, sched: Scheduler) -> tuple[list[Pod] | None, list[str]]:
    """``select_victims`` for a pod that PodTopologySpread or InterPodAffinity filter: the pods are taken off
    the node and out of the topology counts for real while the filters run, and put back after, in their
    order."""
    prio = pod.priority
    potential = [p for p in st.pods if p.priority < prio]
    if not potential:
        return None, [NO_VICTIMS]
    topology = sched.topology
    saved_pods, saved_ports = list(st.pods), list(st.ports)
    order = {id(p): i for i, p in enumerate(saved_pods)}
    off: list[Pod] = []

    def reasons() -> list[str]:
        why = dynamic_reasons(pod.spec, st)
        if why:
            return list(why)
        topo = topology.prepare(pod).reason(st.node)
        return [topo] if topo is not None else []

    def take(p: Pod) -> None:
        st.remove(p)
        topology.unbound(p, st)
        off.append(p)

    def put(p: Pod) -> None:
        st.add(p)
        topology.bound(p, st)
        off.remove(p)

    try:
        for p in potential:
            take(p)
        why = reasons()
        if why:
            return None, why
        potential.sort(key=lambda p: (-p.priority, start(p), order[id(p)]))
        victims = []
        for p in potential:
            put(p)
            if reasons():
                take(p)
                victims.append(p)
        return victims, []
    finally:
        for p in list(off):
            put(p)
        st.pods[:] = saved_pods
        st.ports[:] = saved_ports


class _Resolvable:
    """Per pod spec: the nodes whose first failing filter preemption could resolve, apart from host ports
    (those depend on what runs there): the filter group's feasible nodes with room for every request in
    their whole allocatable. Grows as the group takes in new nodes."""

    __slots__ = ("node_set", "nodes", "pos")

    def __init__(self, empty: Any) -> None:
        self.nodes: Any = empty  # numpy int64 array of node indexes, in node order
        self.node_set: set[int] | None = None  # the same, as a set, built when needed
        self.pos = 0


class Preemption:
    """PostFilter over a ``Scheduler``: ``preempt(pod)`` after ``Scheduler.place`` found no node.

    ``lowest`` is the lowest priority of any pod that may be bound later (the queue's); with the pods bound
    now it gives a floor: a pod at or below it has no pod of lower priority to evict anywhere, and is
    answered without looking at the nodes' pods. None: no such shortcut.
    """

    def __init__(self, sched: Scheduler, lowest: float | None = None) -> None:
        self.sched = sched
        self._floor = -math.inf
        if lowest is not None:
            bound = (p.priority for st in sched.states for p in st.pods)
            self._floor = min(lowest, min(bound, default=math.inf))
        self._scanned = False
        self._log_pos = 0
        self._seen_nodes = 0
        self._lowest: dict[int, int] = {}  # node index -> lowest priority of a pod on it
        self._by_lowest: dict[int, set[int]] = {}  # that priority -> node indexes
        self._resolvable: dict[PodSpecInfo, _Resolvable] = {}
        self._alloc: dict[str, Any] = {}  # resource -> every node's allocatable amount (numpy)
        # (spec, priority) -> (bind-log length, node count, message) of the last attempt without candidates
        self._failed: dict[tuple[PodSpecInfo, int], tuple[int, int, str]] = {}
        self._plain: dict[tuple[int, int], str] = {}  # (nodes, potential nodes) -> message without victims
        # message(): (pod class, priority, nodes rejected unresolvably) -> (bind-log length, node count, words)
        self._said: dict[tuple[Any, ...], tuple[int, int, str]] = {}
        # (spec, priority) -> node index -> (node version, candidate or None, status reasons)
        self._victims: dict[tuple[PodSpecInfo, int], dict[int, tuple[int, Candidate | None, list[str]]]] = {}

    # --- which nodes hold pods of lower priority -------------------------------------------------------

    def _note(self, st: NodeState) -> None:
        idx = st.index
        old = self._lowest.pop(idx, None)
        if old is not None:
            self._by_lowest[old].discard(idx)
        if st.pods:
            low = min(p.priority for p in st.pods)
            self._lowest[idx] = low
            self._by_lowest.setdefault(low, set()).add(idx)

    def _refresh(self) -> None:
        sched = self.sched
        states = sched.states
        if not self._scanned:  # the pods bound before the first look are not on the log
            self._scanned = True
            self._log_pos = sched.log_length
            self._seen_nodes = len(states)
            for st in states:
                self._note(st)
            return
        if self._log_pos < sched.log_length:
            for idx in set(sched.changed_since(self._log_pos)):
                self._note(states[idx])
            self._log_pos = sched.log_length
        if self._seen_nodes < len(states):
            for st in states[self._seen_nodes :]:
                self._note(st)
            self._seen_nodes = len(states)

    def _with_lower(self, priority: int) -> set[int]:
        out: set[int] = set()
        for low, nodes in self._by_lowest.items():
            if low < priority:
                out |= nodes
        return out

    def _allocatable(self, resource: str) -> Any:
        import numpy as np

        states = self.sched.states
        arr = self._alloc.get(resource)
        have = 0 if arr is None else len(arr)
        if have < len(states):
            tail = np.fromiter(
                (states[i].node.allocatable.get(resource, 0) for i in range(have, len(states))),
                dtype=np.int64,
                count=len(states) - have,
            )
            arr = self._alloc[resource] = tail if arr is None else np.concatenate([arr, tail])
        return arr

    def _potential(self, spec: PodSpecInfo) -> tuple[int, _Resolvable, set[int]]:
        """How many nodes are potential for ``spec``; the resolvable ones; those only a host port makes
        potential (NodePorts runs before NodeResourcesFit, and a conflict is resolvable)."""
        import numpy as np

        sched = self.sched
        feasible = sched.feasible_nodes(spec)
        res = self._resolvable.get(spec)
        if res is None:
            res = self._resolvable[spec] = _Resolvable(np.zeros(0, dtype=np.int64))
        if res.pos < len(feasible):
            idx = np.asarray(feasible[res.pos :], dtype=np.int64)
            room = np.ones(len(idx), dtype=bool)
            for name, amount in spec.requests:
                room &= self._allocatable(name)[idx] >= amount
            res.nodes = np.concatenate([res.nodes, idx[room]])
            res.node_set = None
            res.pos = len(feasible)
        extra: set[int] = set()
        if spec.host_ports:
            have = self._node_set(res)
            states = sched.states
            extra = {
                i for i in feasible if i not in have and ports_conflict(spec.host_ports, states[i].ports)
            }
        return len(res.nodes) + len(extra), res, extra

    @staticmethod
    def _node_set(res: _Resolvable) -> set[int]:
        if res.node_set is None:
            res.node_set = set(res.nodes.tolist())
        return res.node_set

    # --- PostFilter ------------------------------------------------------------------------------------

    def candidates(self, pod: Pod) -> tuple[list[Candidate], Counter[str]]:
        """DryRunPreemption over the potential nodes: the candidates, and every other node's status."""
        found, statuses, _ = self._dry_run(pod)
        return found, statuses

    def _potential_exact(self, pod: Pod) -> set[int]:
        """The potential nodes of a pod on the scheduler's exact path: the topology filters run after
        NodeResourcesFit, and only some of their statuses are resolvable."""
        _, res, extra = self._potential(pod.spec)
        sched, spec = self.sched, pod.spec
        states = sched.states
        topo = sched.topology.prepare(pod)
        out = set(extra)
        for idx in res.nodes.tolist():
            st = states[idx]
            if fits(spec, st) and topo.reason(st.node) in _UNRESOLVABLE_TOPOLOGY:
                continue
            out.add(idx)
        return out

    def _dry_run(self, pod: Pod, unresolvable: frozenset[int] = frozenset()
                 ) -> tuple[list[Candidate], Counter[str], str | None]:
        """The candidates and statuses, and the message when no node had a pod of lower priority (the usual
        case, answered from the node counts alone). ``unresolvable``: nodes a plugin kgpu runs outside the
        scheduler's filters (DynamicResources) rejected as UnschedulableAndUnresolvable; never potential."""
        sched = self.sched
        exact = sched.needs_exact(pod)
        potential: set[int] | None = None
        if exact:
            exact_set = self._potential_exact(pod) - unresolvable
            n_potential = len(exact_set)
        else:
            n_potential, res, extra = self._potential(pod.spec)
            if unresolvable:
                potential = (self._node_set(res) | extra) - unresolvable
                n_potential = len(potential)
        statuses: Counter[str] = Counter()
        statuses[NOT_HELPFUL] = len(sched.states) - n_potential
        hits: list[int] = []
        if pod.priority > self._floor:
            self._refresh()
            lower = self._with_lower(pod.priority)
            if lower and exact:
                hits = sorted(lower & exact_set)
            elif lower and potential is not None:
                hits = sorted(lower & potential)
            elif lower:
                hits = sorted((lower & self._node_set(res)) | (lower & extra))  # in node order
        statuses[NO_VICTIMS] = n_potential - len(hits)
        if not hits:
            key = (len(sched.states), n_potential)
            message = self._plain.get(key)
            if message is None:
                message = self._plain[key] = f"preemption: {unschedulable_message(key[0], +statuses)}"
            return [], +statuses, message
        found: list[Candidate] = []
        wanted = num_candidates(n_potential)
        states = sched.states
        # A fast-path pod's result on a node depends on that node alone: kept per (spec, priority) and node
        # version, so the next pod of the class redoes only the nodes that changed.
        memo = None if exact else self._victims.setdefault((pod.spec, pod.priority), {})
        for i in hits:
            st = states[i]
            hit = memo.get(i) if memo is not None else None
            if hit is not None and hit[0] == st.version:
                candidate, why = hit[1], hit[2]
            else:
                victims, why = select_victims_exact(pod, st, sched) if exact else select_victims(pod, st)
                candidate = None if victims is None else Candidate(st, victims)
                if memo is not None:
                    memo[i] = (st.version, candidate, why)
            if candidate is None:
                statuses.update(why)
                continue
            found.append(candidate)
            if len(found) >= wanted:
                break  # kube-scheduler stops its dry run here (the nodes left are never looked at)
        return found, +statuses, None

    def preempt(self, pod: Pod) -> Outcome:
        """Run PostFilter for a pod that fits no node: evict and bind, or say why not."""
        sched = self.sched
        if pod.spec.scheduling_gates or not sched.states:
            return Outcome()  # gated pods never reach a scheduling cycle; no nodes is not a FitError
        if pod.preemption_policy == NEVER:
            return Outcome(message=f"preemption: {NOT_ELIGIBLE_NEVER}")
        key = (pod.spec, pod.priority)
        last = self._failed.get(key)
        if last is not None and last[0] == sched.log_length and last[1] == len(sched.states):
            return Outcome(message=last[2])
        found, statuses, message = self._dry_run(pod)
        if not found:
            message = message or f"preemption: {unschedulable_message(len(sched.states), +statuses)}"
            self._failed[key] = (sched.log_length, len(sched.states), message)
            return Outcome(message=message)
        best = pick_one_node(found)
        st = best.node
        for victim in best.victims:
            sched.unbind(victim, st)
        sched.bind(pod, st)
        return Outcome(st, best.victims)

    def message(self, pod: Pod, unresolvable: frozenset[int] = frozenset()) -> str:
        """The words PostFilter would add now, without acting; empty when it would find candidates.
        ``unresolvable``: nodes rejected as UnschedulableAndUnresolvable by DynamicResources (never
        potential: "Preemption is not helpful for scheduling" there).

        Kept per class of pod until the cluster changes (a bind or an eviction, a node added), as ``preempt``
        keeps its failures: thousands of unschedulable pods of a few specs cost a few dry runs."""
        sched = self.sched
        if pod.spec.scheduling_gates or not sched.states:
            return ""
        if pod.preemption_policy == NEVER:
            return f"preemption: {NOT_ELIGIBLE_NEVER}"
        key: tuple[Any, ...] = (pod.spec, pod.priority, unresolvable)
        if sched.needs_exact(pod):  # the topology filters read the pod's namespace and labels too
            key += (pod.namespace, tuple(sorted(pod.labels.items())))
        last = self._said.get(key)
        if last is not None and last[0] == sched.log_length and last[1] == len(sched.states):
            return last[2]
        found, statuses, message = self._dry_run(pod, unresolvable)
        words = "" if found else (message or f"preemption: {unschedulable_message(len(sched.states), +statuses)}")
        self._said[key] = (sched.log_length, len(sched.states), words)
        return words
