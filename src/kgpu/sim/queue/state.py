"""What the queue simulation keeps per Workload and per ClusterQueue, and each ClusterQueue's queue
(sigs.k8s.io/kueue v0.15.0 pkg/workload/workload.go ``Info`` and ``AssignmentClusterQueueState``;
pkg/cache/queue/cluster_queue.go).

A ClusterQueue's queue is a heap ordered by priority (higher first), then the queue-order timestamp
(``Ordering.GetQueueOrderTimestamp``: the creation time, or the eviction time of a Workload evicted by a
PodsReady timeout or an admission check), plus the set of inadmissible Workloads that wait for quota to be
freed. Kueue leaves equal priority and equal timestamp (one-second resolution) to its heap; kgpu breaks
those ties by namespace, then name. A BestEffortFIFO queue keeps its "sticky" Workload (the one waiting for
its preemptions) first until it is admitted or gone (Kueue#6929).

Requeueing (``RequeueIfNotPresent``): a StrictFIFO queue puts every Workload back into the heap at once,
except one whose namespace does not match; a BestEffortFIFO queue only one that failed after nomination,
is waiting for its preemptions, or still has flavors to try; the rest wait among the inadmissible until
``QueueInadmissibleWorkloads`` moves them back, which Kueue does when quota is freed in the cohort tree.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from kgpu.model.kueue import ClusterQueue, Workload
from kgpu.sim.queue.tree import FR, Node

Key = tuple[str, str]  # (namespace, name)


@dataclass(slots=True)
class LastState:
    """AssignmentClusterQueueState: per PodSet, per resource, the last flavor index tried (-1: all tried)."""

    tried: list[dict[str, int]]
    generation: int

    def pending_flavors(self) -> bool:
        return any(idx != -1 for per_podset in self.tried for idx in per_podset.values())

    def next_flavor(self, podset: int, resource: str) -> int:
        if podset >= len(self.tried):
            return 0
        idx = self.tried[podset].get(resource)
        return 0 if idx is None else idx + 1


@dataclass(slots=True)
class Info:
    """A Workload as the simulation sees it: its queue, what it holds or asks for, its conditions."""

    wl: Workload
    cq: str | None  # the ClusterQueue its LocalQueue points to (or, admitted, the one it is admitted in)
    order_time: float  # GetQueueOrderTimestamp
    admitted: bool = False
    usage: dict[FR, int] = field(default_factory=dict)  # held quota while admitted
    flavors: dict[str, dict[str, str]] = field(default_factory=dict)  # podset -> resource -> flavor
    reserved_at: float | None = None  # QuotaReserved lastTransitionTime (candidate ordering)
    last: LastState | None = None
    reason: str = ""
    message: str = ""
    evicted: bool = False  # an Evicted=True condition (from the input, or written during settle)
    evicted_reason: str = ""
    evicted_message: str = ""
    preempted_by: Key | None = None
    order: int | None = None

    @property
    def key(self) -> Key:
        return (self.wl.namespace, self.wl.name)

    @property
    def priority(self) -> int:
        return self.wl.priority

    def heap_key(self) -> tuple[int, float, str, str]:
        return (-self.wl.priority, self.order_time, self.wl.namespace, self.wl.name)


class Queue:
    """A ClusterQueue's pending Workloads: the heap (lazy deletion, one live entry per Workload) and the
    inadmissible set."""

    __slots__ = ("_heap", "_seq", "_token", "in_heap", "inadmissible", "sticky")

    def __init__(self) -> None:
        self._heap: list[tuple[tuple[int, float, str, str], int, Key]] = []
        self._seq = 0
        self._token: dict[Key, int] = {}
        self.in_heap: dict[Key, Info] = {}
        self.inadmissible: dict[Key, Info] = {}
        self.sticky: Key | None = None

    def __len__(self) -> int:
        return len(self.in_heap) + len(self.inadmissible)

    def push_if_absent(self, info: Info) -> bool:
        key = info.key
        if key in self.in_heap:
            return False
        self.in_heap[key] = info
        self._seq += 1
        self._token[key] = self._seq
        heapq.heappush(self._heap, (info.heap_key(), self._seq, key))
        return True

    def push_or_update(self, info: Info, backoff_expired: bool) -> None:
        """PushOrUpdate, for a Workload that (again) waits without quota."""
        key = info.key
        self.inadmissible.pop(key, None)
        if key in self.in_heap:
            self.in_heap[key] = info
        elif not backoff_expired:
            self.inadmissible[key] = info
        else:
            self.push_if_absent(info)

    def _take(self, key: Key) -> Info:
        self._token.pop(key, None)
        return self.in_heap.pop(key)

    def pop(self) -> Info | None:
        if self.sticky is not None and self.sticky in self.in_heap:
            return self._take(self.sticky)
        while self._heap:
            _, token, key = heapq.heappop(self._heap)
            if self._token.get(key) == token:
                return self._take(key)
        return None

    def delete(self, key: Key) -> None:
        if key in self.in_heap:
            self._take(key)
        self.inadmissible.pop(key, None)
        if self.sticky == key:
            self.sticky = None

    def requeue(self, info: Info, immediate: bool) -> bool:
        """requeueIfNotPresent (without the in-cycle requeue signal: kgpu frees quota between cycles).
        Whether it went back into the heap."""
        key = info.key
        if immediate or (info.last is not None and info.last.pending_flavors()):
            stale = self.inadmissible.pop(key, None)
            self.push_if_absent(stale if stale is not None else info)
            return True
        if key not in self.inadmissible and key not in self.in_heap:
            self.inadmissible[key] = info
        return False


@dataclass(slots=True)
class CQState:
    """A ClusterQueue: its spec, its node in the quota tree, its status, its admitted Workloads, its queue."""

    spec: ClusterQueue
    node: Node
    queue: Queue
    active: bool = True  # the cache's status: every flavor and admission check found, not stopped
    in_snapshot: bool = True  # active and no cohort cycle above it
    inactive_reason: str = ""
    inactive_message: str = ""
    workloads: dict[Key, Info] = field(default_factory=dict)  # those holding quota here
    generation: int = 1  # AllocatableResourceGeneration

    @property
    def name(self) -> str:
        return self.spec.name
