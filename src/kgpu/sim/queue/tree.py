"""Quota and usage over the cohort tree (sigs.k8s.io/kueue v0.15.0 pkg/cache/scheduler/resource_node.go,
clusterqueue_snapshot.go, cohort_snapshot.go, and ``FindHeightOfLowestSubtreeThatFits`` from
pkg/scheduler/preemption/classical/hierarchical_preemption.go).

Every ClusterQueue and Cohort is a node holding, per (flavor, resource): its own quotas (nominal,
borrowingLimit, lendingLimit), its subtree quota (its nominal plus what each child lends up: the child's
subtree quota less the part its lendingLimit keeps local) and its usage (for a Cohort, what its children use
beyond what they keep local). ``available`` walks up from a ClusterQueue, capped at each level by the
borrowingLimit; ``add_usage`` and ``remove_usage`` bubble the part past the local quota up to the parent.
All amounts are int64 counts in Kueue's units; quantities are compared exactly as Kueue compares them.

One live tree serves as both Kueue's cache and its per-cycle snapshot: what a cycle only assumes (the
usage of a preemptor waiting for its victims, capacity reserved for a workload that cannot preempt) is
added to the tree and taken back when the cycle ends. Inactive ClusterQueues stay in the tree, since the
cache's Cohorts count their quota and usage, but are not children in the snapshot (``in_snapshot``): they
neither lend candidates for preemption nor count in a node's height.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from kgpu.model.kueue import Quota, ResourceGroup

FR = tuple[str, str]  # (flavor, resource)
NO_QUOTA = Quota(0)


class Node:
    """A ClusterQueue or Cohort in the quota tree."""

    __slots__ = (
        "child_cohorts",
        "child_cqs",
        "height",
        "is_cq",
        "name",
        "parent",
        "quotas",
        "subtree",
        "usage",
    )

    def __init__(self, name: str, *, is_cq: bool) -> None:
        self.name = name
        self.is_cq = is_cq
        self.parent: Node | None = None
        self.quotas: dict[FR, Quota] = {}
        self.subtree: dict[FR, int] = {}
        self.usage: dict[FR, int] = {}
        self.child_cqs: list[Node] = []  # those in the scheduling snapshot (active, no cycle above)
        self.child_cohorts: list[Node] = []
        self.height = 0

    def quota(self, fr: FR) -> Quota:
        return self.quotas.get(fr, NO_QUOTA)

    def local_quota(self, fr: FR) -> int:
        """Capacity the lendingLimit keeps visible only to this subtree."""
        q = self.quotas.get(fr)
        if q is not None and q.lending_limit is not None:
            return max(0, self.subtree.get(fr, 0) - q.lending_limit)
        return 0

    def local_available(self, fr: FR) -> int:
        return max(0, self.local_quota(fr) - self.usage.get(fr, 0))

    def borrowing_with(self, fr: FR, val: int) -> bool:
        """ClusterQueueSnapshot.BorrowingWith (against nominal) or CohortSnapshot.BorrowingWith (subtree)."""
        limit = self.quota(fr).nominal if self.is_cq else self.subtree.get(fr, 0)
        return self.usage.get(fr, 0) + val > limit

    def within_nominal(self, frs: Iterator[FR] | set[FR] | frozenset[FR]) -> bool:
        """IsWithinNominalInResources: usage does not exceed the subtree quota in any of ``frs``."""
        return all(self.usage.get(fr, 0) <= self.subtree.get(fr, 0) for fr in frs)

    def ancestors(self) -> Iterator[Node]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> Node:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def path(self) -> str:
        """buildCQPath: ``/root/.../name``."""
        names = [self.name, *(a.name for a in self.ancestors())]
        return "/" + "/".join(reversed(names))


def quotas_of(groups: tuple[ResourceGroup, ...]) -> dict[FR, Quota]:
    return {(f.name, res): q for rg in groups for f in rg.flavors for res, q in f.resources}


def _path(node: Node) -> list[Node]:
    """The node and its ancestors, root last."""
    path = [node]
    while path[-1].parent is not None:
        path.append(path[-1].parent)
    return path


def available(node: Node, fr: FR) -> int:
    """How much of ``fr`` the node can still take: its local part plus what its parent has for it, capped
    by the borrowingLimit at each level (computed from the root down; cohort trees may be deep)."""
    path = _path(node)
    root = path[-1]
    avail = root.subtree.get(fr, 0) - root.usage.get(fr, 0)
    for n in reversed(path[:-1]):
        used = n.usage.get(fr, 0)
        local = n.local_quota(fr)
        q = n.quotas.get(fr)
        if q is not None and q.borrowing_limit is not None:
            stored_in_parent = n.subtree.get(fr, 0) - local
            avail = min(stored_in_parent - max(0, used - local) + q.borrowing_limit, avail)
        avail = max(0, local - used) + avail
    return avail


def cq_available(node: Node, fr: FR) -> int:
    """ClusterQueueSnapshot.Available: never negative."""
    return max(0, available(node, fr))


def potential_available(node: Node, fr: FR) -> int:
    """The most this node could ever take, with no usage anywhere, within borrowingLimits."""
    path = _path(node)
    total = path[-1].subtree.get(fr, 0)
    for n in reversed(path[:-1]):
        total = n.local_quota(fr) + total
        q = n.quotas.get(fr)
        if q is not None and q.borrowing_limit is not None:
            total = min(n.subtree.get(fr, 0) + q.borrowing_limit, total)
    return total


def add_usage(node: Node, fr: FR, val: int) -> None:
    """addUsage: what exceeds the node's local quota bubbles up to its parent."""
    current: Node | None = node
    while current is not None:
        local_available = current.local_available(fr)
        current.usage[fr] = current.usage.get(fr, 0) + val
        if current.parent is None or val <= local_available:
            return
        val -= local_available
        current = current.parent


