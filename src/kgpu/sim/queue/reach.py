"""What preemption could ever free: an upper bound that ends a preemption search before it starts (sigs.k8s.io/kueue
v0.15.0 pkg/scheduler/preemption/preemption.go ``classicalPreemptions``, classical/candidate_generator.go,
common/preemption_policy.go; kgpu.sim.queue.preemption has the search itself).

A search removes candidates until the preemptor's request fits what its ClusterQueue has available. Removing a
Workload's usage makes at most that much more of each flavor-resource available (``available`` takes sums and
minimums of usages along the path to the root, each with slope 0 or 1). So no set of victims makes a request
fit when it exceeds what is available plus what every Workload the search could remove holds:

- in the preemptor's own ClusterQueue, the Workloads ``withinClusterQueue`` names: lower priority
  (LowerPriority), or lower or equal (LowerOrNewerEqualPriority, whose "newer" only narrows it);
- in other ClusterQueues of the cohort tree, under ``reclaimWithinCohort`` (lower priority, or any), only
  while their ClusterQueue uses more than its quota in a flavor-resource the search is about (a candidate is
  valid only then): when the search is about one flavor-resource (the flavor assigner's oracle), at most the
  excess plus one Workload (the removal that brings it back within its quota is the last); otherwise
  everything they hold.

``Holdings`` keeps, per ClusterQueue and flavor-resource, what admitted Workloads hold by priority and the
largest single Workload; ``reach`` is the bound. Both change only when a Workload is admitted or gives its
quota back (``Scheduler.hold`` / ``unhold``), and a bound is kept until its ClusterQueue's counter moves
(kgpu.sim.queue.versions); ``reach`` reads the current usage, so it is asked only at the start of a cycle,
never while a cycle holds assumed usage.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kgpu.model.kueue_queues import ANY, LOWER_OR_NEWER_EQUAL, LOWER_PRIORITY, NEVER
from kgpu.sim.queue.state import CQState, Info
from kgpu.sim.queue.tree import FR, Node, cq_available


def _eligible(per: Mapping[int, int], policy: str, priority: int) -> int:
    if policy == ANY:
        return sum(per.values())
    if policy == LOWER_PRIORITY:
        return sum(v for q, v in per.items() if q < priority)
    if policy == LOWER_OR_NEWER_EQUAL:
        return sum(v for q, v in per.items() if q <= priority)
    return 0


class Holdings:
    """What admitted Workloads hold, per ClusterQueue and flavor-resource: by priority, and the sizes held."""

    __slots__ = ("_cache", "_members", "by_cq", "cqs", "sizes", "version")

    def __init__(self, cqs: Mapping[str, CQState], version: Callable[[str], int]) -> None:
        self.cqs = cqs
        self.version = version  # a ClusterQueue's counter (kgpu.sim.queue.versions): what a bound reads
        self.by_cq: dict[str, dict[FR, dict[int, int]]] = {}
        self.sizes: dict[str, dict[FR, dict[int, int]]] = {}  # usage of one Workload -> how many
        self._members: dict[Node, list[CQState]] = {}
        self._cache: dict[tuple[str, FR, int, frozenset[FR] | None], tuple[int, int]] = {}

    def _apply(self, cq: CQState, info: Info, sign: int) -> None:
        prio = info.priority
        table = self.by_cq.setdefault(cq.name, {})
        sizes = self.sizes.setdefault(cq.name, {})
        for fr, v in info.usage.items():
            per = table.setdefault(fr, {})
            left = per.get(prio, 0) + sign * v
            if left:
                per[prio] = left
            else:
                per.pop(prio, None)
            count = sizes.setdefault(fr, {})
            n = count.get(v, 0) + sign
            if n:
                count[v] = n
            else:
                count.pop(v, None)

    def add(self, cq: CQState, info: Info) -> None:
        self._apply(cq, info, 1)

    def remove(self, cq: CQState, info: Info) -> None:
        self._apply(cq, info, -1)

    def _tree(self, cq: CQState) -> list[CQState]:
        root = cq.node.root()
        members = self._members.get(root)
        if members is None:
            members = [c for c in self.cqs.values() if c.node.root() is root]
            self._members[root] = members
        return members

    def reach(self, cq: CQState, fr: FR, priority: int, frs: frozenset[FR] | None) -> int:
        """The most of ``fr`` that ``cq`` could have available after a search by a preemptor of ``priority``
        (module docstring); ``frs``: the flavor-resources the search is about, None for ``fr`` alone."""
        key = (cq.name, fr, priority, frs)
        version = self.version(cq.name)
        got = self._cache.get(key)
        if got is not None and got[0] == version:
            return got[1]
        p = cq.spec.preemption
        total = cq_available(cq.node, fr)
        total += _eligible(self.by_cq.get(cq.name, {}).get(fr, {}), p.within_cluster_queue, priority)
        if cq.node.parent is not None and p.reclaim_within_cohort != NEVER:
            reclaim = LOWER_PRIORITY if p.reclaim_within_cohort != ANY else ANY
            for other in self._tree(cq):
                if other is cq:
                    continue
                per = self.by_cq.get(other.name, {}).get(fr)
                if not per:
                    continue
                held = _eligible(per, reclaim, priority)
                if not held:
                    continue
                node = other.node
                if frs is None:
                    excess = node.usage.get(fr, 0) - node.subtree.get(fr, 0)
                    if excess > 0:
                        total += min(held, excess + max(self.sizes[other.name][fr]))
                elif any(node.usage.get(f, 0) > node.subtree.get(f, 0) for f in frs):
                    total += held
        self._cache[key] = (version, total)
        return total
