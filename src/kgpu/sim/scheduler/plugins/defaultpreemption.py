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
3. on each potential node, ``SelectVictimsOnNode`` (``kgpu.sim.scheduler.plugins.victims``): every pod of lower priority is removed (the topology
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
message until a node changes. SelectVictimsOnNode (``kgpu.sim.scheduler.plugins.victims``) writes
nothing: a node's answer is kept per class of pod and node version (for pods on the scheduler's exact
path, topology spread and pod affinity, also per the few counts their filters read on the node), so the
next pod of the class redoes only the nodes that changed; the pods below a priority on a node are sorted
once per node version. The exact path's potential nodes come from the topology filters' codes over every
node at once.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kgpu.model.objects import Pod, PodSpecInfo
from kgpu.model.predicates import (
    ERR_POD_AFFINITY,
    ERR_SPREAD_LABEL,
    ports_conflict,
    unschedulable_message,
)
from kgpu.sim.scheduler.plugins.topology import REASONS, PodFilter
from kgpu.sim.scheduler.plugins.victims import (
    NO_VICTIMS,
    Lower,
    Trial,
    Volumes,
    select_victims,
    select_victims_exact,
    start,
)
from kgpu.sim.scheduler.scheduler import NodeState, Scheduler, fits

# InterPodAffinity and PodTopologySpread statuses that removing pods cannot resolve, as PodFilter.codes
_UNRESOLVABLE_CODES = [REASONS.index(ERR_POD_AFFINITY), REASONS.index(ERR_SPREAD_LABEL)]
_TOPOLOGY_REASONS = frozenset(r for r in REASONS if r)

NEVER = "Never"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
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


# A PreFilter plugin that runs before DynamicResources' (the volume plugins: a claim not found, unbound
# immediate claims) and rejects the pod as UnschedulableAndUnresolvable stops the PreFilter phase, so
# DynamicResources' PostFilter finds no state of its own and errs with CycleState's "not found"; the
# framework returns that error before DefaultPreemption runs, and the event ends with it (kube-scheduler
# v1.34, DRA on: RunPreFilterPlugins, DynamicResources.PostFilter, RunPostFilterPlugins).
PREFILTER_STOPPED = "not found"


