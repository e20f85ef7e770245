"""settle on the states a cluster is found in: both API versions, hierarchical cohorts, Workloads already
evicted, deactivated or finished, what is not modelled said as a warning, and preemption loops found."""

from __future__ import annotations

import copy
from typing import Any

from kgpu.sim.queue.admission import settle
from test_kueue_admission import FLAVORS, GPU, _cohort_of_two, gpu_job, gpus_only, out, running, team
from test_kueue_model import cluster_queue, cohort, flavor_quotas, group, local_queue, namespace, quota


def _setup(version: str) -> list[dict[str, Any]]:
    """Cohort research (4 GPUs of its own) under org: team-a (8) and team-b (none) in research, team-c
    (none) in org. team-b borrows all 12; team-a reclaims; team-c borrows what is left."""
    objs = [
        *copy.deepcopy(FLAVORS),
        cohort("org", "", version=version),
        cohort("research", "org", group([GPU], flavor_quotas("a100", quota(GPU, 4))), version=version),
        cluster_queue("team-a", gpus_only(("a100", 8)), cohort="research", reclaim="Any", version=version),
        cluster_queue("team-b", gpus_only(("a100", 0)), cohort="research", version=version),
        cluster_queue("team-c", gpus_only(("a100", 0)), cohort="org", strategy="StrictFIFO", version=version),
        *team("team-a", "team-a"),
        *team("team-b", "team-b"),
        *team("team-c", "team-c"),
        running("team-b", "lent", 12, "team-b"),
        gpu_job("team-a", "mine", 4, at="2025-06-02T09:00:00Z"),
        gpu_job("team-c", "side", 6, at="2025-06-02T09:01:00Z"),
    ]
    for o in objs:
        if o["apiVersion"].startswith("kueue.x-k8s.io/"):
            o["apiVersion"] = f"kueue.x-k8s.io/{version}"
    for o in objs:
        if o["kind"] == "Workload" and version == "v1beta1":
            assert "priorityClassRef" not in o["spec"]
    return objs


def test_v1beta1_and_v1beta2_spellings_settle_the_same() -> None:
    a = settle(_setup("v1beta1"), "v1beta1.json")
    b = settle(_setup("v1beta2"), "v1beta2.json")
    assert a.workloads == b.workloads and a.cluster_queues == b.cluster_queues
    assert any(o.evicted for o in b.workloads.values()) and any(o.order for o in b.workloads.values())


def test_hierarchical_cohort_quota_and_paths() -> None:
    """team-b (no quota) borrowed 12 = team-a's 8 + research's 4. team-a's job is within its nominal quota
    (hierarchical advantage over research's subtree): it reclaims, and the victim's paths run through both
    cohorts. Next cycle the heads are ordered by borrowing height: team-a's (0) is admitted, team-b's
    (height 1, research) no longer fits, team-c's (height 2, org) fits in the 8 GPUs left and borrows 6."""
    s = settle(_setup("v1beta2"))
    lent = s.workloads[next(k for k in s.workloads if k[1].startswith("job-lent-"))]
    assert (
        lent.evicted
        and "preemptor path: /org/research/team-a; preemptee path: /org/research/team-b"
        in lent.evicted_message
    )
    mine = s.workloads[next(k for k in s.workloads if k[1].startswith("job-mine-"))]
    assert mine.admitted
    side = s.workloads[next(k for k in s.workloads if k[1].startswith("job-side-"))]
    assert side.admitted and s.cluster_queues["team-c"].resources["a100"][GPU].borrowed == 6
    assert not lent.admitted and lent.message.endswith("more needed")


def test_an_evicted_workload_in_the_input_gives_its_quota_back() -> None:
    """The contract: admitted but Evicted is pending. Kueue's job controller clears the reservation with
    reason Pending and the eviction message; the freed quota admits the next job."""
    gone = running("team-a", "gone", 8, "team-a")
    gone["status"]["conditions"].append(
        {
            "type": "Evicted",
            "status": "True",
            "reason": "PodsReadyTimeout",
            "message": "Exceeded the PodsReady timeout default/gone",
            "lastTransitionTime": "2025-06-02T10:00:00Z",
        }
    )
    nxt = gpu_job("team-a", "next", 8)
    s = settle(
        [*FLAVORS, cluster_queue("team-a", gpus_only(("a100", 8))), *team("team-a", "team-a"), gone, nxt]
    )
    assert out(s, nxt).admitted  # the evicted one now queues behind: its queue time is its eviction
    g = out(s, gone)
    assert not g.admitted and g.evicted and g.evicted_reason == "PodsReadyTimeout"


def test_deactivated_and_finished_workloads() -> None:
    off = running("team-a", "off", 8, "team-a")
    off["spec"]["active"] = False
    done = running("team-a", "done", 8, "team-a")
    done["status"]["conditions"].append(
        {
            "type": "Finished",
            "status": "True",
            "reason": "Succeeded",
            "message": "Job finished successfully",
            "lastTransitionTime": "2025-06-02T10:00:00Z",
        }
    )
    nxt = gpu_job("team-a", "next", 8)
    s = settle(
        [*FLAVORS, cluster_queue("team-a", gpus_only(("a100", 8))), *team("team-a", "team-a"), off, done, nxt]
    )
    assert ("team-a", done["metadata"]["name"]) not in s.workloads
    o = out(s, off)
    assert not o.admitted and (o.evicted_reason, o.evicted_message) == (
        "Deactivated",
        "The workload is deactivated",
    )
    assert out(s, nxt).admitted


