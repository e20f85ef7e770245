"""PodTopologySpread and InterPodAffinity through simulate: placements and kube-scheduler's messages."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from builders import GPU_TOLERATION, assert_scheduled, assert_unschedulable, node_dict, placement, pod_dict
from kgpu.errors import InputError
from kgpu.model.load import parse_documents
from kgpu.model.objects import HostPort
from kgpu.sim.simulate import simulate

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def run(nodes: list[dict], pods: list[dict], cluster_pods: list[dict] | None = None):
    return simulate(
        parse_documents(nodes + (cluster_pods or []), "cluster.yaml"), parse_documents(pods, "work.yaml")
    )


def zone_node(name: str, zone: str | None, **kw: Any) -> dict:
    labels = {HOST: name, **({ZONE: zone} if zone else {})}
    return node_dict(name, labels=labels, **kw)


def spread(
    key: str = ZONE, skew: int = 1, action: str = "DoNotSchedule", app: str = "train", **kw: Any
) -> dict:
    return {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": action,
        "labelSelector": {"matchLabels": {"app": app}},
        **kw,
    }


def term(key: str, app: str, **kw: Any) -> dict:
    return {"topologyKey": key, "labelSelector": {"matchLabels": {"app": app}}, **kw}


def test_zone_spread_with_the_other_zone_tainted_places_one_and_leaves_three_pending():
    """The issue's example: 4 GPU replicas, maxSkew 1 over zones, zone b's only node tainted."""
    nodes = [
        zone_node("a1", "a", gpus=8),
        zone_node("b1", "b", gpus=8, taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
    ]
    pods = [pod_dict(f"train-{i}", gpus=1, labels={"app": "train"}, spread=[spread()]) for i in range(4)]
    result = run(nodes, pods)
    assert_scheduled(result, "train-0", "a1")
    for i in (1, 2, 3):
        assert_unschedulable(
            result,
            f"train-{i}",
            "0/2 nodes are available: 1 node(s) didn't match pod topology spread constraints, "
            "1 node(s) had untolerated taint(s).",
        )


def test_spread_alternates_zones_and_counts_running_pods():
    nodes = [zone_node("a1", "a"), zone_node("b1", "b"), zone_node("c1", "c")]
    running = [pod_dict("old", node_name="a1", labels={"app": "train"}, phase="Running")]
    pods = [pod_dict(f"p{i}", labels={"app": "train"}, spread=[spread()]) for i in range(5)]
    result = run(nodes, pods, running)
    # a has 1 already: b and c first, then each zone in turn (ties to the emptiest node, then by name)
    assert [placement(result, f"p{i}").node for i in range(5)] == ["b1", "c1", "a1", "b1", "c1"]


def test_node_without_the_topology_key_is_missing_required_label():
    nodes = [zone_node("a1", "a", cpu="1"), zone_node("nolabel", None)]
    pods = [pod_dict("p", cpu="2", labels={"app": "train"}, spread=[spread()])]
    assert_unschedulable(
        run(nodes, pods),
        "p",
        "0/2 nodes are available: 1 Insufficient cpu, "
        "1 node(s) didn't match pod topology spread constraints (missing required label).",
    )


def test_min_domains_counts_missing_domains_as_zero():
    """minDomains 3 with two zones: the global minimum is 0, so each zone takes at most maxSkew pods."""
    nodes = [zone_node("a1", "a"), zone_node("b1", "b")]
    pods = [pod_dict(f"p{i}", labels={"app": "train"}, spread=[spread(minDomains=3)]) for i in range(3)]
    result = run(nodes, pods)
    assert [p.phase for p in result.placements] == ["Scheduled", "Scheduled", "Unschedulable"]
    assert placement(result, "p2").reason == (
        "0/2 nodes are available: 2 node(s) didn't match pod topology spread constraints. "
        # a skew is resolvable by preemption, but every pod has the same priority
        "no new claims to deallocate, preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )


def test_node_taints_policy_honor_leaves_the_tainted_zone_out_of_the_count():
    tainted = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
    nodes = [zone_node("a1", "a"), zone_node("b1", "b", taints=[tainted])]
    honor = [
        pod_dict(f"h{i}", labels={"app": "h"}, spread=[spread(app="h", nodeTaintsPolicy="Honor")])
        for i in range(3)
    ]
    result = run(nodes, honor)
    assert [p.node for p in result.placements] == ["a1", "a1", "a1"]


def test_match_label_keys_spread_each_revision_on_its_own():
    nodes = [zone_node("a1", "a"), zone_node("b1", "b")]
    c = spread(matchLabelKeys=["rev"])
    running = [
        pod_dict(f"old{i}", node_name="a1", labels={"app": "train", "rev": "1"}, phase="Running")
        for i in range(3)
    ]
    pods = [pod_dict(f"p{i}", labels={"app": "train", "rev": "2"}, spread=[c]) for i in range(2)]
    result = run(nodes, pods, running)
    # rev 1 pods do not count: the second pod may (must) go to the busier a1; counting them it could not
    assert [p.node for p in result.placements] == ["b1", "a1"]


def test_schedule_anyway_constraints_do_not_filter():
    nodes = [zone_node("a1", "a"), zone_node("b1", "b", cpu="1")]
    pods = [
        pod_dict(f"p{i}", cpu="1", labels={"app": "train"}, spread=[spread(action="ScheduleAnyway")])
        for i in range(4)
    ]
    result = run(nodes, pods)
    assert [p.phase for p in result.placements] == ["Scheduled"] * 4


def test_required_anti_affinity_one_per_host():
    nodes = [zone_node(f"n{i}", "a") for i in range(3)]
    pods = [pod_dict(f"p{i}", labels={"app": "db"}, pod_anti_affinity=[term(HOST, "db")]) for i in range(4)]
    result = run(nodes, pods)
    assert sorted(p.node for p in result.placements[:3]) == ["n0", "n1", "n2"]
    assert_unschedulable(
        result, "p3", "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
    )


def test_existing_pods_anti_affinity_keeps_matching_pods_away():
    """A running pod that refuses app=web in its zone: web pods go elsewhere, others are not affected."""
    nodes = [zone_node("a1", "a"), zone_node("b1", "b", cpu="1")]
    guard = pod_dict(
        "guard",
        node_name="a1",
        labels={"app": "guard"},
        phase="Running",
        pod_anti_affinity=[term(ZONE, "web")],
    )
    pods = [
        pod_dict("w0", cpu="1", labels={"app": "web"}),
        pod_dict("w1", cpu="1", labels={"app": "web"}),
        pod_dict("other", cpu="1", labels={"app": "other"}),
    ]
    result = run(nodes, pods, [guard])
    assert_scheduled(result, "w0", "b1")
    assert_unschedulable(
        result,
        "w1",
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't satisfy existing pods anti-affinity rules.",
    )
    assert_scheduled(result, "other", "a1")


def test_existing_anti_affinity_of_a_pod_placed_earlier_in_the_simulation():
    nodes = [zone_node("a1", "a"), zone_node("b1", "b")]
    pods = [
        pod_dict("guard", labels={"app": "guard"}, pod_anti_affinity=[term(ZONE, "web")]),
        pod_dict("w0", labels={"app": "web"}),
    ]
    result = run(nodes, pods)
    assert placement(result, "w0").node != placement(result, "guard").node


def test_pod_affinity_follows_the_matching_pod_and_the_first_pod_may_go_anywhere():
    nodes = [zone_node("a1", "a"), zone_node("b1", "b")]
    running = [pod_dict("cache", node_name="b1", labels={"app": "cache"}, phase="Running")]
    pods = [pod_dict(f"web{i}", labels={"app": "web"}, pod_affinity=[term(ZONE, "cache")]) for i in range(2)]
    pods.append(pod_dict("self", labels={"app": "self"}, pod_affinity=[term(ZONE, "self")]))
    pods.append(pod_dict("lonely", labels={"app": "lonely"}, pod_affinity=[term(ZONE, "nothing")]))
    result = run(nodes, pods, running)
    assert [placement(result, f"web{i}").node for i in range(2)] == ["b1", "b1"]
    assert placement(result, "self").phase == "Scheduled"  # matches its own term: no pod yet, anywhere
    assert_unschedulable(
        result, "lonely", "0/2 nodes are available: 2 node(s) didn't match pod affinity rules."
    )


def test_affinity_terms_default_to_the_pods_namespace_and_namespaces_widen_them():
    nodes = [zone_node("a1", "a"), zone_node("b1", "b")]
    running = [pod_dict("cache", node_name="b1", labels={"app": "cache"}, phase="Running", namespace="infra")]
    pods = [
        pod_dict("here", labels={"app": "x"}, pod_affinity=[term(ZONE, "cache")]),
        pod_dict("there", labels={"app": "y"}, pod_affinity=[term(ZONE, "cache", namespaces=["infra"])]),
        pod_dict("all", labels={"app": "z"}, pod_affinity=[term(ZONE, "cache", namespaceSelector={})]),
    ]
    result = run(nodes, pods, running)
    assert placement(result, "here").phase == "Unschedulable"
    assert_scheduled(result, "there", "b1")
    assert_scheduled(result, "all", "b1")


def test_tolerating_gpu_pods_spread_over_zones_through_the_filters_they_pass():
    nodes = [
        zone_node(
            "a1", "a", gpus=1, taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
        ),
        zone_node(
            "b1", "b", gpus=1, taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
        ),
    ]
    pods = [
        pod_dict(f"g{i}", gpus=1, tolerations=[GPU_TOLERATION], labels={"app": "g"}, spread=[spread(app="g")])
        for i in range(3)
    ]
    result = run(nodes, pods)
    assert sorted(p.node or "-" for p in result.placements) == ["-", "a1", "b1"]
    assert placement(result, "g2").reason == (
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. "
        "no new claims to deallocate, preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("maxSkew", 0, "spec.topologySpreadConstraints[0].maxSkew: must be greater than zero, got 0"),
        (
            "whenUnsatisfiable",
            "Never",
            "spec.topologySpreadConstraints[0].whenUnsatisfiable: 'Never' is not one of",
        ),
        ("topologyKey", "", "spec.topologySpreadConstraints[0].topologyKey: can not be empty"),
        ("minDomains", 0, "spec.topologySpreadConstraints[0].minDomains: must be greater than zero"),
        (
            "nodeTaintsPolicy",
            "Sometimes",
            "spec.topologySpreadConstraints[0].nodeTaintsPolicy: 'Sometimes' is not one of",
        ),
        (
            "labelSelector",
            {"matchExpressions": [{"key": "app", "operator": "In"}]},
            "labelSelector.matchExpressions[0].values: must be specified when `operator` is 'In' or 'NotIn'",
        ),
        (
            "matchLabelKeys",
            ["app"],
            "matchLabelKeys[0]: 'app' exists in both matchLabelKeys and labelSelector",
        ),
    ],
)
def test_bad_spread_constraints_name_the_field(field, value, message):
    c = spread()
    c[field] = value
    with pytest.raises(InputError) as exc:
        parse_documents([pod_dict("p", spread=[c])], "work.yaml")
    assert message in exc.value.line()
    assert exc.value.line().startswith("work.yaml: Pod default/p: ")


def test_bad_affinity_terms_name_the_field():
    with pytest.raises(InputError) as exc:
        parse_documents(
            [pod_dict("p", pod_anti_affinity=[{"topologyKey": "", "labelSelector": {}}])], "w.yaml"
        )
    assert exc.value.line() == (
        "w.yaml: Pod default/p: spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
        ".topologyKey: can not be empty"
    )
    doc = pod_dict("p")
    doc["spec"]["affinity"] = {
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 101, "podAffinityTerm": term(ZONE, "x")}
            ]
        }
    }
    with pytest.raises(InputError) as exc:
        parse_documents([doc], "w.yaml")
    assert (
        "preferredDuringSchedulingIgnoredDuringExecution[0].weight: must be in the range 1-100"
        in exc.value.line()
    )


def test_explain_pod_of_a_constrained_pod_gives_the_placement_message():
    """What provisioning and doctor print for a pod left pending: the same words as its placement, from the
    array path and from the loop that classes with host ports take."""
    from builders import make_node, make_pod
    from kgpu.sim.scheduler.scheduler import Scheduler

    sched = Scheduler([make_node("a1", labels={ZONE: "a"}), make_node("b1", labels={ZONE: "b"}, cpu="1")])
    pods = [make_pod(f"p{i}", cpu="1", labels={"app": "train"}, spread=[spread()]) for i in range(4)]
    decisions = [sched.place(p) for p in pods]
    assert [d.node.name if d.node else None for d in decisions] == ["a1", "b1", "a1", None]
    expected = (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match pod topology spread constraints."
    )
    assert decisions[3].reason == expected
    assert sched.explain_pod(pods[3]) == expected
    ported = make_pod("q", cpu="1", labels={"app": "train"}, spread=[spread()])
    ported.spec = replace(ported.spec, host_ports=(HostPort(8080),))
    assert sched.place(ported).reason == expected
    assert sched.explain_pod(ported) == expected


def test_karpenter_never_binds_a_pod_where_its_anti_affinity_forbids():
    """Karpenter packs two pods that refuse to share a host into one claim (kgpu's Karpenter does not model
    pod anti-affinity); binding them goes through the scheduler's filters, so the second is not bound
    beside the first."""
    from kgpu.model.objects import LabelSelector, PodAffinityTerm, Requirement
    from test_provision_karpenter import GENERAL, make_pod, profile, sim

    term = PodAffinityTerm(HOST, LabelSelector((Requirement("app", "In", ("db",)),)))
    pods = []
    for i in range(2):
        pod = make_pod(f"db-{i}", cpu=500, mem_gib=0.5)
        pod.labels = {"app": "db"}
        pod.spec = replace(pod.spec, pod_anti_affinity=(term,))
        pods.append(pod)
    result = sim(profile(GENERAL), *pods)
    nodes = [p.node for p in result.placements if p.node]
    assert len(nodes) == len(set(nodes)) and nodes  # never two on one host
    for node in result.new_nodes:
        assert len([p for p in node.pods if p.labels.get("app") == "db"]) <= 1


def test_counters_that_start_late_count_as_a_walk_over_every_node():
    """A counter made at a Deployment's first pod takes the placed pods its selector can match from the
    scheduler's label index, not from every node: after binds, evictions and nodes that join (pods bound to
    them before and after the index first looks), its counts are those of a counter that walks every pod on
    every node."""
    import random

    from builders import make_node, make_pod
    from kgpu.model.objects import LabelSelector, Requirement, SpreadConstraint
    from kgpu.sim.scheduler.plugins.topology import AntiAffinityCounter, NodeCounter, SpreadCounter, Term
    from kgpu.sim.scheduler.scheduler import Scheduler

    rng = random.Random(5)
    apps = ["web", "db", "cache"]
    for case in range(20):
        nodes = [make_node(f"n{i}", cpu="64", labels={HOST: f"n{i}", ZONE: "abc"[i % 3]}) for i in range(6)]
        sched = Scheduler(nodes[:4])
        # the index is built for "app" by an early counter
        first = make_pod("first", cpu="10m", labels={"app": "web"}, spread=[spread(app="web")])
        sched.place(first)
        placed = []
        for step in range(60):
            roll = rng.random()
            if roll < 0.05 and len(sched.states) < len(nodes):
                sched.add_node(nodes[len(sched.states)])
            elif roll < 0.15 and placed:
                pod, st = placed.pop(rng.randrange(len(placed)))
                sched.unbind(pod, st)
            else:
                ns = rng.choice(["default", "ml"])
                pod = make_pod(f"p{step}", cpu="10m", namespace=ns, labels={"app": rng.choice(apps)})
                st = sched.states[rng.randrange(len(sched.states))]
                sched.bind(pod, st)
                placed.append((pod, st))
        app = rng.choice(apps)
        late = make_pod("late", cpu="10m", labels={"app": app}, spread=[spread(app=app)],
                        pod_anti_affinity=[term(HOST, app)])
        topo = sched.topology.prepare(late)
        selector = LabelSelector((Requirement("app", "In", (app,)),))
        walked = SpreadCounter("default", selector, SpreadConstraint(1, ZONE, "DoNotSchedule", selector),
                               (ZONE,), late.spec)
        walked.catch_up(sched.states)  # no index: every pod on every node
        assert topo.spread[0][1] == walked.domains, f"case {case}"
        anti = AntiAffinityCounter(Term(HOST, selector, frozenset({"default"}), None))
        anti.catch_up(sched.states)
        assert {k: v for k, v in topo.anti[0][1].items() if v} == {k: v for k, v in anti.counts.items() if v}, f"case {case}"
        hosts = NodeCounter("default", selector)
        hosts.catch_up(sched.states)
        by_index = NodeCounter("default", selector)
        by_index.catch_up(sched.states, sched.topology._index)
        assert by_index.counts == hosts.counts, f"case {case}"


def test_spread_pods_that_fit_nowhere_get_the_class_message_and_a_new_node_is_seen():
    """An exact-path pod with no node that passes the node filters and has room: the message is the
    class's (no topology counts in it), and it is worked out again when nodes join or pods leave."""
    from builders import make_node, make_pod
    from kgpu.sim.scheduler.scheduler import Scheduler

    sched = Scheduler([make_node("a1", cpu="2", labels={ZONE: "a"}), make_node("b1", cpu="2", labels={ZONE: "b"})])
    pods = [make_pod(f"p{i}", cpu="2", labels={"app": "train"}, spread=[spread()]) for i in range(5)]
    assert [d.node.name if d.node else None for d in map(sched.place, pods[:2])] == ["a1", "b1"]
    assert sched.place(pods[2]).reason == "0/2 nodes are available: 2 Insufficient cpu."
    assert sched.explain_pod(pods[2]) == "0/2 nodes are available: 2 Insufficient cpu."
    sched.add_node(make_node("c1", cpu="2", labels={ZONE: "c"}))
    decision = sched.place(pods[3])
    assert decision.node is not None and decision.node.name == "c1"
    assert sched.place(pods[4]).reason == "0/3 nodes are available: 3 Insufficient cpu."
    sched.unbind(pods[0], sched.by_name["a1"])
    decision = sched.place(pods[4])
    assert decision.node is not None and decision.node.name == "a1"
