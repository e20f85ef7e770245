"""Kueue's classical preemption through settle: candidates, their order, the minimal set of victims, the
Evicted condition Kueue writes on them, and the preemptor admitted in a later cycle
(pkg/scheduler/preemption/preemption.go, classical/, common/; pkg/scheduler/scheduler.go)."""

from __future__ import annotations

from typing import Any

from kgpu.sim.queue.admission import settle
from test_kueue_admission import FLAVORS, GPU, _cohort_of_two, gpu_job, gpus_only, key, out, running, team
from test_kueue_model import cluster_queue, container, podset, workload


def _message(preemptor: dict[str, Any], why: str, by: str, victim: str) -> str:
    uid = preemptor["metadata"]["uid"]
    job_uid = preemptor["metadata"]["labels"]["kueue.x-k8s.io/job-uid"]
    return (
        f"Preempted to accommodate a workload (UID: {uid}, JobUID: {job_uid}) due to {why}; "
        f"preemptor path: {by}; preemptee path: {victim}"
    )


def test_within_cluster_queue_evicts_the_newest_lower_priority_workload() -> None:
    """Candidates of equal priority go most recently admitted first (CandidatesOrdering): low-2 is evicted,
    with reason Preempted and preemptionMessage; the preemptor waits one cycle ("Pending the preemption of 1
    workload(s)") and is admitted in the next, low-2 then finds no candidate and stays pending."""
    cq = cluster_queue("team-a", gpus_only(("a100", 8)), within="LowerPriority")
    low1 = running("team-a", "low-1", 4, "team-a", at="2025-06-02T08:00:00Z")
    low2 = running("team-a", "low-2", 4, "team-a", at="2025-06-02T08:30:00Z")
    high = gpu_job("team-a", "high", 4, priority=1000, at="2025-06-02T09:00:00Z")
    s = settle([*FLAVORS, cq, *team("team-a", "team-a"), low1, low2, high])
    assert out(s, high).admitted and out(s, high).order == 1
    victim = out(s, low2)
    assert victim.evicted and not victim.admitted and victim.preempted_by == key(high)
    assert victim.evicted_reason == "Preempted"
    assert victim.evicted_message == _message(
        high, "prioritization in the ClusterQueue", "/team-a", "/team-a"
    )
    assert (victim.reason, victim.message) == (
        "Pending",
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor a100, 4 more needed",
    )
    assert out(s, low1).admitted and not out(s, low1).evicted and out(s, low1).order is None


def test_the_victim_set_is_minimal() -> None:
    """classicalPreemptions removes newest first (low-c 2 GPUs: not enough, then low-b 4: fits), then
    fillBackWorkloads adds low-c back since the preemptor still fits: only low-b goes."""
    cq = cluster_queue("team-a", gpus_only(("a100", 8)), within="LowerPriority")
    a = running("team-a", "low-a", 2, "team-a", at="2025-06-02T08:00:00Z")
    b = running("team-a", "low-b", 4, "team-a", at="2025-06-02T08:10:00Z")
    c = running("team-a", "low-c", 2, "team-a", at="2025-06-02T08:20:00Z")
    high = gpu_job("team-a", "high", 4, priority=10)
    s = settle([*FLAVORS, cq, *team("team-a", "team-a"), a, b, c, high])
    assert [k for k, o in s.workloads.items() if o.evicted] == [key(b)]
    assert out(s, high).admitted


def test_lower_or_newer_equal_priority() -> None:
    """SatisfiesPreemptionPolicy: equal priority may go when created after the preemptor; LowerPriority
    would not allow it."""
    early = gpu_job("team-a", "early", 8, at="2025-06-02T07:00:00Z")
    late = running("team-a", "late", 8, "team-a", at="2025-06-02T08:00:00Z")
    late["metadata"]["creationTimestamp"] = "2025-06-02T07:30:00Z"
    base = [*FLAVORS, *team("team-a", "team-a"), early, late]
    s = settle([cluster_queue("team-a", gpus_only(("a100", 8)), within="LowerOrNewerEqualPriority"), *base])
    assert out(s, early).admitted and out(s, late).evicted
    s = settle([cluster_queue("team-a", gpus_only(("a100", 8)), within="LowerPriority"), *base])
    assert not out(s, early).admitted and not out(s, late).evicted


def test_reclaim_within_cohort_takes_back_lent_quota() -> None:
    """team-b (no quota) borrows team-a's 8 GPUs. team-a's job is within its nominal quota, so it has the
    hierarchical advantage over team-b's borrowing workload (reclaimWithinCohort Any): reason
    InCohortReclamation, paths through the cohort. Next cycle team-a's job is admitted first (not
    borrowing) and team-b's requeued job no longer fits."""
    lender = cluster_queue("team-a", gpus_only(("a100", 8)), cohort="org", reclaim="Any")
    borrower = cluster_queue("team-b", gpus_only(("a100", 0)), cohort="org")
    lent = running("team-b", "lent", 8, "team-b")
    mine = gpu_job("team-a", "mine", 4, at="2025-06-02T09:00:00Z")
    s = _cohort_of_two(lender, borrower, lent, mine)
    assert out(s, mine).admitted and out(s, mine).flavors == {"main": {GPU: "a100"}}
    victim = out(s, lent)
    assert victim.evicted and victim.preempted_by == key(mine)
    assert victim.evicted_message == _message(
        mine, "reclamation within the cohort", "/org/team-a", "/org/team-b"
    )
    assert not victim.admitted
    assert (
        victim.message
        == "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor a100, 4 more needed"
    )
    usage = s.cluster_queues
    assert (
        usage["team-a"].resources["a100"][GPU].used == 4 and usage["team-b"].resources["a100"][GPU].used == 0
    )


