"""Upstream unit-test tables of kube-scheduler v1.34.4's PodTopologySpread and InterPodAffinity filters,
transcribed case by case (facts: pods, nodes, expected status per node), run against ``kgpu.sim.scheduler.plugins.topology``
the way upstream runs them: PreFilter over a snapshot of nodes and existing pods, then Filter per node.

Sources: pkg/scheduler/framework/plugins/podtopologyspread/filtering_test.go (TestSingleConstraint,
TestMultipleConstraints) and pkg/scheduler/framework/plugins/interpodaffinity/filtering_test.go
(TestRequiredAffinitySingleNode, TestRequiredAffinityMultipleNodes). Each case keeps its upstream name.
Left out: "terminating Pods should be excluded" (kgpu reads no deletionTimestamp), the namespaceSelector
cases that select on labels of Namespace objects (kgpu reads none), and the cases whose pods the API server
rejects (invalid label values, an empty topologyKey): kgpu rejects those at input, tested at the end.
Specs are built as model objects, not parsed, so upstream's test-only shapes (two constraints on one
topology key) can be expressed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest

from builders import make_pod, node_dict, pod_dict
from kgpu.errors import InputError
from kgpu.model.load import parse_documents
from kgpu.model.objects import (
    LabelSelector,
    Node,
    NodeSelector,
    Pod,
    PodAffinityTerm,
    Requirement,
    SpreadConstraint,
    Term,
)
from kgpu.model.predicates import (
    ERR_EXISTING_ANTI_AFFINITY,
    ERR_POD_AFFINITY,
    ERR_POD_ANTI_AFFINITY,
    ERR_SPREAD,
    ERR_SPREAD_LABEL,
)
from kgpu.sim.scheduler.plugins.topology import REASONS
from kgpu.sim.scheduler.scheduler import Scheduler

OK = None
SKEW = ERR_SPREAD
LABEL = ERR_SPREAD_LABEL
AFF = ERR_POD_AFFINITY
ANTI = ERR_POD_ANTI_AFFINITY
EXIST = ERR_EXISTING_ANTI_AFFINITY

FOO = LabelSelector((Requirement("foo", "Exists"),))  # fooSelector
BAR = LabelSelector((Requirement("bar", "Exists"),))  # barSelector
TAINTED = True  # st.MakeNode().Taints(taints): node.kubernetes.io/unschedulable:NoSchedule


def C(
    max_skew: int,
    key: str,
    selector: LabelSelector | None,
    *,
    min_domains: int = 1,
    affinity_policy: str = "Honor",
    taints_policy: str = "Ignore",
) -> SpreadConstraint:
    """st.PodWrapper.SpreadConstraint with DoNotSchedule and no matchLabelKeys (as every case here)."""
    return SpreadConstraint(
        max_skew, key, "DoNotSchedule", selector, min_domains, affinity_policy, taints_policy
    )


def N(name: str, labels: dict[str, str], tainted: bool = False) -> Node:
    taints = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}] if tainted else None
    return parse_documents([node_dict(name, labels=labels, taints=taints)], "nodes").nodes[0]


def E(name: str, node: str, labels: dict[str, str], namespace: str = "default", **spec: Any) -> Pod:
    """An existing pod bound to ``node``."""
    return P(name, namespace=namespace, labels=labels, node=node, **spec)


def P(
    name: str = "p",
    *,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    node: str = "",
    spread: tuple[SpreadConstraint, ...] | list[SpreadConstraint] = (),
    node_selector: dict[str, str] | None = None,
    affinity: list[tuple[str, str, list[str]]] | None = None,
    pod_affinity: tuple[PodAffinityTerm, ...] = (),
    anti: tuple[PodAffinityTerm, ...] = (),
) -> Pod:
    pod = make_pod(name, namespace=namespace, labels=labels or {"_": "_"})
    pod.labels = dict(labels or {})
    na = None
    if affinity:
        na = NodeSelector((Term(tuple(Requirement(k, op, tuple(v)) for k, op, v in affinity)),))
    pod.spec = replace(
        pod.spec,
        node_name=node,
        topology_spread=tuple(spread),
        node_selector=tuple(sorted((node_selector or {}).items())),
        affinity=na,
        pod_affinity=pod_affinity,
        pod_anti_affinity=anti,
    )
    return pod


@dataclass
class Case:
    name: str
    pod: dict[str, Any]
    nodes: list[Node]
    existing: list[Pod]
    want: dict[str, str | None]


def statuses(pod: Pod, nodes: list[Node], existing: list[Pod]) -> dict[str, str | None]:
    """PreFilter over the snapshot, then Filter on each node: the reason, or None where the node passes."""
    sched = Scheduler(nodes, existing)
    state = sched.topology.prepare(pod)
    got = {st.name: state.reason(st.node) for st in sched.states}
    codes = state.codes(sched.topology.domain_ids).tolist()  # the same, over every node at once
    assert [REASONS[c] or None for c in codes] == list(got.values())
    return got


SPREAD_CASES = [
    Case(
        "TestSingleConstraint/no existing pods",
        {"labels": {"foo": ""}, "spread": [C(1, "zone", FOO)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [],
        {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
    ),
    Case(
        "TestSingleConstraint/no existing pods, incoming pod doesn't match itself",
        {"labels": {"foo": ""}, "spread": [C(1, "zone", BAR)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [],
        {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
    ),
    Case(
        "TestSingleConstraint/existing pods in a different namespace do not count",
        {"labels": {"foo": ""}, "spread": [C(1, "zone", FOO)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [
            E("p-a1", "node-a", {"foo": ""}, namespace="ns1"),
            E("p-b1", "node-a", {"foo": ""}, namespace="ns2"),
            E("p-x1", "node-x", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
        ],
        {"node-a": OK, "node-b": OK, "node-x": SKEW, "node-y": SKEW},
    ),
    Case(
        "TestSingleConstraint/existing pods do not match null selector",
        {"labels": {"foo": ""}, "spread": [C(1, "zone", None)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [E("p-x1", "node-x", {"foo": ""}), E("p-y1", "node-y", {"foo": ""})],
        {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
    ),
    Case(
        "TestSingleConstraint/pods spread across zones as 3/3, all nodes fit",
        {"labels": {"foo": ""}, "spread": [C(1, "zone", FOO)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
            E("p-y2", "node-y", {"foo": ""}),
            E("p-y3", "node-y", {"foo": ""}),
        ],
        {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
    ),
    Case(
        "TestSingleConstraint/pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
        {"labels": {"foo": ""}, "spread": [C(1, "zone", FOO)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zon": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-x1", "node-x", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
        ],
        {"node-a": OK, "node-b": LABEL, "node-x": SKEW, "node-y": SKEW},
    ),
    Case(
        "TestSingleConstraint/pod cannot be scheduled as all nodes don't have label 'rack'",
        {"labels": {"foo": ""}, "spread": [C(1, "rack", FOO)]},
        [N("node-a", {"zone": "zone1", "node": "node-a"}), N("node-x", {"zone": "zone2", "node": "node-x"})],
        [],
        {"node-a": LABEL, "node-x": LABEL},
    ),
    Case(
        "TestSingleConstraint/pods spread across nodes as 2/1/0/3, only node-x fits",
        {"labels": {"foo": ""}, "spread": [C(1, "node", FOO)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
            E("p-y2", "node-y", {"foo": ""}),
            E("p-y3", "node-y", {"foo": ""}),
        ],
        {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW},
    ),
    Case(
        "TestSingleConstraint/pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
        {"labels": {"foo": ""}, "spread": [C(2, "node", FOO)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
            E("p-y2", "node-y", {"foo": ""}),
            E("p-y3", "node-y", {"foo": ""}),
        ],
        {"node-a": SKEW, "node-b": OK, "node-x": OK, "node-y": SKEW},
    ),
    Case(
        "TestSingleConstraint/pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
        {"labels": {"bar": ""}, "spread": [C(1, "node", FOO)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
            E("p-y2", "node-y", {"foo": ""}),
            E("p-y3", "node-y", {"foo": ""}),
        ],
        {"node-a": SKEW, "node-b": OK, "node-x": OK, "node-y": SKEW},
    ),
    Case(
        "TestSingleConstraint/incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
        {
            "labels": {"foo": ""},
            "spread": [C(1, "node", FOO)],
            "affinity": [("node", "In", ["node-a", "node-y"])],
        },
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
            E("p-y2", "node-y", {"foo": ""}),
            E("p-y3", "node-y", {"foo": ""}),
        ],
        {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": SKEW},
    ),
    Case(
        "TestSingleConstraint/incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
        {"labels": {"foo": ""}, "spread": [C(1, "zone", FOO)], "affinity": [("node", "NotIn", ["node-b"])]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [
            E("p-b1", "node-b", {"foo": ""}),
            E("p-b2", "node-b", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
        ],
        {"node-a": OK, "node-b": OK, "node-x": SKEW, "node-y": SKEW},
    ),
    Case(
        "TestSingleConstraint/pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains < minDomains, then the third node fits",
        {"labels": {"foo": ""}, "spread": [C(2, "node", FOO, min_domains=4)]},
        [N("node-a", {"node": "node-a"}), N("node-b", {"node": "node-b"}), N("node-c", {"node": "node-c"})],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-b2", "node-b", {"foo": ""}),
            E("p-c1", "node-c", {"foo": ""}),
        ],
        {"node-a": SKEW, "node-b": SKEW, "node-c": OK},
    ),
    Case(
        "TestSingleConstraint/pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains > minDomains, then the all nodes fit",
        {"labels": {"foo": ""}, "spread": [C(2, "node", FOO, min_domains=2)]},
        [N("node-a", {"node": "node-a"}), N("node-b", {"node": "node-b"}), N("node-c", {"node": "node-c"})],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-b2", "node-b", {"foo": ""}),
            E("p-c1", "node-c", {"foo": ""}),
        ],
        {"node-a": OK, "node-b": OK, "node-c": OK},
    ),
    Case(
        "TestSingleConstraint/pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains, then the third and fourth nodes fit",
        {"labels": {"foo": ""}, "spread": [C(2, "zone", FOO, min_domains=3)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [
            E("p-b1", "node-a", {"foo": ""}),
            E("p-b2", "node-b", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
        ],
        {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": OK},
    ),
    Case(
        "TestSingleConstraint/pods spread across zone as 2/1, maxSkew is 2 and the number of domains > minDomains, then the all nodes fit",
        {"labels": {"foo": ""}, "spread": [C(2, "zone", FOO, min_domains=1)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [
            E("p-b1", "node-a", {"foo": ""}),
            E("p-b2", "node-b", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
        ],
        {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
    ),
    Case(
        "TestSingleConstraint/NodeAffinityPolicy honored with labelSelectors",
        {"labels": {"foo": ""}, "spread": [C(1, "node", FOO)], "node_selector": {"foo": ""}},
        [
            N("node-a", {"node": "node-a", "foo": ""}),
            N("node-b", {"node": "node-b", "foo": ""}),
            N("node-x", {"node": "node-x", "foo": ""}),
            N("node-y", {"node": "node-y"}),
        ],
        [
            E("p-b1", "node-a", {"foo": ""}),
            E("p-b2", "node-b", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
        ],
        {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": OK},
    ),
    Case(
        "TestSingleConstraint/NodeAffinityPolicy ignored with labelSelectors",
        {
            "labels": {"foo": ""},
            "spread": [C(1, "node", FOO, affinity_policy="Ignore")],
            "node_selector": {"foo": ""},
        },
        [
            N("node-a", {"node": "node-a", "foo": ""}),
            N("node-b", {"node": "node-b", "foo": ""}),
            N("node-x", {"node": "node-x", "foo": ""}),
            N("node-y", {"node": "node-y"}),
        ],
        [
            E("p-b1", "node-a", {"foo": ""}),
            E("p-b2", "node-b", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
        ],
        {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW},
    ),
    Case(
        "TestSingleConstraint/NodeAffinityPolicy honored with nodeAffinity",
        {"labels": {"foo": ""}, "spread": [C(1, "node", FOO)], "affinity": [("foo", "In", [""])]},
        [
            N("node-a", {"node": "node-a", "foo": ""}),
            N("node-b", {"node": "node-b", "foo": ""}),
            N("node-x", {"node": "node-x", "foo": ""}),
            N("node-y", {"node": "node-y"}),
        ],
        [
            E("p-b1", "node-a", {"foo": ""}),
            E("p-b2", "node-b", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
        ],
        {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": OK},
    ),
    Case(
        "TestSingleConstraint/NodeAffinityPolicy ignored with labelSelectors",
        {
            "labels": {"foo": ""},
            "spread": [C(1, "node", FOO, affinity_policy="Ignore")],
            "affinity": [("foo", "In", [""])],
        },
        [
            N("node-a", {"node": "node-a", "foo": ""}),
            N("node-b", {"node": "node-b", "foo": ""}),
            N("node-x", {"node": "node-x", "foo": ""}),
            N("node-y", {"node": "node-y"}),
        ],
        [
            E("p-b1", "node-a", {"foo": ""}),
            E("p-b2", "node-b", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
        ],
        {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW},
    ),
    Case(
        "TestSingleConstraint/NodeTaintsPolicy honored",
        {"labels": {"foo": ""}, "spread": [C(1, "node", FOO, taints_policy="Honor")]},
        [
            N("node-a", {"node": "node-a", "foo": ""}),
            N("node-b", {"node": "node-b", "foo": ""}),
            N("node-x", {"node": "node-x", "foo": ""}),
            N("node-y", {"node": "node-y"}, TAINTED),
        ],
        [
            E("p-b1", "node-a", {"foo": ""}),
            E("p-b2", "node-b", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
        ],
        {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": OK},
    ),
    Case(
        "TestSingleConstraint/NodeTaintsPolicy ignored",
        {"labels": {"foo": ""}, "spread": [C(1, "node", FOO)]},
        [
            N("node-a", {"node": "node-a", "foo": ""}),
            N("node-b", {"node": "node-b", "foo": ""}),
            N("node-x", {"node": "node-x", "foo": ""}),
            N("node-y", {"node": "node-y"}, TAINTED),
        ],
        [
            E("p-b1", "node-a", {"foo": ""}),
            E("p-b2", "node-b", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
        ],
        {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW},
    ),
    Case(
        "TestMultipleConstraints/two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
        {"labels": {"foo": ""}, "spread": [C(1, "zone", FOO), C(1, "node", FOO)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
            E("p-y2", "node-y", {"foo": ""}),
            E("p-y3", "node-y", {"foo": ""}),
        ],
        {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW},
    ),
    Case(
        "TestMultipleConstraints/two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
        {"labels": {"foo": ""}, "spread": [C(1, "zone", FOO), C(1, "node", FOO)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
            E("p-y2", "node-y", {"foo": ""}),
            E("p-y3", "node-y", {"foo": ""}),
            E("p-y4", "node-y", {"foo": ""}),
        ],
        {"node-a": SKEW, "node-b": SKEW, "node-x": SKEW, "node-y": SKEW},
    ),
    Case(
        "TestMultipleConstraints/Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
        {"labels": {"foo": "", "bar": ""}, "spread": [C(1, "zone", FOO), C(1, "node", BAR)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [E("p-a1", "node-a", {"foo": ""}), E("p-y1", "node-y", {"bar": ""})],
        {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW},
    ),
    Case(
        "TestMultipleConstraints/Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
        {"labels": {"foo": "", "bar": ""}, "spread": [C(1, "zone", FOO), C(1, "node", BAR)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-x1", "node-x", {"bar": ""}),
            E("p-y1", "node-y", {"bar": ""}),
        ],
        {"node-a": SKEW, "node-b": SKEW, "node-x": SKEW, "node-y": SKEW},
    ),
    Case(
        "TestMultipleConstraints/Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
        {"labels": {"foo": "", "bar": ""}, "spread": [C(1, "zone", FOO), C(1, "node", BAR)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": "", "bar": ""}),
            E("p-y1", "node-y", {"foo": ""}),
            E("p-y2", "node-y", {"foo": "", "bar": ""}),
            E("p-y3", "node-y", {"foo": ""}),
        ],
        {"node-a": SKEW, "node-b": OK, "node-x": SKEW, "node-y": SKEW},
    ),
    Case(
        "TestMultipleConstraints/Constraints hold different labelSelectors but pod doesn't match itself on 'zone' constraint",
        {"labels": {"bar": ""}, "spread": [C(1, "zone", FOO), C(1, "node", BAR)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-x1", "node-x", {"bar": ""}),
            E("p-y1", "node-y", {"bar": ""}),
        ],
        {"node-a": OK, "node-b": OK, "node-x": SKEW, "node-y": SKEW},
    ),
    Case(
        "TestMultipleConstraints/two Constraints on zone and node, absence of label 'node' on node-x, spreads = [1/1, 1/0/0/1]",
        {"labels": {"foo": ""}, "spread": [C(1, "zone", FOO), C(1, "node", FOO)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [E("p-a1", "node-a", {"foo": ""}), E("p-y3", "node-y", {"foo": ""})],
        {"node-a": SKEW, "node-b": OK, "node-x": LABEL, "node-y": SKEW},
    ),
    Case(
        "TestMultipleConstraints/two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
        {
            "labels": {"foo": ""},
            "spread": [C(1, "zone", FOO), C(1, "node", FOO, affinity_policy="Ignore")],
            "node_selector": {"foo": ""},
        },
        [
            N("node-a", {"zone": "zone1", "node": "node-a", "foo": ""}),
            N("node-b", {"zone": "zone1", "node": "node-b", "foo": ""}),
            N("node-x", {"zone": "zone2", "node": "node-x", "foo": ""}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
        ],
        {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW},
    ),
    Case(
        "TestMultipleConstraints/two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
        {"labels": {"foo": ""}, "spread": [C(1, "zone", FOO, taints_policy="Honor"), C(1, "node", FOO)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a", "foo": ""}),
            N("node-b", {"zone": "zone1", "node": "node-b", "foo": ""}),
            N("node-x", {"zone": "zone2", "node": "node-x", "foo": ""}),
            N("node-y", {"zone": "zone2", "node": "node-y"}, TAINTED),
        ],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
        ],
        {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW},
    ),
    Case(
        "TestMultipleConstraints/two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
        {
            "labels": {"foo": ""},
            "spread": [C(1, "zone", FOO), C(1, "node", FOO)],
            "node_selector": {"foo": ""},
        },
        [
            N("node-a", {"zone": "zone1", "node": "node-a", "foo": ""}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x", "foo": ""}),
            N("node-y", {"zone": "zone2", "node": "node-y", "foo": ""}, TAINTED),
        ],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
        ],
        {"node-a": SKEW, "node-b": OK, "node-x": OK, "node-y": SKEW},
    ),
    Case(
        "TestMultipleConstraints/two node inclusion Constraints, zone: honor/honor, node: ignore/ignore",
        {
            "labels": {"foo": ""},
            "spread": [C(1, "zone", FOO, taints_policy="Honor"), C(1, "node", FOO, affinity_policy="Ignore")],
            "node_selector": {"foo": ""},
        },
        [
            N("node-a", {"zone": "zone1", "node": "node-a", "foo": ""}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x", "foo": ""}),
            N("node-y", {"zone": "zone2", "node": "node-y", "foo": ""}, TAINTED),
        ],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
        ],
        {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": SKEW},
    ),
    Case(
        "TestMultipleConstraints/two Constraints on zone, spreads = [3/3, 2/1]",
        {"labels": {"foo": "", "bar": ""}, "spread": [C(1, "zone", BAR), C(1, "zone", FOO)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [
            E("p-a1", "node-a", {"foo": "", "bar": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": "", "bar": ""}),
            E("p-y1", "node-y", {"foo": ""}),
            E("p-y2", "node-y", {"foo": "", "bar": ""}),
            E("p-y3", "node-y", {"foo": ""}),
        ],
        {"node-a": SKEW, "node-b": SKEW, "node-x": OK, "node-y": OK},
    ),
    Case(
        "TestMultipleConstraints/two Constraints on zone, spreads = [3/4, 2/1]",
        {"labels": {"foo": "", "bar": ""}, "spread": [C(1, "zone", BAR), C(1, "zone", FOO)]},
        [
            N("node-a", {"zone": "zone1", "node": "node-a"}),
            N("node-b", {"zone": "zone1", "node": "node-b"}),
            N("node-x", {"zone": "zone2", "node": "node-x"}),
            N("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [
            E("p-a1", "node-a", {"foo": "", "bar": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": "", "bar": ""}),
            E("p-y1", "node-y", {"foo": ""}),
            E("p-y2", "node-y", {"foo": "", "bar": ""}),
            E("p-y3", "node-y", {"foo": ""}),
            E("p-y4", "node-y", {"foo": ""}),
        ],
        {"node-a": SKEW, "node-b": SKEW, "node-x": SKEW, "node-y": SKEW},
    ),
]


@pytest.mark.parametrize("case", SPREAD_CASES, ids=lambda c: c.name)
def test_pod_topology_spread_filter(case: Case) -> None:
    pod = P(**case.pod)
    assert statuses(pod, case.nodes, case.existing) == case.want


# --- PodTopologySpread Score --------------------------------------------------------------------------------


def S(
    max_skew: int,
    key: str,
    selector: LabelSelector | None,
    *,
    min_domains: int = 1,
    affinity_policy: str = "Honor",
    taints_policy: str = "Ignore",
    match_label_keys: tuple[str, ...] = (),
) -> SpreadConstraint:
    """st.PodWrapper.SpreadConstraint with ScheduleAnyway."""
    return SpreadConstraint(
        max_skew,
        key,
        "ScheduleAnyway",
        selector,
        min_domains,
        affinity_policy,
        taints_policy,
        match_label_keys,
    )


@dataclass
class ScoreCase:
    name: str
    pod: dict[str, Any]
    nodes: list[Node]  # candidates: they passed every filter
    failed: list[Node]  # the other nodes of the cluster
    existing: list[Pod]
    want: dict[str, int]  # normalised score per candidate


SPREAD_SCORE_CASES = [
    ScoreCase(
        "TestPodTopologySpreadScore/one constraint on node, no existing pods",
        {"labels": {"foo": ""}, "spread": [S(1, "kubernetes.io/hostname", FOO)]},
        [
            N("node-a", {"kubernetes.io/hostname": "node-a"}),
            N("node-b", {"kubernetes.io/hostname": "node-b"}),
        ],
        [],
        [],
        {"node-a": 100, "node-b": 100},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/one constraint on node, only one node is candidate",
        {"labels": {"foo": ""}, "spread": [S(1, "kubernetes.io/hostname", FOO)]},
        [N("node-a", {"kubernetes.io/hostname": "node-a"})],
        [N("node-b", {"kubernetes.io/hostname": "node-b"})],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
        ],
        {"node-a": 100},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/one constraint on node, all nodes have the same number of matching pods",
        {"labels": {"foo": ""}, "spread": [S(1, "kubernetes.io/hostname", FOO)]},
        [
            N("node-a", {"kubernetes.io/hostname": "node-a"}),
            N("node-b", {"kubernetes.io/hostname": "node-b"}),
        ],
        [],
        [E("p-a1", "node-a", {"foo": ""}), E("p-b1", "node-b", {"foo": ""})],
        {"node-a": 100, "node-b": 100},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/one constraint on node, all 4 nodes are candidates",
        {"labels": {"foo": ""}, "spread": [S(1, "kubernetes.io/hostname", FOO)]},
        [
            N("node-a", {"kubernetes.io/hostname": "node-a"}),
            N("node-b", {"kubernetes.io/hostname": "node-b"}),
            N("node-c", {"kubernetes.io/hostname": "node-c"}),
            N("node-d", {"kubernetes.io/hostname": "node-d"}),
        ],
        [],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-d1", "node-d", {"foo": ""}),
            E("p-d2", "node-d", {"foo": ""}),
            E("p-d3", "node-d", {"foo": ""}),
        ],
        {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/one constraint on node, null selector",
        {"labels": {"foo": ""}, "spread": [S(1, "kubernetes.io/hostname", None)]},
        [
            N("node-a", {"kubernetes.io/hostname": "node-a"}),
            N("node-b", {"kubernetes.io/hostname": "node-b"}),
            N("node-c", {"kubernetes.io/hostname": "node-c"}),
            N("node-d", {"kubernetes.io/hostname": "node-d"}),
        ],
        [],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-d1", "node-d", {"foo": ""}),
            E("p-d2", "node-d", {"foo": ""}),
            E("p-d3", "node-d", {"foo": ""}),
        ],
        {"node-a": 100, "node-b": 100, "node-c": 100, "node-d": 100},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/one constraint on node, all 4 nodes are candidates, maxSkew=2",
        {"labels": {"foo": ""}, "spread": [S(2, "kubernetes.io/hostname", FOO)]},
        [
            N("node-a", {"kubernetes.io/hostname": "node-a"}),
            N("node-b", {"kubernetes.io/hostname": "node-b"}),
            N("node-c", {"kubernetes.io/hostname": "node-c"}),
            N("node-d", {"kubernetes.io/hostname": "node-d"}),
        ],
        [],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-d1", "node-d", {"foo": ""}),
            E("p-d2", "node-d", {"foo": ""}),
            E("p-d3", "node-d", {"foo": ""}),
        ],
        {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/one constraint on node, all 4 nodes are candidates, maxSkew=3",
        {"labels": {"foo": ""}, "spread": [S(3, "kubernetes.io/hostname", FOO)]},
        [
            N("node-a", {"kubernetes.io/hostname": "node-a"}),
            N("node-b", {"kubernetes.io/hostname": "node-b"}),
            N("node-c", {"kubernetes.io/hostname": "node-c"}),
            N("node-d", {"kubernetes.io/hostname": "node-d"}),
        ],
        [],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-a3", "node-a", {"foo": ""}),
            E("p-a4", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-b2", "node-b", {"foo": ""}),
            E("p-b3", "node-b", {"foo": ""}),
            E("p-c1", "node-c", {"foo": ""}),
            E("p-c2", "node-c", {"foo": ""}),
            E("p-d1", "node-d", {"foo": ""}),
        ],
        {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/one constraint on node, 3 out of 4 nodes are candidates",
        {"labels": {"foo": ""}, "spread": [S(1, "kubernetes.io/hostname", FOO)]},
        [
            N("node-a", {"kubernetes.io/hostname": "node-a"}),
            N("node-b", {"kubernetes.io/hostname": "node-b"}),
            N("node-x", {"kubernetes.io/hostname": "node-x"}),
        ],
        [N("node-y", {"kubernetes.io/hostname": "node-y"})],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-a3", "node-a", {"foo": ""}),
            E("p-a4", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-b2", "node-b", {"foo": ""}),
            E("p-x1", "node-x", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
            E("p-y2", "node-y", {"foo": ""}),
            E("p-y3", "node-y", {"foo": ""}),
        ],
        {"node-a": 33, "node-b": 83, "node-x": 100},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key",
        {"labels": {"foo": ""}, "spread": [S(1, "kubernetes.io/hostname", FOO)]},
        [
            N("node-a", {"kubernetes.io/hostname": "node-a"}),
            N("node-b", {"n": "node-b"}),
            N("node-x", {"kubernetes.io/hostname": "node-x"}),
        ],
        [N("node-y", {"kubernetes.io/hostname": "node-y"})],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-a3", "node-a", {"foo": ""}),
            E("p-a4", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-b2", "node-b", {"foo": ""}),
            E("p-x1", "node-x", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
            E("p-y2", "node-y", {"foo": ""}),
            E("p-y3", "node-y", {"foo": ""}),
        ],
        {"node-a": 16, "node-b": 0, "node-x": 100},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/one constraint on zone, 3 out of 4 nodes are candidates",
        {"labels": {"foo": ""}, "spread": [S(1, "zone", FOO)]},
        [
            N("node-a", {"zone": "zone1", "kubernetes.io/hostname": "node-a"}),
            N("node-b", {"zone": "zone1", "kubernetes.io/hostname": "node-b"}),
            N("node-x", {"zone": "zone2", "kubernetes.io/hostname": "node-x"}),
        ],
        [N("node-y", {"zone": "zone2", "kubernetes.io/hostname": "node-y"})],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-a3", "node-a", {"foo": ""}),
            E("p-a4", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-b2", "node-b", {"foo": ""}),
            E("p-x1", "node-x", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
            E("p-y2", "node-y", {"foo": ""}),
            E("p-y3", "node-y", {"foo": ""}),
        ],
        {"node-a": 75, "node-b": 75, "node-x": 100},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/two Constraints on zone and node, 2 out of 4 nodes are candidates",
        {"labels": {"foo": ""}, "spread": [S(1, "zone", FOO), S(1, "kubernetes.io/hostname", FOO)]},
        [
            N("node-a", {"zone": "zone1", "kubernetes.io/hostname": "node-a"}),
            N("node-x", {"zone": "zone2", "kubernetes.io/hostname": "node-x"}),
        ],
        [
            N("node-b", {"zone": "zone1", "kubernetes.io/hostname": "node-b"}),
            N("node-y", {"zone": "zone2", "kubernetes.io/hostname": "node-y"}),
        ],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-x1", "node-x", {"foo": ""}),
            E("p-x2", "node-x", {"foo": ""}),
            E("p-y1", "node-y", {"foo": ""}),
            E("p-y2", "node-y", {"foo": ""}),
            E("p-y3", "node-y", {"foo": ""}),
            E("p-y4", "node-y", {"foo": ""}),
        ],
        {"node-a": 100, "node-x": 63},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/two Constraints on zone, 2 out of 4 nodes are candidates",
        {"labels": {"foo": "", "bar": ""}, "spread": [S(1, "zone", FOO), S(1, "zone", BAR)]},
        [N("node-a", {"zone": "zone1"}), N("node-x", {"zone": "zone2"})],
        [N("node-b", {"zone": "zone1"}), N("node-y", {"zone": "zone2"})],
        [
            E("p-a1", "node-a", {"foo": "", "bar": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": "", "bar": ""}),
            E("p-y1", "node-y", {"foo": ""}),
            E("p-y2", "node-y", {"foo": "", "bar": ""}),
            E("p-y3", "node-y", {"foo": ""}),
        ],
        {"node-a": 85, "node-x": 100},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/two Constraints on zone and node, with different labelSelectors",
        {
            "labels": {"foo": "", "bar": ""},
            "spread": [S(1, "zone", FOO), S(1, "kubernetes.io/hostname", BAR)],
        },
        [
            N("node-a", {"zone": "zone1", "kubernetes.io/hostname": "node-a"}),
            N("node-b", {"zone": "zone1", "kubernetes.io/hostname": "node-b"}),
            N("node-x", {"zone": "zone2", "kubernetes.io/hostname": "node-x"}),
            N("node-y", {"zone": "zone2", "kubernetes.io/hostname": "node-y"}),
        ],
        [],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": "", "bar": ""}),
            E("p-y1", "node-y", {"foo": ""}),
            E("p-y2", "node-y", {"bar": ""}),
        ],
        {"node-a": 60, "node-b": 20, "node-x": 100, "node-y": 60},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
        {
            "labels": {"foo": "", "bar": ""},
            "spread": [S(1, "zone", FOO), S(1, "kubernetes.io/hostname", BAR)],
        },
        [
            N("node-a", {"zone": "zone1", "kubernetes.io/hostname": "node-a"}),
            N("node-b", {"zone": "zone1", "kubernetes.io/hostname": "node-b"}),
            N("node-x", {"zone": "zone2", "kubernetes.io/hostname": "node-x"}),
            N("node-y", {"zone": "zone2", "kubernetes.io/hostname": "node-y"}),
        ],
        [],
        [
            E("p-b1", "node-b", {"bar": ""}),
            E("p-x1", "node-x", {"foo": ""}),
            E("p-y1", "node-y", {"foo": "", "bar": ""}),
        ],
        {"node-a": 100, "node-b": 60, "node-x": 40, "node-y": 0},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are candidates",
        {
            "labels": {"foo": "", "bar": ""},
            "spread": [S(1, "zone", FOO), S(1, "kubernetes.io/hostname", BAR)],
        },
        [
            N("node-a", {"zone": "zone1", "kubernetes.io/hostname": "node-a"}),
            N("node-b", {"zone": "zone1", "kubernetes.io/hostname": "node-b"}),
            N("node-x", {"zone": "zone2", "kubernetes.io/hostname": "node-x"}),
        ],
        [N("node-y", {"zone": "zone2", "kubernetes.io/hostname": "node-y"})],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": "", "bar": ""}),
            E("p-y1", "node-y", {"foo": ""}),
            E("p-y2", "node-y", {"bar": ""}),
        ],
        {"node-a": 50, "node-b": 25, "node-x": 100},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/existing pods in a different namespace do not count",
        {"labels": {"foo": ""}, "spread": [S(1, "kubernetes.io/hostname", FOO)]},
        [
            N("node-a", {"kubernetes.io/hostname": "node-a"}),
            N("node-b", {"kubernetes.io/hostname": "node-b"}),
        ],
        [],
        [
            E("p-a1", "node-a", {"foo": ""}, namespace="ns1"),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-b2", "node-b", {"foo": ""}),
        ],
        {"node-a": 100, "node-b": 33},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/minDomains has no effect when ScheduleAnyway",
        {"labels": {"foo": ""}, "spread": [S(2, "node", FOO, min_domains=10)]},
        [N("node-a", {"node": "node-a"}), N("node-b", {"node": "node-b"}), N("node-c", {"node": "node-c"})],
        [],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-b2", "node-b", {"foo": ""}),
            E("p-c1", "node-c", {"foo": ""}),
        ],
        {"node-a": 75, "node-b": 75, "node-c": 100},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/NodeAffinityPolicy honoed with labelSelectors",
        {"labels": {"foo": ""}, "spread": [S(1, "node", FOO)], "node_selector": {"foo": ""}},
        [
            N("node-a", {"node": "node-a", "foo": ""}),
            N("node-b", {"node": "node-b", "foo": ""}),
            N("node-c", {"node": "node-c"}),
        ],
        [],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-c1", "node-c", {"foo": ""}),
        ],
        {"node-a": 0, "node-b": 33, "node-c": 100},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/NodeAffinityPolicy ignored with labelSelectors",
        {
            "labels": {"foo": ""},
            "spread": [S(1, "node", FOO, affinity_policy="Ignore")],
            "node_selector": {"foo": ""},
        },
        [
            N("node-a", {"node": "node-a", "foo": ""}),
            N("node-b", {"node": "node-b", "foo": ""}),
            N("node-c", {"node": "node-c"}),
        ],
        [],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-c1", "node-c", {"foo": ""}),
        ],
        {"node-a": 66, "node-b": 100, "node-c": 100},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/NodeAffinityPolicy honoed with nodeAffinity",
        {"labels": {"foo": ""}, "spread": [S(1, "node", FOO)], "affinity": [("foo", "In", [""])]},
        [
            N("node-a", {"node": "node-a", "foo": ""}),
            N("node-b", {"node": "node-b", "foo": ""}),
            N("node-c", {"node": "node-c"}),
        ],
        [],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-c1", "node-c", {"foo": ""}),
        ],
        {"node-a": 0, "node-b": 33, "node-c": 100},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/NodeAffinityPolicy ignored with nodeAffinity",
        {
            "labels": {"foo": ""},
            "spread": [S(1, "node", FOO, affinity_policy="Ignore")],
            "affinity": [("foo", "In", [""])],
        },
        [
            N("node-a", {"node": "node-a", "foo": ""}),
            N("node-b", {"node": "node-b", "foo": ""}),
            N("node-c", {"node": "node-c"}),
        ],
        [],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-c1", "node-c", {"foo": ""}),
        ],
        {"node-a": 66, "node-b": 100, "node-c": 100},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/NodeTaintsPolicy honored",
        {"labels": {"foo": ""}, "spread": [S(1, "node", FOO, taints_policy="Honor")]},
        [
            N("node-a", {"node": "node-a"}),
            N("node-b", {"node": "node-b"}),
            N("node-c", {"node": "node-c"}, TAINTED),
        ],
        [],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-c1", "node-c", {"foo": ""}),
        ],
        {"node-a": 0, "node-b": 33, "node-c": 100},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/NodeTaintsPolicy ignored",
        {"labels": {"foo": ""}, "spread": [S(1, "node", FOO)]},
        [
            N("node-a", {"node": "node-a"}),
            N("node-b", {"node": "node-b"}),
            N("node-c", {"node": "node-c"}, TAINTED),
        ],
        [],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-a2", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": ""}),
            E("p-c1", "node-c", {"foo": ""}),
        ],
        {"node-a": 66, "node-b": 100, "node-c": 100},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
        {
            "labels": {"foo": "", "bar": ""},
            "spread": [
                S(1, "zone", LabelSelector(()), match_label_keys=("foo",)),
                S(1, "kubernetes.io/hostname", LabelSelector(()), match_label_keys=("bar",)),
            ],
        },
        [
            N("node-a", {"zone": "zone1", "kubernetes.io/hostname": "node-a"}),
            N("node-b", {"zone": "zone1", "kubernetes.io/hostname": "node-b"}),
            N("node-c", {"zone": "zone2", "kubernetes.io/hostname": "node-c"}),
            N("node-d", {"zone": "zone2", "kubernetes.io/hostname": "node-d"}),
        ],
        [],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": "", "bar": ""}),
            E("p-y1", "node-c", {"foo": ""}),
            E("p-y2", "node-c", {"bar": ""}),
        ],
        {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100},
    ),
    ScoreCase(
        "TestPodTopologySpreadScore/matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
        {
            "labels": {"foo": "", "bar": "", "baz": ""},
            "spread": [S(1, "zone", FOO), S(1, "kubernetes.io/hostname", BAR, match_label_keys=("baz",))],
        },
        [
            N("node-a", {"zone": "zone1", "kubernetes.io/hostname": "node-a"}),
            N("node-b", {"zone": "zone1", "kubernetes.io/hostname": "node-b"}),
            N("node-c", {"zone": "zone2", "kubernetes.io/hostname": "node-c"}),
            N("node-d", {"zone": "zone2", "kubernetes.io/hostname": "node-d"}),
        ],
        [],
        [
            E("p-a1", "node-a", {"foo": ""}),
            E("p-b1", "node-b", {"foo": "", "bar": "", "baz": ""}),
            E("p-c1", "node-c", {"foo": ""}),
            E("p-c2", "node-c", {"bar": ""}),
            E("p-d3", "node-c", {"bar": "", "baz": ""}),
        ],
        {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100},
    ),
]


@pytest.mark.parametrize("case", SPREAD_SCORE_CASES, ids=lambda c: c.name)
def test_pod_topology_spread_score(case: ScoreCase) -> None:
    """TestPodTopologySpreadScore (scoring_test.go): PreScore, Score and NormalizeScore over the candidates.
    Left out: system defaulting (Services), terminating pods, and the disabled-feature-gate case."""
    pod = P(**case.pod)
    sched = Scheduler(case.nodes + case.failed, case.existing)
    candidates = sched.states[: len(case.nodes)]
    got = sched.topology._spread_scores(pod, candidates)
    assert got is not None
    assert dict(zip((st.name for st in candidates), got, strict=True)) == case.want


# --- InterPodAffinity ------------------------------------------------------------------------------------


def sel(*reqs: Requirement) -> LabelSelector:
    return LabelSelector(reqs)


def In(key: str, *values: str) -> Requirement:
    return Requirement(key, "In", values)


def NotIn(key: str, *values: str) -> Requirement:
    return Requirement(key, "NotIn", values)


def Exists(key: str) -> Requirement:
    return Requirement(key, "Exists")


def DoesNotExist(key: str) -> Requirement:
    return Requirement(key, "DoesNotExist")


def T(
    key: str, *reqs: Requirement, namespaces: tuple[str, ...] = (), ns_selector: LabelSelector | None = None
):
    """A required term as st.PodAffinityIn / PodAffinityExists build it (one selector, the pod's namespace)."""
    return PodAffinityTerm(key, sel(*reqs), namespaces, ns_selector)


POD_LABEL = {"service": "securityscan"}
POD_LABEL2 = {"security": "S1"}
NODE1 = N("node1", {"region": "r1", "zone": "z11"})
EXISTING = E("existing", "node1", POD_LABEL)  # st.MakePod().Labels(podLabel).Node("node1")

SINGLE = "TestRequiredAffinitySingleNode/"
SINGLE_NODE_CASES = [
    (
        SINGLE + "A pod that has no required pod affinity scheduling rules can schedule onto a node with no "
        "existing pods",
        P(),
        [],
        OK,
    ),
    (
        SINGLE
        + "satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator "
        "that matches the existing pod",
        P(labels=POD_LABEL2, pod_affinity=(T("region", In("service", "securityscan", "value2")),)),
        [EXISTING],
        OK,
    ),
    (
        SINGLE
        + "satisfies the pod with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using not in "
        "operator in labelSelector that matches the existing pod",
        P(labels=POD_LABEL2, pod_affinity=(T("region", NotIn("service", "securityscan3", "value3")),)),
        [EXISTING],
        OK,
    ),
    (
        SINGLE + "Does not satisfy the PodAffinity with labelSelector because of diff Namespace",
        P(
            labels=POD_LABEL2,
            pod_affinity=(T("", In("service", "securityscan", "value2"), namespaces=("DiffNameSpace",)),),
        ),
        [E("e", "node1", {"service": "securityscan"}, namespace="ns")],
        AFF,
    ),
    (
        SINGLE + "Doesn't satisfy the PodAffinity because of unmatching labelSelector with the existing pod",
        P(labels=POD_LABEL, pod_affinity=(T("", In("service", "antivirusscan", "value2")),)),
        [EXISTING],
        AFF,
    ),
    (
        SINGLE + "satisfies the PodAffinity with different label Operators in multiple "
        "RequiredDuringSchedulingIgnoredDuringExecution ",
        P(
            labels=POD_LABEL2,
            pod_affinity=(
                T("region", Exists("service"), DoesNotExist("wrongkey")),
                T("region", In("service", "securityscan"), NotIn("service", "WrongValue")),
            ),
        ),
        [EXISTING],
        OK,
    ),
    (
        SINGLE
        + "The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot schedule onto "
        "the node because one of the matchExpression item don't match.",
        P(
            labels=POD_LABEL2,
            pod_affinity=(
                T("region", Exists("service"), DoesNotExist("wrongkey")),
                T("region", In("service", "securityscan2"), NotIn("service", "WrongValue")),
            ),
        ),
        [EXISTING],
        AFF,
    ),
    (
        SINGLE + "satisfies the PodAffinity and PodAntiAffinity with the existing pod",
        P(
            labels=POD_LABEL2,
            pod_affinity=(T("region", In("service", "securityscan", "value2")),),
            anti=(T("node", In("service", "antivirusscan", "value2")),),
        ),
        [EXISTING],
        OK,
    ),
    (
        SINGLE
        + "satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the existing pod",
        P(
            labels=POD_LABEL2,
            pod_affinity=(T("region", In("service", "securityscan", "value2")),),
            anti=(T("node", In("service", "antivirusscan", "value2")),),
        ),
        [E("e", "node1", POD_LABEL, anti=(T("node", In("service", "antivirusscan", "value2")),))],
        OK,
    ),
    (
        SINGLE + "satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the existing pod",
        P(
            labels=POD_LABEL2,
            pod_affinity=(T("region", In("service", "securityscan", "value2")),),
            anti=(T("zone", In("service", "securityscan", "value2")),),
        ),
        [EXISTING],
        ANTI,
    ),
    (
        SINGLE
        + "satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity symmetry with the "
        "existing pod",
        P(
            labels=POD_LABEL,
            pod_affinity=(T("region", In("service", "securityscan", "value2")),),
            anti=(T("node", In("service", "antivirusscan", "value2")),),
        ),
        [E("e", "node1", POD_LABEL, anti=(T("zone", In("service", "securityscan", "value2")),))],
        EXIST,
    ),
    (
        SINGLE + "pod matches its own Label in PodAffinity and that matches the existing pod Labels",
        P(labels=POD_LABEL, pod_affinity=(T("region", NotIn("service", "securityscan", "value2")),)),
        [E("e", "node2", {"service": "securityscan"})],
        AFF,
    ),
    (
        SINGLE + "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity "
        "constraints. doesn't satisfy PodAntiAffinity symmetry with the existing pod",
        P(labels=POD_LABEL),
        [E("e", "node1", POD_LABEL, anti=(T("zone", In("service", "securityscan", "value2")),))],
        EXIST,
    ),
    (
        SINGLE + "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity "
        "constraints. satisfy PodAntiAffinity symmetry with the existing pod",
        P(labels=POD_LABEL),
        [E("e", "node1", POD_LABEL, anti=(T("zone", NotIn("service", "securityscan", "value2")),))],
        OK,
    ),
    (
        SINGLE
        + "satisfies the PodAntiAffinity with existing pod but doesn't satisfy PodAntiAffinity symmetry with "
        "incoming pod",
        P(labels=POD_LABEL, anti=(T("region", Exists("service")), T("region", Exists("security")))),
        [E("e", "node1", POD_LABEL2, anti=(T("zone", Exists("security")),))],
        ANTI,
    ),
    (
        SINGLE
        + "PodAntiAffinity symmetry check a1: incoming pod and existing pod partially match each other on "
        "AffinityTerms",
        P(labels=POD_LABEL, anti=(T("zone", Exists("service")), T("zone", Exists("security")))),
        [E("e", "node1", POD_LABEL2, anti=(T("zone", Exists("security")),))],
        ANTI,
    ),
    (
        SINGLE
        + "PodAntiAffinity symmetry check a2: incoming pod and existing pod partially match each other on "
        "AffinityTerms",
        P(labels=POD_LABEL2, anti=(T("zone", Exists("security")),)),
        [E("e", "node1", POD_LABEL, anti=(T("zone", Exists("service")), T("zone", Exists("security"))))],
        EXIST,
    ),
    (
        SINGLE
        + "PodAntiAffinity symmetry check b1: incoming pod and existing pod partially match each other on "
        "AffinityTerms",
        P(labels={"abc": "", "xyz": ""}, anti=(T("zone", Exists("abc")), T("zone", Exists("def")))),
        [E("e", "node1", {"def": "", "xyz": ""}, anti=(T("zone", Exists("abc")), T("zone", Exists("def"))))],
        ANTI,
    ),
    (
        SINGLE
        + "PodAntiAffinity symmetry check b2: incoming pod and existing pod partially match each other on "
        "AffinityTerms",
        P(labels={"def": "", "xyz": ""}, anti=(T("zone", Exists("abc")), T("zone", Exists("def")))),
        [E("e", "node1", {"abc": "", "xyz": ""}, anti=(T("zone", Exists("abc")), T("zone", Exists("def"))))],
        ANTI,
    ),
    (
        SINGLE + "anti-affinity with matching all NamespaceSelector",
        P(
            namespace="subteam1-team1",
            labels=POD_LABEL2,
            anti=(T("zone", In("service", "securityscan", "value2"), ns_selector=sel()),),
        ),
        [E("e", "node1", POD_LABEL, namespace="subteam2-team1")],
        ANTI,
    ),
]


@pytest.mark.parametrize(
    ("name", "pod", "existing", "want"), SINGLE_NODE_CASES, ids=[c[0] for c in SINGLE_NODE_CASES]
)
def test_inter_pod_affinity_filter_single_node(name, pod, existing, want) -> None:
    assert statuses(pod, [NODE1], existing) == {"node1": want}


RG_CHINA = {"region": "China"}
RG_CHINA_AZ1 = {"region": "China", "az": "az1"}
RG_INDIA = {"region": "India"}


def two(zone_b: str) -> list[Node]:
    return [
        N("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
        N("nodeB", {"region": "r1", "zone": zone_b, "hostname": "nodeB"}),
    ]


MULTI = "TestRequiredAffinityMultipleNodes/"
MULTI_NODE_CASES = [
    (
        MULTI
        + "A pod can be scheduled onto all the nodes that have the same topology key & label value with one of "
        "them has an existing pod that matches the affinity rules",
        P(pod_affinity=(T("region", In("foo", "bar")),)),
        [E("p1", "node1", {"foo": "bar"})],
        [N("node1", RG_CHINA), N("node2", RG_CHINA_AZ1), N("node3", RG_INDIA)],
        [OK, OK, AFF],
    ),
    (
        MULTI
        + "The affinity rule is to schedule all of the pods of this collection to the same zone. The first pod "
        "of the collection should not be blocked from being scheduled onto any node, even there's no existing pod "
        "that matches the rule anywhere.",
        P(
            labels={"foo": "bar", "service": "securityscan"},
            pod_affinity=(T("zone", In("foo", "bar")), T("zone", In("service", "securityscan"))),
        ),
        [E("p1", "nodeA", {"foo": "bar"})],
        [N("nodeA", {"zone": "az1", "hostname": "h1"}), N("nodeB", {"zone": "az2", "hostname": "h2"})],
        [OK, OK],
    ),
    (
        MULTI
        + "The first pod of the collection can only be scheduled on nodes labelled with the requested topology "
        "keys",
        P(
            labels={"foo": "bar", "service": "securityscan"},
            pod_affinity=(T("zone", In("foo", "bar")), T("zone", In("service", "securityscan"))),
        ),
        [E("p1", "nodeA", {"foo": "bar"})],
        [
            N("nodeA", {"zoneLabel": "az1", "hostname": "h1"}),
            N("nodeB", {"zoneLabel": "az2", "hostname": "h2"}),
        ],
        [AFF, AFF],
    ),
    (
        MULTI
        + "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the "
        "inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB.",
        P(anti=(T("region", In("foo", "abc")),)),
        [E("e", "nodeA", {"foo": "abc"})],
        [
            N("nodeA", {"region": "r1", "hostname": "nodeA"}),
            N("nodeB", {"region": "r1", "hostname": "nodeB"}),
        ],
        [ANTI, ANTI],
    ),
    (
        MULTI
        + "This test ensures that anti-affinity matches a pod when any term of the anti-affinity rule matches a "
        "pod.",
        P(anti=(T("region", In("foo", "abc")), T("zone", In("service", "securityscan")))),
        [E("e", "nodeA", {"foo": "abc", "service": "securityscan"})],
        [
            N("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
            N("nodeB", {"region": "r1", "zone": "z2", "hostname": "nodeB"}),
        ],
        [ANTI, ANTI],
    ),
    (
        MULTI
        + "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the "
        "inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB but can be scheduled onto nodeC",
        P(anti=(T("region", In("foo", "abc")),)),
        [E("e", "nodeA", {"foo": "abc"})],
        [N("nodeA", RG_CHINA), N("nodeB", RG_CHINA_AZ1), N("nodeC", RG_INDIA)],
        [ANTI, ANTI, OK],
    ),
    (
        MULTI
        + "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the "
        "inter pod affinity rule. The pod can not be scheduled onto nodeA, nodeB, but can be scheduled onto nodeC "
        "(NodeC has an existing pod that match the inter pod affinity rule but in different namespace)",
        P(namespace="ns1", labels={"foo": "123"}, anti=(T("region", In("foo", "bar")),)),
        [
            E("e1", "nodeA", {"foo": "bar"}, namespace="ns1"),
            E("e2", "nodeC", {}, namespace="ns2", anti=(T("region", In("foo", "123")),)),
        ],
        [N("nodeA", RG_CHINA), N("nodeB", RG_CHINA_AZ1), N("nodeC", RG_INDIA)],
        [ANTI, ANTI, OK],
    ),
    (
        MULTI + "Test existing pod's anti-affinity: if an existing pod has a term with invalid topologyKey, "
        "labelSelector of the term is firstly checked, and then topologyKey of the term is also checked",
        P(labels={"foo": ""}),
        [E("e", "nodeA", {}, anti=(T("invalid-node-label", Exists("foo")),))],
        two("z1"),
        [OK, OK],
    ),
    (
        MULTI
        + "Test incoming pod's anti-affinity: even if labelSelector matches, we still check if topologyKey "
        "matches",
        P(anti=(T("invalid-node-label", Exists("foo")),)),
        [E("e", "nodeA", {"foo": ""})],
        two("z1"),
        [OK, OK],
    ),
    (
        MULTI
        + "Test existing pod's anti-affinity: incoming pod wouldn't considered as a fit as it violates each "
        "existingPod's terms on all nodes",
        P(labels={"foo": "", "bar": ""}),
        [
            E("e1", "nodeA", {}, anti=(T("zone", Exists("foo")),)),
            E("e2", "nodeA", {}, anti=(T("region", Exists("bar")),)),
        ],
        two("z2"),
        [EXIST, EXIST],
    ),
    (
        MULTI
        + "Test incoming pod's anti-affinity: incoming pod wouldn't considered as a fit as it at least violates "
        "one anti-affinity rule of existingPod",
        P(anti=(T("zone", Exists("foo")), T("region", Exists("bar")))),
        [E("e1", "nodeA", {"foo": ""}), E("e2", "nodeB", {"bar": ""})],
        two("z2"),
        [ANTI, ANTI],
    ),
    (
        MULTI
        + "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted "
        "as a single term match - case when one term has invalid topologyKey",
        P(labels={"foo": "", "bar": ""}),
        [E("e", "nodeA", {}, anti=(T("invalid-node-label", Exists("foo")), T("zone", Exists("bar"))))],
        two("z2"),
        [EXIST, OK],
    ),
    (
        MULTI
        + "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted "
        "as a single term match - case when one term has invalid topologyKey",
        P(anti=(T("invalid-node-label", Exists("foo")), T("zone", Exists("bar")))),
        [E("podA", "nodeA", {"foo": "", "bar": ""})],
        two("z2"),
        [ANTI, OK],
    ),
    (
        MULTI
        + "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted "
        "as a single term match - case when all terms have valid topologyKey",
        P(labels={"foo": "", "bar": ""}),
        [E("e", "nodeA", {}, anti=(T("region", Exists("foo")), T("zone", Exists("bar"))))],
        two("z2"),
        [EXIST, EXIST],
    ),
    (
        MULTI
        + "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted "
        "as a single term match - case when all terms have valid topologyKey",
        P(anti=(T("region", Exists("foo")), T("zone", Exists("bar")))),
        [E("e", "nodeA", {"foo": "", "bar": ""})],
        two("z2"),
        [ANTI, ANTI],
    ),
    (
        MULTI
        + "Test existing pod's anti-affinity: existingPod on nodeA and nodeB has at least one anti-affinity "
        "term matches incoming pod, so incoming pod can only be scheduled to nodeC",
        P(labels={"foo": "", "bar": ""}),
        [
            E("e1", "nodeA", {}, anti=(T("zone", Exists("foo")), T("zone", Exists("labelA")))),
            E("e2", "nodeB", {}, anti=(T("zone", Exists("bar")), T("zone", Exists("labelB")))),
        ],
        [*two("z2"), N("nodeC", {"region": "r1", "zone": "z3", "hostname": "nodeC"})],
        [EXIST, EXIST, OK],
    ),
    (
        MULTI
        + "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all "
        "topologyKeys match",
        P(pod_affinity=(T("region", Exists("foo")), T("zone", Exists("bar")))),
        [E("pod1", "nodeA", {"foo": "", "bar": ""})],
        two("z1"),
        [OK, OK],
    ),
    (
        MULTI
        + "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all "
        "topologyKeys match, and the match logic should be satisfied on the same pod",
        P(pod_affinity=(T("region", Exists("foo")), T("zone", Exists("bar")))),
        [E("pod1", "nodeA", {"foo": ""}), E("pod2", "nodeB", {"bar": ""})],
        two("z2"),
        [AFF, AFF],
    ),
]


@pytest.mark.parametrize(
    ("name", "pod", "existing", "nodes", "want"), MULTI_NODE_CASES, ids=[c[0][:120] for c in MULTI_NODE_CASES]
)
def test_inter_pod_affinity_filter_multiple_nodes(name, pod, existing, nodes, want) -> None:
    assert statuses(pod, nodes, existing) == {n.name: w for n, w in zip(nodes, want, strict=True)}


@pytest.mark.parametrize("kind", ["podAffinity", "podAntiAffinity"])
def test_invalid_label_value_in_a_term_is_an_input_error(kind: str) -> None:
    """TestRequiredAffinitySingleNode/"PodAffinity fails PreFilter with an invalid affinity label syntax" (and
    its anti-affinity twin): the API server refuses such a pod; kgpu refuses the input, naming the field."""
    term = {
        "topologyKey": "region",
        "labelSelector": {
            "matchExpressions": [{"key": "service", "operator": "In", "values": ["{{.bad-value.}}"]}]
        },
    }
    doc = pod_dict(
        "p",
        pod_affinity=[term] if kind == "podAffinity" else None,
        pod_anti_affinity=[term] if kind == "podAntiAffinity" else None,
    )
    with pytest.raises(InputError) as exc:
        parse_documents([doc], "w.yaml")
    assert exc.value.line().startswith(
        f"w.yaml: Pod default/p: spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution[0]"
        ".labelSelector.matchExpressions[0].values[0]: '{{.bad-value.}}': a valid label must be"
    )
