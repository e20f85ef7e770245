"""What a ClusterQueue's answers depend on, as a counter per ClusterQueue.

A nomination (the flavor assigner with its preemption oracle, then the preemption search), the bound on
what preemption could free (kgpu.sim.queue.reach) and the skipper's classification of a shape all read the
quota tree only at the flavor-resources their ClusterQueue has quota for: the usage along its path to the
root and in the subtrees of its Cohorts, and the admitted Workloads using them (the preemption candidates,
with their priorities and admission times: ``_variant`` leaves out a candidate using none of the
flavor-resources searched, ``within_nominal`` and ``_fits`` read only those). So an admission or a release
changes the answers only of the ClusterQueues with quota for a flavor-resource the Workload uses, wherever
in the tree they are, and what was found for the others still holds.

``touch`` moves the counter of every ClusterQueue with quota for a flavor-resource of the Workload;
``touch_all`` moves every counter. The one answer that reads the clock: a candidate admitted with no
recorded time sorts at ``now`` (``Preemptor._order``), so while one holds quota, a new ``now`` moves every
counter (``at``).
"""

from __future__ import annotations

from collections.abc import Mapping

from kgpu.sim.queue.flavors import Group
from kgpu.sim.queue.state import Info, Key
from kgpu.sim.queue.tree import FR


class Versions:
    __slots__ = ("_by_fr", "_now", "_of", "undated")

    def __init__(self, cqs: Mapping[str, object], groups: Mapping[str, Mapping[str, Group]]) -> None:
        self._of: dict[str, int] = dict.fromkeys(cqs, 0)
        self._by_fr: dict[FR, list[str]] = {}
        for name in cqs:
            frs = {
                (f.name, res)
                for group in (groups.get(name) or {}).values()
                for f in group.spec.flavors
                for res in group.covered
            }
            for fr in frs:
                self._by_fr.setdefault(fr, []).append(name)
        self.undated: set[Key] = set()  # admitted Workloads holding quota with no recorded admission time
        self._now: float | None = None

    def of(self, cq: str) -> int:
        return self._of.get(cq, 0)

    def touch(self, info: Info) -> None:
        """The Workload starts or stops holding quota, or what a search reads of it changes."""
        of = self._of
        seen: set[str] = set()
        for fr in info.usage:
            for name in self._by_fr.get(fr, ()):
                if name not in seen:
                    seen.add(name)
                    of[name] += 1

    def held(self, info: Info, holding: bool) -> None:
        if holding and info.reserved_at is None:
            self.undated.add(info.key)
        else:
            self.undated.discard(info.key)
        self.touch(info)

    def touch_all(self) -> None:
        of = self._of
        for name in of:
            of[name] += 1

    def at(self, now: float) -> None:
        """The clock moves to ``now`` (a candidate with no admission time sorts there)."""
        if now != self._now:
            self._now = now
            if self.undated:
                self.touch_all()