def test_reclaim_lower_priority_spares_a_higher_priority_borrower() -> None:
    """reclaimWithinCohort LowerPriority: the borrower's priority is higher, so there is no candidate; the
    head reserves its quota and waits."""
    lender = cluster_queue("team-a", gpus_only(("a100", 8)), cohort="org", reclaim="LowerPriority")
    borrower = cluster_queue("team-b", gpus_only(("a100", 0)), cohort="org")
    lent = running("team-b", "lent", 8, "team-b", priority=100)
    mine = gpu_job("team-a", "mine", 4)
    s = _cohort_of_two(lender, borrower, lent, mine)
    assert not out(s, mine).admitted and not out(s, lent).evicted
    assert out(s, mine).message.endswith(
        "insufficient unused quota for nvidia.com/gpu in flavor a100, 4 more needed"
    )


def test_borrow_within_cohort_lets_a_borrowing_preemptor_reclaim() -> None:
    """team-a needs 12 (8 nominal + borrowing). Without borrowWithinCohort it may not preempt while
    borrowing: no fit. With policy LowerPriority, team-b's low-priority workload using more than its nominal
    quota is a candidate (ReclaimWhileBorrowing)."""
    borrower = cluster_queue("team-b", gpus_only(("a100", 4)), cohort="org")
    hog = running("team-b", "hog", 8, "team-b", priority=0)
    wide = gpu_job("team-a", "wide", 4, pods=3, priority=50)
    never = _cohort_of_two(
        cluster_queue("team-a", gpus_only(("a100", 8)), cohort="org", reclaim="LowerPriority"),
        borrower,
        hog,
        wide,
    )
    assert not out(never, wide).admitted and not out(never, hog).evicted
    allowed = _cohort_of_two(
        cluster_queue(
            "team-a",
            gpus_only(("a100", 8)),
            cohort="org",
            reclaim="LowerPriority",
            borrow_within={"policy": "LowerPriority"},
        ),
        borrower,
        hog,
        wide,
    )
    assert out(allowed, wide).admitted and out(allowed, hog).evicted
    assert "reclamation within the cohort while borrowing" in out(allowed, hog).evicted_message


def test_when_can_preempt_decides_between_preempting_in_a100_and_a_free_h100() -> None:
    """whenCanPreempt TryNextFlavor (the default) passes a100, where low would have to go, for the free
    h100. MayStopSearch stops at a100 and preempts low; in the next cycle high fits a100 (its last
    assignment was cleared when it preempted), and low, requeued with no candidate in a100 (NoCandidates:
    try the next flavor), is admitted again in h100."""
    low = running("team-a", "low", 4, "team-a")
    high = gpu_job("team-a", "high", 4, priority=100)
    base = [*FLAVORS, *team("team-a", "team-a"), low, high]
    default = settle(
        [cluster_queue("team-a", gpus_only(("a100", 4), ("h100", 4)), within="LowerPriority"), *base]
    )
    assert out(default, high).flavors == {"main": {GPU: "h100"}} and not out(default, low).evicted
    stop = settle(
        [
            cluster_queue(
                "team-a",
                gpus_only(("a100", 4), ("h100", 4)),
                within="LowerPriority",
                fungibility={"whenCanPreempt": "MayStopSearch"},
            ),
            *base,
        ]
    )
    assert out(stop, high).flavors == {"main": {GPU: "a100"}} and out(stop, high).order == 1
    again = out(stop, low)
    assert again.evicted and again.admitted and again.order == 2 and again.flavors == {"main": {GPU: "h100"}}
    assert again.preempted_by == key(high)


def test_a_preemptor_tried_while_its_victim_stops_resumes_past_the_flavor_it_would_borrow() -> None:
    """Kueue tries a preemptor again while its victim's job stops (PendingPreemption requeues it at once). team-a
    reclaims its 8 a100 GPUs from team-b's older job. On that retry, the victim still holding them, team-a's
    first pod set fits h100 only by borrowing team-b's, and with borrowWithinCohort Never a borrowing
    preemptor has no candidates: LastAssignment remembers h100 as tried. Once the victim is gone the next try
    starts that pod set at a100: both pod sets fit team-a's own quota (not borrowing), so team-a's job goes
    before the victim, which would borrow at the same height with the same priority and is older. Without that
    retry the two tie, the victim is admitted again and preempted again (what the real Kueue does instead was
    seen at seed 221982589, scenario 221982605)."""
    fungible = {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}
    team_a = cluster_queue(
        "team-a", gpus_only(("h100", 0), ("a100", 8)), cohort="org", reclaim="Any", fungibility=fungible
    )
    team_b = cluster_queue("team-b", gpus_only(("a100", 0), ("h100", 4)), cohort="org", fungibility=fungible)
    lent = running("team-b", "lent", 8, "team-b", at="2025-06-02T08:00:00Z")
    two = workload(
        "team-a",
        "two",
        "lq",
        podset(1, container(2), name="small"),
        podset(1, container(6), name="big"),
        created="2025-06-02T09:00:00Z",
    )
    s = _cohort_of_two(team_a, team_b, lent, two)
    assert out(s, two).admitted and out(s, two).flavors == {"small": {GPU: "a100"}, "big": {GPU: "a100"}}
    victim = out(s, lent)
    assert victim.evicted and victim.preempted_by == key(two) and not victim.admitted
    assert not s.warnings
