"""``kgpu top``: GPUs per node and per pool, as ``kubectl describe nodes`` (Allocatable, Allocated resources)
and ``kubectl top nodes`` show CPU and memory, from a live cluster or from its objects in a file.

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

A GPU node is one that offers GPUs, holds pods that ask for them, or that doctor counts as one
(``kgpu.doctor.reading.gpu_node_reason``: a GPU instance type, GFD / NFD labels, a GPU resource in its
capacity); one that advertises none is shown with what is wrong, in doctor's terms (``kgpu.doctor.nodes``'
``gpu-node-no-gpus`` and ``gpu-node-missing-gpus``): ``no_gpus`` (no device plugin ever registered them:
``kubectl`` shows ``<none>``), ``plugin_gone`` (registered once, 0 now), ``gpus_unhealthy`` (capacity but 0
allocatable), ``gpus_missing`` (fewer whole GPUs than the type has), ``mig_pending`` / ``mig_failed`` (the MIG
manager's state), beside ``not_ready`` / ``unknown`` (the Ready condition), ``cordoned`` and ``idle`` (GPUs
allocatable, none requested: the node's whole price is idle).

Prices come from the caller (``price_of``: the CLI prices nodes as the node view does, from their
instance-type, capacity-type and region labels over the catalog), so this module stays free of the CLI.

Pools: Karpenter's ``karpenter.sh/nodepool``, EKS managed node groups' ``eks.amazonaws.com/nodegroup``,
eksctl's ``alpha.eksctl.io/nodegroup-name``, GKE's ``cloud.google.com/gke-nodepool``, AKS's ``agentpool``,
TKE's ``tke.cloud.tencent.com/nodepool-id``; a TKE super node (``type: virtual-kubelet``, instance type
``eklet``, as doctor tells them) without one is in ``super-nodes``; any other node in ``-``.

The objects come from the bounded lists (:func:`read`), a snapshot or ``kubectl get -o json`` document
(:func:`from_document`), or the watches of ``--watch`` (:func:`from_watch`, ``kgpu.live.watch``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kgpu.doctor.reading import CatalogTypes
from kgpu.errors import InputError
from kgpu.live.client import (
    NODE,
    POD,
    RESOURCECLAIM,
    RESOURCESLICE,
    ApiClient,
    Forbidden,
    NotServed,
)
from kgpu.live.watch import Cluster
from kgpu.model.gpus import DRA_GPU, GpuResource, NodeGpus, dra_devices, is_gpu, node_gpus
from kgpu.model.nvidia import GPU
from kgpu.model.quantity import parse_quantity

POOL_LABELS = (
    ("karpenter.sh/nodepool", "karpenter"),
    ("eks.amazonaws.com/nodegroup", "eks-nodegroup"),
    ("alpha.eksctl.io/nodegroup-name", "eksctl"),
    ("cloud.google.com/gke-nodepool", "gke"),
    ("kubernetes.azure.com/agentpool", "aks"),
    ("agentpool", "aks"),
    ("tke.cloud.tencent.com/nodepool-id", "tke"),
)
SUPER_POOL = ("super-nodes", "tke-supernode")
CAPACITY_LABELS = (
    "karpenter.sh/capacity-type",
    "eks.amazonaws.com/capacityType",
    "node.kubernetes.io/lifecycle",
)
INSTANCE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")
UTIL_QUERIES = (("nvidia_smi_utilization_gpu_ratio", 1.0), ("DCGM_FI_DEV_GPU_UTIL", 100.0))
NODE_KEYS = ("node", "Hostname", "kubernetes_node", "nodename")
SORT_KEYS = ("pool", "name", "gpu-free", "gpu-req", "price", "idle", "util")
# A node's status codes (docs/live.md): its Ready condition, cordon, idle, and what is wrong with its GPUs.
PROBLEMS = frozenset(
    [
        "not_ready",
        "unknown",
        "no_gpus",
        "plugin_gone",
        "gpus_unhealthy",
        "gpus_missing",
        "mig_pending",
        "mig_failed",
    ]
)
STATUSES = frozenset({"ready", "cordoned", "idle", *PROBLEMS})
Query = Callable[[str], list[tuple[dict[str, str], float]]]
PriceOf = Callable[[str, str, Mapping[str, str]], "float | None"]


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
    return (
        {str(k): _count(v, f"{where}.{k}") for k, v in resources.items() if is_gpu(str(k))}
        if isinstance(resources, dict)
        else {}
    )


def pod_gpus(pod: dict[str, Any], where: str) -> dict[str, float]:
    """GPUs a pod asks, as the scheduler sums them: containers added, init containers' largest, the larger."""
    spec = _dig(pod, "spec")
    total: dict[str, float] = {}
    init: dict[str, float] = {}
    for field_name, acc, add in (("containers", total, True), ("initContainers", init, False)):
        containers = spec.get(field_name)
        for i, c in enumerate(containers if isinstance(containers, list) else ()):
            res = _dig(c, "resources")
            asked = _gpus(res.get("limits"), f"{where}.spec.{field_name}[{i}].resources.limits")
            asked.update(_gpus(res.get("requests"), f"{where}.spec.{field_name}[{i}].resources.requests"))
            for k, v in asked.items():
                acc[k] = acc.get(k, 0.0) + v if add else max(acc.get(k, 0.0), v)
    return {k: max(total.get(k, 0.0), init.get(k, 0.0)) for k in {*total, *init}}


