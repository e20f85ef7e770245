"""What Karpenter launches (Scheduler.Solve of sigs.k8s.io/karpenter v1.8, pkg/controllers/provisioning/
scheduling/scheduler.go) and the consolidated steady state kgpu shows beside it.

- a new NodeClaim keeps every instance type that holds its pods, so later pods join it and it grows to a
  bigger type; the cheapest offering that holds them all is launched (``NodeClaim.CanAdd``);
- before each pod, in-flight claims are sorted by pod count (``Scheduler.add``: ``sort.Slice`` on
  ``len(Pods)``), so the emptiest claim that can take the pod gets it;
- beside the launch, the second view ``karpenter_consolidated`` says where Karpenter's disruption
  controller takes it (tests/test_karpenter_disruption.py): for a launch nothing has changed since, it keeps
  it, because Solve already launched the cheapest node that holds each claim's pods.
"""

from __future__ import annotations

from pathlib import Path

from builders import pod_dict
from kgpu.sim.simulate import PROVISIONED
from test_karpenter_claims import run
from test_provision_karpenter import GENERAL, make_pod, profile, sim

ON_DEMAND = {**GENERAL, "capacityTypes": ["on-demand"]}


def test_a_claim_grows_to_hold_later_pods() -> None:
    """Three 3-core pods: Karpenter's first claim takes all three and launches m5.4xlarge, the cheapest type
    that holds 9 cores (kgpu used to cap the claim at m5.xlarge, one pod each, and launch three nodes)."""
    result = sim(profile(ON_DEMAND), *(make_pod(f"p-{i}", cpu=3000, mem_gib=2) for i in range(3)))
    assert all(p.phase == PROVISIONED for p in result.placements)
    assert [(n.instance_type, len(n.pods)) for n in result.new_nodes] == [("m5.4xlarge", 3)]
    assert result.summary()["hourly_cost"] == 0.768


def test_consolidation_keeps_a_launch_it_cannot_replace_with_one_cheaper_node() -> None:
    """The same three pods: three m5.xlarge ($0.576/h) would be cheaper than the m5.4xlarge ($0.768/h), but
    Karpenter replaces a node with at most one node, and no single cheaper node holds the three pods: the
    steady state is the launch, and the view says why."""
    result = sim(profile(ON_DEMAND), *(make_pod(f"p-{i}", cpu=3000, mem_gib=2) for i in range(3)))
    view = result.extra["karpenter_consolidated"]
    assert view["steps"] == []
    assert view["hourly_cost"] == view["launch_hourly_cost"] == 0.768
    assert view["saving"] == 0
    assert [n["instance_type"] for n in view["new_nodes"]] == ["m5.4xlarge"]
    assert view["kept"] == ["general-1: no instance type is cheaper than the node(s) it would replace"]


def test_consolidated_view_is_the_launch_when_nothing_is_cheaper() -> None:
    """One small pod: the launch is already the cheapest node; consolidation saves nothing."""
    result = sim(profile(ON_DEMAND), make_pod("a", cpu=500))
    view = result.extra["karpenter_consolidated"]
    assert view["hourly_cost"] == view["launch_hourly_cost"] == 0.096
    assert view["saving"] == 0 and view["steps"] == []
    assert [n["instance_type"] for n in view["new_nodes"]] == ["m5.large"]


def test_in_flight_claims_are_tried_emptiest_first() -> None:
    """Two claims, one per zone (each 10-core pod selects its zone, and no type holds two); a 1-core pod for
    zone a joins the first, so it has two pods; then a pod that can go anywhere joins the emptier claim, the
    one in zone b, not the first one created."""
    zone = "topology.kubernetes.io/zone"
    pods = [
        make_pod("big-a", cpu=10000, selector={zone: "us-west-2a"}),
        make_pod("big-b", cpu=10000, selector={zone: "us-west-2b"}),
        make_pod("small-a", cpu=1000, selector={zone: "us-west-2a"}),
        make_pod("any", cpu=500),
    ]
    result = sim(profile(ON_DEMAND), *pods)
    by_zone = {n.zone: sorted(p.name for p in n.pods) for n in result.new_nodes}
    assert by_zone == {"us-west-2a": ["big-a", "small-a"], "us-west-2b": ["any", "big-b"]}


def test_identical_pods_fill_in_flight_claims_evenly() -> None:
    """Pods that fit every in-flight claim go one at a time to the claim with the fewest pods, so four
    half-core pods after two zonal 10-core pods land two and two (creation order would put all four on the
    first claim)."""
    zone = "topology.kubernetes.io/zone"
    pods = [
        make_pod("big-a", cpu=10000, selector={zone: "us-west-2a"}),
        make_pod("big-b", cpu=10000, selector={zone: "us-west-2b"}),
        *(make_pod(f"w-{i}", cpu=500) for i in range(4)),
    ]
    result = sim(profile(ON_DEMAND), *pods)
    assert sorted(len(n.pods) for n in result.new_nodes) == [3, 3]


def test_simulate_json_carries_the_consolidated_view(tmp_path: Path) -> None:
    """`kgpu simulate -o json`: the launch is the result (new_nodes, cost); where Karpenter's disruption
    controller takes it is beside it (here: it keeps it)."""
    pods = [pod_dict(f"p-{i}", cpu="3", memory="2Gi") for i in range(3)]
    _, data = run(tmp_path, pods)
    view = data["karpenter_consolidated"]
    assert view["launch_hourly_cost"] == data["cost"]["total"] == view["hourly_cost"]
    assert view["steps"] == [] and view["saving"] == 0 and view["modelled"] is True
    assert sorted(n["name"] for n in view["new_nodes"]) == sorted(n["name"] for n in data["new_nodes"])
