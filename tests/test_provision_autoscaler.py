"""cluster-autoscaler node groups: templates from ASG tags, scale from zero, max size, least-waste."""

from __future__ import annotations

from typing import Any

from kgpu.model.inputs import Objects
from kgpu.model.load import parse_text
from kgpu.model.profile import Profile, parse_profile
from kgpu.sim.provisioners.cluster_autoscaler import asg_tags, template_from_tags
from kgpu.sim.provisioners.provision import provisioner_for
from kgpu.sim.simulate import PROVISIONED, UNSCHEDULABLE, SimulationResult, simulate

GPU_GROUP = {
    "name": "gpu-ng",
    "kind": "nodegroup",
    "instanceTypes": ["g4dn.xlarge"],
    "capacityTypes": ["spot"],
    "maxSize": 2,
    "labels": {"nvidia.com/gpu": "true"},
    "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
}


def profile(*pools: dict[str, Any]) -> Profile:
    return parse_profile(
        {
            "metadata": {"name": "ca"},
            "provider": "eks",
            "autoscaler": "cluster-autoscaler",
            "cluster": {"zones": ["us-west-2a"]},
            "pools": list(pools),
        }
    )


def pods(selector: str, replicas: int = 1, tolerate: bool = True) -> Objects:
    tol = "tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]" if tolerate else ""
    doc = f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: vec}}
spec:
  replicas: {replicas}
  template:
    spec:
      nodeSelector: {selector}
      {tol}
      containers: [{{name: c, image: x, resources: {{limits: {{nvidia.com/gpu: 1}}}}}}]
"""
    return parse_text(doc.encode(), "w.yaml")


def run(prof: Profile, work: Objects) -> SimulationResult:
    return simulate(Objects(), work, provisioner=provisioner_for(prof))


def test_template_tags_parse_like_cluster_autoscaler() -> None:
    tags = {
        "k8s.io/cluster-autoscaler/node-template/label/nvidia.com/gpu": "true",
        "k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu": "true:NoSchedule",
        "k8s.io/cluster-autoscaler/node-template/taint/dedicated": "nvidia.com/gpu=true",  # seed 001's: no effect
        "k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu": "4",
    }
    labels, taints, res = template_from_tags(tags)
    assert labels == {"nvidia.com/gpu": "true"}
    assert [(t.key, t.value, t.effect) for t in taints] == [("nvidia.com/gpu", "true", "NoSchedule")]
    assert res == {"nvidia.com/gpu": 4}


def test_scale_from_zero_with_label_tags() -> None:
    result = run(profile(GPU_GROUP), pods('{"nvidia.com/gpu": "true"}', replicas=2))
    assert [p.phase for p in result.placements] == [PROVISIONED, PROVISIONED]
    assert {n.instance_type for n in result.new_nodes} == {"g4dn.xlarge"}
    assert {n.capacity_type for n in result.new_nodes} == {"spot"}


def test_max_size_reached_in_cluster_autoscaler_words() -> None:
    result = run(profile(GPU_GROUP), pods('{"nvidia.com/gpu": "true"}', replicas=3))
    assert len(result.new_nodes) == 2
    (p,) = result.unschedulable
    assert "cluster-autoscaler: pod didn't trigger scale-up: 1 max node group size reached" in (
        p.reason or ""
    )


def test_missing_node_template_label_tag_is_the_seed_001_trap() -> None:
    """Nodes get eksctl's cluster-name label, but no ASG tag declares it: no scale-up from zero."""
    result = run(profile(GPU_GROUP), pods('{"alpha.eksctl.io/cluster-name": "gpu-cluster"}'))
    (p,) = result.placements
    assert p.phase == UNSCHEDULABLE
    reason = p.reason or ""
    assert "pod didn't trigger scale-up: 1 node(s) didn't match Pod's node affinity/selector" in reason
    assert "k8s.io/cluster-autoscaler/node-template/label/alpha.eksctl.io/cluster-name" in reason


def test_eksctl_group_name_label_is_tagged_so_pods_may_select_a_group_by_it() -> None:
    """kgpu render tags every unmanaged group with node-template/label/alpha.eksctl.io/nodegroup-name, so a
    pod selecting the group by eksctl's own label scales it up from zero."""
    result = run(profile(GPU_GROUP), pods('{"alpha.eksctl.io/nodegroup-name": "gpu-ng"}'))
    (p,) = result.placements
    assert p.phase != UNSCHEDULABLE, p.reason
    assert result.new_nodes[0].pool == "gpu-ng"


def test_asg_tag_overriding_a_label_blocks_scale_up() -> None:
    group = {
        **GPU_GROUP,
        "asgTags": {"k8s.io/cluster-autoscaler/node-template/label/nvidia.com/gpu": "false"},
    }
    assert (
        asg_tags(profile(group), profile(group).pools[0])[
            "k8s.io/cluster-autoscaler/node-template/label/nvidia.com/gpu"
        ]
        == "false"
    )
    (p,) = run(profile(group), pods('{"nvidia.com/gpu": "true"}')).placements
    assert p.phase == UNSCHEDULABLE and "didn't trigger scale-up" in (p.reason or "")


def test_untolerated_taint_counted_per_group() -> None:
    (p,) = run(profile(GPU_GROUP), pods('{"nvidia.com/gpu": "true"}', tolerate=False)).placements
    assert "pod didn't trigger scale-up: 1 node(s) had untolerated taint(s)" in (
        p.reason or ""
    )


def test_per_zone_groups_are_balanced() -> None:
    prof = parse_profile(
        {
            "metadata": {"name": "ca"},
            "provider": "eks",
            "autoscaler": "cluster-autoscaler",
            "cluster": {"zones": ["us-west-2a", "us-west-2b", "us-west-2c"]},
            "pools": [{**GPU_GROUP, "perZone": True, "maxSize": 10}],
        }
    )
    result = run(prof, pods('{"nvidia.com/gpu": "true"}', replicas=6))
    zones = sorted(n.zone for n in result.new_nodes)
    assert zones == ["us-west-2a"] * 2 + ["us-west-2b"] * 2 + ["us-west-2c"] * 2
    assert sorted({n.name.rsplit("-", 1)[0] for n in result.new_nodes}) == [
        "gpu-ng-a",
        "gpu-ng-b",
        "gpu-ng-c",
    ]
