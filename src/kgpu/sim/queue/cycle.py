"""One scheduling cycle (sigs.k8s.io/kueue v0.15.0 pkg/scheduler/scheduler.go ``schedule``), and what
happens between cycles when preempted Workloads give their quota back.

1. Heads: the first Workload of each active ClusterQueue's queue (pkg/cache/queue/manager.go ``heads``).
2. Nominate each head against the cycle's starting state: a ClusterQueue left out of the snapshot by a
   cohort cycle ("ClusterQueue x is inactive"), a namespace its namespaceSelector does not select, requests
   above a container's limits, or else a flavor assignment (``kgpu.sim.queue.flavors``) and, when it needs
   preemption, its victims (``kgpu.sim.queue.preemption``); with partial admission (a PodSet ``minCount``)
   Kueue then searches the largest counts that fit (``PodSetReducer``, a binary search).
3. Order the nominated: not borrowing (by the height of the cohort subtree borrowed from) first, then higher
   priority, then the older queue-order timestamp (kgpu then orders by namespace and name).
4. In that order: a head that fits nowhere is left; one that needs preemption but has no victims reserves
   the quota it could use unless its ClusterQueue may always reclaim (``reclaimWithinCohort: Any``); one
   whose victims overlap an earlier head's, or that no longer fits after earlier heads, is skipped; one that
   needs preemption evicts its victims ("Pending the preemption of N workload(s)"); one that fits is
   admitted ("Quota reserved in ClusterQueue x").
5. Requeue the rest (``kgpu.sim.queue.state.Queue.requeue``) and write their QuotaReserved condition
   (reason Pending, the message above).

Kueue evicts in one cycle and admits the preemptor in a later one: the victims' job controllers stop them,
Kueue takes their quota back (QuotaReserved False, reason Pending, the eviction message), requeues them,
and moves every inadmissible Workload of the cohort tree back into its queue. kgpu does this between
cycles. Everything a cycle assumed without admitting (a preemptor's usage, reserved capacity) is taken
back at its end, as Kueue drops its snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from kgpu.model.kueue import ResourceFlavor
from kgpu.model.kueue_queues import ANY, BEST_EFFORT_FIFO, LOWER_OR_NEWER_EQUAL, STRICT_FIFO
from kgpu.model.predicates import selector_matches
from kgpu.sim.queue.flavors import FIT, NOFIT, PREEMPT, Assignment, FlavorAssigner, Group
from kgpu.sim.queue.preemption import Preemptor, Target, add_workload, message, remove_workload
from kgpu.sim.queue.reach import Holdings
from kgpu.sim.queue.state import CQState, Info, Key, LastState, bucket_of, canonical
from kgpu.sim.queue.tree import FR, Node, add_all, fits, remove_all
from kgpu.sim.queue.versions import Versions

GENERIC, FAILED_AFTER_NOMINATION, NAMESPACE_MISMATCH, PENDING_PREEMPTION = (
    "",
    "FailedAfterNomination",
    "NamespaceMismatch",
    "PendingPreemption",
)
_NOT_NOMINATED, _SKIPPED, _ASSUMED = "", "skipped", "assumed"


@dataclass(frozen=True, slots=True)
class Nomination:
    """What nominating a head finds against the cycle's starting state; the same for every Workload of one
    shape in one ClusterQueue until what its ClusterQueue reads of the quota tree changes
    (``Scheduler.versions``)."""

    nominated: bool
    message: str
    requeue_reason: str = GENERIC
    assignment: Assignment | None = None
    targets: tuple[Target, ...] = ()

    def viable(self) -> bool:
        """Whether the head would take a cycle's quota: it fits, or it has victims to preempt."""
        if self.assignment is None:
            return False
        mode = self.assignment.mode()
        return mode == FIT or (mode == PREEMPT and bool(self.targets))


@dataclass(slots=True)
class Entry:
    info: Info
    cq: CQState
    message: str = ""
    requeue_reason: str = GENERIC
    status: str = _NOT_NOMINATED
    assignment: Assignment | None = None
    targets: list[Target] = field(default_factory=list)
    volatile: bool = False  # popped as the sticky head, or with flavors left to try
    back: bool = False  # put back into the heap afterwards


