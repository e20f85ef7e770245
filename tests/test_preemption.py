"""Preemption (DefaultPreemption, kube-scheduler's PostFilter) through ``simulate``.

Upstream cases are transcribed from kubernetes v1.34.4 pkg/scheduler/framework/plugins/defaultpreemption/
default_preemption_test.go (TestPostFilter, TestDryRunPreemption, TestSelectBestCandidate,
TestPodEligibleToPreemptOthers), each test naming its table and case. Upstream mocks the filter statuses
and registers only the plugins a case needs; here the default filters give the same statuses (a node's
pod capacity for "onePodRes", requests within the whole allocatable for an Unschedulable status). Cases
that need what kgpu does not model (PodDisruptionBudgets, inter-pod affinity, topology spread, extenders,
nominated pods, terminating pods, failing test plugins) are left out; one PDB case is kept where the
answer does not depend on the budget.

Then a naive reference (every filter on every node, victims chosen by brute force, node state rebuilt from
its pods after each eviction) is compared with the real code on seeded random clusters with priorities,
owners, start times and host ports, in heap and array mode; and the scheduler alone against the naive
scheduler with evictions between placements.
"""

from __future__ import annotations

import functools
import heapq
import random
from collections import Counter
from typing import Any

import pytest

from builders import GPU_TAINT, GPU_TOLERATION, node_dict, placement, pod_dict
from kgpu.model.load import parse_documents
from kgpu.model.objects import Node, Pod
from kgpu.model.predicates import (
    ERR_POD_AFFINITY,
    ERR_SPREAD_LABEL,
    filter_reasons,
    ports_conflict,
    prefilter_node_names,
    static_reasons,
    unschedulable_message,
)
from kgpu.sim import simulate as simulate_module
from kgpu.sim.scheduler.plugins.defaultpreemption import num_candidates
from kgpu.sim.scheduler.scheduler import NodeState, Scheduler, score
from kgpu.sim.simulate import simulate
from test_scheduler import best_node, naive_topology

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
SMALL = {"cpu": "100m", "memory": "100"}
MEDIUM = {"cpu": "200m", "memory": "200"}
LARGE = {"cpu": "300m", "memory": "300"}
VERY_LARGE = {"cpu": "500m", "memory": "500"}
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"


def node(name: str, res: dict[str, str] | None = None, pods: int = 32, **kw: Any) -> dict:
    """st.MakeNode().Capacity(res): 32 pods unless given."""
    res = res or {"cpu": "0", "memory": "0"}
    return node_dict(name, cpu=res["cpu"], memory=res["memory"], pods=pods, **kw)


def one_pod_node(name: str, **kw: Any) -> dict:
    """Capacity(onePodRes): room for one pod and nothing else."""
    return node(name, pods=1, **kw)


def pod(
    name: str,
    priority: int = 0,
    res: dict[str, str] | None = None,
    on: str | None = None,
    start: int | None = None,
    owner: str | None = None,
    **kw: Any,
) -> dict:
    res = res or {}
    doc = pod_dict(name, cpu=res.get("cpu"), memory=res.get("memory"), node_name=on, priority=priority, **kw)
    if start is not None:  # epochTimeN: N nanoseconds after the epoch; seconds keep the order
        doc.setdefault("status", {})["startTime"] = f"1970-01-01T00:00:{start:02d}Z"
    if owner:
        doc["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": owner, "name": "owner", "uid": "u", "controller": True}
        ]
    return doc


def run(nodes: list[dict], running: list[dict], pending: list[dict], extra: list[dict] | None = None):
    return simulate(
        parse_documents(nodes + running + (extra or []), "cluster"), parse_documents(pending, "work")
    )


def preempted(result) -> dict[str, str]:
    """Victim name -> node it was evicted from."""
    return {p.pod.name: p.node for p in result.placements if p.phase == "Preempted"}


def postfilter_words(result, name: str = "p") -> str:
    reason = placement(result, name).reason or ""
    return reason.partition(" preemption: ")[2]


# --- TestPostFilter ------------------------------------------------------------------------------------


def test_postfilter_pod_with_higher_priority_can_be_made_schedulable():
    """TestPostFilter: 'pod with higher priority can be made schedulable'."""
    r = run([one_pod_node("node1")], [pod("p1", on="node1")], [pod("p", HIGH)])
    assert placement(r, "p").node == "node1"
    assert preempted(r) == {"p1": "node1"}
    assert placement(r, "p").victims == ["default/p1"]
    assert r.summary()["preempted"] == 1


