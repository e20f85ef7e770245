"""The scheduler's view of a pod with resource claims (kube-scheduler's scheduling cycle with DynamicResources;
kgpu.sim.scheduler.plugins.dynamicresources has the plugin): every default filter, then DynamicResources'
Filter, on every node; the best-scored node that passes wins and the pod's devices are reserved. Pods whose
claims are all alike take a lane that keeps their nodes' scores in a heap (``_place_lane``). Also what kgpu
says of a pod PreEnqueue keeps out of the queue, and DynamicResources' PostFilter words."""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kgpu.model.dra import (
    ALL,
    ALLOCATION_RESULTS_MAX,
    AllocatedDevice,
    Claim,
    ClaimSpec,
)
from kgpu.model.objects import CPU, MEMORY, Node, Pod
from kgpu.model.predicates import filter_reasons, unschedulable_message
from kgpu.sim.scheduler.plugins.dra_allocator import (
    AllocationError,
)
from kgpu.sim.scheduler.plugins.dynamicresources import DRA, NO_CLAIMS, PLUGIN, STILL_NOT, _Lane
from kgpu.sim.scheduler.scheduler import _score, fits


@dataclass
class Outcome:
    node: Any = None  # the NodeState bound to
    reason: str | None = None
    devices: list[dict[str, Any]] = field(default_factory=list)
    prefilter: bool = False  # rejected by PreFilter (PostFilter: no new claims to deallocate)
    # every node's status is UnschedulableAndUnresolvable (PreFilter's, or DynamicResources' Filter on each):
    # DefaultPreemption finds no candidate and says preemption is not helpful on all of them
    unresolvable: bool = False
    rejected: frozenset[int] = frozenset()  # nodes (indexes) DynamicResources' Filter rejected: unresolvable
    no_claims: bool = False  # PreFilter found no claim to allocate (each one not needed): nothing to deallocate


def place(dra: DRA, sched: Any, pod: Pod) -> Outcome:
    """Schedule a pod with resource claims: every default filter, then DynamicResources' Filter, on every
    node; the best-scored node that passes wins (DynamicResources does not score in 1.34). Binds the pod
    and reserves its devices."""
    states = sched.states
    early = sched.before_plugins(pod)
    if early is not None:
        return Outcome(reason=early)
    verdict = dra.prefilter(pod)
    if verdict.enqueue:
        return Outcome(reason=not_enqueued(verdict.message), prefilter=True, unresolvable=True)
    if verdict.message:
        return Outcome(reason=f"0/{len(states)} nodes are available: {verdict.message}.", prefilter=True,
                       unresolvable=True)
    if _lane_ok(sched, pod, verdict.claims):
        try:
            fast = _place_lane(dra, sched, pod, verdict.claims)
        except AllocationError as exc:
            return Outcome(reason=f'running "{PLUGIN}" filter plugin: {exc}')
        if fast is not None:
            return fast
    spec = pod.spec
    topo = None
    counter: Counter[str] = Counter()
    passing = []
    rejected: list[int] = []
    allocations: dict[int, list[list[AllocatedDevice]]] = {}
    for st in states:
        why = filter_reasons(spec, st.node, st.requested, st.pod_count, st.ports)
        if why:
            counter.update(why)
            continue
        if sched.needs_exact(pod):
            if topo is None:
                topo = sched.topology.prepare(pod)
            t = topo.reason(st.node)
            if t is not None:
                counter[t] += 1
                continue
        try:
            reason, alloc = dra.filter(pod, verdict.claims, st.node)
        except AllocationError as exc:
            return Outcome(reason=f'running "{PLUGIN}" filter plugin: {exc}')
        if reason is not None:
            counter[reason] += 1
            rejected.append(st.index)
            continue
        allocations[st.index] = alloc
        passing.append(st)
    if not passing:
        return Outcome(reason=unschedulable_message(len(states), counter), unresolvable=len(rejected) == len(states),
                       rejected=frozenset(rejected), no_claims=not verdict.claims)
    best = sched.best_of(pod, passing)
    return _bound(dra, sched, pod, verdict.claims, best, allocations[best.index])


def _bound(dra: DRA, sched: Any, pod: Pod, claims: list[Claim], best: Any,
           alloc: list[list[AllocatedDevice]]) -> Outcome:
    dra.commit(claims, alloc, best.node)
    sched.bind(pod, best)
    devices = [
        {"claim": c.name, "request": d.request, "driver": d.driver, "pool": d.pool, "device": d.device,
         **({"adminAccess": True} if d.admin_access else {})}
        for c in claims for d in (c.allocation.devices if c.allocation is not None else ())
    ]
    return Outcome(node=best, devices=devices)


def _lane_ok(sched: Any, pod: Pod, claims: list[Claim]) -> bool:
    if pod.spec.preferred or sched.needs_exact(pod):
        return False
    for c in claims:
        if c.allocation is not None or c.owner[1] != pod.name or c.owner[0] != "Pod":
            return False
        if not _spec_lane_ok(c.spec):
            return False
    return True


