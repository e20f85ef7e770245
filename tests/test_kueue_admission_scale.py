"""settle at scale: seeded random cohort trees, flavors, quotas, policies and Workloads. What Kueue
guarantees must hold whatever the input (no quota handed out beyond what the cohort tree holds, victims
named with their preemptor, admissions numbered in order), and 10,000 Workloads over 20 ClusterQueues
settle in seconds (printed, not asserted)."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from kgpu.sim.queue.admission import Settled, settle
from test_kueue_admission import GPU
from test_kueue_model import (
    cluster_queue,
    cohort,
    container,
    flavor_quotas,
    group,
    local_queue,
    namespace,
    podset,
    quota,
    resource_flavor,
    workload,
)


def _cluster(
    seed: int, workloads: int, queues: int
) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
    """Objects, and per root cohort (or lone ClusterQueue) the GPUs of each flavor its tree holds."""
    rng = random.Random(seed)
    flavors = ["a100", "h100"]
    objs: list[dict[str, Any]] = [resource_flavor(f) for f in flavors]
    roots = [f"org-{i}" for i in range(max(1, queues // 5))]
    totals: dict[str, dict[str, int]] = {r: dict.fromkeys(flavors, 0) for r in roots}
    for r in roots:
        objs.append(cohort(r))
    for i in range(queues):
        root = roots[i % len(roots)] if rng.random() < 0.8 else ""
        name = f"team-{i}"
        nominal = {f: rng.choice([0, 8, 16, 32]) for f in flavors}
        lending = {f: rng.choice([None, nominal[f] // 2]) if root else None for f in flavors}
        borrowing = {f: rng.choice([None, 8]) if root else None for f in flavors}
        g = group(
            ["cpu", "memory", GPU],
            *(
                flavor_quotas(
                    f,
                    quota("cpu", str(8 * nominal[f])),
                    quota("memory", f"{64 * nominal[f]}Gi"),
                    quota(GPU, nominal[f], borrowing[f], lending[f]),
                )
                for f in flavors
            ),
        )
        objs.append(
            cluster_queue(
                name,
                g,
                cohort=root or None,
                strategy=rng.choice(["BestEffortFIFO", "BestEffortFIFO", "StrictFIFO"]),
                within=rng.choice(["Never", "LowerPriority", "LowerOrNewerEqualPriority"]),
                reclaim=rng.choice(["Never", "LowerPriority", "Any"]),
                fungibility={"whenCanBorrow": rng.choice(["MayStopSearch", "TryNextFlavor"])},
            )
        )
        objs += [namespace(name), local_queue(name, "lq", name)]
        totals.setdefault(root or name, dict.fromkeys(flavors, 0))
        for f in flavors:
            totals[root or name][f] += nominal[f]
    for j in range(workloads):
        ns = f"team-{rng.randrange(queues)}"
        gpus = rng.choice([1, 2, 4, 8])
        created = f"2025-06-02T{8 + j // 3600:02d}:{(j // 60) % 60:02d}:{j % 60:02d}Z"
        objs.append(
            workload(
                ns,
                f"train-{j}",
                "lq",
                podset(rng.choice([1, 1, 2, 4]), container(gpus, str(4 * gpus), f"{32 * gpus}Gi")),
                priority=rng.choice([0, 0, 100, 1000]),
                created=created,
            )
        )
    return objs, totals


def _check(s: Settled, objs: list[dict[str, Any]], totals: dict[str, dict[str, int]]) -> None:
    cohort_of = {
        o["metadata"]["name"]: o["spec"].get("cohortName", "") for o in objs if o["kind"] == "ClusterQueue"
    }
    used: dict[str, dict[str, int]] = {}
    for name, cq in s.cluster_queues.items():
        tree = cohort_of[name] or name
        for flavor, per in cq.resources.items():
            used.setdefault(tree, {}).setdefault(flavor, 0)
            used[tree][flavor] += per[GPU].used if GPU in per else 0
            if GPU in per and per[GPU].borrowing_limit is not None:
                assert per[GPU].used <= per[GPU].nominal + per[GPU].borrowing_limit
    for tree, per in used.items():
        for flavor, n in per.items():
            assert n <= totals[tree][flavor], (tree, flavor)
    orders = sorted(o.order for o in s.workloads.values() if o.order is not None)
    assert orders == sorted(set(orders))
    for o in s.workloads.values():
        if o.admitted:
            assert o.flavors and all(GPU in f for f in o.flavors.values())
        if o.evicted and o.evicted_reason == "Preempted":
            assert o.preempted_by in s.workloads and o.evicted_message.startswith(
                "Preempted to accommodate a workload"
            )
        if not o.admitted:
            assert o.flavors == {}


@pytest.mark.parametrize("seed", range(12))
def test_random_cohorts_keep_kueues_guarantees(seed: int) -> None:
    objs, totals = _cluster(seed, workloads=150, queues=6)
    s = settle(objs, f"seed-{seed}")
    _check(s, objs, totals)
    assert s.cycles > 0


def test_ten_thousand_workloads_settle() -> None:
    objs, totals = _cluster(2026, workloads=10_000, queues=20)
    start = time.perf_counter()
    s = settle(objs, "bench")
    took = time.perf_counter() - start
    admitted = sum(o.admitted for o in s.workloads.values())
    print(
        f"\nsettle: 10,000 Workloads, 20 ClusterQueues: {took:.2f} s ({took / 10:.3f} s per 1,000), "
        f"{s.cycles} cycles, {admitted} admitted"
    )
    _check(s, objs, totals)
    assert len(s.workloads) == 10_000
