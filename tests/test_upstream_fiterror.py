"""The "0/N nodes are available: ..." message (FitError.Error), transcribed from upstream.

Upstream: kubernetes/kubernetes

- ``pkg/scheduler/framework/types_test.go``, TestFitError_Error: the rows driven by per-node Filter statuses
  (the two rows with a ``PreFilterMsg`` have no kgpu counterpart: kgpu has no PreFilter failures). A
  PostFilter message, when present, follows the sentence after a space.
- ``pkg/scheduler/framework/types.go``, FitError.Error: each entry is ``"<count> <reason>"`` and the entries
  are ordered with ``sort.Strings`` (a plain string sort, so ``"10 ..."`` sorts before ``"2 ..."``).
- ``pkg/scheduler/schedule_one.go``: ``ErrNoNodesAvailable`` ("no nodes available to schedule pods").

The end-to-end rows at the bottom run kgpu's Scheduler and check the message it builds from the filters
transcribed in the other ``test_upstream_*`` modules (derived, not upstream tables).
"""

from __future__ import annotations

from collections import Counter

import pytest

from k8s_builders import container, load_node, load_pod, node, pod, taint
from kgpu.model.predicates import ERR_TAINTS, unschedulable_message
from kgpu.sim.scheduler.scheduler import NO_NODES, Scheduler

F1 = "Node(s) failed Filter plugin FalseFilter-1"
F2 = "Node(s) failed Filter plugin FalseFilter-2"
POST = "Error running PostFilter plugin FailedPostFilter"

# types_test.go, TestFitError_Error: (name, number of nodes, node -> status message, PostFilterMsg, want)
FIT_ERROR: list[tuple[str, int, dict[str, str], str, str]] = [
    (
        "nodes failed one Filter plugin with an empty PostFilterMsg",
        3,
        {"node1": F1, "node2": F1, "node3": F1},
        "",
        "0/3 nodes are available: 3 Node(s) failed Filter plugin FalseFilter-1.",
    ),
    (
        "nodes failed one Filter plugin with a non-empty PostFilterMsg",
        3,
        {"node1": F1, "node2": F1, "node3": F1},
        POST,
        "0/3 nodes are available: 3 Node(s) failed Filter plugin FalseFilter-1. "
        "Error running PostFilter plugin FailedPostFilter",
    ),
    (
        "nodes failed two Filter plugins with an empty PostFilterMsg",
        3,
        {"node1": F1, "node2": F1, "node3": F2},
        "",
        "0/3 nodes are available: 1 Node(s) failed Filter plugin FalseFilter-2, "
        "2 Node(s) failed Filter plugin FalseFilter-1.",
    ),
    (
        "nodes failed two Filter plugins with a non-empty PostFilterMsg",
        3,
        {"node1": F1, "node2": F1, "node3": F2},
        POST,
        "0/3 nodes are available: 1 Node(s) failed Filter plugin FalseFilter-2, "
        "2 Node(s) failed Filter plugin FalseFilter-1. Error running PostFilter plugin FailedPostFilter",
    ),
    (
        "failed to Permit on node",
        1,
        {"node1": "Node failed Permit plugin Permit-1"},
        "",
        "0/1 nodes are available: 1 Node failed Permit plugin Permit-1.",
    ),
    (
        "failed to Reserve on node",
        1,
        {"node1": "Node failed Reserve plugin Reserve-1"},
        "",
        "0/1 nodes are available: 1 Node failed Reserve plugin Reserve-1.",
    ),
]


@pytest.mark.parametrize(
    ("num_nodes", "statuses", "post_filter", "want"),
    [c[1:] for c in FIT_ERROR],
    ids=[c[0] for c in FIT_ERROR],
)
def test_fit_error_error(num_nodes: int, statuses: dict[str, str], post_filter: str, want: str) -> None:
    histogram = Counter(statuses.values())
    extra = (lambda: post_filter) if post_filter else None
    assert unschedulable_message(num_nodes, histogram, extra) == want


def test_fit_error_sorts_entries_as_strings() -> None:
    # types.go FitError.Error: sort.Strings over "<count> <reason>" -- "10 ..." before "2 ...".
    histogram = Counter({"Insufficient cpu": 2, "Too many pods": 10})
    assert (
        unschedulable_message(12, histogram)
        == "0/12 nodes are available: 10 Too many pods, 2 Insufficient cpu."
    )


def test_no_nodes_available() -> None:
    # schedule_one.go: ErrNoNodesAvailable
    assert NO_NODES == "no nodes available to schedule pods"
    sched = Scheduler([])
    decision = sched.place(load_pod(pod("p", containers=[container({"cpu": "1"}, name="c")])))
    assert decision.node is None and decision.reason == NO_NODES


def _alloc(cpu: str, mem: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": mem, "pods": "110"}


def test_scheduler_message_counts_each_reason_per_node() -> None:
    """Derived: one node fails TaintToleration, two fail NodeResourcesFit on cpu and memory; every
    insufficient resource of a node is its own entry (fit.go returns all of them), entries string-sorted."""
    nodes = [
        load_node(node("tainted", allocatable=_alloc("64", "256Gi"), taints=[taint("dedicated", "gpu")])),
        load_node(node("small-1", allocatable=_alloc("1", "1Gi"))),
        load_node(node("small-2", allocatable=_alloc("1", "1Gi"))),
    ]
    p = load_pod(pod("p", containers=[container({"cpu": "2", "memory": "2Gi"}, name="c")]))
    decision = Scheduler(nodes).place(p)
    assert decision.node is None
    assert decision.reason == (
        "0/3 nodes are available: 1 " + ERR_TAINTS + ", 2 Insufficient cpu, 2 Insufficient memory."
    )


def test_scheduler_message_after_capacity_is_used() -> None:
    """Derived: the message reflects pods the simulation has already bound; a node can fail on both the pod
    count and cpu (fit.go reports both)."""
    nodes = [
        load_node(node("a", allocatable={"cpu": "1", "memory": "1Gi", "pods": "1"})),
        load_node(node("b", allocatable={"cpu": "1", "memory": "1Gi", "pods": "10"})),
    ]
    sched = Scheduler(nodes)
    first = sched.place(load_pod(pod("p1", containers=[container({"cpu": "600m"}, name="c")])))
    second = sched.place(load_pod(pod("p2", containers=[container({"cpu": "600m"}, name="c")])))
    assert first.node is not None and second.node is not None and first.node.name != second.node.name
    third = sched.place(load_pod(pod("p3", containers=[container({"cpu": "600m"}, name="c")])))
    assert third.node is None
    # node a: pod limit reached and 400m free; node b: 400m free.
    assert third.reason == "0/2 nodes are available: 1 Too many pods, 2 Insufficient cpu."