def remove_usage(node: Node, fr: FR, val: int) -> None:
    """removeUsage: the part the node stored in its parent comes off the parent too."""
    current: Node | None = node
    while current is not None:
        stored_in_parent = current.usage.get(fr, 0) - current.local_quota(fr)
        current.usage[fr] = current.usage.get(fr, 0) - val
        if stored_in_parent <= 0 or current.parent is None:
            return
        val = min(val, stored_in_parent)
        current = current.parent


def add_all(node: Node, usage: Mapping[FR, int]) -> None:
    for fr, val in usage.items():
        add_usage(node, fr, val)


def remove_all(node: Node, usage: Mapping[FR, int]) -> None:
    for fr, val in usage.items():
        remove_usage(node, fr, val)


def fits(node: Node, usage: Mapping[FR, int]) -> bool:
    """ClusterQueueSnapshot.Fits."""
    return all(cq_available(node, fr) >= val for fr, val in usage.items())


def _post_order(root: Node, children: Mapping[str, list[Node]]) -> list[Node]:
    """Cohorts below ``root`` (itself included), children before parents; iterative, trees may be deep."""
    order: list[Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(c for c in children.get(node.name, ()) if not c.is_cq)
    order.reverse()
    return order


def accumulate(root: Node, members: Mapping[str, list[Node]]) -> None:
    """updateCohortResourceNode: subtree quotas from the leaves up (usage is added later, bubbling)."""
    for cohort in _post_order(root, members):
        cohort.subtree = {fr: q.nominal for fr, q in cohort.quotas.items()}
        for child in members.get(cohort.name, ()):
            if child.is_cq:
                child.subtree = {fr: q.nominal for fr, q in child.quotas.items()}
            for fr, sub in child.subtree.items():
                cohort.subtree[fr] = cohort.subtree.get(fr, 0) + sub - child.local_quota(fr)


def set_heights(root: Node) -> None:
    """getNodeHeight over the snapshot's children: 1 for a cohort with children, +1 per cohort level."""
    children = {root.name: list(root.child_cohorts)}
    stack = list(root.child_cohorts)
    while stack:
        node = stack.pop()
        children[node.name] = list(node.child_cohorts)
        stack.extend(node.child_cohorts)
    for cohort in _post_order(root, children):
        height = min(len(cohort.child_cqs) + len(cohort.child_cohorts), 1)
        for child in cohort.child_cohorts:
            height = max(height, child.height + 1)
        cohort.height = height


def lowest_fitting_height(cq: Node, fr: FR, val: int) -> tuple[int, bool]:
    """FindHeightOfLowestSubtreeThatFits: the height of the smallest subtree whose quota holds ``val``
    more of ``fr`` (0: the ClusterQueue's own nominal quota), and whether reclaiming above it is possible."""
    if not cq.borrowing_with(fr, val) or cq.parent is None:
        return 0, cq.parent is not None
    remaining = val - cq.local_available(fr)
    for node in cq.ancestors():
        if not node.borrowing_with(fr, remaining):
            return node.height, node.parent is not None
        remaining -= node.local_available(fr)
    return cq.root().height, False
