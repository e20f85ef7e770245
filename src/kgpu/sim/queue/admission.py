"""``settle``: the steady state Kueue's scheduler reaches from a set of Kueue objects.

    settled = settle(objects, source="cluster.json")

``objects`` are Kubernetes objects as dicts (``kubectl get -o json`` items, any mix); the Kueue objects,
PriorityClasses and Namespaces among them are read (``kgpu.model.kueue``), bad ones raise InputError.
A Workload whose ``Finished`` condition is True holds nothing and is left out. One with ``status.admission``
and ``QuotaReserved`` True (not evicted) holds the quota its ``podSetAssignments`` record. Every other
Workload is pending, where the workload controller puts it (pkg/controller/core/workload_controller.go):

- its LocalQueue does not exist: reason Inadmissible, "LocalQueue q doesn't exist";
- its LocalQueue is stopped: "LocalQueue q is inactive";
- the ClusterQueue it names does not exist: "ClusterQueue c doesn't exist";
- the ClusterQueue is inactive (stopped, a flavor or admission check missing): "ClusterQueue c is inactive";
- otherwise in its ClusterQueue's queue.

Then Kueue's scheduling cycles run (``kgpu.sim.queue.cycle``) until none changes anything: every head was
put back exactly as it was popped for as many cycles as a flavor search can rotate through. What Kueue
leaves to timing is decided the same way each time and documented where it happens (tie order in queues
and among heads, the order of a PodSet's resources, all admissions within one second).

Modelled: everything in ``kgpu.sim.queue``'s docstring. Not modelled, and said in ``Settled.warnings``
when the input uses it: fair sharing and admission fair sharing (kgpu admits as Kueue's default
configuration, with fair sharing off), topology-aware scheduling, admission checks (QuotaReserved is
decided; Admitted then waits for the checks), requeue backoff (a Workload whose Requeued condition is False
waits as if its backoff had not elapsed), waitForPodsReady, LimitRanges and RuntimeClass overhead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kgpu.model.kueue import KueueObjects, Workload, read_kueue
from kgpu.model.kueue_workload import EVICTED, FINISHED, QUOTA_RESERVED, REQUEUED
from kgpu.sim.queue.build import Tree, build
from kgpu.sim.queue.cycle import Scheduler
from kgpu.sim.queue.preemption import add_workload
from kgpu.sim.queue.state import CQState, Info
from kgpu.sim.queue.tree import FR

__all__ = ["Outcome", "QueueUsage", "ResourceUsage", "Settled", "settle"]

INADMISSIBLE = "Inadmissible"
LOOP_REPEATS = 3  # the same admitted set after evictions this often: Kueue would preempt in a loop
DEACTIVATED = "Deactivated"


@dataclass(frozen=True, slots=True)
class Outcome:
    """A Workload after ``settle``.

    ``reason``/``message``: the QuotaReserved condition Kueue writes ("QuotaReserved" and "Quota reserved in
    ClusterQueue c" when admitted; "Pending" or "Inadmissible" and Kueue's message otherwise; "" when Kueue
    has written none, e.g. behind a StrictFIFO head that never moves).
    ``evicted``: the Evicted condition is True at the end (evicted during settle, or in the input and still
    pending), or the Workload was evicted during settle and admitted again later, when Kueue's condition
    reads False with reason QuotaReserved and message "Previously: <evicted_message>".
    ``order``: the position in which settle admitted it (None if admitted before, or not admitted).
    """

    admitted: bool
    cluster_queue: str | None
    flavors: dict[str, dict[str, str]]
    reason: str
    message: str
    evicted: bool = False
    evicted_reason: str = ""
    evicted_message: str = ""
    preempted_by: tuple[str, str] | None = None
    order: int | None = None


@dataclass(frozen=True, slots=True)
class ResourceUsage:
    """One resource of one flavor of a ClusterQueue, in Kueue's units (cpu in millicores)."""

    nominal: int
    used: int
    borrowed: int  # used beyond nominal
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class QueueUsage:
    active: bool
    reason: str  # the Active condition's reason (Ready, Stopped, FlavorNotFound, ...)
    message: str
    cohort: str | None
    resources: dict[str, dict[str, ResourceUsage]]  # flavor -> resource -> usage
    pending: int
    admitted: int


