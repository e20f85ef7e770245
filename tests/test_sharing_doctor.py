"""doctor on shared GPUs: plugin config keys, MIG config state and strategy labels, pods asking more than one
shared GPU (and those the kubelet already refused), NodePools without a NodeOverlay, memory isolation."""

from __future__ import annotations

from typing import Any

from kgpu.doctor import CHECK_IDS, doctor_report
from snapshot_builders import container, daemon_pod, node, nodepool, plugin_ds, pod, snapshot

GPU_TOL = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
TS_LABELS = {
    "nvidia.com/device-plugin.config": "infer",
    "nvidia.com/gpu.replicas": "4",
    "nvidia.com/gpu.sharing-strategy": "time-slicing",
    "nvidia.com/gpu.product": "NVIDIA-A10G-SHARED",
    "nvidia.com/gpu.count": "1",
}


def plugin_configmap(*keys: str) -> dict[str, Any]:
    """The ConfigMap kgpu render (and the plugin's helm chart, config.map) writes: one config per key."""
    data = {
        k: "version: v1\nflags:\n  migStrategy: none\nsharing:\n  timeSlicing:\n    resources:\n"
        "    - name: nvidia.com/gpu\n      replicas: 4\n"
        for k in keys
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "nvidia-device-plugin-config", "namespace": "kube-system"},
        "data": data,
    }


def shared_node(name: str, labels: dict[str, str], gpus: int = 4, nodepool_name: str | None = "infer") -> dict[str, Any]:
    taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    return node(name, "g5.xlarge", labels=labels, gpus=gpus, nodepool=nodepool_name, taints=[taint])


def gpu_pod(name: str, node_name: str | None, count: int = 1, resource: str = "nvidia.com/gpu", **kw: Any) -> dict[str, Any]:
    c = container("vllm", "vllm/vllm-openai:v0.6.0", requests={"cpu": "1", resource: str(count)},
                  limits={resource: str(count)})
    return pod(name, containers=[c], node_name=node_name, tolerations=GPU_TOL, **kw)


def findings(items: list[dict[str, Any]], check: str) -> list[tuple[str, str]]:
    report = doctor_report(snapshot(items))
    return [(f.severity, f.object) for f in report.by_check(check)]


def test_checks_are_registered() -> None:
    assert set(CHECK_IDS["shared GPUs"]) == {
        "sharing-config-missing",
        "mig-config-state",
        "mig-strategy-labels",
        "shared-request-gt-one",
        "nodepool-overlay",
        "shared-memory-isolation",
    }


def test_config_key_missing_is_an_error() -> None:
    bad = {**TS_LABELS, "nvidia.com/device-plugin.config": "infr"}
    items = [plugin_configmap("default", "infer"), shared_node("gpu-a", TS_LABELS), shared_node("gpu-b", bad)]
    assert findings(items, "sharing-config-missing") == [("error", "Node/gpu-b")]
    # without the ConfigMap in the input nothing can be said
    assert findings(items[1:], "sharing-config-missing") == []


def test_mig_config_state() -> None:
    labels = {"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.strategy": "mixed"}
    items = [
        node("mig-a", "g5.xlarge", labels={**labels, "nvidia.com/mig.config.state": "pending"}),
        node("mig-b", "g5.xlarge", labels={**labels, "nvidia.com/mig.config.state": "failed"}),
        node("mig-c", "g5.xlarge", labels={**labels, "nvidia.com/mig.config.state": "success"}),
    ]
    assert sorted(findings(items, "mig-config-state")) == [("error", "Node/mig-b"), ("warning", "Node/mig-a")]


def test_mig_strategy_labels() -> None:
    single = {"nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-INVALID"}
    mixed = {"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"}
    items = [node("a", "g5.xlarge", labels=single), node("b", "g5.xlarge", labels=mixed)]
    assert sorted(findings(items, "mig-strategy-labels")) == [("error", "Node/a"), ("warning", "Node/b")]


def test_more_than_one_shared_gpu() -> None:
    mps = {**TS_LABELS, "nvidia.com/gpu.sharing-strategy": "mps"}
    refused = gpu_pod("refused", "gpu-a", 2, phase="Failed")
    refused["status"]["reason"] = "UnexpectedAdmissionError"
    refused["status"]["message"] = (
        "Pod was rejected: Allocate failed due to rpc error: code = Unknown desc = invalid request: "
        "maximum request size for shared resources is 1; found 2, which is unexpected"
    )
    items = [
        shared_node("gpu-a", TS_LABELS),
        shared_node("gpu-b", mps),
        gpu_pod("two-ts", "gpu-a", 2),
        gpu_pod("two-mps", "gpu-b", 2),
        gpu_pod("one", "gpu-b", 1),
        refused,
    ]
    assert sorted(findings(items, "shared-request-gt-one")) == [
        ("error", "Pod/default/refused"),
        ("error", "Pod/default/two-mps"),
        ("warning", "Pod/default/two-ts"),
    ]


def test_nodepool_without_overlay() -> None:
    shared_pool = nodepool("infer", labels={"nvidia.com/device-plugin.config": "infer"})
    whole = nodepool("train")
    items = [shared_pool, whole, shared_node("gpu-a", TS_LABELS)]
    assert findings(items, "nodepool-overlay") == [("warning", "NodePool/infer")]
    overlay = {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": "infer-gpu-sharing"},
        "spec": {
            "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["infer"]}],
            "capacity": {"nvidia.com/gpu": "4"},
        },
    }
    assert findings([*items, overlay], "nodepool-overlay") == []


def test_time_slicing_memory_isolation_is_info() -> None:
    items = [shared_node("gpu-a", TS_LABELS), gpu_pod("a", "gpu-a"), gpu_pod("b", "gpu-a")]
    assert findings(items, "shared-memory-isolation") == [("info", "Node/gpu-a")]


def test_a_shared_node_is_not_an_error_elsewhere() -> None:
    """A healthy time-sliced node (4 replicas of 1 A10G) raises nothing at error level in any check."""
    ds = plugin_ds(desired=1)
    items = [plugin_configmap("default", "infer"), ds, daemon_pod(ds, "gpu-a"), shared_node("gpu-a", TS_LABELS),
             gpu_pod("a", "gpu-a")]
    report = doctor_report(snapshot(items))
    got = {f.check for f in report.findings if f.severity != "info"}
    assert got <= {"gpu-exporter-missing"}, got  # no exporter in this snapshot; nothing about the sharing