def test_postfilter_pod_with_tied_priority_is_still_unschedulable():
    """TestPostFilter: 'pod with tied priority is still unschedulable'."""
    r = run([one_pod_node("node1")], [pod("p1", on="node1")], [pod("p")])
    assert placement(r, "p").reason == (
        "0/1 nodes are available: 1 Too many pods. "
        "no new claims to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )


def test_postfilter_preemption_should_respect_filtered_nodes_statuses():
    """TestPostFilter: 'preemption should respect filteredNodesStatuses' (node1 UnschedulableAndUnresolvable:
    here an untolerated taint)."""
    r = run([one_pod_node("node1", taints=[GPU_TAINT])], [pod("p1", on="node1")], [pod("p", HIGH)])
    assert postfilter_words(r) == "0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    assert preempted(r) == {}


def test_postfilter_absent_node_status_means_unresolvable():
    """TestPostFilter: 'preemption should respect absent NodeToStatusMap entry meaning
    UnschedulableAndUnresolvable' (a node outside NodeAffinity's PreFilter result is absent)."""
    pinned = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["other"]}]}]
    r = run([one_pod_node("node1")], [pod("p1", on="node1")], [pod("p", HIGH, affinity_terms=pinned)])
    assert postfilter_words(r) == "0/1 nodes are available: 1 Preemption is not helpful for scheduling."


def test_postfilter_pod_can_be_made_schedulable_on_one_node():
    """TestPostFilter: 'pod can be made schedulable on one node' (node1's pod has higher priority)."""
    nodes = [one_pod_node("node1"), one_pod_node("node2")]
    r = run(nodes, [pod("p1", HIGH, on="node1"), pod("p2", LOW, on="node2")], [pod("p", MID)])
    assert placement(r, "p").node == "node2"
    assert preempted(r) == {"p2": "node2"}


def test_postfilter_pod_can_be_made_schedulable_on_min_highest_priority_node():
    """TestPostFilter: 'pod can be made schedulable on minHighestPriority node'. Upstream's PDBs make both
    nodes violate one budget each; the answer rests on the highest victim priority, which kgpu (no PDBs)
    reaches the same way."""
    nodes = [one_pod_node("node1"), one_pod_node("node2")]
    running = [pod("p1", HIGH, on="node1"), pod("p2", LOW, on="node1"), pod("p3", MID, on="node2")]
    r = run(nodes, running, [pod("p", VERY_HIGH)])
    assert placement(r, "p").node == "node2"
    assert preempted(r) == {"p3": "node2"}


def test_postfilter_no_enough_resource_after_removing_low_priority_pods():
    """TestPostFilter: 'no candidate nodes found, no enough resource after removing low priority pods'.
    Upstream mocks both nodes Unschedulable; with real filters the request must fit the whole
    allocatable, so each node also runs a pod of the preemptor's priority that cannot be removed."""
    nodes = [node("node1", {"cpu": "400m", "memory": "400"}), node("node2", {"cpu": "400m", "memory": "400"})]
    running = [pod("p1", on="node1", res=SMALL), pod("p2", on="node2", res=SMALL)]
    running += [pod("h1", HIGH, on="node1", res=MEDIUM), pod("h2", HIGH, on="node2", res=MEDIUM)]
    r = run(nodes, running, [pod("p", HIGH, res=LARGE)])
    assert postfilter_words(r) == "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory."


def test_postfilter_mixed_reasons_no_lower_priority_pod_and_no_enough_cpu():
    """TestPostFilter: 'no candidate nodes found with mixed reasons, no lower priority pod and no enough CPU
    resource'."""
    nodes = [one_pod_node("node1"), node("node2", {"cpu": "400m", "memory": "400"}), one_pod_node("node3")]
    running = [pod("p1", HIGH, on="node1"), pod("p2", on="node2", res=SMALL), pod("p3", HIGH, on="node3")]
    running.append(pod("h2", HIGH, on="node2", res=MEDIUM))
    r = run(nodes, running, [pod("p", HIGH, res=LARGE)])
    # node1 and node3 hold no cpu at all: the request is above their allocatable, so not even potential
    assert postfilter_words(r) == (
        "0/3 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, "
        "2 Preemption is not helpful for scheduling."
    )


def test_postfilter_two_unresolvable_nodes_and_two_without_enough_cpu():
    """TestPostFilter: 'no candidate nodes found with mixed reason, 2 UnschedulableAndUnresolvable nodes
    and 2 nodes don't have enough CPU resource' (node3 and node4 tainted here)."""
    big = {"cpu": "400m", "memory": "400"}
    nodes = [node("node1", big), node("node2", big), node("node3", big, taints=[GPU_TAINT])]
    nodes.append(node("node4", big, taints=[GPU_TAINT]))
    running = [pod("p1", on="node1", res=SMALL), pod("p2", on="node2", res=SMALL)]
    running += [pod("h1", HIGH, on="node1", res=MEDIUM), pod("h2", HIGH, on="node2", res=MEDIUM)]
    r = run(nodes, running, [pod("p", HIGH, res=LARGE)])
    assert postfilter_words(r) == (
        f"0/4 nodes are available: 2 Insufficient cpu, 2 Insufficient memory, 2 {NOT_HELPFUL}."
    )


# --- TestPodEligibleToPreemptOthers -------------------------------------------------------------------


