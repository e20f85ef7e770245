"""Provisioning for profile pools with ``gpuAllocation: dra``: new nodes publish the ResourceSlices NVIDIA's
driver would and advertise no nvidia.com/gpu; Karpenter v1.8 rejects pods with claims (its default), and
they land on nodes launched for other pods; cluster-autoscaler scales a DRA group for a claim only when the
group has a node to copy slices from (kubernetes/autoscaler#10277), up to its maxSize."""

from __future__ import annotations

from typing import Any

from kgpu.model.inputs import Objects
from kgpu.model.load import parse_text
from kgpu.model.profile import Profile, parse_profile
from kgpu.sim.plan import plan
from kgpu.sim.provisioners.dra_pools import KARPENTER_DRA_ERROR
from kgpu.sim.provisioners.pools import profile_daemonsets
from kgpu.sim.provisioners.provision import baseline_nodes, provisioner_for
from kgpu.sim.simulate import PROVISIONED, SCHEDULED, UNSCHEDULABLE, SimulationResult, simulate

TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
TEMPLATE = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com}
"""


def profile(autoscaler: str, **pool: Any) -> Profile:
    kind = "karpenter" if autoscaler == "karpenter" else "nodegroup"
    return parse_profile({
        "metadata": {"name": "dra"}, "provider": "eks", "autoscaler": autoscaler,
        "cluster": {"zones": ["us-west-2a"], "kubernetesVersion": "1.34"},
        "pools": [{"name": "gpu", "kind": kind, "gpuAllocation": "dra", "instanceTypes": ["g5.xlarge"],
                   "taints": [TAINT], **pool}],
    })


def claim_pod(name: str, template: str = "one-gpu") -> str:
    return f"""
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  tolerations: [{{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}]
  resourceClaims: [{{name: gpu, resourceClaimTemplateName: {template}}}]
  containers: [{{name: c, image: x, resources: {{claims: [{{name: gpu}}], requests: {{cpu: "1"}}}}}}]
"""


def plain_pod(name: str, gpus: int = 0) -> str:
    limits = f", limits: {{nvidia.com/gpu: {gpus}}}" if gpus else ""
    return f"""
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  nodeSelector: {{karpenter.sh/nodepool: gpu}}
  tolerations: [{{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}]
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: "1"}}{limits}}}}}]
"""


def run(prof: Profile, text: str) -> SimulationResult:
    return simulate(Objects(), parse_text(text.encode(), "w.yaml"), provisioner=provisioner_for(prof))


def by_name(result: SimulationResult) -> dict[str, Any]:
    return {p.pod.name: p for p in result.placements}


def test_karpenter_rejects_a_claim_pod_with_its_own_words_and_launches_nothing() -> None:
    result = run(profile("karpenter"), TEMPLATE + claim_pod("train"))
    p = by_name(result)["train"]
    assert p.phase == UNSCHEDULABLE
    assert f"karpenter: Failed to schedule pod, {KARPENTER_DRA_ERROR}" in (p.reason or "")
    assert result.new_nodes == []
    assert not [w for w in p.warnings if w.code == "dra"]  # modelled: the profile's DeviceClasses are there


def test_a_claim_pod_lands_on_a_node_karpenter_launched_for_another_pod() -> None:
    result = run(profile("karpenter"), TEMPLATE + claim_pod("train") + plain_pod("web"))
    pods = by_name(result)
    (node,) = result.new_nodes
    assert pods["web"].phase == PROVISIONED and pods["web"].node == node.name
    train = pods["train"]
    assert train.phase == PROVISIONED and train.node == node.name
    assert train.devices == [{"claim": "train-gpu", "request": "gpu", "driver": "gpu.nvidia.com",
                              "pool": node.name, "device": "gpu-0"}]
    st = next(s for s in result.nodes if s.node.name == node.name)
    assert "nvidia.com/gpu" not in st.node.allocatable  # no device plugin on a DRA pool


def test_nvidia_gpu_limits_on_a_dra_pool_wait_for_a_resource_no_node_advertises() -> None:
    """Karpenter believes the instance type's GPUs and launches; the node's driver publishes slices, not
    nvidia.com/gpu, so the pod stays pending."""
    result = run(profile("karpenter"), plain_pod("legacy", gpus=1))
    p = by_name(result)["legacy"]
    assert p.phase == UNSCHEDULABLE
    assert "0/0 nodes are available" not in (p.reason or "")
    assert "launched for it from a gpuAllocation: dra pool" in (p.reason or "")
    assert "claim them with a ResourceClaim of DeviceClass gpu.nvidia.com" in (p.reason or "")


def test_cluster_autoscaler_never_scales_an_empty_dra_group_for_a_claim() -> None:
    result = run(profile("cluster-autoscaler", maxSize=3), TEMPLATE + claim_pod("train"))
    reason = by_name(result)["train"].reason or ""
    assert "cluster-autoscaler: pod didn't trigger scale-up: 1 cannot allocate all claims" in reason
    assert "kubernetes/autoscaler#10277" in reason and "minSize: 1" in reason
    assert result.new_nodes == []


def test_cluster_autoscaler_copies_a_nodes_slices_and_scales_up_to_max_size() -> None:
    prof = profile("cluster-autoscaler", minSize=1, maxSize=2)
    work = parse_text((TEMPLATE + claim_pod("a") + claim_pod("b") + claim_pod("c")).encode(), "w.yaml")
    result = plan(prof, work).simulation
    pods = by_name(result)
    assert pods["a"].phase == SCHEDULED and pods["a"].node == "gpu-base-1"
    assert pods["a"].devices[0]["pool"] == "gpu-base-1"
    assert pods["b"].phase == PROVISIONED and pods["b"].devices[0]["device"] == "gpu-0"
    assert [n.name for n in result.new_nodes] == [pods["b"].node]
    assert pods["c"].phase == UNSCHEDULABLE
    assert (pods["c"].reason or "").startswith("0/1 nodes are available: 1 cannot allocate all claims.")  # first pass
    assert "cluster-autoscaler: pod didn't trigger scale-up: 1 max node group size reached" in (pods["c"].reason or "")


def test_a_missing_template_is_the_scheduler_s_prefilter_and_nothing_scales() -> None:
    result = run(profile("cluster-autoscaler", minSize=0, maxSize=3), TEMPLATE + claim_pod("x", template="nope"))
    reason = by_name(result)["x"].reason or ""
    assert reason.startswith('0/0 nodes') or "ResourceClaim not created yet" in reason
    assert 'pod "default/x": ResourceClaim not created yet' in reason
    assert result.new_nodes == []


def test_baseline_nodes_of_a_dra_pool_advertise_no_gpu_and_the_plugin_is_not_deployed_there() -> None:
    prof = profile("cluster-autoscaler", minSize=1, maxSize=2)
    (node,) = baseline_nodes(prof)
    assert "nvidia.com/gpu" not in node.allocatable
    assert [ds.name for ds in profile_daemonsets(prof)] == ["kgpu-exporter"]


def test_provisioned_slices_look_like_the_drivers() -> None:
    """The slice a new node publishes is named and owned as the driver's are."""
    prov = provisioner_for(profile("karpenter"))
    result = simulate(Objects(), parse_text((TEMPLATE + claim_pod("t") + plain_pod("w")).encode(), "w.yaml"),
                      provisioner=prov)
    (node,) = result.new_nodes
    (s,) = [s for s in prov.dra.objects.slices if s.node_name == node.name]
    assert s.name.startswith(f"{node.name}-gpu.nvidia.com-") and s.driver == "gpu.nvidia.com"
    assert s.pool == node.name and s.slice_count == 1
    assert [d.name for d in s.devices] == ["gpu-0"]
    assert s.devices[0].attributes["gpu.nvidia.com/productName"] == "NVIDIA A10G"


