"""NodeAffinity's PreFilter (matchFields on metadata.name) and the framework's status for the nodes it leaves
out, as kube-scheduler v1.34 reports them.

PreFilter cases from kubernetes/kubernetes pkg/scheduler/framework/plugins/nodeaffinity/node_affinity_test.go
(TestNodeAffinity, wantPreFilterResult / wantPreFilterStatus); the messages from schedule_one.go
(findNodesThatFitPod: "node(s) didn't satisfy plugin(s) [NodeAffinity]" for nodes outside the result) and
FitError.Error (a PreFilter rejection replaces the per-node reasons).
"""

from __future__ import annotations

from builders import make_node, make_pod, node_dict, pod_dict
from kgpu.model.load import parse_documents
from kgpu.model.predicates import ERR_PREFILTER_NODE_AFFINITY, prefilter_node_names
from kgpu.sim.scheduler.scheduler import Scheduler
from kgpu.sim.simulate import simulate


def name_in(*names: str) -> dict:
    return {"key": "metadata.name", "operator": "In", "values": list(names)}


def spec(terms: list[dict]):
    return make_pod("p", affinity_terms=terms).spec


def test_matchfields_in_matching_the_existing_node():
    """'Pod with matchFields using In operator that matches the existing node': result {node1}."""
    assert prefilter_node_names(spec([{"matchFields": [name_in("node1")]}])) == {"node1"}


def test_matchfields_in_not_matching_the_existing_node():
    """'... that does not match the existing node': the result is still {node1}; node2 is left out."""
    assert prefilter_node_names(spec([{"matchFields": [name_in("node1")]}])) == {"node1"}


def test_a_term_without_a_name_field_keeps_every_node():
    """'Pod with two terms: matchFields does not match, but matchExpressions matches': terms are ORed and
    the second names no node, so there is no PreFilter result."""
    terms = [
        {"matchFields": [name_in("node1")]},
        {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]},
    ]
    assert prefilter_node_names(spec(terms)) is None


def test_one_term_with_expressions_and_a_name_field():
    """'Pod with one term: matchFields does not match, but matchExpressions matches': result {node1}."""
    terms = [
        {
            "matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}],
            "matchFields": [name_in("node1")],
        }
    ]
    assert prefilter_node_names(spec(terms)) == {"node1"}


def test_two_conflicting_match_field_requirements():
    """'Pod with two conflicting mach field requirements': In [node1] and In [node2] in one term leave no
    node; the PreFilter status is UnschedulableAndUnresolvable 'pod affinity terms conflict'."""
    assert prefilter_node_names(spec([{"matchFields": [name_in("node1"), name_in("node2")]}])) == frozenset()


def test_terms_naming_nodes_are_a_union_and_no_affinity_means_no_result():
    terms = [{"matchFields": [name_in("node1")]}, {"matchFields": [name_in("node2")]}]
    assert prefilter_node_names(spec(terms)) == {"node1", "node2"}
    assert prefilter_node_names(make_pod("p").spec) is None
    not_in = [{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node1"]}]}]
    assert prefilter_node_names(spec(not_in)) is None  # only In narrows the candidates


# --- what simulate says ----------------------------------------------------------------------------------


def place(nodes: list[dict], pod: dict) -> str | None:
    result = simulate(parse_documents(nodes, "c"), parse_documents([pod], "w"))
    return result.placements[0].reason


def test_pod_pinned_to_another_node_names_the_prefilter_plugin():
    """The issue's case: 'matchFields: metadata.name In [other-node]' on a one-node cluster."""
    pod = pod_dict("p", affinity_terms=[{"matchFields": [name_in("other-node")]}])
    assert place([node_dict("n1")], pod) == (
        f"0/1 nodes are available: 1 {ERR_PREFILTER_NODE_AFFINITY}. "
        "no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )
    assert ERR_PREFILTER_NODE_AFFINITY == "node(s) didn't satisfy plugin(s) [NodeAffinity]"


def test_only_the_named_node_is_filtered():
    """A pod pinned (as the DaemonSet controller pins its pods) to a node it does not fit: that node's own
    reason, and the other nodes (tainted, cordoned: never filtered) as left out by the PreFilter."""
    nodes = [
        node_dict("a", cpu="1"),
        node_dict("b", unschedulable=True),
        node_dict("c", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
    ]
    pod = pod_dict("p", cpu="2", affinity_terms=[{"matchFields": [name_in("a")]}])
    # 2 cpu on a 1-cpu node: above its whole allocatable, so preemption cannot help there either
    assert place(nodes, pod) == (
        f"0/3 nodes are available: 1 Insufficient cpu, 2 {ERR_PREFILTER_NODE_AFFINITY}. "
        "no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )


def test_conflicting_terms_are_reported_as_a_prefilter_rejection():
    pod = pod_dict("p", affinity_terms=[{"matchFields": [name_in("a"), name_in("b")]}])
    assert (
        place([node_dict("a"), node_dict("b")], pod)
        == "0/2 nodes are available: pod affinity terms conflict. "
        "no new claims to deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )


def test_pinned_pod_lands_on_its_node_in_both_scheduler_modes():
    for array_after in (10_000, 0):
        sched = Scheduler([make_node("a"), make_node("b"), make_node("c")], array_after=array_after)
        decision = sched.place(make_pod("p", affinity_terms=[{"matchFields": [name_in("c")]}]))
        assert decision.node is not None and decision.node.name == "c"