def test_pod_with_preempt_never_policy_is_not_eligible():
    """TestPodEligibleToPreemptOthers: "Pod with 'PreemptNever' preemption policy"; the message as
    DefaultPreemption.PostFilter words it."""
    p = pod("p", HIGH)
    p["spec"]["preemptionPolicy"] = "Never"
    r = run([one_pod_node("node1")], [pod("p1", on="node1")], [p])
    assert placement(r, "p").reason == (
        "0/1 nodes are available: 1 Too many pods. no new claims to deallocate, preemption: not eligible due to preemptionPolicy=Never."
    )
    assert preempted(r) == {}


def test_priority_class_preemption_policy_is_the_pods():
    """The Priority admission plugin copies PriorityClass.preemptionPolicy onto the pod: a class that says
    Never keeps its pods from preempting, whatever they say."""
    pc = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "batch"},
        "value": HIGH,
        "preemptionPolicy": "Never",
    }
    p = pod("p")
    del p["spec"]["priority"]
    p["spec"]["priorityClassName"] = "batch"
    r = run([one_pod_node("node1")], [pod("p1", on="node1")], [p], extra=[pc])
    assert placement(r, "p").pod.priority == HIGH
    assert placement(r, "p").reason.endswith("preemption: not eligible due to preemptionPolicy=Never.")
    pc["preemptionPolicy"] = "PreemptLowerPriority"
    r = run([one_pod_node("node1")], [pod("p1", on="node1")], [p], extra=[pc])
    assert placement(r, "p").node == "node1"


def test_invalid_preemption_policy_is_an_input_error():
    from kgpu.errors import InputError

    p = pod("p")
    p["spec"]["preemptionPolicy"] = "Sometimes"
    with pytest.raises(InputError) as exc:
        parse_documents([p], "w.yaml")
    assert "spec.preemptionPolicy" in exc.value.line() and '"PreemptLowerPriority"' in exc.value.line()


# --- TestDryRunPreemption -----------------------------------------------------------------------------


def dry_run_nodes(*names: str) -> list[dict]:
    """TestDryRunPreemption's nodes: Capacity(veryLargeRes)."""
    return [node(n, VERY_LARGE) for n in names]


def test_dry_run_fits_on_both_nodes_when_lower_priority_pods_are_preempted():
    """TestDryRunPreemption: 'a pod that fits on both nodes when lower priority pods are preempted':
    candidates node1 {p1} and node2 {p2}; equal on every criterion, kgpu takes the first name."""
    running = [pod("p1", MID, LARGE, on="node1"), pod("p2", MID, LARGE, on="node2")]
    r = run(dry_run_nodes("node1", "node2"), running, [pod("p", HIGH, LARGE)])
    assert preempted(r) == {"p1": "node1"}


def test_dry_run_other_pods_running_are_higher_priority():
    """TestDryRunPreemption: 'a pod that would fit on the nodes, but other pods running are higher priority,
    no preemption would happen'."""
    running = [pod("p1", MID, LARGE, on="node1"), pod("p2", MID, LARGE, on="node2")]
    r = run(dry_run_nodes("node1", "node2"), running, [pod("p", LOW, LARGE)])
    assert preempted(r) == {}
    assert postfilter_words(r) == f"0/2 nodes are available: 2 {NO_VICTIMS}."


def test_dry_run_medium_priority_pod_is_preempted_but_the_small_lower_one_stays():
    """TestDryRunPreemption: 'medium priority pod is preempted, but lower priority one stays as it is
    small': the low pod is reprieved (put back, it still fits), the mid one is the victim. The candidates
    are node1 {p1.2} and node2 {p2}; pickOneNodeForPreemption ties them on everything but the name."""
    running = [
        pod("p1.1", LOW, SMALL, on="node1"),
        pod("p1.2", MID, LARGE, on="node1"),
        pod("p2", MID, LARGE, on="node2"),
    ]
    r = run(dry_run_nodes("node1", "node2"), running, [pod("p", HIGH, LARGE)])
    assert preempted(r) == {"p1.2": "node1"}


def test_dry_run_mixed_priority_pods_are_preempted():
    """TestDryRunPreemption: 'mixed priority pods are preempted': node2 holds only a pod of equal
    priority; on node1 the victims are p1.2 (low) and p1.3 (mid, medium), p1.1 is reprieved."""
    running = [
        pod("p1.1", MID, SMALL, on="node1"),
        pod("p1.2", LOW, SMALL, on="node1"),
        pod("p1.3", MID, MEDIUM, on="node1"),
        pod("p1.4", HIGH, SMALL, on="node1"),
        pod("p2", HIGH, LARGE, on="node2"),
    ]
    r = run(dry_run_nodes("node1", "node2"), running, [pod("p", HIGH, LARGE)])
    assert preempted(r) == {"p1.2": "node1", "p1.3": "node1"}
    assert placement(r, "p").victims == ["default/p1.3", "default/p1.2"]  # most important first


