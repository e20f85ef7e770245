"""``settle``: the steady state Kueue's scheduler reaches from a set of Kueue objects.

    settled = settle(objects, source="cluster.json")

``objects`` are Kubernetes objects as dicts (``kubectl get -o json`` items, any mix); the Kueue objects,
PriorityClasses and Namespaces among them are read (``kgpu.model.kueue``), bad ones raise InputError.
A Workload whose ``Finished`` condition is True holds nothing and is left out. One with ``status.admission``
and ``QuotaReserved`` True (not evicted) holds the quota its ``podSetAssignments`` record. Every other
Workload is pending, where the workload controller puts it (``kgpu.sim.queue.engine``: a LocalQueue or
ClusterQueue that is missing or inactive answers "Inadmissible" with Kueue's message).

``settle`` is a thin wrapper over the engine (``kgpu.sim.queue.engine.Settler``): read the objects, build the
quota tree and queues, place every Workload, run Kueue's scheduling cycles (``kgpu.sim.queue.cycle``) until
none changes anything: every head was put back exactly as it was popped for as many cycles as a flavor search
can rotate through. What Kueue leaves to timing is decided the same way each time and documented where it
happens (tie order in queues and among heads, the order of a PodSet's resources, all admissions within one
second). The replay (``kgpu.sim.queue.replay``) keeps one engine across its events instead of settling again.

Modelled: everything in ``kgpu.sim.queue``'s docstring. Not modelled, and said in ``Settled.warnings``
when the input uses it: fair sharing and admission fair sharing (kgpu admits as Kueue's default
configuration, with fair sharing off), topology-aware scheduling (a PodSet whose ``topologyRequest`` asks
for it, pkg/workload ``IsExplicitlyRequestingTAS``, or a ResourceFlavor with ``topologyName``), admission
checks (QuotaReserved is decided; Admitted then waits for the checks), requeue backoff (a Workload whose
Requeued condition is False waits as if its backoff had not elapsed), waitForPodsReady, LimitRanges and
RuntimeClass overhead.
"""

from __future__ import annotations

from typing import Any

from kgpu.model.kueue import KueueObjects, read_kueue
from kgpu.model.kueue_workload import FINISHED
from kgpu.sim.queue.engine import Settler
from kgpu.sim.queue.results import Outcome, QueueUsage, ResourceUsage, Settled

__all__ = ["Outcome", "QueueUsage", "ResourceUsage", "Settled", "settle"]


def latest(k: KueueObjects) -> float:
    """The latest time in the input: creations and condition transitions."""
    times = [wl.creation for wl in k.workloads]
    times += [c.time for wl in k.workloads for c in wl.conditions.values() if c.time is not None]
    return max(times, default=0.0)


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
    engine = Settler(k)
    for wl in k.workloads:
        if not wl.is_true(FINISHED):
            engine.place(wl)
    warnings = _warnings(k)
    if engine.backoff:
        more = f" and {len(engine.backoff) - 5} more" if len(engine.backoff) > 5 else ""
        warnings.append(
            f"requeue backoff is not modelled: {', '.join(engine.backoff[:5])}{more} (Requeued False) wait as if "
            "their backoff had not elapsed"
        )
    engine.run(None, latest(k) if now is None else now)
    return Settled(engine.outcomes(), engine.usage(), warnings + engine.warnings, engine.cycles)
