"""Flavor assignment (sigs.k8s.io/kueue v0.15.0 pkg/scheduler/flavorassigner/flavorassigner.go).

For each PodSet, for each resource group its requests touch, the group's flavors are tried in the order the
ClusterQueue lists them, starting after the flavor the Workload's previous attempt stopped at (unless the
ClusterQueue's allocatable generation moved since). A flavor is skipped when one of its NoSchedule /
NoExecute taints is not tolerated (by the PodSet or the flavor's own tolerations) or when the PodSet's node
selector and required node affinity, cut down to the label keys the group's flavors use, do not match its
node labels. Each resource of the group is then checked against the quota (``fitsResourceQuota``):

- more than the most the ClusterQueue could ever get (``PotentialAvailable``): no fit;
- within what is unused now (``Available``, borrowing within the borrowingLimit): fit, at the height of the
  smallest cohort subtree that holds it (0 without borrowing);
- otherwise preemption is simulated when the request is within nominal quota, or reclaiming in the
  hierarchy is possible, or the ClusterQueue may preempt while borrowing; else no fit.

Flavor fungibility decides when to stop: a flavor needing preemption moves on when ``whenCanPreempt`` is
TryNextFlavor (the default), one needing borrowing when ``whenCanBorrow`` is TryNextFlavor; otherwise the
best flavor seen so far (by preemption mode, then borrowing height, or the other way round under
``preference``) is kept. The reasons are Kueue's own strings, sorted and joined as its ``Status.Message``.

Kueue iterates a PodSet's resources in Go map order, so when two resources of one flavor fail at once the
reasons it prints can vary from run to run; kgpu takes them in name order.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kgpu.model.kueue import ResourceFlavor, ResourceGroup
from kgpu.model.kueue_queues import TRY_NEXT_FLAVOR
from kgpu.model.kueue_resources import PODS, quantity_string
from kgpu.model.kueue_workload import PodSet
from kgpu.model.predicates import first_untolerated, requirement_matches
from kgpu.sim.queue.state import CQState, Info, LastState
from kgpu.sim.queue.tree import FR, cq_available, lowest_fitting_height, potential_available

# FlavorAssignmentMode, from least to most preferred
NOFIT, PREEMPT, FIT = 0, 1, 2
# preemptionMode (granular), from least to most preferred
G_NOFIT, G_NO_CANDIDATES, G_PREEMPT, G_RECLAIM, G_FIT = 0, 1, 2, 3, 4
_TO_MODE = {G_NOFIT: NOFIT, G_NO_CANDIDATES: PREEMPT, G_PREEMPT: PREEMPT, G_RECLAIM: PREEMPT, G_FIT: FIT}
_WORST = (G_NOFIT, sys.maxsize)

Granular = tuple[int, int]  # (preemption mode, borrowing height)
# (flavor-resource, amount) -> (G_NO_CANDIDATES / G_PREEMPT / G_RECLAIM, borrowing height after preempting)
Oracle = Callable[[FR, int], tuple[int, int]]


@dataclass(slots=True)
class FlavorChoice:
    name: str
    mode: int
    borrow: int
    tried: int = 0


@dataclass(slots=True)
class PodSetChoice:
    name: str
    requests: dict[str, int]
    count: int
    flavors: dict[str, FlavorChoice] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    error: str = ""

    def fit(self) -> bool:
        return not self.error and not self.reasons

    def mode(self) -> int:
        if self.fit():
            return FIT
        if not self.flavors:
            return NOFIT
        return min(f.mode for f in self.flavors.values())

    def status_message(self) -> str:
        return self.error or ", ".join(sorted(self.reasons))


@dataclass(slots=True)
class Assignment:
    podsets: list[PodSetChoice]
    last: LastState
    borrowing: int = 0
    usage: dict[FR, int] = field(default_factory=dict)

    def mode(self) -> int:
        if not self.podsets:
            return NOFIT
        return min(ps.mode() for ps in self.podsets)

    def message(self) -> str:
        parts = []
        for ps in self.podsets:
            if ps.fit():
                continue
            if ps.error:
                return f"failed to assign flavors to pod set {ps.name}: {ps.error}"
            parts.append(f"couldn't assign flavors to pod set {ps.name}: {ps.status_message()}")
        return "; ".join(parts)

    def needs_preemption(self) -> frozenset[FR]:
        """flavorResourcesNeedPreemption."""
        return frozenset(
            (fa.name, res) for ps in self.podsets for res, fa in ps.flavors.items() if fa.mode == PREEMPT
        )

    def total_usage(self) -> dict[FR, int]:
        """TotalRequestsFor: what the Workload would hold, at the assigned counts."""
        out: dict[FR, int] = {}
        for ps in self.podsets:
            for res, amount in ps.requests.items():
                fa = ps.flavors.get(res)
                fr = (fa.name if fa is not None else "", res)
                out[fr] = out.get(fr, 0) + amount
        return out

    def flavors(self) -> dict[str, dict[str, str]]:
        return {ps.name: {res: fa.name for res, fa in ps.flavors.items()} for ps in self.podsets}


def is_preferred(a: Granular, b: Granular, preference: str) -> bool:
    """isPreferred, as v0.15 decides it with FlavorFungibilityImplicitPreferenceDefault off (its default)."""
    if a[0] == G_NOFIT:
        return False
    if b[0] == G_NOFIT:
        return True
    # Kueue's names: "borrowingOverPreemption" compares the preemption mode first.
    mode_first = a[0] > b[0] if a[0] != b[0] else a[1] < b[1]
    borrow_first = a[1] < b[1] if a[1] != b[1] else a[0] > b[0]
    if preference == "BorrowingOverPreemption":
        return borrow_first
    return mode_first


def should_try_next(mode: Granular, when_can_borrow: str, when_can_preempt: str) -> bool:
    if mode[0] in (G_NOFIT, G_NO_CANDIDATES):
        return True
    if mode[0] in (G_PREEMPT, G_RECLAIM) and when_can_preempt == TRY_NEXT_FLAVOR:
        return True
    return mode[1] != 0 and when_can_borrow == TRY_NEXT_FLAVOR


def selector_matches(ps: PodSet, keys: frozenset[str], node_labels: Mapping[str, str]) -> bool:
    """flavorSelector + RequiredNodeAffinity.Match over the flavor's node labels, on the keys it knows."""
    for key, value in ps.node_selector:
        if key in keys and node_labels.get(key) != value:
            return False
    if ps.affinity is None:
        return True
    terms = []
    for term in ps.affinity.terms:
        kept = [r for r in term.match_expressions if r.key in keys]
        if not kept:
            return True  # a term left empty matches every flavor (terms are ORed)
        terms.append(kept)
    if not terms:
        return True
    return any(all(requirement_matches(r, node_labels) for r in kept) for kept in terms)


