"""Cost, the LP lower bound, scale to zero, and TKE super-node provisioning details."""

from __future__ import annotations

from dataclasses import dataclass

from kgpu.model.inputs import Objects
from kgpu.model.load import parse_text
from kgpu.model.profile import builtin_profile
from kgpu.sim.cost import Demand, _lp_bound, hourly_cost, lower_bound, per_resource_bound
from kgpu.sim.provisioners.provision import baseline_nodes, provisioner_for
from kgpu.sim.provisioners.scale_down import empty_gpu_nodes
from kgpu.sim.scheduler.scheduler import Scheduler
from kgpu.sim.simulate import simulate


@dataclass
class N:
    hourly_price: float | None
    on_demand_price: float | None
    capacity_type: str


def test_hourly_cost_splits_spot_and_on_demand() -> None:
    cost = hourly_cost([N(0.3, 1.0, "spot"), N(1.0, 1.0, "on-demand"), N(None, None, "on-demand")])
    assert cost["total"] == 1.3 and cost["spot"] == 0.3 and cost["on_demand"] == 1.0
    assert cost["all_on_demand"] == 2.0 and cost["savings"] == 0.7
    assert cost["unpriced_nodes"] == 1


def test_lp_bound_is_fractional_cover() -> None:
    """10 one-unit pods; offering 0 holds 4 for $1, offering 1 holds 1 for $0.3: LP picks 2.5 x $1."""
    demands = [Demand(10, (1,), (0, 1))]
    value, status = _lp_bound(demands, [(4,), (1,)], [1.0, 0.3])
    assert value is not None and abs(value - 2.5) < 1e-6 and status == "Optimal"
    bound = lower_bound(demands, [(4,), (1,)], [1.0, 0.3])
    assert bound.method == "lp" and abs(bound.value - 2.5) < 1e-6 and bound.dropped == ()
    assert abs(per_resource_bound(demands, [(4,), (1,)], [1.0, 0.3]) - 2.5) < 1e-6


def test_pods_no_offering_hosts_are_left_out_of_the_bound_and_reported() -> None:
    """A kind with no compatible offering used to make the LP infeasible, read back as a bound of 0."""
    demands = [Demand(10, (1, 0), (0,)), Demand(3, (0, 1), ())]
    bound = lower_bound(demands, [(4, 0)], [1.0])
    assert bound.method == "lp" and abs(bound.value - 2.5) < 1e-6
    assert bound.dropped == (1,) and bound.dropped_pods == 3


def test_a_solver_status_other_than_optimal_falls_back_to_the_per_resource_bound() -> None:
    """An offering that cannot hold the demand's second resource: the LP is infeasible, HiGHS says so,
    and the bound is the per-resource one instead of the solver's objective."""
    demands = [Demand(10, (1, 1), (0,))]
    value, status = _lp_bound(demands, [(4, 0)], [1.0])
    assert value is None and status == "Infeasible"
    bound = lower_bound(demands, [(4, 0)], [1.0])
    assert bound.method == "per-resource" and bound.status == "Infeasible"
    assert abs(bound.value - 2.5) < 1e-6


def test_empty_existing_gpu_node_is_reported_with_its_remover() -> None:
    profile = builtin_profile("eks-eksctl")
    nodes = [n for n in baseline_nodes(profile)]
    gpu = [n for n in nodes if n.allocatable.get("nvidia.com/gpu")]
    assert not gpu  # GPU groups start at zero
    from kgpu.sim.provisioners.cluster_autoscaler import group_node
    from kgpu.sim.provisioners.provision import provisioner_for as _p

    catalog = _p(profile).catalog
    assert catalog is not None
    node = group_node(profile, profile.pool("gpu-spot-ng"), "gpu-spot-ng-a", "us-west-2a", "g1", catalog)[0]
    sched = Scheduler([*nodes, node])
    (entry,) = empty_gpu_nodes(profile, sched, {})
    assert entry["node"] == "g1" and entry["removed_by"] == "cluster-autoscaler" and entry["after"] == "10m"


def test_karpenter_consolidate_after_reported() -> None:
    profile = builtin_profile("eks-karpenter")
    doc = b"""
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  nodeSelector: {node-type: gpu}
  containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]
"""
    result = simulate(Objects(), parse_text(doc, "p.yaml"), provisioner=provisioner_for(profile))
    assert "scale_to_zero" not in result.extra  # the new node is busy
    sched = Scheduler([])
    assert empty_gpu_nodes(profile, sched, {}) == []
    node = result.nodes[0].node
    (entry,) = empty_gpu_nodes(profile, Scheduler([node]), {})
    assert (entry["pool"], entry["removed_by"], entry["after"]) == ("gpu", "karpenter", "30s")
