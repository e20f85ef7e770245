"""Consistency: the pieces agree, one taint change moves them together, and disagreements are reported."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kgpu.model.profile import TEMPLATES, builtin_profile
from kgpu.render.consistency import check, errors, warnings
from kgpu.render.stack import render_stack
from render_helpers import changed, named, of_kind, pod_spec, pool_data


@pytest.mark.parametrize("template", TEMPLATES)
def test_builtin_templates_are_consistent(template: str) -> None:
    profile = builtin_profile(template)
    assert check(profile, render_stack(profile)) == []


def test_changing_one_taint_changes_pool_device_plugin_and_every_workload() -> None:
    """Acceptance: the NodePool, the device plugin tolerations and every workload follow the profile's taint."""

    def retaint(data: dict[str, Any]) -> None:
        pool_data(data, "gpu")["taints"] = [{"key": "dedicated", "value": "ml", "effect": "NoExecute"}]

    profile = changed("eks-karpenter", retaint)
    stack = render_stack(profile)
    wanted = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"}
    nodepool = named(stack["karpenter"], "NodePool", "gpu")
    assert nodepool["spec"]["template"]["spec"]["taints"] == [
        {"key": "dedicated", "effect": "NoExecute", "value": "ml"}
    ]
    plugin = of_kind(stack["device-plugin"], "DaemonSet")[0]
    assert wanted in pod_spec(plugin)["tolerations"]
    workloads = [d for d in stack["workloads"] if d["kind"] in ("Job", "Deployment", "Pod")]
    assert len(workloads) == 4
    for doc in workloads:
        tolerations = pod_spec(doc)["tolerations"]
        assert tolerations == [wanted], doc["metadata"]["name"]
    assert check(profile, stack) == []
    # ... and the original render had none of it.
    before = render_stack(builtin_profile("eks-karpenter"))
    assert all(
        wanted not in pod_spec(d).get("tolerations", [])
        for d in before["workloads"]
        if d["kind"] != "Service"
    )


def _problem_lines(profile: Any, stack: dict[str, list[dict[str, Any]]]) -> list[str]:
    return [p.line() for p in check(profile, stack)]


def test_workload_missing_toleration_is_an_error_naming_it() -> None:
    profile = builtin_profile("eks-karpenter")
    stack = copy.deepcopy(render_stack(profile))
    job = named(stack["workloads"], "Job", "gpu-train-gpu")
    del pod_spec(job)["tolerations"]
    lines = _problem_lines(profile, stack)
    assert len(lines) == 1
    assert lines[0].startswith("error: Job gpu-train-gpu: spec.template.spec: would not schedule on pool gpu")
    assert "untolerated taint {nvidia.com/gpu: true}" in lines[0]


def test_workload_selecting_a_label_the_pool_lacks_is_an_error() -> None:
    profile = builtin_profile("eks-karpenter")
    stack = copy.deepcopy(render_stack(profile))
    deployment = named(stack["workloads"], "Deployment", "gpu-infer-gpu")
    pod_spec(deployment)["nodeSelector"] = {"node-type": "gpu-large"}
    lines = _problem_lines(profile, stack)
    assert any("Deployment gpu-infer-gpu" in line and "node affinity/selector" in line for line in lines)


def test_device_plugin_not_tolerating_a_pool_taint_is_an_error() -> None:
    profile = builtin_profile("kuberay")
    # Force the DaemonSet onto the Bottlerocket pool, then drop the toleration it needs there.
    profile = changed("kuberay", lambda d: pool_data(d, "gpu-node-group").update(devicePlugin="daemonset"))
    stack = copy.deepcopy(render_stack(profile))
    plugin = of_kind(stack["device-plugin"], "DaemonSet")[0]
    pod_spec(plugin)["tolerations"] = [
        t for t in pod_spec(plugin)["tolerations"] if t["key"] != "ray.io/node-type"
    ]
    problems = check(profile, stack)
    assert [p.subject for p in errors(problems)] == ["DaemonSet kube-system/nvidia-device-plugin-daemonset"]
    assert "pool gpu-node-group" in errors(problems)[0].message
    assert "untolerated taint {ray.io/node-type: worker}" in errors(problems)[0].message
    # Forcing the DaemonSet onto Bottlerocket NVIDIA is itself a warning.
    assert any(p.subject == "pool gpu-node-group" and p.field == "devicePlugin" for p in warnings(problems))


