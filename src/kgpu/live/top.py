"""``kgpu top``: GPUs per node and per pool of a live cluster, as ``kubectl describe nodes`` (Allocatable,
Allocated resources) and ``kubectl top nodes`` show CPU and memory.

- allocatable: the node's ``status.allocatable`` of each GPU resource (``nvidia.com/gpu``, its ``.shared``
  form, ``nvidia.com/mig-<profile>``), and the devices NVIDIA's DRA driver publishes for it in ResourceSlices
  (``dra:gpu``, ``dra:mig-<profile>``); with the node's GPU model and the kind of its GPUs (whole, time-slicing
  or MPS replicas, MIG single or mixed, DRA), from the one inventory ``kgpu.model.gpus`` builds;
- requested: what the node's pods that are not finished ask, each pod counted as the scheduler counts it
  (the larger of its containers' sum and its largest init container; requests, else limits, which is
  what a GPU request defaults to); DRA devices: those allocated to ResourceClaims that a pod holds
  (``status.reservedFor``);
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
from kgpu.live.client import NODE, POD, RESOURCECLAIM, RESOURCESLICE, ApiClient, Forbidden, NotServed
from kgpu.model.gpus import DRA_GPU, GpuResource, dra_devices, node_gpus
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
    except OverflowError:
        raise InputError(f"{raw!r} is too large for a count of devices", where=where) from None


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


def _claimed(claims: Iterable[dict[str, Any]], slices: Iterable[Any]) -> dict[str, dict[str, float]]:
    """DRA devices held by pods, by node and by the inventory's label (dra:gpu, dra:mig-<profile>)."""
    where: dict[tuple[str, str, str], tuple[str, str]] = {}
    for node, devices in dra_devices(slices).items():
        inv = node_gpus({}, {}, None, devices)
        labels = {(r.kind, r.profile): r.label for r in inv.resources}
        for d in devices:
            kind = DRA_GPU if d.type == "gpu" else "dra-mig"
            if (kind, d.profile) in labels:
                where[(d.driver, node, d.name)] = (node, labels[(kind, d.profile)])
    by_pool = {(getattr(s, "driver", ""), getattr(s, "pool", "")): getattr(s, "node_name", "") for s in slices}
    out: dict[str, dict[str, float]] = {}
    for claim in claims:
        status = _dig(claim, "status")
        if not status.get("reservedFor"):
            continue
        results = _dig(status, "allocation", "devices").get("results")
        for r in results if isinstance(results, list) else ():
            if not isinstance(r, dict):
                continue
            driver, pool, device = str(r.get("driver") or ""), str(r.get("pool") or ""), str(r.get("device") or "")
            hit = where.get((driver, by_pool.get((driver, pool), pool), device))
            if hit is not None:
                into = out.setdefault(hit[0], {})
                into[hit[1]] = into.get(hit[1], 0.0) + 1
    return out


def _key(r: GpuResource) -> str:
    return r.label if r.kind.startswith("dra") else r.name


def summarize(nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
              util: list[tuple[dict[str, str], float]] | None = None, *, all_nodes: bool = False,
              slices: Iterable[Any] = (), claims: Iterable[dict[str, Any]] = ()) -> dict[str, Any]:
    """The view's data from the objects (and the utilisation series, None: no Prometheus); ``slices`` are typed
    ResourceSlices (``kgpu.model.dra``), ``claims`` the ResourceClaims as the API server serves them."""
    slices = list(slices)
    requested: dict[str, dict[str, float]] = _claimed(claims, slices)
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
    devices = dra_devices(slices)
    by_key: dict[str, str] = {}
    rows: list[dict[str, Any]] = []
    for node in nodes:
        meta = _dig(node, "metadata")
        name = str(meta.get("name") or "")
        labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
        assert isinstance(labels, dict)
        alloc = _gpus(_dig(node, "status", "allocatable"), f"Node/{name}.status.allocatable")
        inv = node_gpus({str(k): str(v) for k, v in labels.items()}, {k: int(v) for k, v in alloc.items()}, None,
                        devices.get(name, ()))
        offered = {_key(r): float(r.allocatable) for r in inv.resources}
        offered.update(alloc)
        asked = requested.get(name, {})
        if any(offered.values()):  # a resource the kubelet keeps at 0 beside those in use (MIG mixed: nvidia.com/gpu)
            offered = {k: v for k, v in offered.items() if v or asked.get(k)}
        if not offered and not asked and not all_nodes:
            continue
        pool, source = pool_of(labels)
        rows.append({
            "node": name, "pool": pool, "poolSource": source,
            "instanceType": _first(labels, INSTANCE_LABELS), "capacityType": _first(labels, CAPACITY_LABELS),
            "gpuProduct": inv.product, "gpuKind": inv.kind, "gpuCount": inv.count,
            "resources": {r: {"allocatable": _num(offered.get(r, 0.0)), "requested": _num(asked.get(r, 0.0))}
                          for r in sorted({*offered, *asked})},
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


def read_dra(client: ApiClient, *, page_size: int = 500) -> tuple[list[Any], list[dict[str, Any]], str]:
    """ResourceSlices (typed, validated as ``kgpu.model.dra`` reads them) and ResourceClaims, where the cluster
    serves resource.k8s.io/v1 and the role may list them; else none, and a note saying why."""
    from kgpu.model.dra import read as read_objects

    try:
        raw = client.list(RESOURCESLICE, page_size=page_size)
        claims = client.list(RESOURCECLAIM, page_size=page_size) if raw else []
    except NotServed:
        return [], [], ""
    except Forbidden as exc:
        return [], [], f"no DRA devices shown: {exc.message}"
    docs = [(s, f"{RESOURCESLICE.plural}[{i}]") for i, s in enumerate(raw) if isinstance(s, dict)]
    return read_objects(docs).slices, claims, ""
