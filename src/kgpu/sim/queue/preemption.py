"""Classical preemption (sigs.k8s.io/kueue v0.15.0 pkg/scheduler/preemption/preemption.go,
preemption_oracle.go, classical/candidate_generator.go, classical/hierarchical_preemption.go,
common/ordering.go, common/preemption_policy.go).

Candidates are admitted Workloads that use a flavor-resource the preemptor needs preemption in:

- in its own ClusterQueue, under ``withinClusterQueue`` (LowerPriority, or LowerOrNewerEqualPriority: lower
  priority, or equal priority and created later than the preemptor);
- in the cohort tree, under ``reclaimWithinCohort`` (Any, LowerPriority), only from ClusterQueues (and
  Cohort subtrees) using more than their quota. Walking up from the preemptor's ClusterQueue, once a subtree
  holds what it asks for, the preemptor has a hierarchical advantage over what others use of that subtree
  (any priority may go); without it, a candidate of at least the preemptor's priority (or above
  ``borrowWithinCohort.maxPriorityThreshold``) may only go if the preemptor then does not borrow.

They are ordered (``CandidatesOrdering``): already evicted first (none in kgpu, whose victims give their
quota back before the next cycle), other ClusterQueues before the
preemptor's own, lower priority first, most recently admitted first, then by UID. Kueue removes them in that
order until the preemptor fits (with or without borrowing, as the policies allow), then adds back, in
reverse order, every one it can do without: the minimal set of victims. Each victim gets Kueue's message:
"Preempted to accommodate a workload (UID: ..., JobUID: ...) due to <reason>; preemptor path: /cohort/cq;
preemptee path: /cohort/cq".

The same search, run for one flavor-resource, is the oracle the flavor assigner asks whether a flavor
needing preemption has candidates (``SimulatePreemption``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kgpu.model.kueue_queues import ANY, LOWER_OR_NEWER_EQUAL, LOWER_PRIORITY, NEVER
from kgpu.sim.queue.flavors import G_NO_CANDIDATES, G_PREEMPT, G_RECLAIM
from kgpu.sim.queue.reach import Holdings
from kgpu.sim.queue.state import CQState, Info
from kgpu.sim.queue.tree import FR, Node, add_all, cq_available, lowest_fitting_height, remove_all

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
REASON_TEXT = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    "InCohortFairSharing": "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}

_NEVER, _WITHIN_CQ, _HIERARCHICAL, _RECLAIM_WITHOUT_BORROWING, _RECLAIM_WHILE_BORROWING = range(5)
_VARIANT_REASON = {
    _WITHIN_CQ: IN_CLUSTER_QUEUE,
    _HIERARCHICAL: IN_COHORT_RECLAMATION,
    _RECLAIM_WITHOUT_BORROWING: IN_COHORT_RECLAMATION,
    _RECLAIM_WHILE_BORROWING: IN_COHORT_RECLAIM_WHILE_BORROWING,
}


@dataclass(slots=True)
class Target:
    info: Info
    reason: str


def message(preemptor: Info, reason: str, preemptor_path: str, preemptee_path: str) -> str:
    """preemptionMessage: the Evicted (and Preempted) condition message on a victim."""
    wl = preemptor.wl
    return (
        f"Preempted to accommodate a workload (UID: {wl.uid or 'UNKNOWN'}, JobUID: {wl.job_uid or 'UNKNOWN'}) "
        f"due to {REASON_TEXT.get(reason, 'UNKNOWN')}; preemptor path: {preemptor_path or 'UNKNOWN'}; "
        f"preemptee path: {preemptee_path or 'UNKNOWN'}"
    )


def satisfies_policy(preemptor: Info, candidate: Info, policy: str) -> bool:
    lower = preemptor.priority > candidate.priority
    if policy == LOWER_PRIORITY:
        return lower
    if policy == LOWER_OR_NEWER_EQUAL:
        return lower or (
            preemptor.priority == candidate.priority and preemptor.order_time < candidate.order_time
        )
    return policy == ANY


def remove_workload(cqs: Mapping[str, CQState], info: Info) -> None:
    """Snapshot.RemoveWorkload."""
    cq = cqs[info.cq or ""]
    cq.workloads.pop(info.key, None)
    remove_all(cq.node, info.usage)


def add_workload(cqs: Mapping[str, CQState], info: Info) -> None:
    cq = cqs[info.cq or ""]
    cq.workloads[info.key] = info
    add_all(cq.node, info.usage)


@dataclass(slots=True)
class _Candidate:
    info: Info
    lca: Node | None
    variant: int


class Preemptor:
    """Kueue's classical preemptor over the simulation's ClusterQueues."""

    def __init__(self, cqs: Mapping[str, CQState], now: float, holdings: Holdings | None = None) -> None:
        self.cqs = cqs
        self.now = now
        self.holdings = holdings  # with it, searches that no set of victims can satisfy end at once

    def beyond_reach(self, pre: Info, cq: CQState, usage: Mapping[FR, int]) -> bool:
        """Some flavor-resource asks more than any set of victims could make available (``Holdings.reach``)."""
        h = self.holdings
        if h is None:
            return False
        frs = frozenset(usage) if len(usage) > 1 else None
        return any(v > h.reach(cq, fr, pre.priority, frs) for fr, v in usage.items())

    # --- candidates ----------------------------------------------------------------------------------

    def _variant(self, pre: Info, cq: CQState, frs: frozenset[FR], cand: Info, advantage: bool) -> int:
        if not any(fr in frs for fr in cand.usage):
            return _NEVER
        same = cand.cq == cq.name
        policy = cq.spec.preemption.within_cluster_queue if same else cq.spec.preemption.reclaim_within_cohort
        if not satisfies_policy(pre, cand, policy):
            return _NEVER
        if same:
            return _WITHIN_CQ
        if advantage:
            return _HIERARCHICAL
        p = cq.spec.preemption
        if p.borrow_within_cohort == NEVER:
            return _RECLAIM_WITHOUT_BORROWING
        if cand.priority >= pre.priority or (
            p.max_priority_threshold is not None and cand.priority > p.max_priority_threshold
        ):
            return _RECLAIM_WITHOUT_BORROWING
        return _RECLAIM_WHILE_BORROWING

    def _from_cq(
        self, pre: Info, cq: CQState, frs: frozenset[FR], source: CQState, lca: Node | None, advantage: bool
    ) -> list[_Candidate]:
        out = []
        for cand in source.workloads.values():
            variant = self._variant(pre, cq, frs, cand, advantage)
            if variant != _NEVER:
                out.append(_Candidate(cand, lca, variant))
        return out

    def _in_subtree(
        self,
        pre: Info,
        cq: CQState,
        frs: frozenset[FR],
        root: Node,
        skip: Node | None,
        advantage: bool,
        result: list[_Candidate],
    ) -> None:
        """collectCandidatesInSubtree: from ClusterQueues (and Cohort subtrees) using more than their quota,
        leaving out ``skip`` (the subtree already searched); iterative, trees may be deep."""
        stack = [root]
        while stack:
            current = stack.pop()
            for child in current.child_cohorts:
                if child is not skip and not child.within_nominal(frs):
                    stack.append(child)
            for child_cq in current.child_cqs:
                if child_cq is not cq.node and not child_cq.within_nominal(frs):
                    result.extend(self._from_cq(pre, cq, frs, self.cqs[child_cq.name], root, advantage))

    def _hierarchical(
        self, pre: Info, cq: CQState, frs: frozenset[FR], requests: Mapping[FR, int]
    ) -> tuple[list[_Candidate], list[_Candidate]]:
        hierarchy: list[_Candidate] = []
        by_priority: list[_Candidate] = []
        if cq.node.parent is None or cq.spec.preemption.reclaim_within_cohort == NEVER:
            return hierarchy, by_priority
        advantage, remaining = _fit_in_quota(cq.node, requests)
        previous: Node | None = None
        for current in cq.node.ancestors():
            into = hierarchy if advantage else by_priority
            self._in_subtree(pre, cq, frs, current, previous, advantage, into)
            fits, remaining = _fit_in_quota(current, remaining)
            advantage = advantage or fits
            previous = current
        return hierarchy, by_priority

    def _order(self, cands: list[_Candidate], cq_name: str) -> list[_Candidate]:
        def key(c: _Candidate) -> tuple[bool, int, float, str, str, str]:
            i = c.info
            reserved = i.reserved_at if i.reserved_at is not None else self.now
            return (i.cq == cq_name, i.priority, -reserved, i.wl.uid, i.wl.namespace, i.wl.name)

        return sorted(cands, key=key)

    # --- the search ----------------------------------------------------------------------------------

    def targets(self, pre: Info, cq: CQState, frs: frozenset[FR], usage: Mapping[FR, int]) -> list[Target]:
        """classicalPreemptions: the victims that let ``usage`` fit in ``cq``, or [] when none do."""
        if self.beyond_reach(pre, cq, usage):
            return []
        spec = cq.spec.preemption
        same = [] if spec.within_cluster_queue == NEVER else self._from_cq(pre, cq, frs, cq, None, False)
        hierarchy, by_priority = self._hierarchical(pre, cq, frs, usage)
        # Kueue puts candidates already being evicted first; in kgpu a victim gives its quota back before
        # the next cycle, so no admitted candidate is ever being evicted.
        ordered = [c for lst in (hierarchy, by_priority, same) for c in self._order(lst, cq.name)]
        forbidden = spec.borrow_within_cohort == NEVER
        attempts: tuple[bool, ...]
        if (not hierarchy and not by_priority) or (forbidden and not self._under_nominal(cq, frs)):
            attempts = (True,)
        elif forbidden and not hierarchy:
            attempts = (False, True)
        else:
            attempts = (True, False)
        for borrowing in attempts:
            chosen: list[Target] = []
            for cand in ordered:
                if not self._valid(cq, frs, cand, borrowing):
                    continue
                remove_workload(self.cqs, cand.info)
                chosen.append(Target(cand.info, _VARIANT_REASON[cand.variant]))
                if _fits(cq.node, usage, borrowing):
                    chosen = self._fill_back(cq, usage, chosen, borrowing)
                    for t in chosen:
                        add_workload(self.cqs, t.info)
                    return chosen
            for t in chosen:
                add_workload(self.cqs, t.info)
        return []

    @staticmethod
    def _under_nominal(cq: CQState, frs: frozenset[FR]) -> bool:
        return all(cq.node.usage.get(fr, 0) < cq.node.quota(fr).nominal for fr in frs)

    def _valid(self, cq: CQState, frs: frozenset[FR], cand: _Candidate, borrowing: bool) -> bool:
        if cand.info.cq == cq.name:
            return True
        if borrowing and cand.variant == _RECLAIM_WITHOUT_BORROWING:
            return False
        node = self.cqs[cand.info.cq or ""].node
        if node.within_nominal(frs):
            return False
        for ancestor in node.ancestors():
            if ancestor is cand.lca:
                break
            if ancestor.within_nominal(frs):
                return False
        return True

    def _fill_back(
        self, cq: CQState, usage: Mapping[FR, int], chosen: list[Target], borrowing: bool
    ) -> list[Target]:
        for i in range(len(chosen) - 2, -1, -1):
            add_workload(self.cqs, chosen[i].info)
            if _fits(cq.node, usage, borrowing):
                chosen[i] = chosen[-1]  # Kueue's O(1) deletion, which reorders the victims
                chosen.pop()
            else:
                remove_workload(self.cqs, chosen[i].info)
        return chosen

    def simulate(self, pre: Info, cq: CQState, fr: FR, quantity: int) -> tuple[int, int]:
        """PreemptionOracle.SimulatePreemption for one flavor-resource."""
        if self.holdings is not None and quantity > self.holdings.reach(cq, fr, pre.priority, None):
            return G_NO_CANDIDATES, lowest_fitting_height(cq.node, fr, quantity)[0]
        found = self.targets(pre, cq, frozenset((fr,)), {fr: quantity})
        if not found:
            return G_NO_CANDIDATES, lowest_fitting_height(cq.node, fr, quantity)[0]
        for t in found:
            remove_all(self.cqs[t.info.cq or ""].node, t.info.usage)
        borrow = lowest_fitting_height(cq.node, fr, quantity)[0]
        for t in found:
            add_all(self.cqs[t.info.cq or ""].node, t.info.usage)
        if any(t.info.cq == cq.name for t in found):
            return G_PREEMPT, borrow
        return G_RECLAIM, borrow


def _fit_in_quota(node: Node, requests: Mapping[FR, int]) -> tuple[bool, dict[FR, int]]:
    """QuantitiesFitInQuota."""
    fits = True
    remaining = {}
    for fr, v in requests.items():
        if node.usage.get(fr, 0) + v > node.subtree.get(fr, 0):
            fits = False
        remaining[fr] = max(0, v - node.local_available(fr))
    return fits, remaining


def _fits(node: Node, usage: Mapping[FR, int], borrowing: bool) -> bool:
    """workloadFits."""
    for fr, v in usage.items():
        if not borrowing and node.borrowing_with(fr, v):
            return False
        if v > cq_available(node, fr):
            return False
    return True