def refusal(flavors: Mapping[str, ResourceFlavor], name: str, ps: PodSet, group: Group) -> list[str]:
    """Why a PodSet can never use a flavor: it does not exist, a taint is not tolerated, the node selector or
    required node affinity does not match its labels."""
    flavor = flavors.get(name)
    if flavor is None:
        return [f"flavor {name} not found"]
    taint = first_untolerated(flavor.node_taints, (*ps.tolerations, *flavor.tolerations))
    if taint is not None:
        # Kueue formats the corev1.Taint value with %s: Go prints the struct's fields in braces, a nil
        # TimeAdded as <nil> (a flavor's taints never carry one)
        return [f"untolerated taint {{{taint.key} {taint.value} {taint.effect} <nil>}} in flavor {name}"]
    if not selector_matches(ps, group.keys, flavor.node_labels):
        return [f"flavor {name} doesn't match node affinity"]
    return []


@dataclass(slots=True)
class Group:
    """A resource group as the snapshot holds it, with the label keys of its flavors."""

    spec: ResourceGroup
    covered: frozenset[str]
    keys: frozenset[str]


class FlavorAssigner:
    def __init__(
        self,
        info: Info,
        cq: CQState,
        groups: Mapping[str, Group],
        flavors: Mapping[str, ResourceFlavor],
        oracle: Oracle,
        last: LastState | None = None,
    ) -> None:
        """``last``: where the Workload's previous flavor search stopped (``Info.last``, left untouched)."""
        self.info = info
        self.cq = cq
        self.last = last if last is not None and cq.generation <= last.generation else None
        self.groups = groups  # resource -> its group
        self.flavors = flavors
        self.oracle = oracle
        spec = cq.spec
        self.preference = spec.fungibility.preference
        self.when_can_borrow = spec.fungibility.when_can_borrow
        self.when_can_preempt = spec.fungibility.when_can_preempt
        self.preempt_while_borrowing = spec.preemption.borrow_within_cohort != "Never"

    def assign(self, counts: Sequence[int] | None = None) -> Assignment:
        info = self.info
        assignment = Assignment(podsets=[], last=LastState([], self.cq.generation))
        covers_pods = PODS in self.groups
        for i, ps in enumerate(info.wl.podsets):
            count = ps.count if counts is None else counts[i]
            requests = ps.total(count)
            if covers_pods:
                requests[PODS] = count
            choice = PodSetChoice(ps.name, requests, count)
            failed = False
            for res in sorted(requests):
                if res in choice.flavors:
                    continue  # assigned with its resource group
                found, reasons, error = self._find_flavor(i, ps, requests, res, assignment.usage)
                if error or not found:
                    choice.flavors, choice.reasons, choice.error = {}, reasons, error
                    failed = True
                    break
                choice.flavors.update(found)
                choice.reasons.extend(reasons)
            self._append(assignment, choice)
            if failed:
                break
        return assignment

    @staticmethod
    def _append(assignment: Assignment, choice: PodSetChoice) -> None:
        assignment.podsets.append(choice)
        tried: dict[str, int] = {}
        for res, fa in choice.flavors.items():
            assignment.borrowing = max(assignment.borrowing, fa.borrow)
            fr = (fa.name, res)
            assignment.usage[fr] = assignment.usage.get(fr, 0) + choice.requests[res]
            tried[res] = fa.tried
        assignment.last.tried.append(tried)

    def _find_flavor(
        self, index: int, ps: PodSet, requests: Mapping[str, int], resource: str, used: Mapping[FR, int]
    ) -> tuple[dict[str, FlavorChoice], list[str], str]:
        group = self.groups.get(resource)
        if group is None:
            return {}, [f"resource {resource} unavailable in ClusterQueue"], ""
        wanted = sorted(r for r in requests if r in group.covered)
        reasons: list[str] = []
        best: dict[str, FlavorChoice] | None = None
        best_mode = _WORST
        flavors = group.spec.flavors
        start = self.last.next_flavor(index, resource) if self.last is not None else 0
        attempted = -1
        for idx in range(start, len(flavors)):
            attempted = idx
            name = flavors[idx].name
            rejected = refusal(self.flavors, name, ps, group)
            if rejected:
                reasons.extend(rejected)
                continue
            choices: dict[str, FlavorChoice] = {}
            mode: Granular = (G_FIT, 0)
            for res in wanted:
                fr = (name, res)
                pmode, borrow, why = self._fits_quota(fr, used.get(fr, 0), requests[res])
                reasons.extend(why)
                if is_preferred(mode, (pmode, borrow), self.preference):
                    mode = (pmode, borrow)
                if mode[0] == G_NOFIT:
                    break
                choices[res] = FlavorChoice(name, _TO_MODE[pmode], borrow)
            if not should_try_next(mode, self.when_can_borrow, self.when_can_preempt):
                best, best_mode = choices, mode
                break
            if is_preferred(mode, best_mode, self.preference):
                best, best_mode = choices, mode
        if best is None:
            return {}, reasons, ""
        last_idx = -1 if attempted == len(flavors) - 1 else attempted
        for fa in best.values():
            fa.tried = last_idx
        return best, ([] if best_mode[0] == G_FIT else reasons), ""

    def _fits_quota(self, fr: FR, assumed: int, request: int) -> tuple[int, int, list[str]]:
        node = self.cq.node
        flavor, res = fr
        avail = cq_available(node, fr)
        most = potential_available(node, fr)
        val = assumed + request
        if val > most:
            return (
                G_NOFIT,
                0,
                [
                    f"insufficient quota for {res} in flavor {flavor}, previously considered podsets requests "
                    f"({quantity_string(res, assumed)}) + current podset request ({quantity_string(res, request)}) "
                    f"> maximum capacity ({quantity_string(res, most)})"
                ],
            )
        borrow, may_reclaim = lowest_fitting_height(node, fr, val)
        if val <= avail:
            return G_FIT, borrow, []
        why = [
            f"insufficient unused quota for {res} in flavor {flavor}, {quantity_string(res, val - avail)} more needed"
        ]
        if val <= node.quota(fr).nominal or may_reclaim or self.preempt_while_borrowing:
            possibility, after = self.oracle(fr, val)
            return possibility, after, why
        return G_NOFIT, borrow, why