def is_super_node(labels: Mapping[str, Any]) -> bool:
    """A TKE super node (virtual kubelet), as doctor tells one (``kgpu.doctor.state``)."""
    return labels.get("type") == "virtual-kubelet" or _first(labels, INSTANCE_LABELS) == "eklet"


def pool_of(labels: Mapping[str, Any]) -> tuple[str, str]:
    for key, source in POOL_LABELS:
        value = labels.get(key)
        if isinstance(value, str) and value:
            return value, source
    return SUPER_POOL if is_super_node(labels) else ("-", "")


def _first(labels: Mapping[str, Any], keys: Iterable[str]) -> str:
    return next((str(labels[k]) for k in keys if isinstance(labels.get(k), str) and labels[k]), "")


def _capacity_type(labels: Mapping[str, Any]) -> str:
    """on-demand or spot (EKS writes ON_DEMAND / SPOT), as the catalog prices them; "" when unlabelled."""
    value = _first(labels, CAPACITY_LABELS).lower().replace("_", "-")
    return {"ondemand": "on-demand", "normal": "on-demand"}.get(value, value)


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
    by_pool = {
        (getattr(s, "driver", ""), getattr(s, "pool", "")): getattr(s, "node_name", "") for s in slices
    }
    out: dict[str, dict[str, float]] = {}
    for claim in claims:
        status = _dig(claim, "status")
        if not status.get("reservedFor"):
            continue
        results = _dig(status, "allocation", "devices").get("results")
        for r in results if isinstance(results, list) else ():
            if not isinstance(r, dict):
                continue
            driver, pool, device = (
                str(r.get("driver") or ""),
                str(r.get("pool") or ""),
                str(r.get("device") or ""),
            )
            hit = where.get((driver, by_pool.get((driver, pool), pool), device))
            if hit is not None:
                into = out.setdefault(hit[0], {})
                into[hit[1]] = into.get(hit[1], 0.0) + 1
    return out


def _key(r: GpuResource) -> str:
    return r.label if r.kind.startswith("dra") else r.name


def _ready(node: dict[str, Any]) -> str:
    """The Ready condition's status: True, False or Unknown (no condition: Unknown, as kubectl shows it)."""
    for cond in _dig(node, "status").get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return str(cond.get("status") or "Unknown")
    return "Unknown"


def node_status(ready: str, unschedulable: bool, inv: NodeGpus, expected: int, super_node: bool) -> list[str]:
    """The node's status codes (``STATUSES``), before ``idle``: readiness, cordon, and what is wrong with its
    GPUs in the order doctor's ``gpu-node-no-gpus`` decides it."""
    out = ["ready" if ready == "True" else "not_ready" if ready == "False" else "unknown"]
    if unschedulable:
        out.append("cordoned")
    if super_node:
        return out
    if inv.repartitioning:
        out.append("mig_pending")
    elif inv.mig_failed:
        out.append("mig_failed")
    elif inv.units:
        physical = inv.count if inv.dra else inv.whole_equivalent()  # the DRA driver's GPUs, MIG parents too
        if expected and physical is not None and physical < expected:
            out.append("gpus_missing")
    elif inv.capacity_units:
        out.append("gpus_unhealthy")
    elif inv.registered:
        out.append("plugin_gone")
    else:
        out.append("no_gpus")
    return out


