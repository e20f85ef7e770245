"""When Workloads start: kgpu's replay (``kgpu.sim.queue.replay.replay``) against the real Kueue (``kueue_rig``:
minimalkueue from sigs.k8s.io/kueue v0.15.0 on the rig's kube-apiserver and etcd) on a time-compressed trace.

Per scenario, the set-up of ``kueue_scenarios.scenario(n)`` (flavors, cohorts, quotas, limits, queueing
strategies, fungibility, namespace selectors) with preemption off (every policy Never: a preempted job's
restart would make the trace depend on the job, not on Kueue), and 5-9 Workloads shaped as Kueue's batch/v1
Job integration creates them, one arriving each second, each with a runtime of 2 to 6 seconds plus a
fraction of its own (1/64 s steps), so that no two events of a scenario share an instant unless the trace
makes them.

The rig plays the trace as Kueue's performance runner does, on a clock of its own: at each instant (the next
arrival or the next end of a Workload it admitted) it finishes the Workloads due (the ``Finished``
condition, as the runner applies it), creates those arriving, and waits until Kueue settled (no change for a
second, every head tried); a Workload Kueue admitted then started at that instant and ends its runtime later.
Kueue's own reaction times never enter the trace. ``KGPU_CONFORMANCE_CASES / 10`` scenarios (default 30)
from ``KGPU_CONFORMANCE_SEED`` on run in lockstep in one Kueue, each on its own clock.

kgpu gets the set-up as the API server returned it, every Workload as created with its creationTimestamp set
to its arrival on the trace's clock, and each Workload's runtime, and replays from the first arrival. Compared
per Workload: whether it starts, when (exactly: the trace's instants), and with which flavors. Fails on any
disagreement.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from kueue_diff import ready_check
from kueue_rig import API, Key, KueueRig, is_true, key
from kueue_scenarios import Queue, Scenario, _meta, _template, scenario

from conftest import cases, seed
from kgpu.sim.queue.replay import replay

SCENARIOS = max(1, cases(300) // 10)
SEED = seed()
NEVER = {
    "withinClusterQueue": "Never",
    "reclaimWithinCohort": "Never",
    "borrowWithinCohort": {"policy": "Never"},
}
EPOCH = datetime(2026, 1, 1, tzinfo=UTC).timestamp()  # the trace's clock starts here (kgpu's ``now``)


@dataclass
class Planned:
    arrival: int  # seconds on the trace's clock
    runtime: float
    obj: dict[str, Any]


@dataclass
class Trace:
    scn: Scenario
    infra: list[dict[str, Any]]
    planned: dict[Key, Planned]
    created: dict[Key, dict[str, Any]] = field(default_factory=dict)
    started: dict[Key, tuple[float, dict[str, dict[str, str]]]] = field(default_factory=dict)
    ends: dict[Key, float] = field(default_factory=dict)  # admitted, not finished yet: when it ends
    clock: float = -1.0

    def next_instant(self) -> float | None:
        later = [p.arrival for k, p in self.planned.items() if k not in self.created]
        later += list(self.ends.values())
        return min(later) if later else None


def _job(scn: Scenario, r: random.Random, queue: Queue, priority: tuple[str | None, int]) -> dict[str, Any]:
    scn.serial += 1
    job = f"job-{scn.serial}"
    uid = f"{scn.n:08x}-0000-4000-8000-{scn.serial:012x}"
    gpus = r.choice((1, 1, 2, 4))
    spec: dict[str, Any] = {
        "queueName": queue.local_queue,
        "podSets": [{"name": "main", "count": r.choice((1, 1, 2)), "template": _template(r, "train", gpus)}],
        "active": True,
    }
    pc, value = priority
    if pc is not None:
        spec["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": pc}
        spec["priority"] = value
    meta = _meta(
        f"{job}-{uid[-5:]}",
        namespace=queue.namespace,
        labels={"kueue.x-k8s.io/job-uid": uid},
        ownerReferences=[
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": job,
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    )
    return {"apiVersion": API, "kind": "Workload", "metadata": meta, "spec": spec}


def trace(n: int) -> Trace:
    scn = scenario(n)
    infra = copy.deepcopy(scn.infra)
    for obj in infra:
        if obj["kind"] == "ClusterQueue":
            obj["spec"]["preemption"] = copy.deepcopy(NEVER)
    r = random.Random(n * 7919 + 1)
    count = r.randint(5, 9)
    fractions = r.sample(range(1, 32), count)  # distinct 1/64 s parts: no two ends share an instant by chance
    planned = {}
    for i in range(count):
        wl = _job(scn, r, r.choice(scn.queues), r.choice(scn.priorities))
        planned[key(wl)] = Planned(i, r.randint(2, 6) + fractions[i] / 64, wl)
    return Trace(scn, infra, planned)


@pytest.fixture(scope="module")
def rig(kueue: KueueRig) -> KueueRig:
    return kueue


def play(rig: KueueRig, traces: list[Trace], *, max_steps: int = 100) -> int:
    """Every trace on its own clock, in lockstep: per step each trace applies the events of its next instant
    (ends first, then arrivals); then Kueue settles and what it admitted started at that instant."""
    rig.create_each([t.infra for t in traces])
    rig.wait_active(
        {
            "ClusterQueue": {q.name for t in traces for q in t.scn.queues},
            "LocalQueue": {f"{q.namespace}/{q.local_queue}" for t in traces for q in t.scn.queues},
        }
    )
    heads_tried = ready_check([t.scn for t in traces])

    def ready(snap: dict[Key, dict[str, Any]]) -> str | None:
        # a head skipped in a cycle after another took the quota ("no longer fits after processing another
        # workload") keeps that message when nothing frees quota before the next event: steady here
        why = heads_tried(snap)
        return None if why is not None and "is to be tried again" in why else why

    steps = 0
    while steps < max_steps:
        moving = []
        for t in traces:
            at = t.next_instant()
            if at is not None:
                t.clock = at
                moving.append(t)
        if not moving:
            break
        steps += 1

        def apply(t: Trace) -> list[dict[str, Any]]:
            for k in sorted(k for k, end in t.ends.items() if end == t.clock):
                rig.finish(*k)
                del t.ends[k]
            arriving = [p.obj for k, p in t.planned.items() if k not in t.created and p.arrival == t.clock]
            return [rig.create(o) for o in arriving]

        for t, objs in zip(moving, rig.pool.map(apply, moving), strict=True):
            t.created.update((key(o), o) for o in objs)
        snap = rig.wait_settled(ready, timeout=120)
        for t in moving:
            for k in t.planned:
                wl = snap.get(k)
                admission = (wl or {}).get("status", {}).get("admission")
                if k in t.started or not admission or not is_true(wl or {}, "QuotaReserved"):
                    continue
                flavors = {ps["name"]: dict(ps.get("flavors") or {}) for ps in admission["podSetAssignments"]}
                t.started[k] = (t.clock, flavors)
                t.ends[k] = t.clock + t.planned[k].runtime
    return steps


def _listed(rig: KueueRig, t: Trace) -> list[dict[str, Any]]:
    prefix = f"s{t.scn.n}-"
    out = []
    for kind in ("ResourceFlavor", "WorkloadPriorityClass", "Cohort", "ClusterQueue", "LocalQueue"):
        for o in rig.list(kind):
            ns, name = key(o)
            if (ns or name).startswith(prefix):
                out.append(o | {"apiVersion": API, "kind": kind})
    for o in rig.api("GET", "/api/v1/namespaces")["items"]:
        if o["metadata"]["name"].startswith(prefix):
            out.append(o | {"apiVersion": "v1", "kind": "Namespace"})
    return out


def _on_the_clock(t: Trace, k: Key) -> dict[str, Any]:
    """The Workload as created, without status, created at its arrival on the trace's clock."""
    obj = {f: v for f, v in t.created[k].items() if f != "status"}
    stamp = datetime.fromtimestamp(EPOCH + t.planned[k].arrival, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return obj | {"metadata": obj["metadata"] | {"creationTimestamp": stamp}}


def test_start_times(rig: KueueRig) -> None:
    traces = [trace(n) for n in range(SEED, SEED + SCENARIOS)]
    steps = play(rig, traces)
    compared = starts = 0
    problems: list[str] = []
    for t in traces:
        objects = _listed(rig, t) + [_on_the_clock(t, k) for k in t.planned if k in t.created]
        runtimes = {k: p.runtime for k, p in t.planned.items()}
        got = replay(
            objects, source=f"scenario {t.scn.n}", now=datetime.fromtimestamp(EPOCH, UTC), runtimes=runtimes
        )
        for k in t.planned:
            compared += 1
            s = got.starts.get(k)
            mine = s.earliest.timestamp() - EPOCH if s is not None and s.earliest is not None else None
            real = t.started.get(k)
            theirs = real[0] if real is not None else None
            where = f"scenario {t.scn.n} {k[0]}/{k[1]}"
            if mine is None or theirs is None or s is None or real is None:
                if (mine is None) != (theirs is None):
                    problems.append(f"{where}: kueue starts it at {theirs}, kgpu at {mine}")
                continue
            starts += 1
            if abs(mine - theirs) > 1e-3:
                problems.append(f"{where}: kueue starts it at {theirs:.3f}s, kgpu at {mine:.3f}s")
            elif real[1] != s.flavors:
                problems.append(f"{where}: kueue gives it {real[1]}, kgpu {s.flavors}")
    print(
        f"\nKueue start times, seed {SEED}, {SCENARIOS} scenarios, {steps} steps: {compared} Workloads, "
        f"{starts} started in both, {compared - starts - len(problems)} in neither, {len(problems)} disagreements"
    )
    for line in problems[:20]:
        print("  ", line)
    assert not problems, f"{len(problems)} disagreements on start times and flavors"