def test_dry_run_equal_priorities_pick_the_later_start_time():
    """TestDryRunPreemption: 'mixed priority pods are preempted, pick later StartTime one when priorities
    are equal': of p1.1 (start 5) and p1.2 (start 4), the older p1.2 is reprieved first."""
    running = [
        pod("p1.1", LOW, SMALL, on="node1", start=5),
        pod("p1.2", LOW, SMALL, on="node1", start=4),
        pod("p1.3", MID, MEDIUM, on="node1", start=3),
        pod("p1.4", HIGH, SMALL, on="node1", start=2),
        pod("p2", HIGH, LARGE, on="node2", start=1),
    ]
    r = run(dry_run_nodes("node1", "node2"), running, [pod("p", HIGH, LARGE)])
    assert preempted(r) == {"p1.1": "node1", "p1.3": "node1"}


def test_dry_run_stops_after_the_number_of_candidates():
    """TestDryRunPreemption: 'all nodes are possible candidates, but DefaultPreemptionArgs limits to 2' runs
    with MinCandidateNodesPercentage 40 / Absolute 1; the defaults (10 %, 100) give calculateNumCandidates
    these values."""
    assert num_candidates(5) == 5
    assert num_candidates(100) == 100
    assert num_candidates(1000) == 100
    assert num_candidates(5000) == 500
    # beyond the first 100 candidates in node order, a better node is not looked at
    names = [f"n{i:03d}" for i in range(120)]
    running = [pod(f"q{i:03d}", MID if i < 110 else LOW, LARGE, on=n) for i, n in enumerate(names)]
    r = run(dry_run_nodes(*names), running, [pod("p", HIGH, LARGE)])
    assert preempted(r) == {"q000": "n000"}


# --- TestSelectBestCandidate (pickOneNodeForPreemption) -------------------------------------------------

SELECT_BEST = [
    (
        "node with min highest priority pod is picked",
        ["node1", "node2", "node3"],
        [
            ("p1.1", MID, MEDIUM, "node1", 0),
            ("p1.2", MID, LARGE, "node1", 0),
            ("p2.1", MID, MEDIUM, "node2", 0),
            ("p2.2", LOW, MEDIUM, "node2", 0),
            ("p3.1", LOW, MEDIUM, "node3", 0),
            ("p3.2", LOW, MEDIUM, "node3", 0),
        ],
        "node3",
    ),
    (
        "when highest priorities are the same, minimum sum of priorities is picked",
        ["node1", "node2", "node3"],
        [
            ("p1.1", MID, MEDIUM, "node1", 0),
            ("p1.2", MID, LARGE, "node1", 0),
            ("p2.1", MID, LARGE, "node2", 0),
            ("p2.2", LOW, MEDIUM, "node2", 0),
            ("p3.1", MID, MEDIUM, "node3", 0),
            ("p3.2", MID, MEDIUM, "node3", 0),
        ],
        "node2",
    ),
    (
        "when highest priority and sum are the same, minimum number of pods is picked",
        ["node1", "node2", "node3"],
        [
            ("p1.1", MID, SMALL, "node1", 0),
            ("p1.2", NEG, SMALL, "node1", 0),
            ("p1.3", MID, SMALL, "node1", 0),
            ("p1.4", NEG, SMALL, "node1", 0),
            ("p2.1", MID, LARGE, "node2", 0),
            ("p2.2", NEG, MEDIUM, "node2", 0),
            ("p3.1", MID, MEDIUM, "node3", 0),
            ("p3.2", NEG, SMALL, "node3", 0),
            ("p3.3", LOW, SMALL, "node3", 0),
        ],
        "node2",
    ),
    (
        "sum of adjusted priorities is considered",
        ["node1", "node2", "node3"],
        [
            ("p1.1", MID, SMALL, "node1", 0),
            ("p1.2", NEG, SMALL, "node1", 0),
            ("p1.3", NEG, SMALL, "node1", 0),
            ("p2.1", MID, LARGE, "node2", 0),
            ("p2.2", NEG, MEDIUM, "node2", 0),
            ("p3.1", MID, MEDIUM, "node3", 0),
            ("p3.2", NEG, SMALL, "node3", 0),
            ("p3.3", LOW, SMALL, "node3", 0),
        ],
        "node2",
    ),
    (
        "non-overlapping lowest high priority, sum priorities, and number of pods",
        ["node1", "node2", "node3", "node4"],
        [
            ("p1.1", MID, SMALL, "node1", 0),
            ("p1.2", LOW, SMALL, "node1", 0),
            ("p1.3", LOW, SMALL, "node1", 0),
            ("p2.1", HIGH, LARGE, "node2", 0),
            ("p3.1", MID, MEDIUM, "node3", 0),
            ("p3.2", LOW, SMALL, "node3", 0),
            ("p3.3", LOW, SMALL, "node3", 0),
            ("p3.4", LOW, MEDIUM, "node3", 0),
            ("p4.1", MID, MEDIUM, "node4", 0),
            ("p4.2", MID, SMALL, "node4", 0),
            ("p4.3", MID, SMALL, "node4", 0),
            ("p4.4", NEG, SMALL, "node4", 0),
        ],
        "node1",
    ),
    (
        "same priority, same number of victims, different start time for each node's pod",
        ["node1", "node2", "node3"],
        [
            ("p1.1", MID, MEDIUM, "node1", 2),
            ("p1.2", MID, MEDIUM, "node1", 2),
            ("p2.1", MID, MEDIUM, "node2", 3),
            ("p2.2", MID, MEDIUM, "node2", 3),
            ("p3.1", MID, MEDIUM, "node3", 1),
            ("p3.2", MID, MEDIUM, "node3", 1),
        ],
        "node2",
    ),
    (
        "same priority, same number of victims, different start time for all pods",
        ["node1", "node2", "node3"],
        [
            ("p1.1", MID, MEDIUM, "node1", 4),
            ("p1.2", MID, MEDIUM, "node1", 2),
            ("p2.1", MID, MEDIUM, "node2", 5),
            ("p2.2", MID, MEDIUM, "node2", 1),
            ("p3.1", MID, MEDIUM, "node3", 3),
            ("p3.2", MID, MEDIUM, "node3", 6),
        ],
        "node3",
    ),
    (
        "different priority, same number of victims, different start time for all pods",
        ["node1", "node2", "node3"],
        [
            ("p1.1", LOW, MEDIUM, "node1", 4),
            ("p1.2", MID, MEDIUM, "node1", 2),
            ("p2.1", MID, MEDIUM, "node2", 6),
            ("p2.2", LOW, MEDIUM, "node2", 1),
            ("p3.1", LOW, MEDIUM, "node3", 3),
            ("p3.2", MID, MEDIUM, "node3", 5),
        ],
        "node2",
    ),
]


