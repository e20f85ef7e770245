"""Deciding many scheduling cycles at once, with the same result as running them one by one.

Kueue's scheduler takes one head per ClusterQueue per cycle (kgpu.sim.queue.cycle). After quota is freed in a
cohort tree, every inadmissible Workload of the tree goes back into its heap (QueueInadmissibleWorkloads), so
a BestEffortFIFO queue of N Workloads takes N cycles to be tried again, nearly all of which end with the head
set aside as it was. Over a replay of thousands of events that is events x Workloads nominations. Here a run
of such cycles is decided per *shape* (``kgpu.sim.queue.state.Bucket``: Workloads of one namespace, priority
and PodSets get the same nomination against the same quota) and by position in the heap:

- For each ClusterQueue, its shapes are taken in the order of their first Workload in the heap and
  classified against the state at the start of the cycles (``classify``):
  ``ASIDE``: the head would be set aside (BestEffortFIFO; StrictFIFO only on a namespace mismatch);
  ``BLOCK``: a StrictFIFO head that would be put back and tried again, unchanged, every cycle;
  ``INTERESTING``: the head would take quota (it fits, or has victims to preempt), or its flavor search did
  not try every flavor; also a BestEffortFIFO queue's sticky head, and a Workload put back with flavors left
  to try (``Scheduler.specials``).
- The ClusterQueue's *stop* is the first Workload whose shape is not ``ASIDE``; the Workloads before it (its
  ``rank`` in the heap) are set aside one per cycle. The first cycle in which any ClusterQueue reaches an
  ``INTERESTING`` head is the next one that must really run; every cycle before it only sets heads aside,
  and heads set aside have no effect on each other (a head that can only preempt without victims reserves
  quota for the rest of its cycle, which matters only to a head that would take quota). So those cycles are
  applied at once (``skip``): each ClusterQueue's first k Workloads leave the heap in one slice.
- When no ClusterQueue has an ``INTERESTING`` head, the scheduling loop would set every remaining head aside
  and idle on the StrictFIFO ones until its window ends: applied the same way.

A shape is classified without a nomination when its first PodSet cannot get any flavor of some resource group
even if every Workload its ClusterQueue's preemption policies could ever name were evicted
(``hopeless``: the request exceeds what any set of victims could make available, ``kgpu.sim.queue.reach``); other
shapes are nominated once per state (``Scheduler.nominate`` remembers the answer until what its ClusterQueue
reads of the quota tree changes, kgpu.sim.queue.versions; so do ``classify`` and ``effect``, across events).

The QuotaReserved message of a Workload set aside this way is Kueue's, but found only when asked
(``Note.resolve``): a hopeless shape keeps the usage along its ClusterQueue's path to the root as it was, and
its message is the flavor assigner's against that usage (preemption candidates change no word of it).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kgpu.model.kueue_queues import ANY, BEST_EFFORT_FIFO
from kgpu.model.kueue_resources import PODS
from kgpu.sim.queue.cycle import NAMESPACE_MISMATCH, Nomination, Scheduler, to_reserve, truncate
from kgpu.sim.queue.flavors import G_NO_CANDIDATES, PREEMPT, FlavorAssigner, Group, refusal
from kgpu.sim.queue.state import Bucket, CQState, HeapKey, Info
from kgpu.sim.queue.tree import FR, Node, add_all

# what a head that takes no quota reserves for the heads it sorts ahead of: () or (quota, borrowing)
Effect = tuple[()] | tuple[tuple[tuple[FR, int], ...], int]

ASIDE, BLOCK, INTERESTING, UNKNOWN = "aside", "block", "interesting", "unknown"
UNBOUNDED = 1 << 62


@dataclass(slots=True)
class Note:
    """The QuotaReserved message of Workloads set aside together: known, or found against ``usage`` (the
    usage of their ClusterQueue's path to the root when they were set aside)."""

    message: str | None
    cq: CQState | None = None
    usage: tuple[tuple[Node, dict[FR, int]], ...] = ()
    found: dict[Hashable, str] = field(default_factory=dict)

    def resolve(self, sched: Scheduler, info: Info) -> str:
        if self.message is not None:
            return self.message
        got = self.found.get(info.bucket)
        if got is not None:
            return got
        assert self.cq is not None
        now = [(node, node.usage) for node, _ in self.usage]
        for node, usage in self.usage:
            node.usage = usage
        try:
            assigner = FlavorAssigner(
                info,
                self.cq,
                sched.groups[self.cq.name],
                sched.flavors,
                lambda fr, v: (G_NO_CANDIDATES, 0),
            )
            got = truncate(assigner.assign().message())
        finally:
            for node, usage in now:
                node.usage = usage
        self.found[info.bucket] = got
        return got


SKIPPED = Note("Workload no longer fits after processing another workload")


@dataclass(frozen=True, slots=True)
class Taker:
    """A head that would take quota (it fits, or has victims), as the cycle checks it."""

    cq: CQState
    info: Info
    key: tuple[Any, ...]  # its place among the cycle's heads (borrowing, -priority, time, namespace, name)
    usage: Mapping[FR, int]
    gone: list[Info]  # its victims


@dataclass(frozen=True, slots=True)
class _Shape:
    priority: int
    plan: list[tuple[bool, list[str], list[tuple[str, int]]]]  # per group: several flavors, usable, requests
    frs: frozenset[FR]  # every flavor-resource an assignment could use (what a preemption search is about)


@dataclass(slots=True)
class Stop:
    """Where a ClusterQueue's run of heads set aside ends: after ``aside`` Workloads, at an ``INTERESTING``
    head, a ``BLOCK`` head, or the end of its heap (``kind`` "")."""

    cq: CQState
    aside: int
    kind: str  # also UNKNOWN: only the heads before ``aside`` are known (set aside)
    notes: dict[Hashable, Note]  # bucket -> the note of its heads set aside
    head: HeapKey | None = None  # the blocked head
    volatile: bool = False  # a sticky head, or one with flavors left to try: no two cycles see it alike
    order: list[Bucket] = field(default_factory=list)  # its shapes by first Workload; those before ``next``
    next: int = 0  # are classified (set aside)
    cap: HeapKey | None = None  # the first Workload with flavors left to try


class Skipper:
    def __init__(self, sched: Scheduler) -> None:
        self.sched = sched
        # What was set aside here since each ClusterQueue's run began: (Scheduler.seq, the keys, the note of
        # each shape), and single heads tried again (blocked), by ClusterQueue
        self.segments: dict[str, list[tuple[int, list[HeapKey], dict[Hashable, Note]]]] = {}
        self.marks: dict[str, dict[HeapKey, tuple[int, Note]]] = {}
        # what was found per ClusterQueue, each with the ClusterQueue's version it holds for
        # (kgpu.sim.queue.versions); shapes and refusals do not depend on the quota tree
        self._classes: dict[tuple[str, Hashable], tuple[int, tuple[str, Note | None]]] = {}
        self._shapes: dict[tuple[str, Hashable], _Shape | bool] = {}
        self._refusals: dict[tuple[str, Hashable], Nomination | None] = {}
        self._usage: dict[str, tuple[int, tuple[tuple[Node, dict[FR, int]], ...]]] = {}
        self._effects: dict[tuple[str, Hashable], tuple[int, Effect]] = {}
        self.stops: list[Stop] = []

    # --- classification -------------------------------------------------------------------------------

    def _shape(self, cq: CQState, info: Info) -> _Shape | bool:
        """What ``hopeless`` reads of a shape, once: True when some resource is not covered (the PodSet fails
        there), False when the shape has more than one PodSet; else its smallest requests and, per resource
        group it touches, the flavors it may use (not refused by taints or node selectors)."""
        key = (cq.name, info.bucket)
        got = self._shapes.get(key)
        if got is not None:
            return got
        podsets = info.wl.podsets
        shape: _Shape | bool
        if len(podsets) != 1:
            shape = False
        else:
            ps = podsets[0]
            n = ps.min_count if ps.min_count is not None else ps.count
            groups = self.sched.groups[cq.name]
            requests = {res: amount * n for res, amount in ps.requests.items()}
            if PODS in groups:
                requests[PODS] = n
            touched: dict[int, Group] = {}
            uncovered = False
            for res in requests:
                group = groups.get(res)
                if group is None:
                    uncovered = True
                    break
                touched[id(group)] = group
            if uncovered:
                shape = True
            else:
                plan = []
                frs: set[FR] = set()
                for group in touched.values():
                    wanted = [(res, requests[res]) for res in sorted(requests) if res in group.covered]
                    usable = [
                        f.name
                        for f in group.spec.flavors
                        if not refusal(self.sched.flavors, f.name, ps, group)
                    ]
                    plan.append((len(group.spec.flavors) > 1, usable, wanted))
                    frs.update((f.name, res) for f in group.spec.flavors for res, _ in wanted)
                shape = _Shape(info.priority, plan, frozenset(frs))
        self._shapes[key] = shape
        return shape

    def hopeless(self, cq: CQState, info: Info) -> bool:
        """Whether the first PodSet, at its smallest count, exceeds in every flavor of some resource group
        what is available plus what preemption could ever free, and no other group it touches has a flavor
        left to try (one flavor each): then the head neither fits nor finds victims, tries every flavor,
        and is set aside."""
        shape = self._shape(cq, info)
        if isinstance(shape, bool):
            return shape
        reach, prio, frs = self.sched.holdings.reach, shape.priority, shape.frs
        failing = -1
        for i, (_, usable, wanted) in enumerate(shape.plan):
            if all(any(amount > reach(cq, (f, res), prio, frs) for res, amount in wanted) for f in usable):
                failing = i
                break
        if failing < 0:
            return False
        return not any(multi for i, (multi, _, _) in enumerate(shape.plan) if i != failing)

    def _refused(self, cq: CQState, info: Info) -> Nomination | None:
        key = (cq.name, info.bucket)
        if key not in self._refusals:
            self._refusals[key] = self.sched.static_refusal(info, cq)
        return self._refusals[key]

    def _path_usage(self, cq: CQState) -> tuple[tuple[Node, dict[FR, int]], ...]:
        version = self.sched.versions.of(cq.name)
        kept = self._usage.get(cq.name)
        if kept is not None and kept[0] == version:
            return kept[1]
        nodes = [cq.node, *cq.node.ancestors()]
        got = tuple((node, dict(node.usage)) for node in nodes)
        self._usage[cq.name] = (version, got)
        return got

    def classify(self, cq: CQState, bucket: Bucket) -> tuple[str, Note | None]:
        """What a cycle does with a head of this shape, against the current state (module docstring)."""
        key = (cq.name, bucket.key)
        version = self.sched.versions.of(cq.name)
        kept = self._classes.get(key)
        if kept is not None and kept[0] == version:
            return kept[1]
        hk = bucket.heap[0]
        info = cq.queue.infos[(hk[2], hk[3])]
        sched = self.sched
        best_effort = cq.spec.queueing_strategy == BEST_EFFORT_FIFO
        refused = self._refused(cq, info)
        nom: Nomination | None = None
        got: tuple[str, Note | None]
        if refused is not None:
            aside = best_effort or refused.requeue_reason == NAMESPACE_MISMATCH
            got = (ASIDE if aside else BLOCK, Note(truncate(refused.message)))
        elif self.hopeless(cq, info):
            got = (ASIDE if best_effort else BLOCK, Note(None, cq, self._path_usage(cq)))
        else:
            nom = sched.nominate(info, cq, None)
            assert nom.assignment is not None
            if nom.viable() or nom.assignment.last.pending_flavors():
                got = (INTERESTING, None)
            else:
                got = (ASIDE if best_effort else BLOCK, Note(truncate(nom.message)))
        self._classes[key] = (version, got)
        return got

    # --- planning and applying runs of cycles ---------------------------------------------------------

    def plan(self, scope: Sequence[CQState]) -> int | None:
        """The number of cycles before a ClusterQueue reaches an ``INTERESTING`` head (None: none will), with
        ``self.stops`` describing each ClusterQueue. Shapes are classified in the order of their first Workload
        and only as deep as needed: every head up to that cycle, and, when there is none, every one."""
        self.stops = []
        for cq in scope:
            queue = cq.queue
            if not cq.active or not queue.merged:
                continue
            if queue.sticky is not None and queue.in_heap(queue.sticky):
                self.stops.append(Stop(cq, 0, INTERESTING, {}, volatile=True))
                continue
            cap = min(
                (queue.infos[k].heap_key() for k in self.sched.specials.get(cq.name, ()) if queue.in_heap(k)),
                default=None,
            )
            order = sorted((b for b in queue.buckets.values() if b.heap), key=lambda b: b.heap[0])
            self.stops.append(Stop(cq, 0, UNKNOWN, {}, order=order, cap=cap))
        upto = 1
        while True:
            for st in self.stops:
                self._extend(st, upto)
            first = min((st.aside for st in self.stops if st.kind == INTERESTING), default=None)
            if first is not None and first < upto:
                return first
            if all(st.kind != UNKNOWN for st in self.stops):
                return first
            upto *= 2

    def _extend(self, s: Stop, upto: int) -> None:
        """Classify a ClusterQueue's shapes until its heads before ``upto`` are known, or its stop is."""
        queue = s.cq.queue
        while s.kind == UNKNOWN:
            while s.next < len(s.order) and not s.order[s.next].heap:
                s.next += 1
            hk = s.order[s.next].heap[0] if s.next < len(s.order) else None
            if s.cap is not None and (hk is None or hk >= s.cap):
                s.kind, s.volatile, s.aside = INTERESTING, True, queue.rank(s.cap)
                return
            if hk is None:
                s.kind, s.aside = "", len(queue.merged)
                return
            s.aside = queue.rank(hk)
            if s.aside >= upto:
                return
            bucket = s.order[s.next]
            cls, note = self.classify(s.cq, bucket)
            if note is not None:
                s.notes[bucket.key] = note
            if cls == ASIDE:
                s.next += 1
                continue
            s.kind = cls
            if cls == BLOCK:
                s.head = hk

    def depth(self) -> int:
        """How many cycles set heads aside when no ClusterQueue reaches an ``INTERESTING`` head."""
        return max((s.aside for s in self.stops), default=0)

    def blocked(self) -> bool:
        return any(s.kind == BLOCK for s in self.stops)

    def skip(self, cycles: int) -> None:
        """Apply ``cycles`` cycles that only set heads aside (and try blocked heads again)."""
        if cycles <= 0:
            return
        self.sched.seq += 1
        seq = self.sched.seq
        for s in self.stops:
            n = min(cycles, s.aside)
            keys = s.cq.queue.set_aside_first(n)
            if keys:
                self.segments.setdefault(s.cq.name, []).append((seq, keys, s.notes))
            if s.kind == BLOCK and cycles > s.aside:
                self._mark(s, seq)
            s.aside -= n

    def _mark(self, s: Stop, seq: int) -> None:
        assert s.head is not None
        bucket = s.cq.queue.infos[(s.head[2], s.head[3])].bucket
        self.marks.setdefault(s.cq.name, {})[s.head] = (seq, s.notes[bucket])

    def written(self, info: Info) -> tuple[int, Note] | None:
        """The latest QuotaReserved condition written here for a queued Workload, and when."""
        hk = info.heap_key()
        cq = info.cq or ""
        best = self.marks.get(cq, {}).get(hk)
        for seq, keys, notes in reversed(self.segments.get(cq, ())):
            if best is not None and best[0] >= seq:
                break
            i = bisect_left(keys, hk)
            if i < len(keys) and keys[i] == hk:
                return seq, notes[info.bucket]
        return best

    def forget(self, names: Sequence[str]) -> None:
        """A new run of these ClusterQueues: what was written before no longer shows."""
        for name in names:
            self.segments.pop(name, None)
            self.marks.pop(name, None)

    def skip_blocked(self) -> None:
        """The cycles that only try blocked StrictFIFO heads again, each as before."""
        self.sched.seq += 1
        for s in self.stops:
            if s.kind == BLOCK:
                self._mark(s, self.sched.seq)

    # --- cycles in which the heads that would take quota cannot ---------------------------------------

    def effect(self, cq: CQState, info: Info) -> Effect:
        """What a head of this shape that takes no quota does to the other heads of its cycle: () nothing, or
        (the quota it reserves (quotaResourcesToReserve), its borrowing) for the heads it sorts ahead of.
        Fixed while the state is: it reads only its own ClusterQueue's usage."""
        key = (cq.name, info.bucket)
        version = self.sched.versions.of(cq.name)
        cached = self._effects.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        nom = self.sched.nominate(info, cq, None)
        got: Effect = ()
        a = nom.assignment
        if (
            a is not None
            and a.mode() == PREEMPT
            and not nom.targets
            and cq.spec.preemption.reclaim_within_cohort != ANY
        ):
            reserve = tuple(sorted((fr, v) for fr, v in to_reserve(a, cq).items() if v))
            if reserve:
                got = (reserve, a.borrowing)
        self._effects[key] = (version, got)
        return got

    def takers(self) -> list[Taker] | None:
        """The heads that would take quota in the next cycle (fit, or have victims), with what they ask; None
        when one there is sticky or has flavors left to try (the cycle must run)."""
        out = []
        for s in self.stops:
            if s.kind != INTERESTING or s.aside:
                continue
            if s.volatile:
                return None
            hk = s.cq.queue.merged[0]
            info = s.cq.queue.infos[(hk[2], hk[3])]
            nom = self.sched.nominate(info, s.cq, info.last)
            if not nom.viable() or nom.assignment is None:
                return None
            key = (nom.assignment.borrowing, *hk)
            out.append(Taker(s.cq, info, key, nom.assignment.usage, [t.info for t in nom.targets]))
        return out or None

    def _head(self, s: Stop, j: int) -> Info | None:
        """The head a ClusterQueue that has no taker presents ``j`` cycles from now."""
        queue = s.cq.queue
        if j < s.aside:
            hk = queue.merged[j]
        elif s.kind == BLOCK and s.head is not None:
            hk = s.head
        else:
            return None
        return queue.infos[(hk[2], hk[3])]

    def _others(self, takers: list[Taker]) -> list[Stop]:
        roots = {t.cq.node.root() for t in takers}
        return [s for s in self.stops if s.cq.node.root() in roots and (s.kind != INTERESTING or s.aside)]

    def _fails(self, taker: Taker, reserved: list[tuple[CQState, Mapping[FR, int]]]) -> bool:
        """Whether the taker does not fit after these reservations (``Scheduler._fits``)."""
        saved = {id(n): (n, dict(n.usage)) for cq, _ in reserved for n in (cq.node, *cq.node.ancestors())}
        for cq, amounts in reserved:
            add_all(cq.node, amounts)
        ok = self.sched._fits(taker.cq, taker.usage, taker.gone)
        for node, usage in saved.values():
            node.usage = usage
        return not ok

    def dry(self, j: int, takers: list[Taker]) -> bool:
        """Whether the cycle ``j`` cycles from now takes no quota, decided as it runs (kgpu.sim.queue.cycle):
        in the heads' order, each head that can only preempt without victims reserves quota, and each taker
        must fit after what was reserved before it; nothing else in the cycle touches the quota."""
        events: list[tuple[tuple[Any, ...], CQState, Mapping[FR, int] | None, Taker | None]] = [
            (t.key, t.cq, None, t) for t in takers
        ]
        for s in self._others(takers):
            info = self._head(s, j)
            if info is None:
                continue
            eff = self.effect(s.cq, info)
            if eff:
                events.append(((eff[1], *info.heap_key()), s.cq, dict(eff[0]), None))
        events.sort(key=lambda e: e[0])
        reserved: list[tuple[CQState, Mapping[FR, int]]] = []
        for _, cq, amounts, taker in events:
            if taker is None:
                assert amounts is not None
                reserved.append((cq, amounts))
            elif not self._fails(taker, reserved):
                return False
        return True

    def _least(self, s: Stop, j0: int, j1: int, taker: Taker) -> dict[FR, int]:
        """The least a ClusterQueue's heads over cycles [j0, j1) reserve before ``taker`` (per
        flavor-resource, the smallest amount any of them reserves; nothing if one reserves nothing or sorts
        after it)."""
        queue = s.cq.queue
        least: dict[FR, int] | None = None
        reps: list[tuple[Info, int]] = []  # a head of each shape in range, and how many of them sort after
        hi = min(j1, s.aside)
        if j0 < hi:
            first, last = queue.merged[j0], queue.merged[hi - 1]
            after = taker.key[1:]
            for bucket in queue.buckets.values():
                lo = bisect_left(bucket.heap, first)
                top = bisect_right(bucket.heap, last)
                if lo < top:
                    hk = bucket.heap[lo]
                    late = top - max(lo, bisect_right(bucket.heap, after))
                    reps.append((queue.infos[(hk[2], hk[3])], late))
        if j1 > s.aside and s.kind == BLOCK and s.head is not None:
            info = queue.infos[(s.head[2], s.head[3])]
            reps.append((info, int(info.heap_key() > taker.key[1:])))
        elif j1 > s.aside:
            return {}  # no head at all in some cycle
        for info, late in reps:
            eff = self.effect(s.cq, info)
            if not eff:
                return {}
            prefix, mine = (eff[1], -info.priority), taker.key[:2]
            if prefix > mine or (prefix == mine and late):
                return {}
            amounts = dict(eff[0])
            least = (
                amounts
                if least is None
                else {fr: min(v, amounts[fr]) for fr, v in least.items() if fr in amounts}
            )
        return least or {}

    def bound(self, j0: int, j1: int, takers: list[Taker]) -> bool:
        """Whether every cycle in [j0, j1) takes no quota, shown by each taker failing to fit after the least
        its tree's other heads reserve before it over those cycles (more reserved never makes room)."""
        others = self._others(takers)
        for taker in takers:
            root = taker.cq.node.root()
            reserved: list[tuple[CQState, Mapping[FR, int]]] = []
            for s in others:
                if s.cq.node.root() is root:
                    amounts = self._least(s, j0, j1, taker)
                    if amounts:
                        reserved.append((s.cq, amounts))
            if not self._fails(taker, reserved):
                return False
        return True

    def futile(self) -> tuple[int, list[Taker]]:
        """How many cycles from now take no quota though a head could (each set aside as the one before,
        the takers skipped: "no longer fits"), up to the first that may take quota or a new taker; and the
        takers. Decided by ``bound`` over runs of cycles (doubling them while it holds, halving them when not)
        and ``dry`` for single ones; shapes are classified as far as the run goes."""
        takers = self.takers()
        if takers is None:
            return 0, []
        done, span = 0, 8
        while True:
            target = done + span
            for st in self.stops:
                if st.kind == UNKNOWN and st.aside < target:
                    self._extend(st, target)
            limit = min(
                (
                    st.aside
                    for st in self.stops
                    if (st.kind == INTERESTING and st.aside) or st.kind == UNKNOWN
                ),
                default=UNBOUNDED,
            )
            end = min(limit, target)
            if done >= end:
                return done, takers
            if self.bound(done, end, takers):
                done = end
                if end == limit or (limit == UNBOUNDED and done > max(st.aside for st in self.stops)):
                    return limit, takers  # beyond the last head set aside every cycle is alike
                span *= 2
                continue
            lo, hi = done, end
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if self.bound(done, mid, takers):
                    lo = mid
                else:
                    hi = mid
            done = lo
            if not self.dry(done, takers):
                return done, takers
            done += 1
            span = 8

    def skip_futile(self, cycles: int, takers: list[Taker]) -> None:
        """Apply ``cycles`` cycles that take no quota: heads set aside or tried again, takers skipped."""
        self.skip(cycles)
        seq = self.sched.seq
        for t in takers:
            t.info.last = None
            self.marks.setdefault(t.cq.name, {})[t.info.heap_key()] = (seq, SKIPPED)

    def moving(self, cycles: int) -> int:
        """Of the next ``cycles`` cycles, how many set a head aside (the first ones)."""
        return max((min(s.aside, cycles) for s in self.stops), default=0)
