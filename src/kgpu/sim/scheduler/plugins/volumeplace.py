"""A pod with PersistentVolumeClaims through kube-scheduler's cycle: ``place`` and ``explain``.

The default filters, then VolumeRestrictions, VolumeBinding and VolumeZone (``kgpu.sim.scheduler.plugins.
volumebinding``, in the default profile's order), on every node; the best-scored node that passes wins (no
volume plugin scores by default in v1.34, pkg/scheduler/framework/plugins/volumebinding), and the pod and
its claims bind there. Where the volumes' constraint is exact as node affinity the scheduler's own paths
place the pod; otherwise, and for the message of a pod that fits nowhere, every node is looked at: over
the scheduler's arrays when the pod's class keeps them (``Scheduler.passing``, ``Scheduler.fit_mask``: the
node-only filters, NodePorts and NodeResourcesFit, and the topology filters' codes, for every node at once),
the volume plugins once per combination of the node labels they read (``VolumeState.grouped``), the best
node as the scheduler ranks it (``Scheduler.best_in``); node by node for a class that cannot keep arrays
(host ports). The message counts each node under the first filter it fails, as kube-scheduler's does.

Preemption (``DryRun``, ``postfilter``): DefaultPreemption's dry run (SelectVictimsOnNode) runs every
filter on a node with its pods of lower priority taken off, the volume plugins included. VolumeRestrictions
counts, at PreFilter, the pod's ReadWriteOncePod claims some scheduled pod uses; its PreFilter extensions
(RemovePod, AddPod) take off and put back each pod's volumes naming one of those claims (by claim name, as
``conflictingPVCRefCountForPod`` does), so evicting the pod that holds the claim, when it runs on the
node tried and has a lower priority, makes room; its status is Unschedulable. VolumeBinding's and
VolumeZone's reasons depend on the node alone and are UnschedulableAndUnresolvable: a node they reject is
never a candidate, and a node that another filter rejected first gets their words once its pods are off.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kgpu.model.objects import Node, Pod
from kgpu.model.predicates import unschedulable_message
from kgpu.model.volumes import Claim
from kgpu.sim.scheduler.plugins.volumebinding import ERR_RWOP, RWOP, UNRESOLVABLE, Verdict, VolumeState
from kgpu.sim.scheduler.scheduler import NO_NODES


@dataclass
class Outcome:
    node: Any = None  # the NodeState bound to
    reason: str | None = None
    prefilter: bool = False  # rejected by PreFilter: not for the provisioners
    unresolvable: bool = False  # every node's status is UnschedulableAndUnresolvable
    claims: list[Claim] = field(default_factory=list)
    # nodes the volume plugins rejected as UnschedulableAndUnresolvable (VolumeBinding's and VolumeZone's
    # Filter): never potential for preemption ("Preemption is not helpful for scheduling" there)
    volume_unresolvable: frozenset[int] = frozenset()


def place(vol: VolumeState, sched: Any, pod: Pod) -> Outcome:
    """Schedule a pod with claims: the default filters, then the volume plugins, on every node; the
    best-scored node that passes wins (no volume plugin scores by default in 1.34). Binds the pod and its
    claims."""
    from kgpu.sim.scheduler.scheduler import fits

    states = sched.states
    early = sched.before_plugins(pod)
    if early is not None:
        return Outcome(reason=early)
    verdict = vol.prefilter(pod)
    if verdict.message:
        return Outcome(
            reason=f"0/{len(states)} nodes are available: {verdict.message}.",
            prefilter=True,
            unresolvable=True,
            claims=verdict.claims,
        )
    # Exact as node affinity: the scheduler's own paths place the pod (NodeAffinity's score reads only
    # preferred terms, so required terms added change no node's score). Not with spread constraints: their
    # nodeAffinityPolicy Honor counts only the nodes the pod's own affinity matches. Only the message of a
    # pod that fits nowhere needs the volume plugins' words: the loop below.
    constraint = False if pod.spec.topology_spread else vol.as_affinity(pod, verdict.claims)
    if constraint is not False:
        original = pod.spec
        spec = original if constraint is None else vol.spec_with(original, constraint)  # type: ignore[arg-type]
        if spec is not None:
            pod.spec = spec
            try:
                decision = sched.place(pod)
            finally:
                pod.spec = original
            if decision.node is not None:
                vol.commit(pod, verdict.claims, decision.node.node)
                return Outcome(node=decision.node, claims=verdict.claims)
    mask = sched.passing(pod)
    if mask is not None:
        # the scheduler's filters over every node at once (its score array and topology codes), the
        # volume plugins once per combination of the labels they read, the best as the scheduler ranks
        import numpy as np

        idx = np.flatnonzero(mask)
        good = idx[vol.passes(pod, verdict.claims, states, idx)] if len(idx) else idx
        if len(good):
            ok = np.zeros(len(states), dtype=bool)
            ok[good] = True
            best = sched.best_in(pod, ok)
            sched.bind(pod, best)
            vol.commit(pod, verdict.claims, best.node)
            return Outcome(node=best, claims=verdict.claims)
        topo = sched.topology.prepare(pod) if sched.needs_exact(pod) else None
        return _unplaced(vol, sched, pod, verdict, topo)
    spec = pod.spec
    exact = sched.needs_exact(pod)
    topo = sched.topology.prepare(pod) if exact else None
    passing = []
    check = vol.filter_memo(pod, verdict.claims)
    for idx in sched.feasible_nodes(spec):  # the node-only filters, memoised per kind of pod
        st = states[idx]
        if not fits(spec, st) or check(st.node):
            continue
        if topo is not None and topo.reason(st.node) is not None:
            continue
        passing.append(st)
    if passing:
        best = sched.best_of(pod, passing)
        sched.bind(pod, best)
        vol.commit(pod, verdict.claims, best.node)
        return Outcome(node=best, claims=verdict.claims)
    return _unplaced(vol, sched, pod, verdict, topo)


def explain(vol: VolumeState, sched: Any, pod: Pod) -> Outcome:
    """Why ``pod`` fits no node of ``sched`` now, in the plugins' words, without placing it (kgpu doctor
    explains a pending pod over the cluster as it is); ``reason`` None when some node would take it."""
    states = sched.states
    if not states:
        return Outcome(reason=NO_NODES)
    verdict = vol.prefilter(pod)
    if verdict.message:
        return Outcome(
            reason=f"0/{len(states)} nodes are available: {verdict.message}.",
            prefilter=True,
            unresolvable=True,
            claims=verdict.claims,
        )
    topo = sched.topology.prepare(pod) if sched.needs_exact(pod) else None
    return _unplaced(vol, sched, pod, verdict, topo)


def _unplaced(vol: VolumeState, sched: Any, pod: Pod, verdict: Verdict, topo: Any) -> Outcome:
    """The message over every node: each counted under the first filter it fails. The node-only filters'
    counts come from the scheduler's filter group (every node they reject is UnschedulableAndUnresolvable);
    the others are checked on the nodes that pass them."""
    from kgpu.sim.scheduler.scheduler import dynamic_reasons

    states, spec = sched.states, pod.spec
    feasible = sched.feasible_nodes(spec)
    counter: Counter[str] = sched.static_counts(spec)
    unresolvable = len(states) - len(feasible)  # nodes DefaultPreemption cannot help on
    fit = sched.fit_mask(pod)
    if fit is not None:
        # vectorised: NodeResourcesFit counted over the class's arrays, the volume plugins once per label
        # combination, the topology filters' codes
        import numpy as np

        from kgpu.sim.scheduler.plugins.topology import REASONS

        at = np.asarray(feasible, dtype=np.int64)
        counter.update(sched.resource_reasons(spec, at))
        fitting = at[fit[at]]
        which, found = vol.grouped(pod, verdict.claims, states, fitting)
        sizes = np.bincount(which, minlength=len(found)).tolist()
        hopeless = np.zeros(len(found), dtype=bool)
        for g, (reasons, size) in enumerate(zip(found, sizes, strict=True)):
            if reasons and size:
                for r in reasons:
                    counter[r] += size
                if all(r in UNRESOLVABLE for r in reasons):
                    unresolvable += size
                    hopeless[g] = True
        volume_unresolvable = frozenset(fitting[hopeless[which]].tolist()) if len(found) else frozenset()
        if topo is not None:
            clean = np.array([not r for r in found], dtype=bool)
            rest = fitting[clean[which]] if len(found) else fitting
            codes = topo.codes(sched.topology.domain_ids)[rest]
            for code, k in enumerate(np.bincount(codes, minlength=len(REASONS)).tolist()):
                if code and k:
                    counter[REASONS[code]] += k
        return Outcome(
            reason=unschedulable_message(len(states), counter),
            claims=verdict.claims,
            unresolvable=unresolvable == len(states),
            volume_unresolvable=volume_unresolvable,
        )
    check = vol.filter_memo(pod, verdict.claims)
    hopeless_nodes: set[int] = set()
    for idx in feasible:
        st = states[idx]
        why = dynamic_reasons(spec, st)
        if why:
            counter.update(why)
            continue
        reasons = check(st.node)
        if reasons:
            counter.update(reasons)
            if all(r in UNRESOLVABLE for r in reasons):
                unresolvable += 1
                hopeless_nodes.add(idx)
            continue
        if topo is not None:
            t = topo.reason(st.node)
            if t is not None:
                counter[t] += 1
    return Outcome(
        reason=unschedulable_message(len(states), counter),
        claims=verdict.claims,
        unresolvable=unresolvable == len(states),
        volume_unresolvable=frozenset(hopeless_nodes),
    )


class DryRun:
    """The volume plugins in DefaultPreemption's dry run for one pod and its claims (module docstring):
    ``reasons(node, off)`` on a node with the pods ``off`` taken off, ``uses(pod)`` what putting a pod back
    adds to VolumeRestrictions' count; ``key`` names what the answers depend on (for the caches)."""

    __slots__ = ("conflicts", "key", "node", "rwop")

    def __init__(self, vol: VolumeState, pod: Pod, claims: list[Claim]) -> None:
        # readWriteOncePodPVCsForPod reads the pod's persistentVolumeClaim volumes (ephemeral ones are not)
        pvcs = {e.partition(" ")[2] for e in pod.spec.volume_claims if e.startswith("pvc ")}
        pvcs |= {t.claim_name(pod.name) for t in pod.spec.claim_templates if t.kind == "template"}
        mine = [c for c in claims if RWOP in c.access_modes and c.name in pvcs]
        self.rwop = frozenset(c.name for c in mine)
        self.conflicts = sum(1 for c in mine if vol.in_use(c))  # calPreFilterState
        self.node = vol.filter_memo(pod, claims, rwop=False)
        self.key = vol.signature(claims)

    def uses(self, pod: Pod) -> int:
        """conflictingPVCRefCountForPod: the pod's persistentVolumeClaim volumes naming one of the claims."""
        if not self.rwop:
            return 0
        n = sum(1 for e in pod.spec.volume_claims if e.startswith("pvc ") and e[4:] in self.rwop)
        return n + sum(
            1 for t in pod.spec.claim_templates if t.kind == "template" and t.claim_name(pod.name) in self.rwop
        )

    def held(self, off: Sequence[Pod]) -> int:
        """VolumeRestrictions' count with the pods ``off`` taken off (above 0: the conflict stays)."""
        return self.conflicts - sum(self.uses(p) for p in off) if self.conflicts else 0

    def reasons(self, node: Node, off: Sequence[Pod]) -> tuple[str, ...]:
        """The volume plugins' status on ``node`` with ``off`` taken off, in the default profile's order."""
        if self.held(off) > 0:
            return (ERR_RWOP,)
        return self.node(node)


def postfilter(vol: VolumeState, preemption: Any, pod: Pod, out: Outcome) -> str:
    """DefaultPreemption's words for a pod with claims that fits no node (``out``, from ``place`` or
    ``explain``), without acting: every node rejected unresolvably, or the dry run with the volume plugins."""
    from kgpu.sim.scheduler.plugins.defaultpreemption import NEVER, NOT_HELPFUL

    n = len(preemption.sched.states)
    if out.unresolvable and pod.preemption_policy != NEVER:
        return f"preemption: 0/{n} nodes are available: {n} {NOT_HELPFUL}."
    return str(preemption.message(pod, out.volume_unresolvable, DryRun(vol, pod, out.claims)))
