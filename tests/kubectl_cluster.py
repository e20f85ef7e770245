"""An EKS GPU cluster as ``kubectl get nodes,pods,ds -A -o json`` prints it, for simulate's input tests.

Built from ``snapshot_builders`` (real metadata, status, admission's default tolerations), with what the
controllers really write: every daemon pod's ownerReference carries its DaemonSet's uid, is pinned to its
node by the DaemonSet controller's ``metadata.name`` matchFields term and is Running there; the DaemonSets'
status counts their pods. The DaemonSets are the ones an EKS GPU cluster runs: kube-proxy and aws-node
(the VPC CNI, with its network-policy agent) on every node, the NVIDIA device plugin on the GPU nodes.
"""

from __future__ import annotations

import copy
from typing import Any

from snapshot_builders import (
    GPU_TAINT,
    GPU_TOLERATION,
    container,
    daemon_pod,
    daemonset,
    node,
    plugin_ds,
    pod,
    snapshot,
    uid,
    v1_list,
)

ECR = "602401143452.dkr.ecr.us-west-2.amazonaws.com"
SYSTEM_NODES = ("ip-192-168-12-34.us-west-2.compute.internal", "ip-192-168-45-67.us-west-2.compute.internal")
GPU_NODES = ("ip-192-168-101-12.us-west-2.compute.internal", "ip-192-168-140-9.us-west-2.compute.internal")
TORCH = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
GPU_LABELS = {"nvidia.com/gpu.present": "true", "karpenter.sh/nodepool": "gpu"}


def _requests(ds: dict[str, Any], *per_container: dict[str, str]) -> dict[str, Any]:
    for c, req in zip(ds["spec"]["template"]["spec"]["containers"], per_container, strict=True):
        c["resources"] = {"requests": dict(req)}
    return ds


def kube_proxy(desired: int) -> dict[str, Any]:
    ds = daemonset(
        "kube-proxy", "kube-system", f"{ECR}/eks/kube-proxy:v1.31.2-minimal-eksbuild.3",
        tolerations=[{"operator": "Exists"}], labels={"k8s-app": "kube-proxy"}, desired=desired,
        container_name="kube-proxy",
    )
    return _requests(ds, {"cpu": "100m"})


def aws_node(desired: int) -> dict[str, Any]:
    ds = daemonset(
        "aws-node", "kube-system", f"{ECR}/amazon-k8s-cni:v1.19.0-eksbuild.1",
        tolerations=[{"operator": "Exists"}], labels={"k8s-app": "aws-node"}, desired=desired,
        container_name="aws-node",
    )
    agent = copy.deepcopy(ds["spec"]["template"]["spec"]["containers"][0])
    agent.update(name="aws-eks-nodeagent", image=f"{ECR}/amazon/aws-network-policy-agent:v1.1.5-eksbuild.1")
    ds["spec"]["template"]["spec"]["containers"].append(agent)
    return _requests(ds, {"cpu": "25m"}, {"cpu": "25m"})


def device_plugin(desired: int) -> dict[str, Any]:
    """The NVIDIA Helm chart's DaemonSet, limited to GPU nodes (nodeSelector as the chart's values allow)."""
    return plugin_ds(desired=desired, node_selector={"nvidia.com/gpu.present": "true"})


def daemon_pod_of(ds: dict[str, Any], node_name: str) -> dict[str, Any]:
    """The pod the DaemonSet controller created on ``node_name``: owned by the DaemonSet's uid."""
    p = daemon_pod(ds, node_name)
    p["metadata"]["ownerReferences"][0]["uid"] = ds["metadata"]["uid"]
    template = ds["spec"]["template"]["spec"]["containers"]
    for c, t in zip(p["spec"]["containers"], template, strict=True):
        c["resources"] = copy.deepcopy(t["resources"])
    return p


def training_pod(name: str, *, node_name: str | None = None, cpu: str = "3700m") -> dict[str, Any]:
    """A PyTorch job's pod asking for one GPU and most of a g5.xlarge: 3920m allocatable, less 150m of
    daemon pods, leaves 3770m; with the daemon pods counted twice only 3620m would be left."""
    job = name.rsplit("-", 1)[0]
    c = container("pytorch", TORCH, requests={"cpu": cpu, "memory": "12Gi"}, gpus=1)
    p = pod(name, "ml", containers=[c], node_name=node_name, tolerations=[GPU_TOLERATION], owner=("Job", job),
            labels={"batch.kubernetes.io/job-name": job, "job-name": job})
    p["metadata"]["ownerReferences"][0]["apiVersion"] = "batch/v1"
    return p


def coredns_pods() -> list[dict[str, Any]]:
    c = container("coredns", f"{ECR}/eks/coredns:v1.11.3-eksbuild.2", requests={"cpu": "100m", "memory": "70Mi"})
    return [
        pod(f"coredns-789f8477df-{suffix}", "kube-system", containers=[copy.deepcopy(c)], node_name=n,
            owner=("ReplicaSet", "coredns-789f8477df"), labels={"k8s-app": "kube-dns"})
        for suffix, n in zip(("4vx9k", "zq7tb"), SYSTEM_NODES, strict=True)
    ]


def eks_items(*, missing: tuple[tuple[str, str], ...] = (), pending: int = 1) -> list[dict[str, Any]]:
    """Nodes, DaemonSets and their running pods, coredns, one running training pod per GPU node but the
    last, and ``pending`` training pods that fit a GPU node once its daemon pods are counted once.
    ``missing``: (DaemonSet, node) pairs whose pod is not there (yet), as on a node that just joined."""
    nodes = [node(n, "m5.xlarge", zone=f"us-west-2{z}") for n, z in zip(SYSTEM_NODES, "ab", strict=True)]
    nodes += [
        node(n, "g5.xlarge", zone=f"us-west-2{z}", taints=[GPU_TAINT], labels=GPU_LABELS, nodepool="gpu")
        for n, z in zip(GPU_NODES, "ab", strict=True)
    ]
    all_nodes = SYSTEM_NODES + GPU_NODES
    sets = [(kube_proxy(len(all_nodes)), all_nodes), (aws_node(len(all_nodes)), all_nodes),
            (device_plugin(len(GPU_NODES)), GPU_NODES)]
    items: list[dict[str, Any]] = [*nodes]
    pods: list[dict[str, Any]] = []
    for ds, where in sets:
        items.append(ds)
        pods += [daemon_pod_of(ds, n) for n in where if (ds["metadata"]["name"], n) not in missing]
    pods += coredns_pods()
    pods += [training_pod(f"resnet-{n}", node_name=node_name) for n, node_name in enumerate(GPU_NODES[:-1])]
    pods += [training_pod(f"bert-{n}") for n in range(pending)]
    return items + pods


def as_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return v1_list(copy.deepcopy(items))


def as_snapshot(items: list[dict[str, Any]]) -> dict[str, Any]:
    return snapshot(copy.deepcopy(items))


__all__ = ["GPU_NODES", "SYSTEM_NODES", "as_list", "as_snapshot", "eks_items", "uid"]