class Scheduler:
    """Kueue's scheduler and queue manager over the simulation's state."""

    def __init__(
        self,
        cqs: dict[str, CQState],
        groups: Mapping[str, Mapping[str, Group]],
        flavors: Mapping[str, ResourceFlavor],
        namespaces: Mapping[str, Mapping[str, str]] | None,
        requeue_groups: Mapping[str, list[str]],
        resolve: Callable[[Info], CQState | None],
        nodes: list[Node],
        now: float,
    ) -> None:
        self.cqs = cqs
        self.nodes = nodes  # every ClusterQueue and Cohort in the quota tree
        self.order = sorted(cqs)
        self.groups = groups
        self.flavors = flavors
        self.namespaces = namespaces
        self.requeue_groups = requeue_groups  # ClusterQueue -> the ClusterQueues of its cohort tree
        self.resolve = resolve  # a pending Workload's ClusterQueue, through its LocalQueue
        # Per ClusterQueue, a counter that moves whenever the usage or the admitted Workloads of a
        # flavor-resource it has quota for change anywhere in the tree (module docstring of
        # kgpu.sim.queue.versions): what nominations, bounds and classifications found is kept against it.
        self.versions = Versions(cqs, groups)
        self.holdings = Holdings(cqs, self.versions.of)
        self.preemptor = Preemptor(cqs, now, self.holdings)
        self.now = now
        self.admitted = 0
        self.victims: list[Info] = []
        # Which Workloads hold quota, as a hash updated on every admission and release (a repeat after
        # evictions is a preemption loop), and how often each Workload was evicted.
        self.signature = 0
        self.evictions: dict[Key, int] = {}
        # The nominations found, each with the version of its ClusterQueue it holds for, and a clock for
        # written conditions.
        self.memo: dict[Hashable, tuple[int, Nomination]] = {}
        self.seq = 0
        # Per ClusterQueue, the Workloads back in the heap with flavors still to try (their next flavor
        # search starts later than the first flavor, unlike every other Workload of their shape).
        self.specials: dict[str, set[Key]] = {}
        self.admissions: list[Info] = []  # admitted and released since the engine last looked
        self.released: list[Info] = []
        self.heads: list[Entry] = []  # the last cycle's

    def hold(self, info: Info) -> None:
        """An admitted Workload starts holding its quota (Cache.AddOrUpdateWorkload)."""
        add_workload(self.cqs, info)
        self.holdings.add(self.cqs[info.cq or ""], info)
        self.versions.held(info, True)

    def unhold(self, info: Info) -> None:
        self.versions.held(info, False)
        remove_workload(self.cqs, info)
        self.holdings.remove(self.cqs[info.cq or ""], info)

    # --- 1-2: heads and nomination --------------------------------------------------------------------

    def _namespace_error(self, info: Info, cq: CQState) -> tuple[str, str]:
        if self.namespaces is None:
            return "", GENERIC
        labels = self.namespaces.get(info.wl.namespace)
        if labels is None:
            return f'Could not obtain workload namespace: namespaces "{info.wl.namespace}" not found', GENERIC
        if not selector_matches(cq.spec.namespace_selector, labels):
            return "Workload namespace doesn't match ClusterQueue selector", NAMESPACE_MISMATCH
        return "", GENERIC

    def namespace_matches(self, info: Info, cq: CQState) -> bool:
        return not self._namespace_error(info, cq)[0]

    def static_refusal(self, info: Info, cq: CQState) -> Nomination | None:
        """What refuses a head before any flavor is tried: a ClusterQueue out of the snapshot, a namespace,
        requests above limits. The same for every Workload of one shape."""
        if not cq.in_snapshot:
            return Nomination(False, f"ClusterQueue {cq.name} is inactive")
        error, reason = self._namespace_error(info, cq)
        if error:
            return Nomination(False, error, reason)
        over = [(i, path, names) for i, ps in enumerate(info.wl.podsets) for path, names in ps.over_limits]
        if over:
            errors = [
                f"spec.podSets[{i}].template.spec.{path}: Invalid value: {json.dumps(list(names), separators=(',', ':'))}: "
                "requests must not exceed its limits"
                for i, path, names in over
            ]
            agg = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
            return Nomination(False, f"resources validation failed: {agg}")
        return None

    def nominate(self, info: Info, cq: CQState, last: LastState | None) -> Nomination:
        """The head against the current state, starting its flavor search after ``last``. Remembered per
        shape until the state changes, when ``last`` starts from the first flavor everywhere."""
        memo_key: Hashable = None
        version = self.versions.of(cq.name)
        if canonical(last, cq.generation):
            t = info.order_time if cq.spec.preemption.within_cluster_queue == LOWER_OR_NEWER_EQUAL else None
            memo_key = (cq.name, info.bucket, t, cq.generation)
            found = self.memo.get(memo_key)
            if found is not None and found[0] == version:
                return found[1]
            last = None
        refused = self.static_refusal(info, cq)
        if refused is not None:
            nom = refused
        else:
            assignment, targets = self._assignments(info, cq, last)
            nom = Nomination(True, assignment.message(), GENERIC, assignment, tuple(targets))
        if memo_key is not None:
            self.memo[memo_key] = (version, nom)
        return nom

    def _nominate(self, info: Info, cq: CQState) -> tuple[Entry, bool]:
        nom = self.nominate(info, cq, info.last)
        e = Entry(
            info, cq, nom.message, nom.requeue_reason, assignment=nom.assignment, targets=list(nom.targets)
        )
        if nom.assignment is not None:
            info.last = nom.assignment.last
        return e, nom.nominated

    def _assignments(
        self, info: Info, cq: CQState, last: LastState | None
    ) -> tuple[Assignment, list[Target]]:
        """getInitialAssignments: the full assignment, its victims, or the largest partial one that works."""
        pre = self.preemptor
        assigner = FlavorAssigner(
            info, cq, self.groups[cq.name], self.flavors, lambda fr, v: pre.simulate(info, cq, fr, v), last
        )
        full = assigner.assign()
        mode = full.mode()
        if mode == FIT:
            return full, []
        if mode == PREEMPT:
            targets = pre.targets(info, cq, full.needs_preemption(), full.total_usage())
            if targets:
                return full, targets
        podsets = info.wl.podsets
        deltas = [ps.count - (ps.min_count if ps.min_count is not None else ps.count) for ps in podsets]
        total = sum(deltas)
        if total <= 0:
            return full, []
        found: tuple[Assignment, list[Target]] | None = None
        good = 0

        def works(i: int) -> bool:
            nonlocal found, good
            counts = [ps.count - d * i // total for ps, d in zip(podsets, deltas, strict=True)]
            a = assigner.assign(counts)
            m = a.mode()
            t = pre.targets(info, cq, a.needs_preemption(), a.total_usage()) if m == PREEMPT else []
            if m == FIT or t:
                found, good = (a, t), i
                return True
            return False

        lo, hi = 0, total + 1  # sort.Search
        while lo < hi:
            mid = (lo + hi) // 2
            if works(mid):
                hi = mid
            else:
                lo = mid + 1
        if found is not None and lo == good:
            return found
        return full, []

    # --- 3-5: the cycle -------------------------------------------------------------------------------

    def cycle(self, order: Sequence[str] | None = None) -> tuple[bool, bool]:
        """One cycle over the ClusterQueues named in ``order`` (default: all): (whether there were heads,
        whether anything moved: an admission, a preemption, a Workload set aside as inadmissible). Victims
        it evicts give their quota back when it ends."""
        self.seq += 1
        heads = []
        for name in self.order if order is None else order:
            cq = self.cqs[name]
            if cq.active:
                sticky = cq.queue.sticky
                info = cq.queue.pop()
                if info is not None:
                    volatile = info.key == sticky or not canonical(info.last, cq.generation)
                    heads.append((info, cq, volatile))
        self.heads = []
        if not heads:
            return False, False
        entries: list[Entry] = []
        others: list[Entry] = []
        for info, cq, volatile in heads:
            e, nominated = self._nominate(info, cq)
            e.volatile = volatile
            (entries if nominated else others).append(e)
        self.heads = [*entries, *others]
        entries.sort(key=_entry_key)

        saved = [(node, dict(node.usage)) for node in self.nodes]
        preempted: dict[Key, Info] = {}
        admitted: list[Entry] = []
        preemptors: list[Entry] = []
        moved = False
        for e in entries:
            assert e.assignment is not None
            cq, mode = e.cq, e.assignment.mode()
            if mode == NOFIT:
                continue
            if mode == PREEMPT and not e.targets:
                if cq.spec.preemption.reclaim_within_cohort != ANY:
                    add_all(cq.node, to_reserve(e.assignment, cq))
                continue
            if any(t.info.key in preempted for t in e.targets):
                self._skip(e, "Workload has overlapping preemption targets with another workload")
                continue
            usage = e.assignment.usage
            if not self._fits(cq, usage, [*preempted.values(), *(t.info for t in e.targets)]):
                self._skip(e, "Workload no longer fits after processing another workload")
                continue
            for t in e.targets:
                preempted[t.info.key] = t.info
            add_all(cq.node, usage)
            moved = True
            if mode == PREEMPT:
                e.info.last = None
                issued = self._issue(e)
                if issued:
                    e.message += f". Pending the preemption of {issued} workload(s)"
                    e.requeue_reason = PENDING_PREEMPTION
                    preemptors.append(e)
                continue
            e.status = _ASSUMED
            admitted.append(e)

        for e in (*entries, *others):
            if e.status != _ASSUMED:
                moved = self._requeue(e) or moved
        # The snapshot is dropped: the tree keeps only what was admitted.
        for node, usage in saved:
            node.usage = usage
        for e in admitted:
            self._admit(e)
        for e in preemptors:
            self._try_while_evicting(e)
        victims, self.victims = self.victims, []
        for victim in victims:
            self._release(victim)
        for e in (*entries, *others):
            info = e.info
            special = self.specials.setdefault(e.cq.name, set())
            if not info.admitted and not canonical(info.last, e.cq.generation):
                special.add(info.key)
            else:
                special.discard(info.key)
        return True, moved

    def _try_while_evicting(self, e: Entry) -> None:
        """Kueue requeues a preemptor at once (PendingPreemption) and tries it again while its victims' jobs
        stop and their quota is still held. Where that try needs the same victims ("Preemption ongoing") its
        LastAssignment is reset again; otherwise (no candidates: the flavor it tried first borrows, and its
        policy does not preempt while borrowing) the try is remembered, and the one after the victims are
        gone starts each pod set after the flavors it tried: a preemptor that reclaimed its own nominal
        quota takes it then, rather than borrowing the first flavor again and tying with its victim
        (scheduler.go, ``e.LastAssignment``; flavorassigner.go, ``NextFlavorToTryForPodSetResource``). kgpu
        gives its victims their quota back when the cycle ends, so it makes that one try here."""
        nom = self.nominate(e.info, e.cq, None)
        if nom.assignment is None:
            return
        ongoing = nom.assignment.mode() == PREEMPT and bool(nom.targets)
        e.info.last = None if ongoing else nom.assignment.last

    def _fits(self, cq: CQState, usage: Mapping[FR, int], gone: list[Info]) -> bool:
        for info in gone:
            remove_all(self.cqs[info.cq or ""].node, info.usage)
        ok = fits(cq.node, usage)
        for info in gone:
            add_all(self.cqs[info.cq or ""].node, info.usage)
        return ok

    @staticmethod
    def _skip(e: Entry, why: str) -> None:
        e.status = _SKIPPED
        e.message = why
        e.info.last = None

    def _issue(self, e: Entry) -> int:
        """IssuePreemptions: every target not yet evicted is evicted now; all of them count."""
        preemptor_path = e.cq.node.path()
        for t in e.targets:
            victim = t.info
            victim.evicted = True
            victim.evicted_reason = "Preempted"
            victim.evicted_message = message(
                e.info, t.reason, preemptor_path, self.cqs[victim.cq or ""].node.path()
            )
            victim.preempted_by = e.info.key
            victim.evict_stamp = self.seq
            self.victims.append(victim)
        return len(e.targets)

    def _requeue(self, e: Entry) -> bool:
        """requeueAndUpdate; whether the Workload left the heap for the inadmissible set."""
        reason = e.requeue_reason
        if e.status != _NOT_NOMINATED and reason == GENERIC:
            reason = FAILED_AFTER_NOMINATION
        queue = e.cq.queue
        if reason == PENDING_PREEMPTION and e.cq.spec.queueing_strategy == BEST_EFFORT_FIFO:
            queue.sticky = e.info.key
        if e.cq.spec.queueing_strategy == STRICT_FIFO:
            immediate = reason != NAMESPACE_MISMATCH
        else:
            immediate = reason in (FAILED_AFTER_NOMINATION, PENDING_PREEMPTION)
        back = queue.requeue(e.info, immediate)
        e.back = back
        if e.status in (_NOT_NOMINATED, _SKIPPED):
            e.info.reason, e.info.message = "Pending", truncate(e.message)
            e.info.stamp = self.seq
        return not back

    def _admit(self, e: Entry) -> None:
        info, cq = e.info, e.cq
        assert e.assignment is not None
        info.admitted = True
        if info.evicted and info.preempted_by is None:
            # evicted before this settle (the input's Evicted condition): admitting it sets that condition
            # False ("Previously: ..."); one evicted by this settle's own preemptions stays reported
            info.evicted, info.evicted_reason, info.evicted_message = False, "", ""
        info.cq = cq.name
        info.usage = dict(e.assignment.usage)
        info.flavors = e.assignment.flavors()
        info.counts = {ps.name: ps.count for ps in e.assignment.podsets}
        info.reason, info.message = "QuotaReserved", f"Quota reserved in ClusterQueue {cq.name}"
        info.base_reason, info.base_message = info.reason, info.message
        info.stamp = info.admit_stamp = self.seq
        info.reserved_at = self.now
        info.last = None
        self.admitted += 1
        info.order = self.admitted
        self.admissions.append(info)
        cq.queue.delete(info.key)
        self.hold(info)
        self.signature ^= hash((info.key, cq.name))

    def _release(self, victim: Info) -> None:
        """The victim's job stopped: its quota comes back, it waits in its queue again, and the inadmissible
        Workloads of its cohort tree are requeued (QueueAssociatedInadmissibleWorkloadsAfter)."""
        source = self.cqs[victim.cq or ""]
        self.unhold(victim)
        self.signature ^= hash((victim.key, source.name))
        self.evictions[victim.key] = self.evictions.get(victim.key, 0) + 1
        source.generation += 1
        self.released.append(victim)
        victim.admitted = False
        victim.usage, victim.flavors, victim.counts = {}, {}, {}
        victim.reason, victim.message = "Pending", victim.evicted_message
        victim.base_reason, victim.base_message = victim.evicted_reason, victim.evicted_message
        victim.stamp = self.seq
        victim.order = None
        victim.last = None
        victim.reserved_at = None
        cq = self.resolve(victim)
        victim.cq = cq.name if cq is not None else None
        if cq is None:
            return
        victim.bucket = bucket_of(victim, cq)
        cq.queue.push_or_update(victim, True)
        self.requeue_inadmissible(cq.name)

    def requeue_inadmissible(self, cq_name: str) -> bool:
        """QueueInadmissibleWorkloads over the cohort tree: every inadmissible Workload whose namespace its
        ClusterQueue selects goes back into the heap. Whether any moved."""
        moved = False
        for name in self.requeue_groups.get(cq_name, ()):
            queue = self.cqs[name].queue
            matching = []
            for bucket in queue.buckets.values():
                if bucket.aside():
                    hk = bucket.every[0]
                    if self.namespace_matches(queue.infos[(hk[2], hk[3])], self.cqs[name]):
                        matching.append(bucket)
            moved = queue.requeue_buckets(matching) or moved
        return moved


def truncate(message: str, limit: int = 32 * 1024) -> str:
    """api.TruncateConditionMessage: a condition message is cut at 32 KiB, ending in " ..."."""
    if len(message.encode()) <= limit:
        return message
    return message.encode()[: limit - 4].decode(errors="ignore") + " ..."


def _entry_key(e: Entry) -> tuple[int, int, float, str, str]:
    assert e.assignment is not None
    i = e.info
    return (e.assignment.borrowing, -i.priority, i.order_time, i.wl.namespace, i.wl.name)


def to_reserve(a: Assignment, cq: CQState) -> dict[FR, int]:
    """quotaResourcesToReserve for a head needing preemption that found no victims."""
    out = {}
    for fr, usage in a.usage.items():
        q = cq.node.quota(fr)
        used = cq.node.usage.get(fr, 0)
        if a.borrowing > 0:
            out[fr] = usage if q.borrowing_limit is None else min(usage, q.nominal + q.borrowing_limit - used)
        else:
            out[fr] = max(0, min(usage, q.nominal - used))
    return out
