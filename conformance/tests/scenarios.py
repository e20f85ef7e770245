"""Seeded random clusters and workloads for differential runs against the real components.

Each scenario is a cluster (nodes and bound pods) and a list of pending pods, written as plain v1 List
JSON, the form both `kgpu simulate` and the oracles read. The generator draws from the shapes users
have: GPU and CPU nodes over zones, GPU taints, PreferNoSchedule taints, selectors on GPU product or zone,
`Gt` on a GPU-count label, preferred node affinity, tolerations of every form, host ports, init containers,
priorities, many pod classes.

Pods carry an `app` label per class, and some classes carry topology spread constraints (zone or
hostname, DoNotSchedule or ScheduleAnyway, minDomains, node inclusion policies, matchLabelKeys, selectors on
their own or another class's pods, or empty) and required pod (anti-)affinity (namespaces, an empty
namespace selector); bound pods carry labels, and a few a required anti-affinity of their own.

`features` records which scheduler behaviours a scenario exercises, so a disagreement can be put in its
class (see docs/simulate.md, "Known differences").
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ZONES = ["us-west-2a", "us-west-2b", "us-west-2c"]
SHAPES = [  # instance type, cpu, memory, pods, gpus, gpu product
    ("m5.xlarge", "3920m", "14919120Ki", "58", 0, None),
    ("m5.4xlarge", "15890m", "61255492Ki", "234", 0, None),
    ("c5.2xlarge", "7910m", "14790112Ki", "58", 0, None),
    ("g4dn.xlarge", "3920m", "15104948Ki", "29", 1, "Tesla-T4"),
    ("g4dn.12xlarge", "47810m", "186676576Ki", "234", 4, "Tesla-T4"),
    ("g5.2xlarge", "7910m", "30513552Ki", "58", 1, "NVIDIA-A10G"),
    ("p3.8xlarge", "31850m", "237867632Ki", "234", 4, "Tesla-V100-SXM2-16GB"),
    ("p4d.24xlarge", "95690m", "1117028368Ki", "737", 8, "NVIDIA-A100-SXM4-40GB"),
]
TAINTS = [
    {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
    {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
    {"key": "maintenance", "value": "now", "effect": "NoExecute"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
]
SOFT_TAINTS = [  # PreferNoSchedule: TaintToleration scoring counts the ones a pod does not tolerate
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
    {"key": "legacy-hardware", "effect": "PreferNoSchedule"},
    {"key": "team", "value": "research", "effect": "PreferNoSchedule"},
]
SOFT_TOLERATIONS = [
    {"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"},
    {"key": "legacy-hardware", "operator": "Exists"},
    {"key": "team", "operator": "Equal", "value": "research"},
    {"key": "team", "operator": "Equal", "value": "infra", "effect": "PreferNoSchedule"},  # tolerates none
    {"key": "spot", "operator": "Exists", "effect": "NoSchedule"},  # wrong effect: tolerates no soft taint
]
CPU_REQ = ["100m", "250m", "500m", "1", "2", "3500m", "8", "30"]
MEM_REQ = ["64Mi", "256Mi", "1Gi", "4Gi", "12Gi", "60Gi", "200Gi"]


@dataclass
class Scenario:
    seed: int
    nodes: list[dict[str, Any]] = field(default_factory=list)
    bound: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)
    priority_classes: list[dict[str, Any]] = field(default_factory=list)
    features: set[str] = field(default_factory=set)

    def write(self, directory: Path) -> tuple[Path, Path]:
        cluster = directory / "cluster.json"
        pods = directory / "pods.json"
        cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                       "items": self.nodes + self.bound + self.priority_classes}))
        pods.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": self.pending}))
        return cluster, pods


def _node(rng: random.Random, i: int, s: Scenario) -> dict[str, Any]:
    itype, cpu, mem, pods, gpus, product = rng.choice(SHAPES)
    name = f"node-{i:03d}-{itype.replace('.', '-')}"
    zone = rng.choice(ZONES)
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "node.kubernetes.io/instance-type": itype, "topology.kubernetes.io/zone": zone,
              "pool": rng.choice(["general", "gpu", "batch"])}
    alloc = {"cpu": cpu, "memory": mem, "pods": pods, "ephemeral-storage": "95551679124"}
    taints: list[dict[str, Any]] = []
    if gpus:
        labels["nvidia.com/gpu.product"] = product or ""
        labels["nvidia.com/gpu.count"] = str(gpus)
        alloc["nvidia.com/gpu"] = str(gpus)
        if rng.random() < 0.7:
            taints.append(rng.choice(TAINTS[:2]))
    if rng.random() < 0.2:
        taints.append(rng.choice(TAINTS[2:]))
    for soft in SOFT_TAINTS[1:]:
        if rng.random() < 0.15:
            taints.append(soft)
    spec: dict[str, Any] = {}
    if taints:
        # The API server rejects two taints with the same key and effect.
        seen: dict[tuple[str, str], dict[str, Any]] = {}
        for t in taints:
            seen[(t["key"], t["effect"])] = t
        spec["taints"] = list(seen.values())
        if any(t["effect"] == "PreferNoSchedule" for t in spec["taints"]):
            s.features.add("prefer-no-schedule-taint")
    if rng.random() < 0.05:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": spec, "status": {"allocatable": alloc, "capacity": dict(alloc)}}


def _requirement(rng: random.Random, s: Scenario) -> dict[str, Any]:
    kind = rng.randrange(7)
    if kind == 0:
        return {"key": "topology.kubernetes.io/zone", "operator": "In", "values": rng.sample(ZONES, rng.randint(1, 2))}
    if kind == 1:
        return {"key": "node.kubernetes.io/instance-type", "operator": "NotIn",
                "values": [rng.choice(SHAPES)[0]]}
    if kind == 2:
        return {"key": "nvidia.com/gpu.count", "operator": rng.choice(["Gt", "Lt"]), "values": [str(rng.choice([0, 1, 2, 4]))]}
    if kind == 3:
        return {"key": "nvidia.com/gpu.product", "operator": rng.choice(["Exists", "DoesNotExist"])}
    if kind == 4:
        return {"key": "pool", "operator": "In", "values": [rng.choice(["general", "gpu", "batch", "none"])]}
    if kind == 5:
        return {"key": "nvidia.com/gpu.product", "operator": "In",
                "values": [rng.choice(["Tesla-T4", "NVIDIA-A10G", "NVIDIA-A100-SXM4-40GB"])]}
    return {"key": "karpenter.sh/capacity-type", "operator": "DoesNotExist"}


APPS = [f"app{i}" for i in range(6)]
TOPOLOGY_KEYS = ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]


def _app_selector(rng: random.Random, own: str) -> dict[str, Any] | None:
    r = rng.random()
    if r < 0.65:
        return {"matchLabels": {"app": own}}
    if r < 0.8:
        return {"matchLabels": {"app": rng.choice(APPS)}}
    if r < 0.9:
        return {"matchExpressions": [{"key": "app", "operator": rng.choice(["Exists", "In"]),
                                      **({"values": [own, rng.choice(APPS)]} if rng.random() < 0.5 else {})}]}
    return {} if rng.random() < 0.7 else None


def _fix_expressions(sel: dict[str, Any] | None) -> dict[str, Any] | None:
    """In needs values and Exists none: make the random expression valid."""
    for e in (sel or {}).get("matchExpressions", []):
        if e["operator"] == "In" and "values" not in e:
            e["values"] = ["app0"]
        if e["operator"] == "Exists":
            e.pop("values", None)
    return sel


def _spread(rng: random.Random, s: Scenario, own: str) -> list[dict[str, Any]]:
    out = []
    for key in rng.sample(TOPOLOGY_KEYS, rng.choice([1, 1, 1, 2])):
        action = "DoNotSchedule" if rng.random() < 0.85 else "ScheduleAnyway"
        c: dict[str, Any] = {"maxSkew": rng.choice([1, 1, 2]), "topologyKey": key, "whenUnsatisfiable": action}
        sel = _fix_expressions(_app_selector(rng, own))
        if sel is not None:
            c["labelSelector"] = sel
        if action == "DoNotSchedule" and rng.random() < 0.2:
            c["minDomains"] = rng.choice([2, 3, 4])
        if rng.random() < 0.2:
            c["nodeTaintsPolicy"] = rng.choice(["Honor", "Ignore"])
        if rng.random() < 0.15:
            c["nodeAffinityPolicy"] = rng.choice(["Honor", "Ignore"])
        if rng.random() < 0.15 and "app" not in str(sel):
            c["matchLabelKeys"] = ["rev"]
        if action == "ScheduleAnyway":
            s.features.add("spread-scoring")
        out.append(c)
    s.features.add("topology-spread")
    return out


def _pod_term(rng: random.Random, own: str) -> dict[str, Any]:
    t: dict[str, Any] = {"topologyKey": rng.choice(TOPOLOGY_KEYS)}
    sel = _fix_expressions(_app_selector(rng, own))
    if sel is not None:
        t["labelSelector"] = sel
    r = rng.random()
    if r < 0.15:
        t["namespaces"] = rng.sample(["default", "ml", "kube-system"], rng.randint(1, 2))
    elif r < 0.25:
        t["namespaceSelector"] = {}
    return t


def _pod_spec(rng: random.Random, s: Scenario, nodes: list[dict[str, Any]], own: str = "app0") -> dict[str, Any]:
    gpus = rng.choice([0, 0, 0, 1, 1, 2, 4, 8]) if rng.random() < 0.5 else 0
    requests: dict[str, str] = {}
    if rng.random() < 0.9:
        requests["cpu"] = rng.choice(CPU_REQ)
    if rng.random() < 0.8:
        requests["memory"] = rng.choice(MEM_REQ)
    limits: dict[str, str] = {}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    resources: dict[str, Any] = {}
    if rng.random() < 0.15 and requests:
        resources["limits"] = {**requests, **limits}  # requests defaulted from limits by the API server
    else:
        if requests:
            resources["requests"] = requests
        if limits:
            resources["limits"] = limits
    container: dict[str, Any] = {"name": "main", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04", "resources": resources}
    if rng.random() < 0.1:
        container["ports"] = [{"containerPort": 8080, "hostPort": rng.choice([8080, 9100]), "protocol": "TCP"}]
        s.features.add("host-ports")
    spec: dict[str, Any] = {"containers": [container]}
    if rng.random() < 0.1:
        spec["initContainers"] = [{"name": "init", "image": "busybox",
                                   "resources": {"requests": {"cpu": rng.choice(CPU_REQ), "memory": "128Mi"}}}]
    if rng.random() < 0.3:
        key = rng.choice(["topology.kubernetes.io/zone", "nvidia.com/gpu.product", "pool"])
        value = {"topology.kubernetes.io/zone": rng.choice(ZONES), "pool": rng.choice(["gpu", "general"]),
                 "nvidia.com/gpu.product": rng.choice(["Tesla-T4", "NVIDIA-A10G"])}[key]
        spec["nodeSelector"] = {key: value}
    affinity: dict[str, Any] = {}
    if rng.random() < 0.35:
        terms = []
        for _ in range(rng.choice([1, 1, 2])):
            term: dict[str, Any] = {"matchExpressions": [_requirement(rng, s) for _ in range(rng.randint(1, 2))]}
            terms.append(term)
        if rng.random() < 0.15 and nodes:
            terms = [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                        "values": [rng.choice(nodes)["metadata"]["name"]]}]}]
            s.features.add("match-fields")
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    if rng.random() < 0.3:
        preferred = []
        for _ in range(rng.choice([1, 1, 2, 3])):
            if rng.random() < 0.1 and nodes:
                preference: dict[str, Any] = {"matchFields": [{"key": "metadata.name", "operator": rng.choice(["In", "NotIn"]),
                                                               "values": [rng.choice(nodes)["metadata"]["name"]]}]}
            else:
                preference = {"matchExpressions": [_requirement(rng, s) for _ in range(rng.choice([1, 1, 2]))]}
            preferred.append({"weight": rng.choice([1, 5, 10, 50, 100, rng.randint(1, 100)]), "preference": preference})
        affinity.setdefault("nodeAffinity", {})["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
        s.features.add("preferred-node-affinity")
    if rng.random() < 0.15:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [_pod_term(rng, own)]}
        s.features.add("pod-anti-affinity")
    if rng.random() < 0.08:
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [_pod_term(rng, own)]}
        s.features.add("pod-affinity-scoring")  # pods matched by a placed pod's required affinity are scored
    if rng.random() < 0.04:
        kind = rng.choice(["podAffinity", "podAntiAffinity"])
        affinity.setdefault(kind, {})["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": rng.randint(1, 100), "podAffinityTerm": _pod_term(rng, own)}]
        s.features.add("pod-affinity-scoring")
    if affinity:
        spec["affinity"] = affinity
    if rng.random() < 0.25:
        spec["topologySpreadConstraints"] = _spread(rng, s, own)
    tolerations = []
    r = rng.random()
    if r < 0.45:
        tolerations.append({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
    elif r < 0.55:
        tolerations.append({"key": "nvidia.com/gpu", "operator": "Equal", "value": "true"})
    elif r < 0.6:
        tolerations.append({"operator": "Exists"})
    if rng.random() < 0.15:
        tolerations.append({"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"})
    if rng.random() < 0.25:
        tolerations.extend(rng.sample(SOFT_TOLERATIONS, rng.randint(1, 2)))
    if tolerations:
        spec["tolerations"] = tolerations
    if rng.random() < 0.3:
        # high-never: as high, but preemptionPolicy Never (kgpu must not preempt for it, the oracle never does)
        spec["priorityClassName"] = rng.choice(["high", "low", "high-never"])
    return spec


def generate(seed: int, max_nodes: int = 12, max_classes: int = 10) -> Scenario:
    rng = random.Random(seed)
    s = Scenario(seed)
    s.nodes = [_node(rng, i, s) for i in range(rng.randint(1, max_nodes))]
    s.priority_classes = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"}, "value": -10},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high-never"},
         "value": 1000, "preemptionPolicy": "Never"},
    ]
    for i in range(rng.randint(0, len(s.nodes) * 2)):
        node = rng.choice(s.nodes)
        spec = {"nodeName": node["metadata"]["name"],
                "containers": [{"name": "c", "image": "busybox",
                                "resources": {"requests": {"cpu": rng.choice(CPU_REQ[:4]), "memory": rng.choice(MEM_REQ[:3])}}}]}
        meta: dict[str, Any] = {"name": f"running-{i}", "namespace": rng.choice(["kube-system", "default", "ml"]),
                                "labels": {"app": rng.choice(APPS), "rev": rng.choice(["1", "2"])}}
        if rng.random() < 0.08:
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                _pod_term(rng, meta["labels"]["app"])]}}
            s.features.add("pod-anti-affinity")
        s.bound.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                        "spec": spec, "status": {"phase": "Running"}})
    for c in range(rng.randint(1, max_classes)):
        app = APPS[c % len(APPS)]
        spec = _pod_spec(rng, s, s.nodes, app)
        ns = rng.choice(["default", "ml"])
        labels = {"app": app, "rev": rng.choice(["1", "2"])}
        for r in range(rng.randint(1, 5)):
            s.pending.append({"apiVersion": "v1", "kind": "Pod",
                              "metadata": {"name": f"class{c}-{r}", "namespace": ns, "labels": dict(labels)},
                              "spec": json.loads(json.dumps(spec))})
    return s
