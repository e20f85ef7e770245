"""Kueue's queues and quota, read and built once and moved by events: the engine under ``settle`` and the
replay (sigs.k8s.io/kueue v0.15.0 pkg/cache/queue/manager.go, pkg/cache/scheduler/cache.go,
pkg/controller/core/workload_controller.go).

    s = Settler(read_kueue(objects))
    for wl in workloads: s.place(wl)        # where the workload controller and the cache put it
    s.run(None, now)                          # scheduling cycles until nothing changes
    s.finish(key); s.place(arriving)          # a Workload ends (its quota comes back) or is created
    s.run({s.label_of(key)}, later)           # settle again the cohort trees those events touched

``place`` puts each Workload where the workload controller puts it (pkg/controller/core/workload_controller.go):

- its LocalQueue does not exist: reason Inadmissible, "LocalQueue q doesn't exist";
- its LocalQueue is stopped: "LocalQueue q is inactive";
- the ClusterQueue it names does not exist: "ClusterQueue c doesn't exist";
- the ClusterQueue is inactive (stopped, a flavor or admission check missing): "ClusterQueue c is inactive";
- otherwise in its ClusterQueue's queue; one admitted (``status.admission``, QuotaReserved True, not
  evicted) holds the quota its ``podSetAssignments`` record.

``run`` runs Kueue's scheduling cycles (``kgpu.sim.queue.cycle``) over the ClusterQueues of the given cohort
trees (``label_of``: "cohort <root>", "queue <name>" without a cohort; admission in one tree never depends on
another's: usage, borrowing and preemption stay inside it) until none changes anything: every head was put
back exactly as it was popped for as many cycles as a flavor search can rotate through (``window``), or a
preemption loop repeats (the same Workloads hold quota a third time after evictions), or a bound on cycles is
reached. Each run starts from what a fresh read of the objects would give for those trees: every pending
Workload back in its heap (one waiting for a requeue backoff among the inadmissible), nothing sticky, no
flavor search half done, the conditions the objects carry (``Info.base_reason``), admissions of earlier runs
stamped at their whole second as a ``lastTransitionTime`` records them. So ``run`` after any events answers
exactly as ``settle`` over the objects as they then are (tests/test_kueue_replay_engine.py checks this on
random timelines). On a Workload's end this is what Kueue does (QueueAssociatedInadmissibleWorkloadsAfter);
on a creation Kueue only queues the new Workload, and the two differ only when a head set aside earlier
could now preempt a Workload admitted after it was last tried.

With ``skip`` (the replay), runs of cycles that only set heads aside are decided at once
(``kgpu.sim.queue.skip``), so an event costs about the number of shapes queued in its tree, not the number of
Workloads; without it (``settle``), every cycle runs one by one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from kgpu.model.kueue import KueueObjects, Workload
from kgpu.model.kueue_workload import EVICTED, QUOTA_RESERVED
from kgpu.sim.queue.build import build
from kgpu.sim.queue.cycle import Scheduler
from kgpu.sim.queue.results import Outcome, QueueUsage, ResourceUsage
from kgpu.sim.queue.skip import Skipper
from kgpu.sim.queue.state import CQState, Info, Key, backing_off, bucket_of
from kgpu.sim.queue.tree import FR

INADMISSIBLE = "Inadmissible"
LOOP_REPEATS = 3  # the same admitted set after evictions this often: Kueue would preempt in a loop
DEACTIVATED = "Deactivated"


def order_time(wl: Workload) -> float:
    """GetQueueOrderTimestamp: the eviction time after a PodsReady timeout or an admission check."""
    ev = wl.condition(EVICTED)
    if (
        ev is not None
        and ev.status == "True"
        and ev.reason in ("PodsReadyTimeout", "AdmissionCheck")
        and ev.time
    ):
        return ev.time
    return wl.creation


@dataclass(slots=True)
class Run:
    """What one ``run`` changed: the Workloads it admitted (in order) and those it evicted (in order)."""

    admitted: list[Info] = field(default_factory=list)
    evicted: list[Info] = field(default_factory=list)
    cycles: int = 0


class Settler:
    """The simulation's state, kept between events (module docstring)."""

    def __init__(self, k: KueueObjects, *, skip: bool = False) -> None:
        self.k = k
        self.tree = tree = build(k)
        self.infos: dict[Key, Info] = {}
        self.backoff: list[str] = []  # Workloads whose Requeued condition is False
        self.sched = Scheduler(
            tree.cqs, tree.groups, k.flavors, k.namespaces, tree.requeue_groups, self.resolve, tree.nodes, 0.0
        )
        self.skipper = Skipper(self.sched) if skip else None
        self.window = 2 + max(
            (len(rg.flavors) for cq in k.cluster_queues.values() for rg in cq.resource_groups), default=1
        )
        self.labels = {name: _label(state) for name, state in tree.cqs.items()}
        self.present: dict[str, int] = {}  # label -> Workloads placed there (the bound on cycles counts them)
        self.held: dict[str, int] = {}  # label -> those of them admitted
        self.started: dict[str, int] = {}  # label -> Scheduler.seq when its last run began
        self.cycles = 0
        self.warnings: list[str] = []
        self._changed: list[Info] = []  # admitted or evicted by the last run

    # --- where Workloads are ------------------------------------------------------------------------

    def queue_of(self, info: Info) -> tuple[CQState | None, str, str]:
        """The ClusterQueue a pending Workload waits in, or why it waits nowhere (reason, message)."""
        wl = info.wl
        lq = self.k.local_queues.get((wl.namespace, wl.queue_name))
        if lq is None:
            return None, INADMISSIBLE, f"LocalQueue {wl.queue_name} doesn't exist"
        if lq.stop_policy != "None":
            return None, INADMISSIBLE, f"LocalQueue {wl.queue_name} is inactive"
        cq = self.tree.cqs.get(lq.cluster_queue)
        if cq is None:
            return None, INADMISSIBLE, f"ClusterQueue {lq.cluster_queue} doesn't exist"
        if not cq.active:
            return cq, INADMISSIBLE, f"ClusterQueue {cq.name} is inactive"
        return cq, "", ""

    def resolve(self, info: Info) -> CQState | None:
        return self.queue_of(info)[0]

    def label_of(self, info: Info) -> str:
        """The cohort tree a Workload's ClusterQueue is in ("nowhere ns/queue" without one)."""
        if info.cq is not None and info.cq in self.labels:
            return self.labels[info.cq]
        return f"nowhere {info.wl.namespace}/{info.wl.queue_name}"

    def place(self, wl: Workload) -> str:
        """Add a Workload as the objects hold it; its label."""
        info = self._place(wl)
        info.base_reason, info.base_message = info.reason, info.message
        label = self.label_of(info)
        self.present[label] = self.present.get(label, 0) + 1
        self.held[label] = self.held.get(label, 0) + info.admitted
        return label

    def _place(self, wl: Workload) -> Info:
        reserved = wl.condition(QUOTA_RESERVED)
        info = Info(wl, None, order_time(wl))
        self.infos[wl.key] = info
        if reserved is not None:
            info.reason, info.message = reserved.reason, reserved.message
        holds = wl.admission is not None and wl.is_true(QUOTA_RESERVED)
        ev = wl.condition(EVICTED)
        if not wl.active:
            info.evicted = True
            if ev is not None and ev.status == "True":
                info.evicted_reason, info.evicted_message = ev.reason, ev.message
            else:
                info.evicted_reason, info.evicted_message = DEACTIVATED, "The workload is deactivated"
            if holds:
                info.reason, info.message = "Pending", info.evicted_message
            cq = self.resolve(info)
            info.cq = cq.name if cq is not None else None
            return info
        if holds and not (ev is not None and ev.status == "True"):
            assert wl.admission is not None
            info.admitted = True
            info.cq = wl.admission.cluster_queue
            info.reserved_at = reserved.time if reserved is not None else None
            for psa in wl.admission.podsets:
                info.flavors[psa.name] = dict(psa.flavors)
                info.counts[psa.name] = psa.count
                for res, amount in psa.usage.items():
                    fr: FR = (psa.flavors.get(res, ""), res)
                    info.usage[fr] = info.usage.get(fr, 0) + amount
            if info.cq in self.tree.cqs:
                self.sched.hold(info)
            return info
        if ev is not None and ev.status == "True":
            info.evicted, info.evicted_reason, info.evicted_message = True, ev.reason, ev.message
            if holds:  # the job stopped: Kueue takes the quota back (jobframework, "handle eviction")
                info.reason, info.message = "Pending", ev.message
        cq, reason, message = self.queue_of(info)
        info.cq = cq.name if cq is not None else None
        if reason:
            info.reason, info.message = reason, message
        if cq is None:
            return info
        info.bucket = bucket_of(info, cq)
        waits = backing_off(wl)
        if waits:
            self.backoff.append(f"{wl.namespace}/{wl.name}")
        cq.queue.push_or_update(info, not waits)
        return info

    def finish(self, key: Key) -> str | None:
        """The Workload ends (Finished, or deleted): it leaves its queue, or gives its quota back. Its label."""
        info = self.infos.pop(key, None)
        if info is None:
            return None
        label = self.label_of(info)
        self.present[label] -= 1
        self.held[label] -= info.admitted
        cq = self.tree.cqs.get(info.cq or "")
        if cq is not None:
            if info.admitted:
                self.sched.unhold(info)
            else:
                cq.queue.delete(key)
                self.sched.specials.get(cq.name, set()).discard(key)
        return label

    def pending(self, labels: Iterable[str]) -> bool:
        """Whether a Workload waits without quota in one of these trees (else a run changes nothing)."""
        return any(self.present.get(label, 0) > self.held.get(label, 0) for label in labels)

    # --- scheduling -----------------------------------------------------------------------------------

    def _refresh(self, names: list[str]) -> int:
        """The state a fresh read of the objects gives the ClusterQueues ``names``; the run's start."""
        sched = self.sched
        for info in self._changed:
            if info.admitted:  # as the objects now record it: admitted at a whole second, not evicted
                if info.reserved_at is not None:
                    info.reserved_at = float(math.floor(info.reserved_at))
                    sched.versions.touch(info)  # a preemption search orders candidates by it
                info.evicted, info.evicted_reason, info.evicted_message = False, "", ""
                info.preempted_by = None
                info.order = None
            else:
                info.preempted_by = None
        self._changed = []
        if self.skipper is not None:
            self.skipper.forget(names)
        for name in names:
            queue = self.tree.cqs[name].queue
            queue.reset()
            for key in sched.specials.pop(name, ()):
                if key in queue.infos:
                    queue.infos[key].last = None
        sched.admitted = sched.signature = 0
        sched.evictions = {}
        sched.admissions, sched.released = [], []
        sched.seq += 1
        return sched.seq

    def run(self, labels: Iterable[str] | None, now: float) -> Run:
        """Scheduling cycles over the cohort trees ``labels`` (None: all) at ``now`` until nothing changes."""
        sched = self.sched
        wanted = set(labels) if labels is not None else {*self.labels.values(), *self.present}
        names = [n for n in sorted(self.tree.cqs) if self.labels[n] in wanted]
        start = self._refresh(names)
        for label in wanted:
            self.started[label] = start
        sched.now = sched.preemptor.now = now
        sched.versions.at(now)
        scope = [self.tree.cqs[n] for n in names]
        workloads = sum(self.present.get(label, 0) for label in wanted)
        limit = 100 + 20 * (workloads + len(self.tree.cqs))
        cycles = idle = 0
        seen: dict[int, int] = {}
        skipper = self.skipper
        while idle < self.window:
            if cycles >= limit:
                self._stopped(cycles)
                break
            if skipper is not None:
                first = skipper.plan(scope)
                todo = skipper.depth() if first is None else first
                steps = min(todo, limit - cycles)
                skipper.skip(steps)
                if steps:
                    cycles, idle = cycles + steps, 0
                if steps < todo:
                    self._stopped(cycles)
                    break
                if first is None:  # every head left is set aside or blocked: the loop idles out
                    if cycles >= limit:
                        self._stopped(cycles)
                    elif skipper.blocked():
                        more = min(self.window - idle, limit - cycles)
                        skipper.skip_blocked()
                        cycles, idle = cycles + more, idle + more
                        if idle < self.window:
                            self._stopped(cycles)
                    break
                if cycles >= limit:
                    continue
                run, takers = skipper.futile()
                if run:
                    # heads that could take quota cannot (what others reserve first): these cycles only set
                    # heads aside (moving), then idle until the window closes
                    moving = skipper.moving(run)
                    settled = idle if moving == 0 else 0
                    steps = min(run, moving + self.window - settled, limit - cycles)
                    skipper.skip_futile(steps, takers)
                    cycles += steps
                    idle = settled + steps - moving if steps > moving else (0 if steps else idle)
                    continue
            released = sum(sched.evictions.values())
            had_heads, moved = sched.cycle(names)
            if not had_heads:
                break
            cycles += 1
            idle = 0 if moved else idle + 1
            if sum(sched.evictions.values()) > released:
                seen[sched.signature] = seen.get(sched.signature, 0) + 1
                if seen[sched.signature] >= LOOP_REPEATS:
                    self.warnings.append(_loop_warning(sched.evictions, cycles))
                    break
        self.cycles += cycles
        self._changed = [*sched.admissions, *sched.released]
        for info in sched.admissions:
            label = self.label_of(info)
            self.held[label] = self.held.get(label, 0) + 1
        for info in sched.released:
            label = self.label_of(info)
            self.held[label] -= 1
        return Run(list(sched.admissions), list(sched.released), cycles)

    def _stopped(self, cycles: int) -> None:
        self.warnings.append(
            f"settle stopped after {cycles} scheduling cycles without reaching a steady state"
        )

    # --- answers --------------------------------------------------------------------------------------

    def condition(self, info: Info) -> tuple[str, str]:
        """The QuotaReserved condition (reason, message) the Workload carries now."""
        reason, message, seq = info.reason, info.message, info.stamp
        if self.skipper is not None and not info.admitted:
            written = self.skipper.written(info)
            if written is not None and written[0] > seq:
                seq = written[0]
                reason, message = "Pending", written[1].resolve(self.sched, info)
        if seq < self.started.get(self.label_of(info), 0):
            return info.base_reason, info.base_message
        return reason, message

    def outcome(self, info: Info) -> Outcome:
        reason, message = self.condition(info)
        return Outcome(
            admitted=info.admitted,
            cluster_queue=info.cq,
            flavors={ps: dict(f) for ps, f in info.flavors.items()} if info.admitted else {},
            reason=reason,
            message=message,
            evicted=info.evicted,
            evicted_reason=info.evicted_reason,
            evicted_message=info.evicted_message,
            preempted_by=info.preempted_by,
            order=info.order if info.admitted else None,
            counts=dict(info.counts) if info.admitted else {},
        )

    def outcomes(self, labels: Iterable[str] | None = None) -> dict[Key, Outcome]:
        wanted = set(labels) if labels is not None else None
        return {
            key: self.outcome(i)
            for key, i in self.infos.items()
            if wanted is None or self.label_of(i) in wanted
        }

    def usage(self) -> dict[str, QueueUsage]:
        pending: dict[str, int] = {}
        admitted: dict[str, int] = {}
        for i in self.infos.values():
            if i.cq is not None:
                counts = admitted if i.admitted else pending
                counts[i.cq] = counts.get(i.cq, 0) + 1
        out = {}
        for name, cq in self.tree.cqs.items():
            resources: dict[str, dict[str, ResourceUsage]] = {}
            for rg in cq.spec.resource_groups:
                for fq in rg.flavors:
                    per = resources.setdefault(fq.name, {})
                    for res, q in fq.resources:
                        used = cq.node.usage.get((fq.name, res), 0)
                        per[res] = ResourceUsage(
                            q.nominal, used, max(0, used - q.nominal), q.borrowing_limit, q.lending_limit
                        )
            for (flavor, res), used in cq.node.usage.items():
                if used and res not in resources.get(flavor, {}):
                    resources.setdefault(flavor, {})[res] = ResourceUsage(0, used, used)
            out[name] = QueueUsage(
                active=cq.active,
                reason=cq.inactive_reason,
                message=cq.inactive_message,
                cohort=cq.spec.cohort or None,
                resources=resources,
                pending=pending.get(name, 0),
                admitted=admitted.get(name, 0),
            )
        return out


def _label(state: CQState) -> str:
    root = state.node.root()
    return f"cohort {root.name}" if root is not state.node else f"queue {state.name}"


def _loop_warning(evictions: dict[Key, int], cycles: int) -> str:
    looping = sorted((k for k, n in evictions.items() if n > 1), key=lambda k: (-evictions[k], k))
    shown = ", ".join(f"{ns}/{name} ({evictions[(ns, name)]}x)" for ns, name in looping[:5])
    more = f" and {len(looping) - 5} more" if len(looping) > 5 else ""
    return (
        f"preemption loop: after {cycles} cycles the same Workloads hold quota again after evictions, as Kueue "
        f"would keep evicting and readmitting them; evicted more than once: {shown}{more}. "
        "The state shown is the one after the loop was found"
    )
