"""Karpenter's disruption controller over the nodes it launched (sigs.k8s.io/karpenter v1.8
pkg/controllers/disruption): what it does, and what it never does.

The trigger of consolidation is a cluster that changed after the launch (a Deployment scaled down, a job
finished): each case launches with Karpenter's Solve, takes some pods away, and asks where the controller
takes the nodes. A node is never turned into several, a replacement is always one node cheaper than what it
replaces, and the pool's policy, consolidateAfter, spot rules and do-not-disrupt pods are read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from kgpu.model.objects import Pod
from kgpu.sim.provisioners.karpenter.disruption import EMPTINESS, MULTI, SINGLE, Disruption, eviction_cost
from kgpu.sim.provisioners.karpenter.solve import Karpenter
from kgpu.sim.provisioners.pools import Context, karpenter_order
from kgpu.sim.scheduler.scheduler import Scheduler
from test_provision_karpenter import CAT, GENERAL, make_pod, profile

ON_DEMAND = {**GENERAL, "capacityTypes": ["on-demand"]}


def disrupt(
    pool: dict[str, Any],
    pods: Sequence[Pod],
    keep: Callable[[Pod], bool],
    *,
    spot_to_spot: bool = False,
    swap: Callable[[Pod], Pod] | None = None,
) -> tuple[list[tuple[str, str, float | None]], dict[str, Any]]:
    """Launch ``pods`` with Solve, keep those ``keep`` says (``swap`` replaces each kept pod), and run the
    disruption controller. Returns the launch (name, type, price) and the controller's view."""
    prof = profile(pool)
    karpenter = Karpenter(prof, CAT)
    sched = Scheduler([])
    ctx = Context(sched, prof, CAT, [])
    karpenter.provision(karpenter_order(pods), ctx)
    new = {n.name: n for n in ctx.new_nodes}
    launched = []
    for st in sched.states:
        left = [p for p in st.pods if keep(p)]
        launched.append((st.node, [swap(p) for p in left] if swap else left, new[st.name]))
    launch = [(n.name, n.instance_type, n.hourly_price) for n in ctx.new_nodes]
    return launch, Disruption(karpenter, [], launched, ctx, spot_to_spot=spot_to_spot).run()


def assert_karpenter_rules(view: dict[str, Any]) -> None:
    """What every command of Karpenter's controller satisfies."""
    for step in view["steps"]:
        rep = step["replacement"]
        if step["method"] == EMPTINESS:
            assert rep is None
        if rep is not None:
            # one node, strictly cheaper than what it replaces
            assert rep["hourly_price"] < sum(n["hourly_price"] for n in step["nodes"])
        assert step["hourly_saving"] > 0
    assert round(view["launch_hourly_cost"] - view["hourly_cost"], 4) == view["saving"]


def test_a_scaled_down_node_is_replaced_by_one_cheaper_node() -> None:
    """Three 3-core pods launch one m5.4xlarge; two go away: single-node consolidation replaces the node
    with the cheapest one that holds the last pod, and the pod moves there."""
    pods = [make_pod(f"p-{i}", cpu=3000, mem_gib=2) for i in range(3)]
    launch, view = disrupt(ON_DEMAND, pods, lambda p: p.name == "p-0")
    assert [t for _, t, _ in launch] == ["m5.4xlarge"]
    assert [(s["method"], s["decision"]) for s in view["steps"]] == [(SINGLE, "replace")]
    assert [(n["instance_type"], n["pods"]) for n in view["new_nodes"]] == [("m5.xlarge", ["default/p-0"])]
    assert (view["launch_hourly_cost"], view["hourly_cost"], view["saving"]) == (0.768, 0.192, 0.576)
    assert_karpenter_rules(view)


def test_consolidation_never_splits_a_node_into_several() -> None:
    """The same three pods, all still running: three m5.xlarge would cost $0.576/h against the launch's
    $0.768/h, but that needs three new nodes for one, which Karpenter never does; nothing cheaper holds all
    three, so it keeps the launch and says why."""
    pods = [make_pod(f"p-{i}", cpu=3000, mem_gib=2) for i in range(3)]
    _, view = disrupt(ON_DEMAND, pods, lambda p: True)
    assert view["steps"] == []
    assert view["hourly_cost"] == view["launch_hourly_cost"] == 0.768
    assert [n["instance_type"] for n in view["new_nodes"]] == ["m5.4xlarge"]
    assert view["kept"] == ["general-1: no instance type is cheaper than the node(s) it would replace"]


def test_an_emptied_node_is_deleted_whatever_the_policy() -> None:
    """Emptiness comes first and both policies do it: a node whose pods all went away is deleted."""
    pods = [make_pod(f"b-{i}", cpu=10000, mem_gib=2) for i in range(2)] + [make_pod("s", cpu=500)]
    for policy in ("WhenEmpty", "WhenEmptyOrUnderutilized"):
        pool = {**ON_DEMAND, "consolidation": {"policy": policy, "after": "30s"}}
        launch, view = disrupt(pool, pods, lambda p: p.name != "b-1")
        assert len(launch) == 2
        assert [(s["method"], s["decision"]) for s in view["steps"]] == [(EMPTINESS, "delete")]
        assert len(view["new_nodes"]) == 1
        assert_karpenter_rules(view)


