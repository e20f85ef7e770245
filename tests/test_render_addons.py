"""Spot interruption handling (Karpenter's queue, aws-node-termination-handler), node IAM policies and the
KubeRay operator, as rendered for the guides' clusters."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kgpu.errors import InputError
from kgpu.model.profile import parse_profile, template_text
from kgpu.render.consistency import check
from kgpu.render.stack import applicable_targets, render_files, render_stack

SSM = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"


def data(template: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(template_text(template))
    return loaded


def test_karpenter_interruption_queue_and_chart_settings() -> None:
    """Seed 000 runs GPU pools on spot: the chart names the queue and the CloudFormation template creates it
    with the four EventBridge rules Karpenter reads."""
    profile = parse_profile(data("eks-karpenter"))
    stack = render_stack(profile)
    assert stack["karpenter-chart"] == [
        {"settings": {"clusterName": "gpu-cluster", "interruptionQueue": "gpu-cluster"}}
    ]
    (cfn,) = stack["interruption-queue"]
    resources = cfn["Resources"]
    assert resources["KarpenterInterruptionQueue"]["Properties"]["QueueName"] == "gpu-cluster"
    rules = {
        r["Properties"]["EventPattern"]["detail-type"][0]: r["Properties"]["Targets"][0]["Arn"]
        for r in resources.values()
        if r["Type"] == "AWS::Events::Rule"
    }
    assert set(rules) == {
        "AWS Health Event",
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
    }
    assert all(arn == {"Fn::GetAtt": ["KarpenterInterruptionQueue", "Arn"]} for arn in rules.values())
    files = render_files(profile)
    assert "aws cloudformation deploy" in files["interruption-queue.cfn.yaml"]


def test_queue_name_from_the_profile() -> None:
    d = data("eks-karpenter")
    d["spotInterruptions"] = {"queueName": "karpenter-ml"}
    stack = render_stack(parse_profile(d))
    assert stack["karpenter-chart"][0]["settings"]["interruptionQueue"] == "karpenter-ml"


def test_spot_pools_without_interruption_handling_warn() -> None:
    d = data("eks-karpenter")
    d["spotInterruptions"] = {"enabled": False}
    profile = parse_profile(d)
    assert "interruption-queue" not in applicable_targets(profile)
    assert "interruptionQueue" not in render_stack(profile)["karpenter-chart"][0]["settings"]
    warned = {
        p.subject for p in check(profile, render_stack(profile)) if p.field == "spotInterruptions.enabled"
    }
    assert warned == {"pool general", "pool gpu"}
    e = data("eks-eksctl")
    e["spotInterruptions"] = {"enabled": False}
    eksctl = parse_profile(e)
    assert "node-termination-handler" not in applicable_targets(eksctl)
    warned = {
        p.subject for p in check(eksctl, render_stack(eksctl)) if p.field == "spotInterruptions.enabled"
    }
    assert warned == {"pool spot-ng", "pool gpu-spot-ng"}


def test_node_termination_handler_for_self_managed_spot_groups_only() -> None:
    """Seed 001's self-managed spot groups get aws-node-termination-handler, tolerating the GPU taint;
    seed 004's managed groups (EKS rebalances them itself) do not."""
    (values,) = render_stack(parse_profile(data("eks-eksctl")))["node-termination-handler"]
    assert values["enableSpotInterruptionDraining"] is True
    assert values["daemonsetTolerations"] == [{"operator": "Exists"}]
    kuberay = data("kuberay")
    for pool in kuberay["pools"]:
        pool["capacityTypes"] = ["spot"]
    assert "node-termination-handler" not in applicable_targets(parse_profile(kuberay))


def test_extra_iam_policies_follow_eksctls_defaults() -> None:
    """Seed 001 attaches SSM: eksctl attaches only the listed ARNs, so the defaults come first."""
    d = data("eks-eksctl")
    d["pools"][1]["iamPolicyARNs"] = [SSM]
    d["pools"][1]["iamAddonPolicies"] = ["ebs", "efs", "fsx", "albIngress", "cloudWatch"]
    (config,) = render_stack(parse_profile(d))["eksctl"]
    group = next(g for g in config["nodeGroups"] if g["name"] == "gpu-spot-ng-a")
    assert group["iam"]["attachPolicyARNs"] == [
        "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
        "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
        "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
        SSM,
    ]
    assert set(group["iam"]["withAddonPolicies"]) == {
        "autoScaler",
        "ebs",
        "efs",
        "fsx",
        "albIngress",
        "cloudWatch",
    }
    general = next(g for g in config["nodeGroups"] if g["name"] == "spot-ng")
    assert "attachPolicyARNs" not in general["iam"]


def test_karpenter_extra_policies_become_attach_commands() -> None:
    d = data("eks-karpenter")
    d["pools"][1]["iamPolicyARNs"] = [SSM]
    text = render_files(parse_profile(d))["karpenter.yaml"]
    assert f"aws iam attach-role-policy --role-name KarpenterNodeRole-gpu-cluster --policy-arn {SSM}" in text


def test_bad_policy_arn_is_a_profile_error() -> None:
    d = data("eks-eksctl")
    d["pools"][1]["iamPolicyARNs"] = ["AmazonSSMManagedInstanceCore"]
    with pytest.raises(InputError, match=r"pools\[1\]\.iamPolicyARNs.*not an IAM policy ARN"):
        parse_profile(d)


def test_kuberay_operator_pinned_on_the_head_pool() -> None:
    """Seed 004: the operator runs beside the Ray head (CPU group), pinned to the CRD version kgpu validates."""
    profile = parse_profile(data("kuberay"))
    (values,) = render_stack(profile)["kuberay-operator"]
    assert values["image"] == {"repository": "quay.io/kuberay/operator", "tag": "v1.7.0"}
    assert values["nodeSelector"] == {"ray.io/node-type": "head"}
    text = render_files(profile)["kuberay-operator-values.yaml"]
    assert "--version 1.7.0" in text


def test_ray_worker_asking_more_gpus_than_the_pool_has_is_an_error() -> None:
    """g5.xlarge has one A10G: gpusPerWorker 2 never schedules, and render says so."""
    d = data("kuberay")
    d["kuberay"]["gpusPerWorker"] = 2
    profile = parse_profile(d)
    problems = [p for p in check(profile, render_stack(profile)) if p.field == "kuberay.gpusPerWorker"]
    assert [(p.level, p.subject) for p in problems] == [("error", "pool gpu-node-group")]
    assert "largest node has 1" in problems[0].message
    d["pools"][1]["instanceTypes"] = ["g5.12xlarge"]
    d["pools"][1]["maxSize"] = 1
    profile = parse_profile(d)
    assert not [p for p in check(profile, render_stack(profile)) if p.field == "kuberay.gpusPerWorker"]