def summarize(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    util: list[tuple[dict[str, str], float]] | None = None,
    *,
    all_nodes: bool = False,
    slices: Iterable[Any] = (),
    claims: Iterable[dict[str, Any]] = (),
    price_of: PriceOf | None = None,
    sort_by: str = "pool",
) -> dict[str, Any]:
    """The view's data from the objects (and the utilisation series, None: no Prometheus); ``slices`` are typed
    ResourceSlices (``kgpu.model.dra``), ``claims`` the ResourceClaims as the API server serves them."""
    from kgpu.doctor.reading import gpu_node_reason

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
    types = CatalogTypes()
    prices: dict[tuple[str, str, str], float | None] = {}
    by_key: dict[str, str] = {}
    rows: list[dict[str, Any]] = []
    for node in nodes:
        row = _node_row(node, requested, devices, types, all_nodes, gpu_node_reason)
        if row is None:
            continue
        labels = _dig(node, "metadata", "labels")
        shape = (row["instance_type"], row["capacity_type"], row["region"])
        if price_of is not None and shape not in prices:
            prices[shape] = price_of(
                row["instance_type"],
                row["capacity_type"] or "on-demand",
                {str(k): str(v) for k, v in labels.items()},
            )
        price = prices.get(shape)
        row["hourly_price"] = None if price is None else round(price, 4)
        idle = "idle" in row["status"]
        row["idle_hourly_cost"] = row["hourly_price"] if idle else 0.0
        rows.append(row)
        by_key[row["node"]] = row["node"]
        for addr in _dig(node, "status").get("addresses") or []:
            if isinstance(addr, dict) and isinstance(addr.get("address"), str):
                by_key.setdefault(addr["address"], row["node"])
    if util is not None:
        per_node: dict[str, list[float]] = {}
        for labels, value in util:
            key = _first(labels, NODE_KEYS) or labels.get("instance", "").rsplit(":", 1)[0].strip("[]")
            if key in by_key:
                per_node.setdefault(by_key[key], []).append(value)
        for row in rows:
            values = per_node.get(row["node"], [])
            row["gpus_reporting"] = len(values)
            row["utilization"] = round(sum(values) / len(values), 4) if values else None
    rows = sort_nodes(rows, sort_by)
    pools = _pools(rows)
    return {
        "nodes": rows,
        "pools": pools,
        "totals": _totals(rows),
        "prometheus": util is not None,
        "sort_by": sort_by,
    }


def _node_row(
    node: dict[str, Any],
    requested: Mapping[str, Mapping[str, float]],
    devices: Mapping[str, Any],
    types: CatalogTypes,
    all_nodes: bool,
    gpu_node_reason: Callable[..., str],
) -> dict[str, Any] | None:
    """One node's row of the view, or None for a node without GPUs (unless ``all_nodes``)."""
    meta = _dig(node, "metadata")
    name = str(meta.get("name") or "")
    labels = {str(k): str(v) for k, v in _dig(node, "metadata", "labels").items()}
    where = f"Node/{name}.status"
    alloc = _gpus(_dig(node, "status", "allocatable"), f"{where}.allocatable")
    capacity = _gpus(_dig(node, "status", "capacity"), f"{where}.capacity")
    inv = node_gpus(
        labels,
        {k: int(v) for k, v in alloc.items()},
        {k: int(v) for k, v in capacity.items()},
        devices.get(name, ()),
    )
    offered = {_key(r): float(r.allocatable) for r in inv.resources}
    offered.update(alloc)
    asked = requested.get(name, {})
    if any(offered.values()):  # a resource the kubelet keeps at 0 beside those in use (MIG mixed: gpu)
        offered = {k: v for k, v in offered.items() if v or asked.get(k)}
    itype = _first(labels, INSTANCE_LABELS)
    catalog_type = types.get(itype)
    cap_gpus = capacity.get(GPU)
    gpu_node = (
        bool(inv.resources)
        or bool(asked)
        or bool(gpu_node_reason(labels, None if cap_gpus is None else int(cap_gpus), catalog_type))
    )
    if not gpu_node and not all_nodes:
        return None
    super_node = is_super_node(labels)
    expected = (
        (catalog_type.gpu_count if catalog_type is not None and catalog_type.gpu_manufacturer != "amd" else 0)
        or _label_int(labels.get("nvidia.com/gpu.count"))
        or _label_int(labels.get("karpenter.k8s.aws/instance-gpu-count"))
    )
    status = (
        node_status(_ready(node), _dig(node, "spec").get("unschedulable") is True, inv, expected, super_node)
        if gpu_node
        else ["ready" if _ready(node) == "True" else "not_ready"]
    )
    resources = {
        r: {"allocatable": _num(offered.get(r, 0.0)), "requested": _num(asked.get(r, 0.0))}
        for r in sorted({*offered, *asked})
    }
    total = {
        "allocatable": _num(sum(v["allocatable"] for v in resources.values())),
        "requested": _num(sum(v["requested"] for v in resources.values())),
    }
    total["free"] = _num(total["allocatable"] - total["requested"])
    if (
        gpu_node
        and not super_node
        and total["allocatable"] > 0
        and not total["requested"]
        and status[0] == "ready"
        and not PROBLEMS.intersection(status)
    ):
        status.append("idle")
    product = inv.product or (catalog_type.gpu_display_name if catalog_type is not None and expected else "")
    pool, source = pool_of(labels)
    return {
        "node": name,
        "pool": pool,
        "pool_source": source,
        "super_node": super_node,
        "instance_type": itype,
        "capacity_type": _capacity_type(labels),
        "region": _first(labels, REGION_LABELS),
        "gpu_product": product,
        "gpu_count": inv.count or (expected if product else 0),
        "gpu_memory_mib": inv.memory_mib
        or (catalog_type.gpu_memory_mib if catalog_type is not None and expected else 0),
        "gpu_kind": "super node" if super_node else inv.kind if gpu_node else "-",
        "ready": status[0] == "ready",
        "status": status,
        "resources": resources,
        "gpus": total,
        "hourly_price": None,
        "idle_hourly_cost": 0.0,
        "utilization": None,
        "gpus_reporting": 0,
    }


