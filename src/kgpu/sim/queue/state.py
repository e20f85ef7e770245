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

The queue is kept as sorted lists of keys, per *shape* (``Bucket``; ``Info.bucket``: namespace, priority,
PodSets, a requeue backoff, and the queue-order time where the ClusterQueue's preemption policy compares it)
and for the whole queue: every queued Workload, and those in the heap. Workloads of one shape get the same answer from a flavor
assignment against the same quota, so ``kgpu.sim.queue.skip`` can decide a whole shape at once, count how
many scheduling cycles its Workloads take by position (``rank``), and set them aside in one slice
(``set_aside_first``), where popping one head per cycle would touch every queued Workload.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Hashable
from dataclasses import dataclass, field

from kgpu.model.kueue import ClusterQueue, Workload
from kgpu.model.kueue_queues import LOWER_OR_NEWER_EQUAL
from kgpu.model.kueue_workload import REQUEUED
from kgpu.sim.queue.tree import FR, Node

Key = tuple[str, str]  # (namespace, name)
HeapKey = tuple[int, float, str, str]  # (-priority, queue-order time, namespace, name)


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
    counts: dict[str, int] = field(default_factory=dict)  # podset -> pods admitted (partial admission)
    reserved_at: float | None = None  # QuotaReserved lastTransitionTime (candidate ordering)
    last: LastState | None = None
    reason: str = ""
    message: str = ""
    evicted: bool = False  # an Evicted=True condition (from the input, or written during settle)
    evicted_reason: str = ""
    evicted_message: str = ""
    preempted_by: Key | None = None
    order: int | None = None
    # What the engine (kgpu.sim.queue.engine) keeps to answer as a fresh read of the objects would:
    bucket: Hashable = None  # the shape this Workload is queued under
    base_reason: str = ""  # the QuotaReserved condition the objects carry between settles
    base_message: str = ""
    stamp: int = 0  # when reason/message were written (Scheduler.seq)
    admit_stamp: int = 0  # when it was admitted, evicted
    evict_stamp: int = 0

    @property
    def key(self) -> Key:
        return (self.wl.namespace, self.wl.name)

    @property
    def priority(self) -> int:
        return self.wl.priority

    def heap_key(self) -> HeapKey:
        return (-self.wl.priority, self.order_time, self.wl.namespace, self.wl.name)


def shape(wl: Workload) -> Hashable:
    """What a flavor assignment reads of a Workload besides its queue-order time: its namespace, priority and
    PodSets. Workloads of one shape in one ClusterQueue share a bucket."""
    return (
        wl.namespace,
        wl.priority,
        tuple(
            (
                ps.name,
                ps.count,
                ps.min_count,
                tuple(sorted(ps.requests.items())),
                ps.node_selector,
                ps.affinity,
                ps.tolerations,
                ps.over_limits,
            )
            for ps in wl.podsets
        ),
    )


def bucket_of(info: Info, cq: CQState) -> Hashable:
    """The bucket a Workload waits in: its shape, whether it waits for a requeue backoff (``Requeued`` False,
    which keeps it out of the heap when placed), and its queue-order time where ``withinClusterQueue:
    LowerOrNewerEqualPriority`` makes a preemption search depend on it."""
    newer = cq.spec.preemption.within_cluster_queue == LOWER_OR_NEWER_EQUAL
    return (shape(info.wl), backing_off(info.wl), info.order_time if newer else None)


def backing_off(wl: Workload) -> bool:
    """Its Requeued condition is False: it waits for a requeue backoff (kgpu does not model its end)."""
    requeued = wl.condition(REQUEUED)
    return requeued is not None and requeued.status == "False"


def waiting(bucket: Bucket) -> bool:
    return isinstance(bucket.key, tuple) and bool(bucket.key[1])


def canonical(last: LastState | None, generation: int) -> bool:
    """Whether a flavor search starts from the first flavor everywhere, as with no last state at all."""
    return last is None or generation > last.generation or not last.pending_flavors()


class Bucket:
    """The queued Workloads of one shape: all of them and those in the heap, both sorted (the others are
    inadmissible)."""

    __slots__ = ("every", "heap", "key")

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.every: list[HeapKey] = []
        self.heap: list[HeapKey] = []

    def in_heap(self, hk: HeapKey) -> bool:
        i = bisect_left(self.heap, hk)
        return i < len(self.heap) and self.heap[i] == hk

    def aside(self) -> bool:
        """Whether some of them are inadmissible."""
        return len(self.heap) < len(self.every)


class Queue:
    """A ClusterQueue's pending Workloads: the heap and the inadmissible set, by shape.

    ``every`` and ``merged`` hold the keys of every queued Workload and of those in the heap, sorted; per shape
    the same (``Bucket``). Putting everything back into the heap copies lists; setting the first n of the heap
    aside cuts them; neither touches a Workload."""

    __slots__ = ("buckets", "every", "infos", "merged", "sticky")

    def __init__(self) -> None:
        self.infos: dict[Key, Info] = {}  # every queued Workload, in the heap or inadmissible
        self.buckets: dict[Hashable, Bucket] = {}
        self.every: list[HeapKey] = []
        self.merged: list[HeapKey] = []  # every Workload in the heap, sorted
        self.sticky: Key | None = None

    def __len__(self) -> int:
        return len(self.infos)

    # --- membership -----------------------------------------------------------------------------------

    def _bucket(self, info: Info) -> Bucket:
        b = self.buckets.get(info.bucket)
        if b is None:
            b = self.buckets[info.bucket] = Bucket(info.bucket)
        return b

    def in_heap(self, key: Key) -> bool:
        info = self.infos.get(key)
        return info is not None and self.buckets[info.bucket].in_heap(info.heap_key())

    def is_inadmissible(self, key: Key) -> bool:
        return key in self.infos and not self.in_heap(key)

    # --- Kueue's queue operations ---------------------------------------------------------------------

    def _add(self, info: Info, heap: bool) -> None:
        hk = info.heap_key()
        b = self._bucket(info)
        self.infos[info.key] = info
        insort(b.every, hk)
        insort(self.every, hk)
        if heap:
            insort(b.heap, hk)
            insort(self.merged, hk)

    def _lift(self, info: Info) -> None:
        hk = info.heap_key()
        insort(self.buckets[info.bucket].heap, hk)
        insort(self.merged, hk)

    def _unheap(self, info: Info) -> None:
        hk = info.heap_key()
        heap = self.buckets[info.bucket].heap
        del heap[bisect_left(heap, hk)]
        del self.merged[bisect_left(self.merged, hk)]

    def _remove(self, info: Info) -> None:
        hk = info.heap_key()
        b = self.buckets[info.bucket]
        if b.in_heap(hk):
            self._unheap(info)
        del b.every[bisect_left(b.every, hk)]
        del self.every[bisect_left(self.every, hk)]
        del self.infos[info.key]

    def push_if_absent(self, info: Info) -> bool:
        key = info.key
        if key in self.infos:
            if self.in_heap(key):
                return False
            self.infos[key] = info
            self._lift(info)
            return True
        self._add(info, True)
        return True

    def push_or_update(self, info: Info, backoff_expired: bool) -> None:
        """PushOrUpdate, for a Workload that (again) waits without quota."""
        key = info.key
        if key in self.infos:
            heap = self.in_heap(key)
            self.infos[key] = info
            if not heap and backoff_expired:
                self._lift(info)
            return
        self._add(info, backoff_expired)

    def pop(self) -> Info | None:
        if self.sticky is not None and self.in_heap(self.sticky):
            info = self.infos[self.sticky]
        elif self.merged:
            hk = self.merged[0]
            info = self.infos[(hk[2], hk[3])]
        else:
            return None
        self._remove(info)
        return info

    def delete(self, key: Key) -> None:
        info = self.infos.get(key)
        if info is not None:
            self._remove(info)
        if self.sticky == key:
            self.sticky = None

    def requeue(self, info: Info, immediate: bool) -> bool:
        """requeueIfNotPresent (without the in-cycle requeue signal: kgpu frees quota between cycles).
        Whether it went back into the heap. ``info`` was popped: it is in neither the heap nor the set."""
        if immediate or (info.last is not None and info.last.pending_flavors()):
            self.push_if_absent(self.infos.get(info.key, info))
            return True
        if info.key not in self.infos:
            self._add(info, False)
        return False

    def requeue_buckets(self, buckets: list[Bucket]) -> bool:
        """Move these shapes' inadmissible Workloads back into the heap; whether any moved."""
        moved = False
        for b in buckets:
            if b.aside():
                b.heap = b.every[:]
                moved = True
        if moved:
            self.merged = sorted(hk for b in self.buckets.values() for hk in b.heap)
        return moved

    def reset(self) -> None:
        """Every queued Workload where placing it from the objects puts it: in the heap, or among the
        inadmissible while it waits for a requeue backoff; none sticky."""
        self.sticky = None
        waits = False
        for b in self.buckets.values():
            if waiting(b):
                b.heap = []
                waits = True
            elif len(b.heap) != len(b.every):
                b.heap = b.every[:]
        if waits:
            self.merged = sorted(hk for b in self.buckets.values() for hk in b.heap)
        elif len(self.merged) != len(self.every):
            self.merged = self.every[:]

    # --- positions, for deciding many cycles at once --------------------------------------------------

    def rank(self, hk: HeapKey) -> int:
        """How many Workloads in the heap come before ``hk``."""
        return bisect_left(self.merged, hk)

    def set_aside_first(self, n: int) -> list[HeapKey]:
        """Move the first ``n`` Workloads of the heap to the inadmissible set; their keys."""
        if n <= 0:
            return []
        limit = self.merged[n] if n < len(self.merged) else None
        for b in self.buckets.values():
            cut = len(b.heap) if limit is None else bisect_left(b.heap, limit)
            if cut:
                del b.heap[:cut]
        moved = self.merged[:n]
        del self.merged[:n]
        return moved


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