@pytest.mark.parametrize(("case", "names", "running", "want"), SELECT_BEST, ids=[c[0] for c in SELECT_BEST])
def test_select_best_candidate(case, names, running, want):
    """TestSelectBestCandidate: the preemptor asks for veryLargeRes on veryLargeRes nodes, so every pod of
    the chosen node is evicted."""
    docs = [pod(n, prio, res, on=where, start=start or None) for n, prio, res, where, start in running]
    prio = VERY_HIGH if case.startswith("non-overlapping") else HIGH
    r = run(dry_run_nodes(*names), docs, [pod("p", prio, VERY_LARGE)])
    assert placement(r, "p").node == want
    assert set(preempted(r).values()) == {want}


def test_select_best_candidate_fits_on_both_nodes_ties_go_to_the_first_name():
    """TestSelectBestCandidate: 'a pod that fits on both nodes when lower priority pods are preempted'
    accepts node1 or node2; kgpu's last tie-break is the name."""
    running = [pod("p1", MID, LARGE, on="node1", start=1), pod("p2", MID, LARGE, on="node2", start=1)]
    r = run(dry_run_nodes("node1", "node2"), running, [pod("p", HIGH, LARGE)])
    assert placement(r, "p").node == "node1"


# --- what simulate does around PostFilter ----------------------------------------------------------------


def test_evicted_pods_with_a_controller_come_back_in_queue_order():
    """A ReplicaSet's pod evicted by a high-priority GPU pod is created again and queued behind every
    pending pod of its priority or higher; a bare pod is gone. The recreated pod lands where there is room."""
    nodes = [node_dict("gpu-1", gpus=1), node_dict("cpu-1", cpu="2")]
    running = [pod("web", LOW, {"cpu": "1"}, on="gpu-1", owner="ReplicaSet", gpus=1)]
    pending = [
        pod("train", HIGH, {"cpu": "1"}, gpus=1, tolerations=[GPU_TOLERATION]),
        pod("batch", LOW, {"cpu": "1"}),
    ]
    r = run(nodes, running, pending)
    d = r.as_dict()
    rows = [(p["name"], p["phase"], p["node"], p.get("recreated", False)) for p in d["pods"]]
    assert rows == [
        ("train", "Scheduled", "gpu-1", False),
        ("batch", "Scheduled", "cpu-1", False),
        ("web", "Preempted", "gpu-1", False),
        ("web", "Unschedulable", None, True),
    ]
    web = d["pods"][2]
    assert web["preempted_by"] == "default/train"
    assert (
        web["reason"] == "preempted by default/train (priority 1000 over 0); its ReplicaSet creates it again"
    )
    assert d["pods"][3]["reason"] == (
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. "
        "no new claims to deallocate, preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling."
    )
    assert d["summary"] == {"scheduled": 2, "unschedulable": 1, "preempted": 1, "with_warnings": 0}