@dataclass(frozen=True, slots=True)
class Settled:
    workloads: dict[tuple[str, str], Outcome]
    cluster_queues: dict[str, QueueUsage]
    warnings: list[str] = field(default_factory=list)
    cycles: int = 0


def _order_time(wl: Workload) -> float:
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


def _latest(k: KueueObjects) -> float:
    times = [wl.creation for wl in k.workloads]
    times += [c.time for wl in k.workloads for c in wl.conditions.values() if c.time is not None]
    return max(times, default=0.0)


class _Setup:
    """Places each Workload where the workload controller and the cache put it."""

    def __init__(self, k: KueueObjects, tree: Tree) -> None:
        self.k = k
        self.tree = tree
        self.infos: dict[tuple[str, str], Info] = {}
        self.backoff: list[str] = []  # Workloads whose Requeued condition is False

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

    def place(self, wl: Workload) -> None:
        reserved = wl.condition(QUOTA_RESERVED)
        info = Info(wl, None, _order_time(wl))
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
            return
        if holds and not (ev is not None and ev.status == "True"):
            assert wl.admission is not None
            info.admitted = True
            info.cq = wl.admission.cluster_queue
            info.reserved_at = reserved.time if reserved is not None else None
            for psa in wl.admission.podsets:
                info.flavors[psa.name] = dict(psa.flavors)
                for res, amount in psa.usage.items():
                    fr: FR = (psa.flavors.get(res, ""), res)
                    info.usage[fr] = info.usage.get(fr, 0) + amount
            if info.cq in self.tree.cqs:
                add_workload(self.tree.cqs, info)
            return
        if ev is not None and ev.status == "True":
            info.evicted, info.evicted_reason, info.evicted_message = True, ev.reason, ev.message
            if holds:  # the job stopped: Kueue takes the quota back (jobframework, "handle eviction")
                info.reason, info.message = "Pending", ev.message
        cq, reason, message = self.queue_of(info)
        info.cq = cq.name if cq is not None else None
        if reason:
            info.reason, info.message = reason, message
        if cq is None:
            return
        requeued = wl.condition(REQUEUED)
        waiting = requeued is not None and requeued.status == "False"
        if waiting:
            self.backoff.append(f"{wl.namespace}/{wl.name}")
        cq.queue.push_or_update(info, not waiting)


def _warnings(k: KueueObjects) -> list[str]:
    out = []
    fair = sorted([f"ClusterQueue {n}" for n, cq in k.cluster_queues.items() if cq.fair_weight is not None])
    fair += sorted(f"Cohort {n}" for n, c in k.cohorts.items() if c.fair_weight is not None)
    if fair:
        out.append(
            f"fair sharing is not modelled: {', '.join(fair)} set spec.fairSharing; kgpu admits as Kueue does with "
            "fair sharing off (its default configuration)"
        )
    scoped = sorted(n for n, cq in k.cluster_queues.items() if cq.admission_scope)
    if scoped:
        out.append(
            f"admission fair sharing is not modelled: ClusterQueue {', '.join(scoped)} set spec.admissionScope"
        )
    tas = sorted(n for n, f in k.flavors.items() if f.topology_name)
    tas_wls = sum(any(ps.topology_request for ps in wl.podsets) for wl in k.workloads)
    if tas or tas_wls:
        out.append(
            "topology-aware scheduling is not modelled: "
            + (f"ResourceFlavor {', '.join(tas)} set spec.topologyName; " if tas else "")
            + f"{tas_wls} Workload(s) request a topology; their flavors are assigned on quota alone"
        )
    checked = sorted(n for n, cq in k.cluster_queues.items() if cq.admission_checks)
    if checked:
        out.append(
            f"admission checks are not modelled: ClusterQueue {', '.join(checked)} require them; kgpu decides quota "
            "reservation (QuotaReserved), after which Kueue admits once the checks are Ready"
        )
    if k.namespaces is None:
        selective = sorted(
            n
            for n, cq in k.cluster_queues.items()
            if cq.namespace_selector is None or cq.namespace_selector.requirements
        )
        if selective:
            out.append(
                f"no Namespace objects in the input: the namespaceSelector of ClusterQueue {', '.join(selective)} is "
                "taken to select every Workload's namespace"
            )
    return out


