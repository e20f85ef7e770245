"""What ``settle`` answers (kgpu.sim.queue.admission): per Workload its Outcome, per ClusterQueue its usage.
``kgpu.sim.queue.admission`` exports these; they live here so that the engine (kgpu.sim.queue.engine) can
build them without importing the entry point."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    ``counts``: admitted, the pods of each PodSet the admission holds quota for (``podSetAssignments[].count``:
    fewer than the PodSet's count when Kueue admitted it partially, down to its ``minCount``); {} otherwise.
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
    counts: dict[str, int] = field(default_factory=dict)


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
