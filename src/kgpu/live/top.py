"""``kgpu top``: GPUs per node and per pool of a live cluster, as ``kubectl describe nodes`` (Allocatable,
Allocated resources) and ``kubectl top nodes`` show CPU and memory.

- allocatable: the node's ``status.allocatable`` of each GPU resource (``nvidia.com/gpu``, its ``.shared``
  form, ``nvidia.com/mig-<profile>``);
- requested: what the node's pods that are not finished ask, each pod counted as the scheduler counts it
  (the larger of its containers' sum and its largest init container; requests, else limits, which is
  what a GPU request defaults to);
- used: with ``--prometheus URL``, the exporter's ``nvidia_smi_utilization_gpu_ratio`` (dcgm-exporter's
  ``DCGM_FI_DEV_GPU_UTIL`` percent when the first has no series), averaged over the GPUs each node
  reports. A series is a node's by its ``node`` label (the rendered ServiceMonitor's relabeling),
  ``Hostname`` (dcgm names), ``kubernetes_node``, or the host of ``instance`` (a node's name or address).

Pools: Karpenter's ``karpenter.sh/nodepool``, EKS managed node groups' ``eks.amazonaws.com/nodegroup``,
eksctl's ``alpha.eksctl.io/nodegroup-name``, GKE's ``cloud.google.com/gke-nodepool``, AKS's ``agentpool``,
TKE's ``tke.cloud.tencent.com/nodepool-id``; a node with none is in pool ``-``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kgpu.errors import InputError
from kgpu.live.client import NODE, POD, ApiClient
from kgpu.model.quantity import parse_quantity
from kgpu.model.sharing import is_gpu_resource

POOL_LABELS = (
    ("karpenter.sh/nodepool", "karpenter"),
    ("eks.amazonaws.com/nodegroup", "eks-nodegroup"),
    ("alpha.eksctl.io/nodegroup-name", "eksctl"),
    ("cloud.google.com/gke-nodepool", "gke"),
    ("kubernetes.azure.com/agentpool", "aks"),
    ("agentpool", "aks"),
    ("tke.cloud.tencent.com/nodepool-id", "tke"),
)
CAPACITY_LABELS = ("karpenter.sh/capacity-type", "eks.amazonaws.com/capacityType", "node.kubernetes.io/lifecycle")
INSTANCE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
UTIL_QUERIES = (("nvidia_smi_utilization_gpu_ratio", 1.0), ("DCGM_FI_DEV_GPU_UTIL", 100.0))
NODE_KEYS = ("node", "Hostname", "kubernetes_node", "nodename")
Query = Callable[[str], list[tuple[dict[str, str], float]]]


def _dig(obj: Any, *keys: str) -> dict[str, Any]:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj if isinstance(obj, dict) else {}


def _count(raw: Any, where: str) -> float:
    try:
        return float(parse_quantity(raw))
    except InputError:
        raise InputError(f"{raw!r} is not a quantity", where=where) from None


def _gpus(resources: Any, where: str) -> dict[str, float]:
    return {str(k): _count(v, f"{where}.{k}") for k, v in resources.items() if is_gpu_resource(str(k))} \
        if isinstance(resources, dict) else {}


def pod_gpus(pod: dict[str, Any], where: str) -> dict[str, float]:
    """GPUs a pod asks, as the scheduler sums them: containers added, init containers' largest, the larger."""
    spec = _dig(pod, "spec")
    total: dict[str, float] = {}
    init: dict[str, float] = {}
    for field, acc, add in (("containers", total, True), ("initContainers", init, False)):
        containers = spec.get(field)
        for i, c in enumerate(containers if isinstance(containers, list) else ()):
            res = _dig(c, "resources")
            asked = _gpus(res.get("limits"), f"{where}.spec.{field}[{i}].resources.limits")
            asked.update(_gpus(res.get("requests"), f"{where}.spec.{field}[{i}].resources.requests"))
            for k, v in asked.items():
                acc[k] = acc.get(k, 0.0) + v if add else max(acc.get(k, 0.0), v)
    return {k: max(total.get(k, 0.0), init.get(k, 0.0)) for k in {*total, *init}}


def pool_of(labels: dict[str, Any]) -> tuple[str, str]:
    for key, source in POOL_LABELS:
        value = labels.get(key)
        if isinstance(value, str) and value:
            return value, source
    return "-", ""


def _first(labels: dict[str, Any], keys: Iterable[str]) -> str:
    return next((str(labels[k]) for k in keys if isinstance(labels.get(k), str) and labels[k]), "")


