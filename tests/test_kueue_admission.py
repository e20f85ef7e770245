"""Kueue's admission (kgpu.sim.queue.admission.settle) on hand-built set-ups.

Each expectation is derived from Kueue v0.15.0's code path, named in the test's docstring: flavor
assignment (pkg/scheduler/flavorassigner/flavorassigner.go), the scheduling cycle
(pkg/scheduler/scheduler.go), queueing (pkg/cache/queue/cluster_queue.go), quota over the cohort tree
(pkg/cache/scheduler/resource_node.go), preemption (pkg/scheduler/preemption/).
"""

from __future__ import annotations

from typing import Any

from kgpu.sim.queue.admission import Outcome, Settled, settle
from test_kueue_model import (
    T0,
    admitted,
    assignment,
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

GPU = "nvidia.com/gpu"


def gpus_only(*flavors: tuple[str, int] | tuple[str, int, int | None, int | None]) -> dict[str, Any]:
    """A group covering only nvidia.com/gpu: (flavor, nominal[, borrowingLimit, lendingLimit])."""
    out = []
    for f in flavors:
        out.append(
            flavor_quotas(f[0], quota(GPU, f[1], f[2] if len(f) > 2 else None, f[3] if len(f) > 3 else None))
        )
    return group([GPU], *out)


def gpu_job(
    ns: str, job: str, gpus: int, *, pods: int = 1, queue: str = "lq", at: str = T0, **kw: Any
) -> dict[str, Any]:
    return workload(ns, job, queue, podset(pods, container(gpus)), created=at, **kw)


def running(
    ns: str, job: str, gpus: int, cq: str, flavor: str = "a100", *, at: str = T0, **kw: Any
) -> dict[str, Any]:
    """A GPU-only Workload Kueue admitted at ``at``."""
    psa = {"name": "main", "flavors": {GPU: flavor}, "resourceUsage": {GPU: str(gpus)}, "count": 1}
    return gpu_job(ns, job, gpus, at=at, status=admitted(cq, [psa], at), **kw)


def team(ns: str, cq: str) -> list[dict[str, Any]]:
    return [namespace(ns), local_queue(ns, "lq", cq)]


def out(settled: Settled, obj: dict[str, Any]) -> Outcome:
    return settled.workloads[(obj["metadata"]["namespace"], obj["metadata"]["name"])]


def key(obj: dict[str, Any]) -> tuple[str, str]:
    return (obj["metadata"]["namespace"], obj["metadata"]["name"])


FLAVORS = [resource_flavor("a100"), resource_flavor("h100")]


def test_quota_message_names_the_resource_flavor_and_what_is_missing() -> None:
    """fitsResourceQuota: 4 of 8 GPUs used, 8 asked: "insufficient unused quota ..., 4 more needed"; no
    preemption policy, so no candidates and the head stays pending (BestEffortFIFO: inadmissible)."""
    big = gpu_job("team-a", "big", 8)
    s = settle(
        [
            *FLAVORS,
            cluster_queue("team-a", gpus_only(("a100", 8))),
            *team("team-a", "team-a"),
            running("team-a", "warm", 4, "team-a"),
            big,
        ],
        "cluster.json",
    )
    o = out(s, big)
    assert not o.admitted and o.cluster_queue == "team-a" and o.flavors == {}
    assert o.reason == "Pending"
    assert (
        o.message
        == "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor a100, 4 more needed"
    )
    usage = s.cluster_queues["team-a"]
    assert usage.resources["a100"][GPU].used == 4 and (usage.pending, usage.admitted) == (1, 1)


def test_reasons_of_one_flavor_are_sorted_and_joined() -> None:
    """Status.Message sorts a PodSet's reasons and joins them with ", "; memory prints in binary form."""
    rg = group(
        ["cpu", "memory", GPU],
        flavor_quotas("a100", quota("cpu", "64"), quota("memory", "512Gi"), quota(GPU, 8)),
    )
    warm = workload(
        "team-a",
        "warm",
        "lq",
        podset(1, container(4, "32", "256Gi")),
        status=admitted("team-a", [assignment("a100", 1, 4)]),
    )
    big = workload("team-a", "big", "lq", podset(1, container(8, "64", "512Gi")))
    s = settle([*FLAVORS, cluster_queue("team-a", rg), *team("team-a", "team-a"), warm, big])
    assert out(s, big).message == (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor a100, 32 more needed, "
        "insufficient unused quota for memory in flavor a100, 256Gi more needed, "
        "insufficient unused quota for nvidia.com/gpu in flavor a100, 4 more needed"
    )


def test_more_than_the_queue_can_ever_get_is_no_fit() -> None:
    """fitsResourceQuota: a request above PotentialAvailable is "insufficient quota ... > maximum capacity"."""
    huge = gpu_job("team-a", "huge", 4, pods=4)
    s = settle([*FLAVORS, cluster_queue("team-a", gpus_only(("a100", 8))), *team("team-a", "team-a"), huge])
    assert out(s, huge).message == (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor a100, previously "
        "considered podsets requests (0) + current podset request (16) > maximum capacity (8)"
    )


def _cohort_of_two(team_a: dict[str, Any], team_b: dict[str, Any], *workloads: dict[str, Any]) -> Settled:
    return settle(
        [*FLAVORS, team_a, team_b, *team("team-a", "team-a"), *team("team-b", "team-b"), *workloads]
    )


def test_borrowing_within_the_cohort_and_non_borrowing_heads_first() -> None:
    """Two teams in cohort org, 8 GPUs each. team-a's 12-GPU job fits only by borrowing (height 1), team-b's
    8-GPU job without: entryOrdering puts the non-borrowing head first, which leaves 8 for team-a, so team-a's
    head is skipped ("no longer fits") and on its next turn lacks 4 GPUs and may not preempt."""
    wide = gpu_job("team-a", "wide", 4, pods=3)
    own = gpu_job("team-b", "own", 8, at="2025-06-02T08:05:00Z")
    s = _cohort_of_two(
        cluster_queue("team-a", gpus_only(("a100", 8)), cohort="org"),
        cluster_queue("team-b", gpus_only(("a100", 8)), cohort="org"),
        wide,
        own,
    )
    assert out(s, own).admitted and out(s, own).order == 1
    assert not out(s, wide).admitted
    assert (
        out(s, wide).message
        == "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor a100, 4 more needed"
    )


def test_borrowing_alone_admits_beyond_nominal() -> None:
    """Without team-b's own demand, team-a borrows 4 of team-b's unused GPUs (available: local + cohort)."""
    wide = gpu_job("team-a", "wide", 4, pods=3)
    s = _cohort_of_two(
        cluster_queue("team-a", gpus_only(("a100", 8)), cohort="org"),
        cluster_queue("team-b", gpus_only(("a100", 8)), cohort="org"),
        wide,
    )
    assert out(s, wide).admitted and out(s, wide).flavors == {"main": {GPU: "a100"}}
    used = s.cluster_queues["team-a"].resources["a100"][GPU]
    assert (used.used, used.borrowed) == (12, 4)


def test_lending_limit_and_borrowing_limit_cap_what_can_be_borrowed() -> None:
    """team-b lends at most 2 (its lendingLimit keeps 6 local: cohort subtree 8 + 2 = 10); team-c may borrow
    at most 2 (its borrowingLimit): both cap PotentialAvailable at 10 GPUs."""
    lending = _cohort_of_two(
        cluster_queue("team-a", gpus_only(("a100", 8)), cohort="org"),
        cluster_queue("team-b", gpus_only(("a100", 8, None, 2)), cohort="org"),
        wide := gpu_job("team-a", "wide", 4, pods=3),
    )
    borrowing = _cohort_of_two(
        cluster_queue("team-a", gpus_only(("a100", 8, 2, None)), cohort="org"),
        cluster_queue("team-b", gpus_only(("a100", 8)), cohort="org"),
        wide,
    )
    for s in (lending, borrowing):
        assert out(s, wide).message == (
            "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor a100, previously "
            "considered podsets requests (0) + current podset request (12) > maximum capacity (10)"
        )
    ten = gpu_job("team-a", "ten", 5, pods=2)
    s = _cohort_of_two(
        cluster_queue("team-a", gpus_only(("a100", 8)), cohort="org"),
        cluster_queue("team-b", gpus_only(("a100", 8, None, 2)), cohort="org"),
        ten,
    )
    assert out(s, ten).admitted and s.cluster_queues["team-a"].resources["a100"][GPU].borrowed == 2


def test_flavors_are_tried_in_order_and_a_full_one_is_passed() -> None:
    """a100 is full and nobody can be preempted (NoCandidates: try the next flavor); h100 fits."""
    job = gpu_job("team-a", "job", 4)
    s = settle(
        [
            *FLAVORS,
            cluster_queue("team-a", gpus_only(("a100", 4), ("h100", 8))),
            *team("team-a", "team-a"),
            running("team-a", "warm", 4, "team-a"),
            job,
        ]
    )
    assert out(s, job).admitted and out(s, job).flavors == {"main": {GPU: "h100"}}


def test_fungibility_decides_between_borrowing_a100_and_a_free_h100() -> None:
    """team-a's a100 is used up, team-b's a100 lies idle in the cohort, team-a's h100 is free. With
    whenCanBorrow MayStopSearch (the default) the search stops at a100 (fit by borrowing); with TryNextFlavor it
    goes on to h100, which fits without borrowing, and keeps it (shouldTryNextFlavor, isPreferred)."""
    job = gpu_job("team-a", "job", 4)
    common = [running("team-a", "warm", 4, "team-a"), job]
    b = cluster_queue("team-b", gpus_only(("a100", 4)), cohort="org")
    stop = _cohort_of_two(
        cluster_queue("team-a", gpus_only(("a100", 4), ("h100", 8)), cohort="org"), b, *common
    )
    assert out(stop, job).flavors == {"main": {GPU: "a100"}}
    assert stop.cluster_queues["team-a"].resources["a100"][GPU].borrowed == 4
    nxt = _cohort_of_two(
        cluster_queue(
            "team-a",
            gpus_only(("a100", 4), ("h100", 8)),
            cohort="org",
            fungibility={"whenCanBorrow": "TryNextFlavor"},
        ),
        b,
        *common,
    )
    assert out(nxt, job).flavors == {"main": {GPU: "h100"}}


def test_untolerated_flavor_taint_and_node_affinity() -> None:
    """checkFlavorForPodSets: a100's NoSchedule taint is not tolerated, h100 lacks 4 GPUs; both reasons,
    sorted. With the toleration a100 fits; a nodeSelector on the flavors' label key picks h100 only."""
    tainted = resource_flavor("a100", taints=[{"key": GPU, "value": "true", "effect": "NoSchedule"}])
    cq = cluster_queue("team-a", gpus_only(("a100", 8), ("h100", 4)))
    job = gpu_job("team-a", "job", 4)
    s = settle(
        [
            tainted,
            resource_flavor("h100"),
            cq,
            *team("team-a", "team-a"),
            running("team-a", "warm", 4, "team-a", "h100"),
            job,
        ]
    )
    assert out(s, job).message == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 4 more "
        "needed, untolerated taint {nvidia.com/gpu true NoSchedule <nil>} in flavor a100"
    )
    tolerant = workload(
        "team-a",
        "ok",
        "lq",
        podset(1, container(4), tolerations=[{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]),
    )
    s = settle([tainted, resource_flavor("h100"), cq, *team("team-a", "team-a"), tolerant])
    assert out(s, tolerant).flavors == {"main": {GPU: "a100"}}
    picky = workload(
        "team-a",
        "picky",
        "lq",
        podset(1, container(4), node_selector={"karpenter.k8s.aws/instance-gpu-name": "h100"}),
    )
    s = settle([*FLAVORS, cq, *team("team-a", "team-a"), picky])
    assert out(s, picky).flavors == {"main": {GPU: "h100"}}


def test_a_resource_no_group_covers() -> None:
    job = workload("team-a", "job", "lq", podset(1, container(1, memory="16Gi")))
    s = settle([*FLAVORS, cluster_queue("team-a", gpus_only(("a100", 8))), *team("team-a", "team-a"), job])
    assert (
        out(s, job).message
        == "couldn't assign flavors to pod set main: resource memory unavailable in ClusterQueue"
    )


def test_strict_fifo_blocks_behind_its_head_best_effort_skips_it() -> None:
    """RequeueIfNotPresent: StrictFIFO puts the head that cannot fit straight back, so the small job behind it
    is never tried (no QuotaReserved condition written); BestEffortFIFO sets the head aside as inadmissible and
    admits the small job. The big job's message stays the one written when it was tried."""
    big = gpu_job("team-a", "big", 8)
    small = gpu_job("team-a", "small", 2, at="2025-06-02T08:01:00Z")
    base = [*FLAVORS, *team("team-a", "team-a"), running("team-a", "warm", 4, "team-a"), big, small]
    strict = settle([cluster_queue("team-a", gpus_only(("a100", 8)), strategy="StrictFIFO"), *base])
    assert not out(strict, small).admitted and (out(strict, small).reason, out(strict, small).message) == (
        "",
        "",
    )
    assert not out(strict, big).admitted and "4 more needed" in out(strict, big).message
    best = settle([cluster_queue("team-a", gpus_only(("a100", 8))), *base])
    assert out(best, small).admitted and out(best, small).order == 1
    assert out(best, big).message.endswith("4 more needed")


def test_higher_priority_first_within_a_queue() -> None:
    """The queue heap: priority first, then creation time."""
    old = gpu_job("team-a", "old", 8, priority=0)
    urgent = gpu_job("team-a", "urgent", 8, priority=100, at="2025-06-02T09:00:00Z")
    s = settle(
        [*FLAVORS, cluster_queue("team-a", gpus_only(("a100", 8))), *team("team-a", "team-a"), old, urgent]
    )
    assert out(s, urgent).admitted and not out(s, old).admitted


def test_inactive_cluster_queue_and_its_status() -> None:
    """A ClusterQueue naming a missing flavor is inactive: its heads are never taken and the workload
    controller writes "ClusterQueue team-a is inactive" (Inadmissible); a stopped one likewise."""
    job = gpu_job("team-a", "job", 1)
    s = settle(
        [
            resource_flavor("a100"),
            cluster_queue("team-a", gpus_only(("a100", 8), ("h100", 8))),
            *team("team-a", "team-a"),
            job,
        ]
    )
    assert (out(s, job).reason, out(s, job).message) == ("Inadmissible", "ClusterQueue team-a is inactive")
    status = s.cluster_queues["team-a"]
    assert not status.active and status.reason == "FlavorNotFound"
    assert status.message == "Can't admit new workloads: references missing ResourceFlavor(s): h100."
    stopped = settle(
        [
            *FLAVORS,
            cluster_queue("team-a", gpus_only(("a100", 8)), stop="Hold"),
            *team("team-a", "team-a"),
            job,
        ]
    )
    assert out(stopped, job).message == "ClusterQueue team-a is inactive"
    assert stopped.cluster_queues["team-a"].message == "Can't admit new workloads: is stopped."


def test_an_inactive_queue_still_lends_its_quota() -> None:
    """The cache's Cohort counts every child ClusterQueue's quota, active or not, and the snapshot clones it:
    team-a (no quota of its own) borrows the stopped team-b's 8 GPUs."""
    job = gpu_job("team-a", "job", 8)
    s = _cohort_of_two(
        cluster_queue("team-a", gpus_only(("a100", 0)), cohort="org"),
        cluster_queue("team-b", gpus_only(("a100", 8)), cohort="org", stop="Hold"),
        job,
    )
    assert out(s, job).admitted


def test_missing_local_queue_and_cluster_queue() -> None:
    lost = gpu_job("team-a", "lost", 1, queue="nope")
    orphan = gpu_job("team-b", "orphan", 1)
    s = settle(
        [
            *FLAVORS,
            cluster_queue("team-a", gpus_only(("a100", 8))),
            *team("team-a", "team-a"),
            *team("team-b", "ghost"),
            lost,
            orphan,
        ]
    )
    assert (out(s, lost).reason, out(s, lost).message) == ("Inadmissible", "LocalQueue nope doesn't exist")
    assert out(s, lost).cluster_queue is None
    assert out(s, orphan).message == "ClusterQueue ghost doesn't exist"


def test_namespace_selector_mismatch() -> None:
    """nominate: the ClusterQueue's namespaceSelector does not select team-b's namespace."""
    cq = cluster_queue(
        "team-a", gpus_only(("a100", 8)), selector={"matchLabels": {"kueue.x-k8s.io/team": "a"}}
    )
    job = gpu_job("team-b", "job", 1)
    s = settle([*FLAVORS, cq, namespace("team-b"), local_queue("team-b", "lq", "team-a"), job])
    assert out(s, job).message == "Workload namespace doesn't match ClusterQueue selector"
    ok = settle(
        [
            *FLAVORS,
            cq,
            namespace("team-b", {"kueue.x-k8s.io/team": "a"}),
            local_queue("team-b", "lq", "team-a"),
            job,
        ]
    )
    assert out(ok, job).admitted


def test_cohort_cycle_leaves_its_queues_out_of_the_snapshot() -> None:
    """Snapshot: a ClusterQueue under a Cohort cycle is in InactiveClusterQueueSets; nominate answers its
    head "ClusterQueue team-a is inactive" (written with reason Pending)."""
    job = gpu_job("team-a", "job", 1)
    s = settle(
        [
            *FLAVORS,
            cluster_queue("team-a", gpus_only(("a100", 8)), cohort="x"),
            cohort("x", "y"),
            cohort("y", "x"),
            *team("team-a", "team-a"),
            job,
        ]
    )
    assert (out(s, job).reason, out(s, job).message) == ("Pending", "ClusterQueue team-a is inactive")


def test_partial_admission_finds_the_largest_count_that_fits() -> None:
    """PodSetReducer: 4 pods x 4 GPUs (minCount 1) against 8 GPUs: the binary search settles on 2 pods."""
    job = workload("team-a", "elastic", "lq", podset(4, container(4), min_count=1))
    s = settle([*FLAVORS, cluster_queue("team-a", gpus_only(("a100", 8))), *team("team-a", "team-a"), job])
    assert out(s, job).admitted and s.cluster_queues["team-a"].resources["a100"][GPU].used == 8


def test_a_workload_evicted_before_and_admitted_again_is_no_longer_evicted() -> None:
    """A Workload preempted earlier (its Evicted condition True, QuotaReserved False as jobframework leaves it
    once the job stopped) that fits again is admitted; Kueue then sets Evicted False ("Previously: ..."), so it
    is not reported evicted. One still pending keeps the input's eviction."""
    preempted = (
        "Preempted to accommodate a workload (UID: 1, JobUID: 2) due to prioritization in the ClusterQueue"
    )

    def evicted_status() -> dict[str, Any]:
        cond = {"status": "True", "reason": "Preempted", "message": preempted, "lastTransitionTime": T0}
        return {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "False",
                    "reason": "Pending",
                    "message": preempted,
                    "lastTransitionTime": T0,
                },
                {"type": "Evicted", **cond},
                {"type": "Requeued", **cond},
            ]
        }

    back = gpu_job("team-a", "back", 4, status=evicted_status())
    still = gpu_job("team-a", "still", 8, status=evicted_status())
    s = settle(
        [*FLAVORS, cluster_queue("team-a", gpus_only(("a100", 8))), *team("team-a", "team-a"), back, still],
        "cluster.json",
    )
    o = out(s, back)
    assert o.admitted and not o.evicted and (o.evicted_reason, o.evicted_message) == ("", "")
    p = out(s, still)
    assert not p.admitted and p.evicted and (p.evicted_reason, p.evicted_message) == ("Preempted", preempted)
