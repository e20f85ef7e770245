"""Add-ons around the GPU pools, as Helm values and one CloudFormation template (not Kubernetes objects):

- ``karpenter-chart``: the Karpenter chart's ``settings`` (cluster name, ``interruptionQueue``), so that the
  controller drains spot nodes on the two-minute interruption warning, rebalance recommendations, scheduled
  maintenance and instance state changes instead of losing their pods;
- ``interruption-queue``: the SQS queue and the four EventBridge rules that feed it, as in Karpenter's
  getting-started CloudFormation (queue named after the cluster unless ``spotInterruptions.queueName``);
  the controller's IAM policy also needs sqs:DeleteMessage/GetQueueUrl/ReceiveMessage on it;
- ``node-termination-handler``: aws-node-termination-handler (IMDS mode, a DaemonSet tolerating every taint,
  GPU ones included) for eksctl's self-managed spot node groups; managed node groups get EKS's own
  capacity rebalancing and need none;
- ``kuberay-operator``: the kuberay-operator chart pinned to ``kuberay.operatorVersion`` (the version whose
  RayCluster CRD ``--validate`` checks against), on the Ray head's pool.
"""

from __future__ import annotations

from typing import Any

from kgpu.model.profile import PoolKind, Profile
from kgpu.model.profile_nodes import CapacityType
from kgpu.render import pool_selector, tolerations

EVENT_RULES = (
    ("ScheduledChangeRule", "aws.health", "AWS Health Event"),
    ("SpotInterruptionRule", "aws.ec2", "EC2 Spot Instance Interruption Warning"),
    ("RebalanceRule", "aws.ec2", "EC2 Instance Rebalance Recommendation"),
    ("InstanceStateChangeRule", "aws.ec2", "EC2 Instance State-change Notification"),
)
KUBERAY_OPERATOR_IMAGE = "quay.io/kuberay/operator"


def queue_name(profile: Profile) -> str:
    return profile.spot_interruptions.queue_name or profile.cluster.name


def spot_karpenter_pools(profile: Profile) -> list[str]:
    return [
        p.name
        for p in profile.pools
        if p.kind == PoolKind.KARPENTER and CapacityType.SPOT in p.capacity_types
    ]


def spot_self_managed_groups(profile: Profile) -> list[str]:
    return [
        p.name
        for p in profile.pools
        if p.kind == PoolKind.NODE_GROUP and not p.managed and CapacityType.SPOT in p.capacity_types
    ]


def karpenter_chart_values(profile: Profile) -> list[dict[str, Any]]:
    settings: dict[str, Any] = {"clusterName": profile.cluster.name}
    if profile.spot_interruptions.enabled:
        settings["interruptionQueue"] = queue_name(profile)
    from kgpu.render.karpenter import overlay_feature_gate

    if overlay_feature_gate(profile):  # NodeOverlays for shared GPUs are off unless the gate is on
        settings["featureGates"] = {"nodeOverlay": True}
    return [{"settings": settings}]


def interruption_queue(profile: Profile) -> list[dict[str, Any]]:
    """Karpenter's interruption queue as a CloudFormation template (long-form intrinsics, plain YAML)."""
    arn = {"Fn::GetAtt": ["KarpenterInterruptionQueue", "Arn"]}
    resources: dict[str, Any] = {
        "KarpenterInterruptionQueue": {
            "Type": "AWS::SQS::Queue",
            "Properties": {
                "QueueName": queue_name(profile),
                "MessageRetentionPeriod": 300,
                "SqsManagedSseEnabled": True,
            },
        },
        "KarpenterInterruptionQueuePolicy": {
            "Type": "AWS::SQS::QueuePolicy",
            "Properties": {
                "Queues": [{"Ref": "KarpenterInterruptionQueue"}],
                "PolicyDocument": {
                    "Id": "EC2InterruptionPolicy",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
                            "Action": "sqs:SendMessage",
                            "Resource": arn,
                        },
                        {
                            "Sid": "DenyHTTP",
                            "Effect": "Deny",
                            "Action": "sqs:*",
                            "Resource": arn,
                            "Condition": {"Bool": {"aws:SecureTransport": False}},
                            "Principal": "*",
                        },
                    ],
                },
            },
        },
    }
    for name, source, detail_type in EVENT_RULES:
        resources[name] = {
            "Type": "AWS::Events::Rule",
            "Properties": {
                "EventPattern": {"source": [source], "detail-type": [detail_type]},
                "Targets": [{"Id": "KarpenterInterruptionQueueTarget", "Arn": arn}],
            },
        }
    return [
        {
            "AWSTemplateFormatVersion": "2010-09-09",
            "Description": f"Karpenter interruption queue for cluster {profile.cluster.name} (rendered by kgpu)",
            "Resources": resources,
            "Outputs": {"QueueName": {"Value": {"Fn::GetAtt": ["KarpenterInterruptionQueue", "QueueName"]}}},
        }
    ]


def node_termination_handler_values(profile: Profile) -> list[dict[str, Any]]:
    return [
        {
            "enableSpotInterruptionDraining": True,
            "enableRebalanceMonitoring": True,
            "enableRebalanceDraining": False,
            "enableScheduledEventDraining": True,
            "daemonsetTolerations": [{"operator": "Exists"}],
        }
    ]


def kuberay_operator_values(profile: Profile) -> list[dict[str, Any]]:
    from kgpu.render.kuberay import head_pool

    assert profile.kuberay is not None
    values: dict[str, Any] = {
        "image": {"repository": KUBERAY_OPERATOR_IMAGE, "tag": f"v{profile.kuberay.operator_version}"}
    }
    head = head_pool(profile)
    if head is not None:
        selector = pool_selector(head)
        if selector:
            values["nodeSelector"] = selector
        tols = tolerations(head)
        if tols:
            values["tolerations"] = tols
    return [values]