def _label_int(value: str | None) -> int:
    return int(value) if value is not None and value.isdigit() and len(value) < 6 else 0


def _num(x: float) -> float | int:
    return int(x) if x == int(x) else round(x, 3)


def sort_nodes(rows: list[dict[str, Any]], by: str) -> list[dict[str, Any]]:
    """Rows in the ``--sort-by`` order (``SORT_KEYS``): pool then name (the default), name, most GPUs free,
    most requested, dearest first, idle nodes first (dearest first), least utilised first (unknown last)."""

    def price(r: dict[str, Any]) -> float:
        return -(r["hourly_price"] or 0.0)

    keys: dict[str, Callable[[dict[str, Any]], Any]] = {
        "pool": lambda r: (r["pool"] == "-", r["pool"], r["node"]),
        "name": lambda r: r["node"],
        "gpu-free": lambda r: (-r["gpus"]["free"], r["node"]),
        "gpu-req": lambda r: (-r["gpus"]["requested"], r["node"]),
        "price": lambda r: (r["hourly_price"] is None, price(r), r["node"]),
        "idle": lambda r: ("idle" not in r["status"], price(r), r["node"]),
        "util": lambda r: (r["utilization"] is None, r["utilization"] or 0.0, r["node"]),
    }
    if by not in keys:
        raise InputError(f"cannot sort by {by!r}", where="--sort-by", hint=f"one of {', '.join(SORT_KEYS)}")
    return sorted(rows, key=keys[by])


def _pools(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    pools: dict[str, dict[str, Any]] = {}
    for row in rows:
        p = pools.setdefault(
            row["pool"],
            {
                "pool": row["pool"],
                "source": row["pool_source"],
                "nodes": 0,
                "node_names": [],
                "instance_types": set(),
                "capacity_types": set(),
                "resources": {},
                "gpus": {"allocatable": 0, "requested": 0, "free": 0},
                "hourly_price": None,
                "unpriced_nodes": 0,
                "idle_nodes": 0,
                "idle_hourly_cost": 0.0,
                "problem_nodes": 0,
                "super_nodes": 0,
                "_util": [],
            },
        )
        p["nodes"] += 1
        p["super_nodes"] += row["super_node"]
        p["node_names"].append(row["node"])
        if row["instance_type"]:
            p["instance_types"].add(row["instance_type"])
        if row["capacity_type"]:
            p["capacity_types"].add(row["capacity_type"])
        for r, v in row["resources"].items():
            into = p["resources"].setdefault(r, {"allocatable": 0, "requested": 0})
            for k in into:
                into[k] = _num(into[k] + v[k])
        for k in p["gpus"]:
            p["gpus"][k] = _num(p["gpus"][k] + row["gpus"][k])
        _add_cost(p, row)
        if row["utilization"] is not None:
            p["_util"].append((row["utilization"], row["gpus_reporting"]))
    out = []
    for p in sorted(pools.values(), key=lambda p: (p["pool"] == "-", p["pool"])):
        util = p.pop("_util")
        gpus = sum(n for _, n in util)
        p["utilization"] = round(sum(u * n for u, n in util) / gpus, 4) if gpus else None
        p["instance_types"] = sorted(p["instance_types"])
        p["capacity_types"] = sorted(p["capacity_types"])
        out.append(p)
    return out


def _add_cost(into: dict[str, Any], row: dict[str, Any]) -> None:
    """A node's price, idle cost and problems added to a pool's or the totals' (unpriced nodes counted)."""
    if row["hourly_price"] is None:
        into["unpriced_nodes"] += 1
    else:
        into["hourly_price"] = round((into["hourly_price"] or 0.0) + row["hourly_price"], 4)
    if "idle" in row["status"]:
        into["idle_nodes"] += 1
        into["idle_hourly_cost"] = round(into["idle_hourly_cost"] + (row["idle_hourly_cost"] or 0.0), 4)
    if PROBLEMS.intersection(row["status"]):
        into["problem_nodes"] += 1


def _totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "nodes": len(rows),
        "gpus": {"allocatable": 0, "requested": 0, "free": 0},
        "hourly_price": None,
        "unpriced_nodes": 0,
        "idle_nodes": 0,
        "idle_hourly_cost": 0.0,
        "problem_nodes": 0,
    }
    for row in rows:
        for k in out["gpus"]:
            out["gpus"][k] = _num(out["gpus"][k] + row["gpus"][k])
        _add_cost(out, row)
    return out