def test_preemption_before_provisioning():
    """kube-scheduler preempts before an autoscaler sees the pod: with a profile that could add a node, the
    high-priority pod still takes the running low-priority pod's node, and only the recreated pod is
    provisioned for."""
    from kgpu.sim.provisioners.provision import provisioner_for
    from test_provision_karpenter import CAT, GPU_POOL, profile

    prof = profile(GPU_POOL)
    cluster = parse_documents(
        [
            node_dict("gpu-1", cpu="4", memory="16Gi", gpus=1, taints=[GPU_TAINT]),
            pod(
                "web", LOW, {"cpu": "1"}, on="gpu-1", owner="ReplicaSet", gpus=1, tolerations=[GPU_TOLERATION]
            ),
        ],
        "c",
    )
    work = parse_documents([pod("train", HIGH, {"cpu": "1"}, gpus=1, tolerations=[GPU_TOLERATION])], "w")
    r = simulate(cluster, work, provisioner=provisioner_for(prof, CAT))
    rows = [(p.pod.name, p.phase, p.recreated) for p in r.placements]
    assert rows == [("train", "Scheduled", False), ("web", "Preempted", False), ("web", "Provisioned", True)]


# --- the naive reference --------------------------------------------------------------------------------


def _unresolvable(pod: Pod, st: NodeState, states: list[NodeState]) -> bool:
    """The node's first failing filter returns UnschedulableAndUnresolvable."""
    spec = pod.spec
    names = prefilter_node_names(spec)
    if (names is not None and st.node.name not in names) or static_reasons(spec, st.node) is not None:
        return True
    if spec.host_ports and ports_conflict(spec.host_ports, st.ports):
        return False
    if filter_reasons(spec, st.node, st.requested, st.pod_count, st.ports) is not None:
        return any(v > st.node.allocatable.get(k, 0) for k, v in spec.requests)
    # NodeResourcesFit passes: PodTopologySpread or InterPodAffinity failed
    return naive_topology(pod, st, states) in (ERR_SPREAD_LABEL, ERR_POD_AFFINITY)


def _reasons(pod: Pod, st: NodeState, states: list[NodeState]) -> list[str] | None:
    """Every filter, the topology ones recounted from every node's pods."""
    r = filter_reasons(pod.spec, st.node, st.requested, st.pod_count, st.ports)
    if r is None:
        why = naive_topology(pod, st, states)
        r = [why] if why else None
    return r


def _rebuilt(st: NodeState, pods: list[Pod]) -> NodeState:
    new = NodeState(st.node, st.index)
    for p in pods:
        new.add(p)
    return new


def _start(p: Pod) -> float:
    return float("inf") if p.start_time is None else p.start_time


def naive(nodes: list[Node], bound: list[Pod], pending: list[Pod]) -> list[tuple]:
    """simulate() with preemption, the obvious way."""
    states = [NodeState(n, i) for i, n in enumerate(nodes)]
    by_name = {st.node.name: st for st in states}
    for p in bound:
        by_name[p.node_name].add(p)
    rows: dict[int, list] = {}
    later: list[Pod] = []
    queue = [(-p.priority, i, p) for i, p in enumerate(pending)]
    heapq.heapify(queue)
    arrivals = len(queue)
    recreated: set[int] = set()
    while queue:
        _, _, pod_ = heapq.heappop(queue)
        again = id(pod_) in recreated
        feasible, reasons = [], Counter()
        for st in states:
            r = _reasons(pod_, st, states)
            if r is None:
                feasible.append(st)
            else:
                reasons.update(r)
        if feasible:
            best = best_node(pod_, feasible, states)
            best.add(pod_)
            rows[id(pod_)] = [pod_.name, "Scheduled", best.node.name, None, None, again]
            continue
        message = unschedulable_message(len(states), reasons)
        if pod_.preemption_policy == "Never":
            rows[id(pod_)] = [
                pod_.name,
                "Unschedulable",
                None,
                f"{message} no new claims to deallocate, preemption: not eligible due to preemptionPolicy=Never.",
                None,
                again,
            ]
            continue
        statuses: Counter[str] = Counter()
        potential = [st for st in states if not _unresolvable(pod_, st, states)]
        statuses[NOT_HELPFUL] = len(states) - len(potential)
        candidates = []
        for st in potential:
            if len(candidates) >= num_candidates(len(potential)):
                break
            lower = [p for p in st.pods if p.priority < pod_.priority]
            if not lower:
                statuses[NO_VICTIMS] += 1
                continue
            keep = [p for p in st.pods if p.priority >= pod_.priority]

            def trial(pods: list[Pod], st: NodeState = st, pod: Pod = pod_) -> list[str] | None:
                world = list(states)
                world[st.index] = _rebuilt(st, pods)
                return _reasons(pod, world[st.index], world)

            r = trial(keep)
            if r is not None:
                statuses.update(r)
                continue
            order = sorted(lower, key=lambda p: (-p.priority, _start(p), st.pods.index(p)))
            victims = []
            for p in order:
                if trial([*keep, p]) is None:
                    keep.append(p)
                else:
                    victims.append(p)
            candidates.append((st, victims))
        if not candidates:
            rows[id(pod_)] = [
                pod_.name,
                "Unschedulable",
                None,
                f"{message} no new claims to deallocate, preemption: {unschedulable_message(len(states), +statuses)}",
                None,
                again,
            ]
            continue

        def rank(c):
            st, vs = c
            top = max(p.priority for p in vs)
            return (
                top,
                sum(p.priority + 2**31 for p in vs),
                len(vs),
                -min(_start(p) for p in vs if p.priority == top),
                st.node.name,
            )

        st, victims = min(candidates, key=rank)
        left = [p for p in st.pods if all(p is not v for v in victims)]
        new_st = _rebuilt(st, left)
        new_st.add(pod_)
        states[st.index] = new_st
        by_name[st.node.name] = new_st
        rows[id(pod_)] = [pod_.name, "Scheduled", st.node.name, None, None, again]
        for v in victims:
            if id(v) not in rows:
                later.append(v)
            new = simulate_module.recreate(v)
            why = f"preempted by {pod_.key} (priority {pod_.priority} over {v.priority}); " + (
                f"its {v.owner_kind} creates it again" if new else "no controller recreates it"
            )
            rows[id(v)] = [v.name, "Preempted", st.node.name, why, pod_.key, False]
            if new is not None:
                recreated.add(id(new))
                later.append(new)
                heapq.heappush(queue, (-new.priority, arrivals, new))
                arrivals += 1
    return [tuple(rows[id(p)]) for p in pending + later]