def test_when_empty_never_replaces_an_underutilized_node() -> None:
    pods = [make_pod(f"p-{i}", cpu=3000, mem_gib=2) for i in range(3)]
    pool = {**ON_DEMAND, "consolidation": {"policy": "WhenEmpty", "after": "30s"}}
    _, view = disrupt(pool, pods, lambda p: p.name == "p-0")
    assert view["steps"] == []
    assert view["kept"] == ["nodepool general: consolidationPolicy WhenEmpty removes empty nodes only"]


def test_consolidate_after_never_disables_even_emptiness() -> None:
    pods = [make_pod(f"b-{i}", cpu=10000, mem_gib=2) for i in range(2)] + [make_pod("s", cpu=500)]
    pool = {**ON_DEMAND, "consolidation": {"policy": "WhenEmptyOrUnderutilized", "after": "Never"}}
    _, view = disrupt(pool, pods, lambda p: p.name != "b-1")
    assert view["steps"] == []
    assert view["kept"] == ["nodepool general: consolidateAfter Never"]


def test_a_pod_moves_to_a_node_with_room_and_its_node_is_deleted() -> None:
    """Four 5-core pods: Solve fills its two claims emptiest first, two pods on each m5.4xlarge. One pod goes
    away: its node is cheapest to disrupt (one pod against two), that pod fits in the other node's room, and
    the node is deleted without a replacement."""
    pods = [make_pod(f"p-{i}", cpu=5000, mem_gib=2) for i in range(4)]
    launch, view = disrupt(ON_DEMAND, pods, lambda p: p.name != "p-0")
    assert [t for _, t, _ in launch] == ["m5.4xlarge", "m5.4xlarge"]
    alone = next(n for n in view["steps"][0]["nodes"]) if view["steps"] else None
    assert [(s["method"], s["decision"], len(s["nodes"])) for s in view["steps"]] == [(SINGLE, "delete", 1)]
    assert alone is not None and alone["name"] not in {n["name"] for n in view["new_nodes"]}
    assert [(n["instance_type"], len(n["pods"])) for n in view["new_nodes"]] == [("m5.4xlarge", 3)]
    assert_karpenter_rules(view)


def test_multi_node_consolidation_deletes_as_many_as_the_budget_allows_then_one_at_a_time() -> None:
    """Eleven m5.4xlarge, each left with one 1-core pod: the default budget (10 % of 11 nodes, rounded up: 2)
    lets multi-node consolidation delete two at once; then single-node consolidation deletes one node per
    command until one node holds all eleven pods."""
    pods = [make_pod(f"w-{i:02}", cpu=9000, mem_gib=2) for i in range(11)]
    launch, view = disrupt(
        ON_DEMAND, pods, lambda p: True, swap=lambda p: replace(p, spec=make_pod("x", cpu=1000).spec)
    )
    assert len(launch) == 11
    methods = [(s["method"], s["decision"], len(s["nodes"])) for s in view["steps"]]
    assert methods[0] == (MULTI, "delete", 2)
    assert methods[1:] == [(SINGLE, "delete", 1)] * 8
    assert [(n["instance_type"], len(n["pods"])) for n in view["new_nodes"]] == [("m5.4xlarge", 11)]
    assert_karpenter_rules(view)


def test_spot_nodes_are_not_replaced_without_the_spot_to_spot_feature_gate() -> None:
    pods = [make_pod(f"p-{i}", cpu=3000, mem_gib=2) for i in range(3)]
    launch, view = disrupt(GENERAL, pods, lambda p: p.name == "p-0")
    assert launch == [("general-1", "m5.4xlarge", 0.32)]
    assert view["steps"] == []
    assert view["kept"] == [
        "general-1: spot nodes are replaced only with the SpotToSpotConsolidation feature gate (off by default)"
    ]
    # with the gate, Karpenter still needs 15 cheaper spot types to choose from
    _, gated = disrupt(GENERAL, pods, lambda p: p.name == "p-0", spot_to_spot=True)
    assert gated["steps"] == []
    assert gated["kept"][0].startswith("general-1: spot-to-spot consolidation needs 15 cheaper spot instance types")


def test_a_do_not_disrupt_pod_keeps_its_node() -> None:
    pods = [make_pod(f"p-{i}", cpu=3000, mem_gib=2) for i in range(3)]
    guard = {"karpenter.sh/do-not-disrupt": "true"}
    _, view = disrupt(ON_DEMAND, pods, lambda p: p.name == "p-0", swap=lambda p: replace(p, annotations=guard))
    assert view["steps"] == []
    assert view["kept"] == ["general-1: a pod has karpenter.sh/do-not-disrupt"]


def test_eviction_cost_follows_priority_and_deletion_cost() -> None:
    pod = make_pod("a")
    assert eviction_cost(pod) == 1.0
    assert eviction_cost(replace(pod, priority=2**25)) == 2.0
    assert eviction_cost(replace(pod, annotations={"controller.kubernetes.io/pod-deletion-cost": str(2**27)})) == 2.0
    assert eviction_cost(replace(pod, priority=2**30)) == 10.0
    assert eviction_cost(replace(pod, priority=-(2**30))) == -10.0