def test_what_is_not_modelled_is_said() -> None:
    cq = cluster_queue("team-a", gpus_only(("a100", 8)), selector={"matchLabels": {"team": "a"}})
    cq["spec"]["fairSharing"] = {"weight": "2"}
    job = gpu_job("team-a", "job", 1)
    s = settle([*FLAVORS, cq, local_queue("team-a", "lq", "team-a"), job])
    text = "\n".join(s.warnings)
    assert "fair sharing is not modelled: ClusterQueue team-a" in text
    assert "no Namespace objects in the input" in text
    assert out(s, job).admitted  # no Namespace objects: the selector is not applied
    s = settle([*FLAVORS, cq, namespace("team-a"), local_queue("team-a", "lq", "team-a"), job])
    assert out(s, job).message == "Workload namespace doesn't match ClusterQueue selector"


def test_a_preemption_loop_is_found_and_reported() -> None:
    """A loop Kueue's rules allow. Cohort org (no quota of its own): t0 has 4 GPUs and lets r0 (8, priority
    100) borrow; t1 has 8, may reclaim Any and preempt LowerPriority within. t1 admits p1 (2); p2 (8) cannot
    reclaim r0 while it would borrow (no borrowWithinCohort); p3 (4, priority 0) fits t1's nominal quota, so it
    reclaims r0 (hierarchical advantage). With r0 gone, p2 preempts p3 within t1 (LowerPriority) and must
    borrow; r0, older at the same priority, wins the next cycle's ordering among borrowing heads and is
    admitted again; p3, requeued when r0 left, reclaims r0 again ... settle sees the same Workloads hold
    quota again after evictions and stops, naming the Workloads evicted more than once."""
    objs = [
        *FLAVORS,
        cluster_queue("t0", gpus_only(("a100", 4)), cohort="org"),
        cluster_queue("t1", gpus_only(("a100", 8)), cohort="org", reclaim="Any", within="LowerPriority"),
        *team("t0", "t0"),
        *team("t1", "t1"),
        r0 := running("t0", "r0", 8, "t0", priority=100, at="2025-06-02T08:00:00Z"),
        gpu_job("t1", "p1", 2, priority=100, at="2025-06-02T08:01:00Z"),
        gpu_job("t1", "p2", 8, priority=100, at="2025-06-02T08:02:00Z"),
        gpu_job("t1", "p3", 4, priority=0, at="2025-06-02T08:03:00Z"),
    ]
    s = settle(objs)
    (loop,) = [w for w in s.warnings if w.startswith("preemption loop")]
    assert f"evicted more than once: t0/{r0['metadata']['name']} (2x)" in loop
    assert s.cycles < 20


def test_borrowing_then_running_out_is_stable_between_two_teams() -> None:
    """Nothing loops when no policy allows preemption: settle ends as soon as heads stop moving."""
    jobs = [gpu_job("team-a", f"a{i}", 4, at=f"2025-06-02T08:0{i}:00Z") for i in range(5)]
    s = _cohort_of_two(
        cluster_queue("team-a", gpus_only(("a100", 8)), cohort="org"),
        cluster_queue("team-b", gpus_only(("a100", 8)), cohort="org"),
        *jobs,
    )
    assert [out(s, j).admitted for j in jobs] == [True, True, True, True, False]
    assert not s.warnings


def test_deep_and_wide_cohort_trees_settle() -> None:
    """Kueue bounds neither the depth of a cohort tree nor its width: 3,000 nested Cohorts (deeper than
    Python's recursion limit) and 2,000 ClusterQueues in one Cohort settle, without a traceback."""
    chain = [cohort(f"c{i}", f"c{i + 1}" if i < 2999 else "") for i in range(3000)]
    chain[-1]["spec"]["resourceGroups"] = [gpus_only(("a100", 8))]
    job = gpu_job("team-a", "deep", 8)
    s = settle(
        [
            *FLAVORS,
            *chain,
            cluster_queue("team-a", gpus_only(("a100", 0)), cohort="c0"),
            *team("team-a", "team-a"),
            job,
        ]
    )
    assert out(s, job).admitted
    wide = [cluster_queue(f"q{i}", gpus_only(("a100", 1)), cohort="org") for i in range(2000)]
    jobs = [
        gpu_job("team-a", f"j{i}", 4, at=f"2025-06-02T08:{i // 60:02d}:{i % 60:02d}Z") for i in range(600)
    ]
    s = settle([*FLAVORS, *wide, local_queue("team-a", "lq", "q0"), namespace("team-a"), *jobs])
    assert sum(o.admitted for o in s.workloads.values()) == 500