def filters_part(message: str) -> str:
    """A scheduler message without its PostFilter part (an older scheduler, or one without DRA, may have
    written either or neither of the two statuses)."""
    for marker in (f" {DRA_NO_CLAIMS}, ", " preemption: "):
        head, sep, _ = message.partition(marker)
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
        # node index -> (node version, priority -> the node's pods below it)
        self._lower: dict[int, tuple[int, dict[int, Lower]]] = {}
        # (spec, priority), or for the exact path (spec, priority, namespace, labels) -> node index -> (node
        # version, {the counts read there (None off the exact path): (candidate or None, status reasons)})
        self._victims: dict[tuple[Any, ...], dict[int, tuple[int, dict[Any, tuple[Candidate | None, list[str]]]]]] = {}

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

    def _potential_exact(self, pod: Pod, volumes: Volumes | None = None) -> tuple[set[int], PodFilter]:
        """The potential nodes of a pod on the scheduler's exact path: the topology filters run after
        NodeResourcesFit (and the volume plugins), and only some of their statuses are resolvable (a node
        the pod fits whose topology status is unresolvable is not potential, unless a volume plugin rejected
        it first). With the pod's PreFilter state. The topology statuses come vectorised over every node
        (``PodFilter.codes``); NodeResourcesFit is asked only where they are unresolvable."""
        import numpy as np

        _, res, extra = self._potential(pod.spec)
        sched, spec = self.sched, pod.spec
        states = sched.states
        topo = sched.topology.prepare(pod)
        nodes = res.nodes
        out = set(nodes.tolist())
        if len(nodes):
            code = topo.codes(sched.topology.domain_ids)[nodes]
            for idx in nodes[np.isin(code, _UNRESOLVABLE_CODES)].tolist():
                if fits(spec, states[idx]) and not (volumes is not None and volumes.reasons(states[idx].node, ())):
                    out.discard(idx)
        out |= extra
        return out, topo

    def _dry_run(self, pod: Pod, unresolvable: frozenset[int] = frozenset(), volumes: Volumes | None = None
                 ) -> tuple[list[Candidate], Counter[str], str | None]:
        """The candidates and statuses, and the message when no node had a pod of lower priority (the usual
        case, answered from the node counts alone). ``unresolvable``: nodes a plugin kgpu runs outside the
        scheduler's filters (DynamicResources, the volume plugins) rejected as UnschedulableAndUnresolvable;
        never potential. ``volumes``: the volume plugins, for a pod with claims (they run on each node
        tried, ``select_victims``)."""
        sched = self.sched
        exact = sched.needs_exact(pod)
        potential: set[int] | None = None
        filt: PodFilter | None = None
        if exact:
            exact_set, filt = self._potential_exact(pod, volumes)
            exact_set -= unresolvable
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
        # version, so the next pod of the class redoes only the nodes that changed. An exact-path pod's
        # depends on the node and on the counts its PreFilter state reads there (``Trial.signature``): kept
        # per (spec, priority, namespace, labels), node version and those counts.
        if filt is not None:
            labels = tuple(sorted(pod.labels.items()))
            memo = self._victims.setdefault((pod.spec, pod.priority, pod.namespace, labels), {})
        else:
            memo = self._victims.setdefault((pod.spec, pod.priority), {})
        # The volume plugins' node-only reasons come after NodeResourcesFit and before the topology filters:
        # a pod with claims reads the class's answer and then them, unless a ReadWriteOncePod conflict makes
        # the answer depend on the pods taken off (then each node is tried as it is).
        direct = volumes is not None and volumes.held(()) > 0
        for i in hits:
            st = states[i]
            if direct:
                low = self._lower_pods(st, pod.priority)
                if filt is not None:
                    victims, why = select_victims_exact(pod, st, sched, filt, low, volumes)
                else:
                    victims, why = select_victims(pod, st, low, volumes)
                if victims is None:
                    statuses.update(why)
                    continue
                found.append(Candidate(st, victims))
                if len(found) >= wanted:
                    break
                continue
            kept = memo.get(i)
            if kept is None or kept[0] != st.version:
                kept = memo[i] = (st.version, {})
            sig = Trial.signature(filt, st.node.labels) if filt is not None else None
            hit = kept[1].get(sig)
            if hit is not None:
                candidate, why = hit
            else:
                low = self._lower_pods(st, pod.priority)
                if filt is not None:
                    victims, why = select_victims_exact(pod, st, sched, filt, low)
                else:
                    victims, why = select_victims(pod, st, low)
                candidate = None if victims is None else Candidate(st, victims)
                kept[1][sig] = (candidate, why)
            if volumes is not None and (candidate is not None or (why and why[0] in _TOPOLOGY_REASONS)):
                more = volumes.reasons(st.node, ())
                if more:
                    candidate, why = None, list(more)
            if candidate is None:
                statuses.update(why)
                continue
            found.append(candidate)
            if len(found) >= wanted:
                break  # kube-scheduler stops its dry run here (the nodes left are never looked at)
        return found, +statuses, None

    def _lower_pods(self, st: NodeState, priority: int) -> Lower:
        """``Lower`` of the node and priority, kept while the node's pods stay the same."""
        kept = self._lower.get(st.index)
        if kept is None or kept[0] != st.version:
            kept = self._lower[st.index] = (st.version, {})
        low = kept[1].get(priority)
        if low is None:
            low = kept[1][priority] = Lower(st, priority)
        return low

    def preempt(
        self, pod: Pod, unresolvable: frozenset[int] = frozenset(), volumes: Volumes | None = None
    ) -> Outcome:
        """Run PostFilter for a pod that fits no node: evict and bind, or say why not. ``unresolvable`` and
        ``volumes`` as for ``message`` (a pod with claims)."""
        sched = self.sched
        if pod.spec.scheduling_gates or not sched.states:
            return Outcome()  # gated pods never reach a scheduling cycle; no nodes is not a FitError
        if pod.preemption_policy == NEVER:
            return Outcome(message=f"preemption: {NOT_ELIGIBLE_NEVER}")
        key: tuple[Any, ...] = (pod.spec, pod.priority)
        if volumes is not None:
            key += (unresolvable, volumes.key)
        last = self._failed.get(key)
        if last is not None and last[0] == sched.log_length and last[1] == len(sched.states):
            return Outcome(message=last[2])
        found, statuses, message = self._dry_run(pod, unresolvable, volumes)
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

    def message(
        self, pod: Pod, unresolvable: frozenset[int] = frozenset(), volumes: Volumes | None = None
    ) -> str:
        """The words PostFilter would add now, without acting; empty when it would find candidates.
        ``unresolvable``: nodes rejected as UnschedulableAndUnresolvable by DynamicResources or the volume
        plugins (never potential: "Preemption is not helpful for scheduling" there); ``volumes``: the volume
        plugins of a pod with claims, run on each node tried.

        Kept per class of pod until the cluster changes (a bind or an eviction, a node added), as ``preempt``
        keeps its failures: thousands of unschedulable pods of a few specs cost a few dry runs."""
        sched = self.sched
        if pod.spec.scheduling_gates or not sched.states:
            return ""
        if pod.preemption_policy == NEVER:
            return f"preemption: {NOT_ELIGIBLE_NEVER}"
        key: tuple[Any, ...] = (pod.spec, pod.priority, unresolvable)
        if volumes is not None:
            key += (volumes.key,)
        if sched.needs_exact(pod):  # the topology filters read the pod's namespace and labels too
            key += (pod.namespace, tuple(sorted(pod.labels.items())))
        last = self._said.get(key)
        if last is not None and last[0] == sched.log_length and last[1] == len(sched.states):
            return last[2]
        found, statuses, message = self._dry_run(pod, unresolvable, volumes)
        words = "" if found else (message or f"preemption: {unschedulable_message(len(sched.states), +statuses)}")
        self._said[key] = (sched.log_length, len(sched.states), words)
        return words
