"""The seeds' scenarios, end to end through simulate with a profile's provisioner."""

from __future__ import annotations

from collections import Counter

from kgpu.model.examples import example_files
from kgpu.model.inputs import Objects
from kgpu.model.load import parse_text
from kgpu.model.profile import builtin_profile, parse_profile
from kgpu.sim.provisioners.provision import baseline_nodes, provisioner_for
from kgpu.sim.simulate import PROVISIONED, SCHEDULED, SimulationResult, simulate


def example(name: str) -> Objects:
    data = dict(example_files())[name]
    return parse_text(data, name)


def run(profile_name: str, work: Objects, baseline: bool = False) -> SimulationResult:
    profile = builtin_profile(profile_name)
    cluster = Objects()
    if baseline:
        cluster.nodes.extend(baseline_nodes(profile))
    return simulate(cluster, work, provisioner=provisioner_for(profile))


def test_seed_000_pytorch_job_on_tainted_karpenter_gpu_pool_with_spot() -> None:
    """Seed 000: the PyTorch Job tolerates nvidia.com/gpu and selects node-type=gpu: a spot GPU node."""
    result = run("eks-karpenter", example("000-pytorch-training.yaml"))
    (p,) = result.placements
    assert p.phase == PROVISIONED
    data = p.as_dict()
    assert data["pool"] == "gpu"
    assert data["capacity_type"] == "spot"
    assert data["instance_type"].split(".")[0] in ("g4dn", "g5", "g6", "p3")
    node = result.new_nodes[0]
    assert node.hourly_price and node.hourly_price > 0
    assert result.summary()["hourly_cost"] == round(node.hourly_price, 4)


def test_seed_001_cuda_vector_add_spot_groups_from_zero_across_three_zones() -> None:
    """Seed 001: 10 replicas on per-zone spot GPU groups scaled from zero, balanced over 3 zones."""
    result = run("eks-eksctl", example("001-cuda-vector-add.yaml"), baseline=True)
    assert all(p.phase == PROVISIONED for p in result.placements)
    zones = Counter(n.zone for n in result.new_nodes)
    assert set(zones) == {"us-west-2a", "us-west-2b", "us-west-2c"}
    assert max(zones.values()) - min(zones.values()) <= 1
    assert {n.capacity_type for n in result.new_nodes} == {"spot"}
    assert {n.instance_type for n in result.new_nodes} == {"p3.2xlarge"}
    assert {n.pool for n in result.new_nodes} == {"gpu-spot-ng"}


def test_seed_003_tke_super_node_pod_gets_its_own_virtual_node() -> None:
    """Seed 003: a GPU pod with gpu-type T4 gets a virtual node sized by the matched spec, no price."""
    doc = b"""
apiVersion: apps/v1
kind: Deployment
metadata: {name: gpu-app}
spec:
  replicas: 2
  template:
    metadata:
      annotations: {eks.tke.cloud.tencent.com/gpu-type: T4}
    spec:
      nodeSelector: {type: virtual-kubelet}
      tolerations: [{key: serverless, operator: Exists, effect: NoSchedule}]
      containers:
      - name: c
        image: nvidia/cuda
        resources: {limits: {nvidia.com/gpu: 1, cpu: "4", memory: 16Gi}}
"""
    result = run("tke-supernode", parse_text(doc, "tke.yaml"))
    assert [p.phase for p in result.placements] == [PROVISIONED, PROVISIONED]
    assert len(result.new_nodes) == 2
    node = result.new_nodes[0]
    assert node.pool == "supernode" and node.hourly_price is None
    assert node.instance_type.startswith("T4 1x")
    assert result.extra["cost"]["unpriced_nodes"] == 2


def test_seed_003_bad_memory_annotation_stays_pending_with_tke_wording() -> None:
    """Seed 003's error table: mem must be whole Gi."""
    doc = b"""
apiVersion: v1
kind: Pod
metadata:
  name: bad
  annotations: {eks.tke.cloud.tencent.com/gpu-type: T4, eks.tke.cloud.tencent.com/gpu-count: "1",
                eks.tke.cloud.tencent.com/cpu: "8", eks.tke.cloud.tencent.com/mem: 32G}
spec:
  tolerations: [{key: serverless, operator: Exists, effect: NoSchedule}]
  containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]
"""
    result = run("tke-supernode", parse_text(doc, "bad.yaml"))
    (p,) = result.placements
    assert p.phase == "Unschedulable"
    assert "Invalid memory format" in (p.reason or "")


def test_seed_004_ray_gpu_worker_on_tainted_g5_group() -> None:
    """Seed 004: the Ray GPU worker tolerates ray.io/node-type=worker and lands on a g5.xlarge node."""
    profile = parse_profile(
        {
            "metadata": {"name": "ray"},
            "provider": "eks",
            "autoscaler": "cluster-autoscaler",
            "cluster": {"zones": ["us-west-2a"]},
            "pools": [
                {
                    "name": "cpu-node-group",
                    "kind": "nodegroup",
                    "instanceTypes": ["m5.xlarge"],
                    "maxSize": 1,
                    "labels": {"ray.io/node-type": "head"},
                },
                {
                    "name": "gpu-node-group",
                    "kind": "nodegroup",
                    "instanceTypes": ["g5.xlarge"],
                    "maxSize": 1,
                    "labels": {"ray.io/node-type": "worker"},
                    "amiFamily": "BottlerocketNvidia",
                    "taints": [{"key": "ray.io/node-type", "value": "worker", "effect": "NoSchedule"}],
                },
            ],
        }
    )
    result = simulate(Objects(), example("004-raycluster.yaml"), provisioner=provisioner_for(profile))
    by_name = {p.pod.name: p.as_dict() for p in result.placements}
    worker = by_name["raycluster-gpu-gpu-group-worker-0"]
    assert worker["phase"] == PROVISIONED
    assert worker["instance_type"] == "g5.xlarge" and worker["pool"] == "gpu-node-group"
    head = by_name["raycluster-gpu-head-0"]
    assert head["pool"] == "cpu-node-group"


def test_seed_004_kuberay_template_baseline_runs_head_and_worker() -> None:
    """The kuberay template's groups start at desired size 1: head and worker run on existing nodes."""
    result = run("kuberay", example("004-raycluster.yaml"), baseline=True)
    assert {p.phase for p in result.placements} == {SCHEDULED}
    nodes = {p.pod.name: p.node for p in result.placements}
    assert nodes["raycluster-gpu-gpu-group-worker-0"].startswith("gpu-node-group")
