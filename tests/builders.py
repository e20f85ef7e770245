"""Test builders for pods and nodes (Kubernetes dicts in, kgpu objects out)."""

from __future__ import annotations

from typing import Any

from kgpu.model.load import parse_documents
from kgpu.model.objects import Node, Pod
from kgpu.sim.scheduler.plugins.defaultpreemption import filters_part
from kgpu.sim.simulate import Placement, SimulationResult

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}


def pod_dict(
    name: str = "p",
    *,
    cpu: str | None = None,
    memory: str | None = None,
    gpus: int = 0,
    tolerations: list[dict[str, Any]] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity_terms: list[dict[str, Any]] | None = None,
    preferred: list[dict[str, Any]] | None = None,
    node_name: str | None = None,
    priority: int | None = None,
    namespace: str = "default",
    phase: str | None = None,
    labels: dict[str, str] | None = None,
    spread: list[dict[str, Any]] | None = None,
    pod_affinity: list[dict[str, Any]] | None = None,
    pod_anti_affinity: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A Pod document; ``spread`` is topologySpreadConstraints, ``pod_affinity`` / ``pod_anti_affinity``
    are required terms."""
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    if gpus:
        limits["nvidia.com/gpu"] = gpus
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"requests": requests, "limits": limits}}]}
    if tolerations:
        spec["tolerations"] = tolerations
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity_terms is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": affinity_terms}}}
    if preferred is not None:  # [{"weight": w, "preference": {"matchExpressions": [...]}}, ...]
        na = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        na["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    if spread:
        spec["topologySpreadConstraints"] = spread
    for field, terms in (("podAffinity", pod_affinity), ("podAntiAffinity", pod_anti_affinity)):
        if terms:
            spec.setdefault("affinity", {})[field] = {"requiredDuringSchedulingIgnoredDuringExecution": terms}
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if phase:
        out["status"] = {"phase": phase}
    return out


def node_dict(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: int = 110,
    gpus: int = 0,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    alloc: dict[str, Any] = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}}, "spec": spec,
            "status": {"allocatable": alloc}}


def make_pod(name: str = "p", **kw: Any) -> Pod:
    return parse_documents([pod_dict(name, **kw)], "test").pods[0]


def make_node(name: str, **kw: Any) -> Node:
    return parse_documents([node_dict(name, **kw)], "test").nodes[0]


def placement(result: SimulationResult, name: str, namespace: str = "default") -> Placement:
    for p in result.placements:
        if p.pod.name == name and p.pod.namespace == namespace:
            return p
    raise AssertionError(f"no placement for {namespace}/{name}: {[p.pod.name for p in result.placements]}")


def assert_scheduled(result: SimulationResult, pod: str, node: str) -> None:
    p = placement(result, pod)
    assert (p.phase, p.node) == ("Scheduled", node), (p.phase, p.node, p.reason)


def assert_unschedulable(result: SimulationResult, pod: str, reason: str) -> None:
    """``reason`` in full; a reason without PostFilter's "preemption: ..." part (a test of the filters) is
    compared with the message up to that part."""
    p = placement(result, pod)
    assert p.phase == "Unschedulable", (p.phase, p.node)
    got = p.reason if " preemption: " in reason else filters_part(p.reason or "")
    assert got == reason, p.reason
