"""PodTopologySpread's and InterPodAffinity's Filter for one pod (kgpu.sim.scheduler.plugins.topology's docstring):
node by node (``reason``, in kube-scheduler's words) or over all nodes at once (``codes``, vectorised over
the nodes' domain ids, indexes into ``REASONS``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from kgpu.model.objects import (
    Node,
)
from kgpu.model.predicates import (
    ERR_EXISTING_ANTI_AFFINITY,
    ERR_POD_AFFINITY,
    ERR_POD_ANTI_AFFINITY,
    ERR_SPREAD,
    ERR_SPREAD_LABEL,
)
from kgpu.sim.scheduler.plugins.topology_counters import (
    DomainArray,
    DomainIds,
    SpreadCounter,
    Term,
)

# Reasons by code, in the order Filter checks them (code 0: the node passes), for ``PodFilter.codes``.
REASONS = (
    "",
    ERR_SPREAD_LABEL,
    ERR_SPREAD,
    ERR_POD_AFFINITY,
    ERR_POD_ANTI_AFFINITY,
    ERR_EXISTING_ANTI_AFFINITY,
)


@dataclass(slots=True)
class PodFilter:
    """PreFilter state of one pod: what ``reason`` checks on each node (``codes``: on every node at once)."""

    # key, domains, self-match, min, maxSkew, the domains by value id, the counter, whether the minimum is
    # over the domains (minDomains met; else it is 0)
    spread: list[tuple[str, dict[str, int], int, int, int, DomainArray, SpreadCounter, bool]]
    affinity: tuple[tuple[Term, ...], Counter[tuple[str, str]], bool] | None  # terms, counts, first-pod pass
    # key, counts by value, the same by value id, the term
    anti: list[tuple[str, Counter[str], DomainArray, Term]]
    # existing pods' anti-affinity terms the pod matches: their topology key and their live counts by (key,
    # value) (read where they are, as ``spread`` and ``anti`` read theirs: no per-pod copy of every domain)
    blocked: list[tuple[str, Counter[tuple[str, str]]]]
    blocked_terms: list[Term]  # the terms of ``blocked``, in its order
    affinity_matches: bool = False  # the pod matches every term of ``affinity`` (the first-pod rule)

    def reason(self, node: Node) -> str | None:
        labels = node.labels
        for key, domains, self_match, min_match, max_skew, *_ in self.spread:
            value = labels.get(key)
            if value is None:
                return ERR_SPREAD_LABEL
            if domains.get(value, 0) + self_match - min_match > max_skew:
                return ERR_SPREAD
        if self.affinity is not None:
            terms, counts, first = self.affinity
            exist = True
            for t in terms:
                value = labels.get(t.topology_key)
                if value is None:
                    return ERR_POD_AFFINITY
                if counts.get((t.topology_key, value), 0) <= 0:
                    exist = False
            if not exist and not first:
                return ERR_POD_AFFINITY
        for key, anti, *_ in self.anti:
            value = labels.get(key)
            if value is not None and anti.get(value, 0) > 0:
                return ERR_POD_ANTI_AFFINITY
        for key, pairs in self.blocked:
            value = labels.get(key)
            if value is not None and pairs.get((key, value), 0) > 0:
                return ERR_EXISTING_ANTI_AFFINITY
        return None

    def codes(self, dom: DomainIds) -> Any:
        """``reason`` for every node as a code into ``REASONS`` (0 where the node passes), vectorised."""
        np = dom.np
        n = len(dom.states)
        code = np.zeros(n, dtype=np.int8)

        def fail(mask: Any, c: int) -> None:
            code[(code == 0) & mask] = c

        for key, _, self_match, min_match, max_skew, view, *_ in self.spread:
            ids = dom.ids(key)
            fail(ids < 0, 1)
            over = view.array(dom) + (self_match - min_match) > max_skew
            over[-1] = False
            fail(over[ids], 2)
        if self.affinity is not None:
            terms, counts, first = self.affinity
            exist = np.ones(n, dtype=bool)
            for t in terms:
                ids = dom.ids(t.topology_key)
                fail(ids < 0, 3)
                present = dom.flags(
                    t.topology_key, [v for (k, v), c in counts.items() if k == t.topology_key and c > 0]
                )
                exist &= present[ids]
            if not first:
                fail(~exist, 3)
        for key, _, view, _ in self.anti:
            ids = dom.ids(key)
            fail((view.array(dom) > 0)[ids], 4)
        blocked: dict[str, list[str]] = {}
        for key, pairs in self.blocked:
            blocked.setdefault(key, []).extend(v for (k, v), c in pairs.items() if k == key and c > 0)
        for key, values in blocked.items():
            ids = dom.ids(key)
            fail(dom.flags(key, values)[ids], 5)
        return code