def summarize(nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
              util: list[tuple[dict[str, str], float]] | None = None, *, all_nodes: bool = False) -> dict[str, Any]:
    """The view's data from the objects (and the utilisation series, None: no Prometheus)."""
    requested: dict[str, dict[str, float]] = {}
    for n, pod in enumerate(pods):
        name = _dig(pod, "spec").get("nodeName")
        phase = _dig(pod, "status").get("phase")
        if not isinstance(name, str) or not name or phase in ("Succeeded", "Failed"):
            continue
        meta = _dig(pod, "metadata")
        where = f"Pod/{meta.get('namespace', 'default')}/{meta.get('name', n)}"
        into = requested.setdefault(name, {})
        for k, v in pod_gpus(pod, where).items():
            into[k] = into.get(k, 0.0) + v
    by_key: dict[str, str] = {}
    rows: list[dict[str, Any]] = []
    for node in nodes:
        meta = _dig(node, "metadata")
        name = str(meta.get("name") or "")
        labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
        assert isinstance(labels, dict)
        alloc = _gpus(_dig(node, "status", "allocatable"), f"Node/{name}.status.allocatable")
        asked = requested.get(name, {})
        if not alloc and not asked and not all_nodes:
            continue
        pool, source = pool_of(labels)
        rows.append({
            "node": name, "pool": pool, "poolSource": source,
            "instanceType": _first(labels, INSTANCE_LABELS), "capacityType": _first(labels, CAPACITY_LABELS),
            "gpuProduct": str(labels.get("nvidia.com/gpu.product") or ""),
            "resources": {r: {"allocatable": _num(alloc.get(r, 0.0)), "requested": _num(asked.get(r, 0.0))}
                          for r in sorted({*alloc, *asked})},
            "utilization": None, "gpusReporting": 0,
        })
        by_key[name] = name
        for addr in _dig(node, "status").get("addresses") or []:
            if isinstance(addr, dict) and isinstance(addr.get("address"), str):
                by_key.setdefault(addr["address"], name)
    if util is not None:
        per_node: dict[str, list[float]] = {}
        for labels, value in util:
            key = _first(labels, NODE_KEYS) or labels.get("instance", "").rsplit(":", 1)[0].strip("[]")
            if key in by_key:
                per_node.setdefault(by_key[key], []).append(value)
        for row in rows:
            values = per_node.get(row["node"], [])
            row["gpusReporting"] = len(values)
            row["utilization"] = round(sum(values) / len(values), 4) if values else None
    return {"nodes": rows, "pools": _pools(rows), "prometheus": util is not None}


def _num(x: float) -> float | int:
    return int(x) if x == int(x) else round(x, 3)


def _pools(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    pools: dict[str, dict[str, Any]] = {}
    for row in rows:
        p = pools.setdefault(row["pool"], {"pool": row["pool"], "source": row["poolSource"], "nodes": 0,
                                           "nodeNames": [],
                                           "instanceTypes": set(), "capacityTypes": set(), "resources": {},
                                           "_util": []})
        p["nodes"] += 1
        p["nodeNames"].append(row["node"])
        if row["instanceType"]:
            p["instanceTypes"].add(row["instanceType"])
        if row["capacityType"]:
            p["capacityTypes"].add(row["capacityType"])
        for r, v in row["resources"].items():
            into = p["resources"].setdefault(r, {"allocatable": 0, "requested": 0})
            into["allocatable"] = _num(into["allocatable"] + v["allocatable"])
            into["requested"] = _num(into["requested"] + v["requested"])
        if row["utilization"] is not None:
            p["_util"].append((row["utilization"], row["gpusReporting"]))
    out = []
    for p in sorted(pools.values(), key=lambda p: (p["pool"] == "-", p["pool"])):
        util = p.pop("_util")
        gpus = sum(n for _, n in util)
        p["utilization"] = round(sum(u * n for u, n in util) / gpus, 4) if gpus else None
        p["instanceTypes"] = sorted(p["instanceTypes"])
        p["capacityTypes"] = sorted(p["capacityTypes"])
        out.append(p)
    return out


def utilization(query: Query) -> list[tuple[dict[str, str], float]]:
    """The exporter's utilisation series as 0..1 ratios: kgpu's (nvidia_gpu_exporter's) name, else DCGM's."""
    for expr, scale in UTIL_QUERIES:
        series = query(expr)
        if series:
            return [(labels, max(0.0, min(value / scale, 1.0))) for labels, value in series]
    return []


def read(client: ApiClient, *, page_size: int = 500) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The nodes and pods the view is made of, through the bounded list path."""
    return client.list(NODE, page_size=page_size), client.list(POD, page_size=page_size)