def _spec_lane_ok(spec: ClaimSpec) -> bool:
    """The allocator's errors before its search (All, more than 32 devices) are for the full path."""
    if sum(max(a.count for a in r.alternatives) for r in spec.requests) > ALLOCATION_RESULTS_MAX:
        return False
    return not any(a.mode == ALL for r in spec.requests for a in r.alternatives)


def _errors_on(dra: DRA, pod: Pod, claims: list[Claim], node: Node) -> bool:
    """Whether a selector of the claims fails on one of the node's devices: kube-scheduler filters every
    node, and such an error on any of them aborts the cycle, so the lane (which stops at the first node that
    serves the pod) is not for these pods."""
    pools = dra._pools(node)
    for c in claims:
        for r in c.spec.requests:
            for a in r.alternatives:
                dra.candidates(pod, node, pools, a)
                if dra.has_errors(node, a):
                    return True
    return False


def _place_lane(dra: DRA, sched: Any, pod: Pod, claims: list[Claim]) -> Outcome | None:
    spec = pod.spec
    # pods of one spec may need different claims (a claim the resourceclaim controller did not create for
    # one of them is not needed): a node dropped for some claims is not dropped for others. Looked up by
    # the objects' identities first (the entry holds them, so an id is not reused), then by value.
    ids = (id(spec), pod.namespace, *[id(c.spec) for c in claims])
    held = dra._lane_ids.get(ids)
    if held is None:
        key = (spec, pod.namespace, tuple(c.spec for c in claims))
        lane = dra._lanes.get(key)
        if lane is None:
            # the score's inputs from the pod (kgpu.sim.scheduler.scheduler.score); lanes that share them share scores
            skey = (spec.nonzero_cpu, spec.nonzero_memory, spec.request(CPU), spec.request(MEMORY))
            lane = dra._lanes[key] = _Lane(raised_pos=sched.raised_length, skey=skey,
                                           scores=dra._scores.setdefault(skey, {}))
        held = dra._lane_ids[ids] = (key, lane)
    lane = held[1]
    states = sched.states
    heap, latest, versions, dead = lane.heap, lane.latest, lane.versions, lane.dead
    skey, memo = lane.skey, lane.scores
    ranks, order = sched.name_ranks()
    n = len(order)

    def entry(idx: int) -> int:
        st = states[idx]
        version = versions[idx] = st.version
        hit = memo.get(idx)
        if hit is None or hit[0] != version:
            hit = memo[idx] = (version, _score(*skey, st))
        e: int = ranks[idx] - hit[1] * n
        latest[idx] = e
        return e

    feasible = sched.feasible_nodes(spec)
    if lane.seen < len(feasible):
        for idx in feasible[lane.seen:]:
            node = states[idx].node
            if any(t.effect == "PreferNoSchedule" for t in node.taints):
                lane.slow = True
            if not lane.slow and _errors_on(dra, pod, claims, node):
                lane.slow = True
            lane.members.append(idx)
        lane.seen = len(feasible)
    if lane.slow:
        return None
    if lane.ranks is not ranks:  # new, or nodes joined: every entry again
        heap[:] = [entry(idx) for idx in lane.members if idx not in dead]
        heapq.heapify(heap)
        lane.ranks, lane.raised_pos = ranks, sched.raised_length
    elif lane.raised_pos < sched.raised_length:
        for idx in set(sched.raised_since(lane.raised_pos)):
            if idx in latest and idx not in dead:
                heapq.heappush(heap, entry(idx))
        lane.raised_pos = sched.raised_length
    heappop, heapreplace = heapq.heappop, heapq.heapreplace
    while heap:
        top = heap[0]
        idx = order[top % n]
        if latest[idx] != top or idx in dead:
            heappop(heap)  # superseded by a newer entry, or dropped
            continue
        st = states[idx]
        if versions[idx] != st.version:
            heapreplace(heap, entry(idx))  # stale: scored again, it sinks to its place
            continue
        if not fits(spec, st):
            heappop(heap)  # pushed again if the node's score may rise (an eviction)
            continue
        reason, alloc = dra.filter(pod, claims, st.node)
        if reason is not None:
            dead.add(idx)
            heappop(heap)
            continue
        # the entry stays: the bind makes it stale, and the next turn scores it again
        return _bound(dra, sched, pod, claims, st, alloc)
    return None


NOT_ENQUEUED = ("kube-scheduler does not try it: {} (DynamicResources' PreEnqueue keeps the pod out of the scheduling "
                "queue until that changes, so there is no FailedScheduling event)")


def not_enqueued(error: str) -> str:
    """What becomes of a pod whose claims PreEnqueue refuses: not kube-scheduler's words (it says nothing)."""
    return NOT_ENQUEUED.format(error)


def postfilter_words(outcome: Outcome) -> str:
    """DynamicResources' PostFilter status for a pod with claims that did not fit: nothing to deallocate when
    PreFilter rejected it or found no claim to allocate (every one not needed), else "still not schedulable"."""
    return NO_CLAIMS if outcome.prefilter or outcome.no_claims else STILL_NOT