PRIORITIES = [-10, 0, 0, 5, 100]
APPS = ["web", "db"]


def anti_term(rng: random.Random) -> dict:
    return {
        "topologyKey": rng.choice(["zone", "kubernetes.io/hostname"]),
        "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
    }


def random_cluster(rng: random.Random) -> tuple[list[dict], list[dict], list[dict]]:
    nodes, running = [], []
    for i in range(rng.randint(1, 8)):
        gpus = rng.choice([0, 0, 1, 2, 4])
        name = f"node-{rng.randint(0, 9)}{i}"
        labels = {"zone": rng.choice("ab"), "kubernetes.io/hostname": name}
        if rng.random() < 0.1:
            del labels["zone"]
        nodes.append(
            node_dict(
                name,
                cpu=rng.choice(["1", "2", "4"]),
                memory=rng.choice(["2Gi", "4Gi", "8Gi"]),
                pods=rng.choice([2, 3, 5, 110]),
                gpus=gpus,
                labels=labels,
                taints=[GPU_TAINT] if gpus and rng.random() < 0.5 else [],
                unschedulable=rng.random() < 0.05,
            )
        )
        for j in range(rng.randint(0, 4)):
            doc = pod(
                f"run-{i}-{j}",
                rng.choice(PRIORITIES),
                {"cpu": rng.choice(["100m", "500m", "1"]), "memory": rng.choice(["256Mi", "1Gi"])},
                on=name,
                start=rng.choice([None, 1, 2, 3]),
                owner=rng.choice([None, "ReplicaSet", "Job"]),
                gpus=rng.choice([0, 0, 1]) if gpus else 0,
                tolerations=[GPU_TOLERATION],
                labels={"app": rng.choice(APPS)},
                pod_anti_affinity=[anti_term(rng)] if rng.random() < 0.1 else None,
            )
            if rng.random() < 0.15:
                doc["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
            running.append(doc)
    shapes = []
    for _ in range(rng.randint(1, 5)):
        kw: dict = {"gpus": rng.choice([0, 0, 1, 2])}
        if rng.random() < 0.6:
            kw["tolerations"] = [GPU_TOLERATION]
        if rng.random() < 0.25:
            kw["node_selector"] = {"zone": rng.choice("ab")}
        kw["labels"] = {"app": rng.choice(APPS)}
        if rng.random() < 0.15:
            kw["spread"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": rng.choice(["zone", "kubernetes.io/hostname"]),
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
                }
            ]
        if rng.random() < 0.15:
            kw["pod_anti_affinity"] = [anti_term(rng)]
        if rng.random() < 0.05:
            kw["pod_affinity"] = [anti_term(rng)]
        shapes.append(
            (
                rng.choice([0, 5, 100, 1000]),
                rng.choice(["100m", "1", "2", "3"]),
                rng.choice([None, "1Gi", "3Gi"]),
                rng.random() < 0.1,
                rng.random() < 0.15,
                kw,
            )
        )
    pending = []
    for i in range(rng.randint(1, 25)):
        prio, cpu, mem, never, port, kw = rng.choice(shapes)
        doc = pod(f"pod-{i}", prio, {"cpu": cpu, "memory": mem} if mem else {"cpu": cpu}, **kw)
        if never:
            doc["spec"]["preemptionPolicy"] = "Never"
        if port:
            doc["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        pending.append(doc)
    return nodes, running, pending


@pytest.mark.parametrize("array_after", [10_000, 0], ids=["heaps", "arrays"])
def test_simulate_matches_naive_preemption_on_random_clusters(array_after, monkeypatch):
    """Scheduling, preemption, evictions and re-queued pods against the naive reference: every pod's
    phase, node, reason, preemptor and recreation, in output order; in heap and in array mode (the
    recreated pods are placed by classes whose nodes grew back: the fast path's exactness after
    evictions)."""
    monkeypatch.setattr(simulate_module, "Scheduler", functools.partial(Scheduler, array_after=array_after))
    rng = random.Random(2026)
    preemptions = 0
    for case in range(250):
        node_docs, running, pending = random_cluster(rng)
        cluster = parse_documents(node_docs + running, "c")
        work = parse_documents(pending, "w")
        expected = naive(cluster.nodes, [p for p in cluster.pods if p.node_name], work.pods)
        result = simulate(parse_documents(node_docs + running, "c"), parse_documents(pending, "w"))
        got = [
            (p.pod.name, p.phase, p.node, p.reason, p.preempted_by, p.recreated) for p in result.placements
        ]
        assert got == expected, f"case {case}"
        preemptions += sum(1 for row in got if row[1] == "Preempted")
    assert preemptions > 100  # the generator does exercise preemption


def _naive_events(events: list[tuple[str, Any]]) -> list[tuple[str | None, str | None]]:
    """Place pods, evict pods (by name), with a full filter and score pass each time."""
    states: list[NodeState] = []
    where: dict[str, int] = {}
    out = []
    for kind, obj in events:
        if kind == "node":
            states.append(NodeState(obj, len(states)))
            continue
        if kind == "evict":
            if obj not in where:  # never placed
                continue
            idx = where.pop(obj)
            st = states[idx]
            states[idx] = _rebuilt(st, [p for p in st.pods if p.name != obj])
            continue
        feasible, reasons = [], Counter()
        for st in states:
            r = filter_reasons(obj.spec, st.node, st.requested, st.pod_count, st.ports)
            if r is None:
                feasible.append(st)
            else:
                reasons.update(r)
        if feasible:
            best = min(feasible, key=lambda st: (-score(obj.spec, st), st.node.name))
            best.add(obj)
            where[obj.name] = best.index
            out.append((best.node.name, None))
        else:
            out.append((None, unschedulable_message(len(states), reasons)))
    return out


@pytest.mark.parametrize("array_after", [10_000, 24, 0], ids=["heaps", "default", "arrays"])
def test_scheduler_stays_exact_when_pods_are_evicted(array_after):
    """Many pod specs filling small and large nodes, with pods evicted between placements (free resources
    grow: heaps must take dropped nodes back, arrays re-score them, messages recount them): the same
    nodes and messages as a full pass each time."""
    from builders import make_node, make_pod

    rng = random.Random(5)
    for case in range(120):
        shapes = [
            {
                "cpu": rng.choice([None, "10m", "250m", "700m", "1", "3"]),
                "memory": rng.choice([None, "64Mi", "1Gi", "5Gi"]),
                "gpus": rng.choice([0, 0, 1]),
                "tolerations": [GPU_TOLERATION] if rng.random() < 0.5 else None,
            }
            for _ in range(rng.randint(3, 40))
        ]
        events: list[tuple[str, Any]] = []
        for i in range(rng.randint(1, 8)):
            gpus = rng.choice([0, 1, 4])
            events.append(
                (
                    "node",
                    make_node(
                        f"n{i}",
                        cpu=rng.choice(["1", "2", "16"]),
                        memory=rng.choice(["2Gi", "8Gi", "64Gi"]),
                        pods=rng.choice([3, 110]),
                        gpus=gpus,
                        taints=[GPU_TAINT] if gpus else None,
                    ),
                )
            )
        placed: list[str] = []
        names = 0
        for _ in range(rng.randint(20, 120)):
            if placed and rng.random() < 0.25:
                events.append(("evict", placed.pop(rng.randrange(len(placed)))))
                continue
            names += 1
            events.append(("pod", make_pod(f"p{names}", **rng.choice(shapes))))
            placed.append(f"p{names}")  # an eviction of a pod that did not land changes nothing
        expected = _naive_events(events)
        sched = Scheduler([], array_after=array_after)
        got, bound = [], {}
        for kind, obj in events:
            if kind == "node":
                sched.add_node(obj)
            elif kind == "evict":
                if obj in bound:
                    p, st = bound.pop(obj)
                    sched.unbind(p, st)
            else:
                d = sched.place(obj)
                got.append((d.node.name if d.node else None, d.reason))
                if d.node is not None:
                    bound[obj.name] = (obj, d.node)
        assert got == expected, f"case {case}"