def settle(objects: Any, source: str = "", *, now: float | None = None) -> Settled:
    """Run Kueue's scheduling cycles over ``objects`` until nothing changes; see the module docstring.
    ``now`` (Unix seconds) stamps admissions made during settle; by default the latest time in the input."""
    k = read_kueue(objects, source)
    tree = build(k)
    setup = _Setup(k, tree)
    for wl in k.workloads:
        if not wl.is_true(FINISHED):
            setup.place(wl)
    clock = _latest(k) if now is None else now
    sched = Scheduler(
        tree.cqs, tree.groups, k.flavors, k.namespaces, tree.requeue_groups, setup.resolve, tree.nodes, clock
    )
    window = 2 + max(
        (len(rg.flavors) for cq in k.cluster_queues.values() for rg in cq.resource_groups), default=1
    )
    limit = 100 + 20 * (len(setup.infos) + len(tree.cqs))
    cycles = idle = 0
    warnings = _warnings(k)
    if setup.backoff:
        more = f" and {len(setup.backoff) - 5} more" if len(setup.backoff) > 5 else ""
        warnings.append(
            f"requeue backoff is not modelled: {', '.join(setup.backoff[:5])}{more} (Requeued False) wait as if "
            "their backoff had not elapsed"
        )
    seen: dict[int, int] = {}
    while idle < window:
        if cycles >= limit:
            warnings.append(
                f"settle stopped after {cycles} scheduling cycles without reaching a steady state"
            )
            break
        released = sum(sched.evictions.values())
        had_heads, moved = sched.cycle()
        if not had_heads:
            break
        cycles += 1
        idle = 0 if moved else idle + 1
        if sum(sched.evictions.values()) > released:
            seen[sched.signature] = seen.get(sched.signature, 0) + 1
            if seen[sched.signature] >= LOOP_REPEATS:
                warnings.append(_loop_warning(sched.evictions, cycles))
                break
    return Settled(_outcomes(setup.infos), _usage(tree, setup.infos), warnings, cycles)


def _loop_warning(evictions: dict[tuple[str, str], int], cycles: int) -> str:
    looping = sorted((k for k, n in evictions.items() if n > 1), key=lambda k: (-evictions[k], k))
    shown = ", ".join(f"{ns}/{name} ({evictions[(ns, name)]}x)" for ns, name in looping[:5])
    more = f" and {len(looping) - 5} more" if len(looping) > 5 else ""
    return (
        f"preemption loop: after {cycles} cycles the same Workloads hold quota again after evictions, as Kueue "
        f"would keep evicting and readmitting them; evicted more than once: {shown}{more}. "
        "The state shown is the one after the loop was found"
    )


def _outcomes(infos: dict[tuple[str, str], Info]) -> dict[tuple[str, str], Outcome]:
    out = {}
    for key, i in infos.items():
        out[key] = Outcome(
            admitted=i.admitted,
            cluster_queue=i.cq,
            flavors={ps: dict(f) for ps, f in i.flavors.items()} if i.admitted else {},
            reason=i.reason,
            message=i.message,
            evicted=i.evicted,
            evicted_reason=i.evicted_reason,
            evicted_message=i.evicted_message,
            preempted_by=i.preempted_by,
            order=i.order if i.admitted else None,
        )
    return out


def _usage(tree: Tree, infos: dict[tuple[str, str], Info]) -> dict[str, QueueUsage]:
    pending: dict[str, int] = {}
    admitted: dict[str, int] = {}
    for i in infos.values():
        if i.cq is not None:
            counts = admitted if i.admitted else pending
            counts[i.cq] = counts.get(i.cq, 0) + 1
    out = {}
    for name, cq in tree.cqs.items():
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