def test_a_mig_partitioned_dra_pool_publishes_mig_devices_a_claim_selects() -> None:
    """The pool's nvidia.com/mig.config label (applied by the GPU Operator's MIG manager) makes the driver publish
    MIG devices instead of full GPUs; a claim on mig.nvidia.com selecting a profile gets one of them."""
    prof = profile("karpenter", instanceTypes=["p4d.24xlarge"], labels={"nvidia.com/mig.config": "all-1g.5gb"})
    mig_template = TEMPLATE.replace("one-gpu", "one-mig").replace(
        "exactly: {deviceClassName: gpu.nvidia.com}",
        """exactly: {deviceClassName: mig.nvidia.com, selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"}}]}""")
    prov = provisioner_for(prof)
    text = mig_template + claim_pod("infer", template="one-mig") + plain_pod("w")
    result = simulate(Objects(), parse_text(text.encode(), "w.yaml"), provisioner=prov)
    (node,) = result.new_nodes
    (s,) = [s for s in prov.dra.objects.slices if s.node_name == node.name]
    assert len(s.devices) == 56 and all(d.attributes["gpu.nvidia.com/type"] == "mig" for d in s.devices)
    infer = by_name(result)["infer"]
    assert infer.phase == PROVISIONED and infer.devices[0]["device"].startswith("gpu-0-mig-")


def test_an_empty_dra_node_counts_as_an_idle_gpu_node() -> None:
    """Scale to zero sees the DRA pool's nodes as GPU nodes though they advertise no nvidia.com/gpu."""
    prof = profile("cluster-autoscaler", minSize=1, maxSize=2)
    stray = parse_text(plain_pod("stray").encode(), "w.yaml")  # fits no node: the provisioners run
    result = plan(prof, stray).simulation
    (entry,) = result.extra["scale_to_zero"]
    assert entry["node"] == "gpu-base-1" and entry["pool"] == "gpu"
    assert entry["why"] == "node group gpu is at minSize 1"  # the price of scaling a DRA group at all