def utilization(query: Query) -> list[tuple[dict[str, str], float]]:
    """The exporter's utilisation series as 0..1 ratios: kgpu's (nvidia_gpu_exporter's) name, else DCGM's."""
    for expr, scale in UTIL_QUERIES:
        series = query(expr)
        if series:
            return [(labels, max(0.0, min(value / scale, 1.0))) for labels, value in series]
    return []


# --- reading ----------------------------------------------------------------------------------------------


@dataclass
class Objects:
    """What the view is made of: nodes, pods and ResourceClaims as the API server serves them, typed
    ResourceSlices; ``note`` says why DRA objects are missing (a 403)."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    slices: list[Any] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""


def _typed_slices(raw: Iterable[Any], source: str) -> list[Any]:
    from kgpu.model.dra import read as read_objects

    docs = [(s, f"{source}[{i}]") for i, s in enumerate(raw) if isinstance(s, dict)]
    return list(read_objects(docs).slices) if docs else []


def read(client: ApiClient, *, page_size: int = 500, label_selector: str | None = None) -> Objects:
    """The nodes (of ``label_selector``, as the API server selects them), pods, ResourceSlices and
    ResourceClaims, through the bounded list path; DRA objects where the cluster serves resource.k8s.io/v1 and
    the role may list them, else none and a note saying why."""
    out = Objects(
        client.list(NODE, page_size=page_size, label_selector=label_selector),
        client.list(POD, page_size=page_size),
    )
    out.slices, out.claims, out.note = read_dra(client, page_size=page_size)
    return out


def read_dra(client: ApiClient, *, page_size: int = 500) -> tuple[list[Any], list[dict[str, Any]], str]:
    try:
        raw = client.list(RESOURCESLICE, page_size=page_size)
        claims = client.list(RESOURCECLAIM, page_size=page_size) if raw else []
    except NotServed:
        return [], [], ""
    except Forbidden as exc:
        return [], [], f"no DRA devices shown: {exc.message}"
    return _typed_slices(raw, RESOURCESLICE.plural), claims, ""


def from_document(doc: Any, source: str) -> Objects:
    """The objects of a ``kgpu snapshot`` (ClusterSnapshot) or ``kubectl get -o json`` (List) document, or of
    one object; anything else is bad input naming the file and the item."""
    if not isinstance(doc, dict):
        raise InputError(
            f"expected a ClusterSnapshot, a List or an object, got {type(doc).__name__}", where=source
        )
    items = doc.get("items") if "items" in doc else [doc]
    if not isinstance(items, list):
        raise InputError("items is not a list", where=source)
    out = Objects()
    raw_slices = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InputError(f"items[{i}] is not an object", where=source)
        kind = item.get("kind")
        if kind == "Node":
            out.nodes.append(item)
        elif kind == "Pod":
            out.pods.append(item)
        elif kind == "ResourceSlice":
            raw_slices.append(item)
        elif kind == "ResourceClaim":
            out.claims.append(item)
    out.slices = _typed_slices(raw_slices, f"{source}: ResourceSlices")
    return out


def from_watch(cluster: Cluster) -> Objects:
    """The objects the watches hold now (ResourceSlices typed and checked as a list's are)."""
    nodes, pods, claims = cluster.items(NODE.kind), cluster.items(POD.kind), cluster.items(RESOURCECLAIM.kind)
    try:
        slices = _typed_slices(cluster.items(RESOURCESLICE.kind), "resourceslices")
    except InputError as exc:
        return Objects(nodes, pods, [], claims, f"no DRA devices shown: {exc.line()}")
    return Objects(nodes, pods, slices, claims, cluster.note)