def test_device_plugin_stays_off_bottlerocket_nvidia_pools() -> None:
    profile = builtin_profile("kuberay")
    stack = render_stack(profile)
    assert stack["device-plugin"] == []
    labels = stack["eksctl"][0]["managedNodeGroups"][1]["labels"]
    assert labels["kgpu.dev/device-plugin"] == "builtin"


def test_device_plugin_reaching_a_builtin_pool_is_an_error() -> None:
    """With an AL2023 pool too, the DaemonSet exists; if its affinity stopped excluding Bottlerocket: error."""

    def add_al2023_pool(data: dict[str, Any]) -> None:
        extra = copy.deepcopy(pool_data(data, "gpu-node-group"))
        extra.update(name="gpu-al2023", amiFamily="AL2023", labels={"ray.io/node-type": "worker"})
        data["pools"].append(extra)

    profile = changed("kuberay", add_al2023_pool)
    stack = copy.deepcopy(render_stack(profile))
    assert check(profile, stack) == []
    plugin = of_kind(stack["device-plugin"], "DaemonSet")[0]
    terms = pod_spec(plugin)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    for term in terms["nodeSelectorTerms"]:
        term["matchExpressions"] = [
            e for e in term["matchExpressions"] if e["key"] != "kgpu.dev/device-plugin"
        ]
    lines = _problem_lines(profile, stack)
    assert any("would run on pool gpu-node-group" in line for line in lines)


def test_autoscaler_group_missing_node_template_label_tag_is_an_error() -> None:
    """An explicit asgTags value that contradicts the label workloads select blocks scale-from-zero."""
    tag = "k8s.io/cluster-autoscaler/node-template/label/nvidia.com/gpu"
    profile = changed("eks-eksctl", lambda d: pool_data(d, "gpu-spot-ng").update(asgTags={tag: "false"}))
    problems = errors(check(profile, render_stack(profile)))
    assert {p.subject for p in problems} == {
        "node group gpu-spot-ng-a",
        "node group gpu-spot-ng-b",
        "node group gpu-spot-ng-c",
    }
    assert all(tag in p.message and p.field == "tags" for p in problems)


def test_seed_001_malformed_taint_tag_is_a_warning() -> None:
    bad = {"k8s.io/cluster-autoscaler/node-template/taint/dedicated": "nvidia.com/gpu=true"}
    profile = changed("eks-eksctl", lambda d: pool_data(d, "gpu-spot-ng").update(asgTags=bad))
    problems = check(profile, render_stack(profile))
    assert errors(problems) == []
    messages = [p.message for p in warnings(problems)]
    assert any("malformed" in m and "'<value>:<effect>'" in m for m in messages)
    assert any("describes taint 'dedicated'" in m for m in messages)


def test_missing_taint_tag_is_a_warning() -> None:
    """With propagation off and the rendered taint tag dropped, cluster-autoscaler does not know the taint."""
    profile = builtin_profile("eks-eksctl")
    stack = copy.deepcopy(render_stack(profile))
    for group in stack["eksctl"][0]["nodeGroups"]:
        group["tags"].pop("k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu", None)
    problems = check(profile, stack)
    assert errors(problems) == []
    assert len(warnings(problems)) == 3


def test_karpenter_gpu_pool_without_taint_is_a_warning() -> None:
    profile = changed("eks-karpenter", lambda d: pool_data(d, "gpu").update(taints=[]))
    problems = check(profile, render_stack(profile))
    assert errors(problems) == []
    assert [(p.subject, p.field) for p in warnings(problems)] == [("pool gpu", "taints")]
