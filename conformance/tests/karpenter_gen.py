"""Seeded random Karpenter scenarios: profile pools (rendered to NodePools), DaemonSets and pending pods.

One scenario is a kgpu profile (EKS, Karpenter, one region, some zones) whose Karpenter pools are drawn at
random (requirement shorthand that renders to In/Gt/Lt, or Karpenter's native requirements with any
operator, ``minValues``, alias and custom keys; capacity types, zones, labels, taints incl.
PreferNoSchedule, weights, limits incl. ``nodes``), DaemonSets (requests, host ports, node selectors) and
pod classes (CPU/memory/GPU requests, node selectors, required node affinity with every operator and OR'ed
terms, alias keys such as ``beta.kubernetes.io/instance-type``, tolerations, host ports, topology
spread on zone and hostname with maxSkew 1-2, sometimes minDomains). The same objects go to kgpu (``simulate`` with the
profile's provisioner) and, as Kubernetes/Karpenter JSON, to the oracle; the NodePools are what
``kgpu render`` writes for the profile.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

REGION = "us-west-2"
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d")
CATEGORIES = ("c", "g", "gr", "m", "p", "r", "t")
FAMILIES = ("c5", "c6i", "c7i", "g4dn", "g5", "g5g", "g6", "g6e", "m5", "m6i", "m7i", "p3", "p4d", "r5", "t3")
GPU_NAMES = ("a10g", "l4", "l40s", "t4", "v100", "a100", "h100")
TYPES = (
    "c5.2xlarge",
    "m5.xlarge",
    "m6i.4xlarge",
    "r5.2xlarge",
    "g4dn.xlarge",
    "g5.2xlarge",
    "g6.xlarge",
    "g5.12xlarge",
    "p3.2xlarge",
    "m7i.large",
    "c7i.4xlarge",
    "t3.large",
)
AWS = "karpenter.k8s.aws/"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}


@dataclass
class Scenario:
    seed: int
    profile: dict[str, Any]
    daemonsets: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    overlays: list[dict[str, Any]] = field(default_factory=list)  # the input's NodeOverlays

    @property
    def zones(self) -> list[str]:
        return list(self.profile["cluster"]["zones"])


def _pick(r: random.Random, seq: tuple[str, ...] | list[str], lo: int = 1, hi: int = 3) -> list[str]:
    return sorted(r.sample(list(seq), r.randint(lo, min(hi, len(seq)))))


def _range(r: random.Random, values: tuple[int, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    if r.random() < 0.6:
        out["min"] = r.choice(values)
    if r.random() < 0.6:
        out["max"] = max(out.get("min", 0), r.choice(values))
    return out or {"min": values[0]}


def _pool(r: random.Random, i: int, zones: list[str]) -> dict[str, Any]:
    gpu = r.random() < 0.5
    req: dict[str, Any] = {}
    if gpu:
        choice = r.random()
        if choice < 0.35:
            req["families"] = _pick(r, ("g4dn", "g5", "g6", "g6e", "p3", "p4d"), 1, 3)
        elif choice < 0.6:
            req["gpuNames"] = _pick(r, GPU_NAMES, 1, 3)
        elif choice < 0.8:
            req["categories"] = _pick(r, ("g", "p"), 1, 2)
        else:
            req["gpuCount"] = {"min": r.choice((1, 1, 2, 4))}
        if r.random() < 0.3:
            req["gpuMemoryGiB"] = _range(r, (16, 24, 32, 48, 80))
    else:
        choice = r.random()
        if choice < 0.4:
            req["categories"] = _pick(r, ("c", "m", "r", "t"), 1, 3)
        elif choice < 0.7:
            req["families"] = _pick(r, ("c5", "c6i", "c7i", "m5", "m6i", "m7i", "r5", "t3"), 1, 4)
        # else: no category: every type of the region, GPU ones included
    if r.random() < 0.3:
        req["generation"] = _range(r, (4, 5, 6, 7))
    if r.random() < 0.3:
        req["cpu"] = _range(r, (2, 4, 8, 16, 32, 64))
    if r.random() < 0.15:
        req["arch"] = ["amd64", "arm64"]
    pool: dict[str, Any] = {
        "name": f"pool-{i}",
        "kind": "karpenter",
        "requirements": req,
        "capacityTypes": _pick(r, ("spot", "on-demand"), 1, 2),
        "devicePlugin": "none",
    }
    if r.random() < 0.4:
        # Karpenter's native requirements instead of the shorthand: any operator, minValues, aliases
        pool["requirements"] = _native(r, gpu, zones)
        if any(q["key"] == "karpenter.sh/capacity-type" for q in pool["requirements"]):
            del pool["capacityTypes"]
    if r.random() < 0.1:
        pool["instanceTypes"] = _pick(r, TYPES, 2, 6)
    if r.random() < 0.25:
        pool["zones"] = _pick(r, zones, 1, len(zones))
    if r.random() < 0.4:
        pool["labels"] = {"team": r.choice(("ml", "web", "batch"))}
        if isinstance(pool["requirements"], list):  # a label and a requirement on one key: one or the other
            pool["requirements"] = [q for q in pool["requirements"] if q["key"] != "team"]
    taints = []
    if gpu and r.random() < 0.6:
        taints.append(dict(GPU_TAINT))
    if r.random() < 0.2:
        taints.append({"key": "dedicated", "value": r.choice(("ml", "web")), "effect": "NoSchedule"})
    if r.random() < 0.15:
        taints.append({"key": "spare", "effect": "PreferNoSchedule"})
    if taints:
        pool["taints"] = taints
    if r.random() < 0.6:
        pool["weight"] = r.choice((1, 10, 10, 50, 100))
    if r.random() < 0.3:
        limits: dict[str, str] = {}
        for key, values in (
            ("cpu", ("8", "32", "100", "1000")),
            ("memory", ("64Gi", "512Gi")),
            ("nvidia.com/gpu", ("1", "4", "16")),
            ("nodes", ("1", "2", "5")),
        ):
            if r.random() < 0.4:
                limits[key] = r.choice(values)
        if limits:
            pool["limits"] = limits
    return pool


def _native(r: random.Random, gpu: bool, zones: list[str]) -> list[dict[str, Any]]:
    """A NodePool's own requirements list: a family or category In (sometimes with minValues), and a few
    of: NotIn, Exists/DoesNotExist on the GPU name, Gt/Lt on integer labels, capacity type, zone, an alias
    key, a custom key with In values."""
    reqs: list[dict[str, Any]] = []
    if gpu:
        fams = _pick(r, ("g4dn", "g5", "g6", "g6e", "p3", "p4d"), 1, 4)
        reqs.append({"key": AWS + "instance-family", "operator": "In", "values": fams})
        if r.random() < 0.5:
            reqs.append({"key": AWS + "instance-gpu-name", "operator": "Exists"})
    elif r.random() < 0.6:
        cats = _pick(r, ("c", "m", "r", "t"), 1, 3)
        reqs.append({"key": AWS + "instance-category", "operator": "In", "values": cats})
        if r.random() < 0.5:
            reqs.append({"key": AWS + "instance-gpu-name", "operator": "DoesNotExist"})
    if reqs and r.random() < 0.4:
        reqs[0]["minValues"] = r.randint(1, len(reqs[0]["values"]))
    if r.random() < 0.3:
        reqs.append(
            {
                "key": "node.kubernetes.io/instance-type",
                "operator": "In",
                "values": _pick(r, TYPES, 3, 8),
                "minValues": r.choice((1, 2, 3)),
            }
        )
    extras = [
        lambda: {"key": AWS + "instance-family", "operator": "NotIn", "values": _pick(r, FAMILIES, 1, 3)},
        lambda: {
            "key": AWS + "instance-generation",
            "operator": r.choice(("Gt", "Lt")),
            "values": [str(r.choice((4, 5, 6)))],
        },
        lambda: {
            "key": AWS + "instance-cpu",
            "operator": r.choice(("Gt", "Lt")),
            "values": [str(r.choice((3, 7, 15, 31)))],
        },
        lambda: {"key": AWS + "instance-size", "operator": "NotIn", "values": ["metal", "large"]},
        lambda: {
            "key": AWS + "instance-network-bandwidth",
            "operator": r.choice(("Gt", "Lt")),
            "values": [str(r.choice((1000, 5000, 20000)))],
        },
        lambda: {
            "key": AWS + "instance-cpu-manufacturer",
            "operator": r.choice(("In", "NotIn")),
            "values": _pick(r, ("intel", "amd", "aws"), 1, 2),
        },
        lambda: r.choice(
            (
                {"key": AWS + "instance-hypervisor", "operator": "In", "values": ["nitro"]},
                {"key": AWS + "instance-hypervisor", "operator": "NotIn", "values": ["nitro"]},
                {"key": AWS + "instance-local-nvme", "operator": r.choice(("Exists", "DoesNotExist"))},
                {"key": AWS + "instance-local-nvme", "operator": "Gt", "values": [str(r.choice((200, 1000)))]},
                {"key": AWS + "instance-ebs-bandwidth", "operator": r.choice(("Gt", "Lt")),
                 "values": [str(r.choice((4750, 10000, 20000)))]},
                {"key": AWS + "instance-encryption-in-transit-supported", "operator": "In", "values": ["true"]},
            )
        ),
        lambda: {
            "key": "karpenter.sh/capacity-type",
            "operator": "In",
            "values": _pick(r, ("spot", "on-demand"), 1, 2),
        },
        lambda: {
            "key": "topology.kubernetes.io/zone",
            "operator": "In",
            "values": _pick(r, zones, 1, len(zones)),
        },
        lambda: {"key": "beta.kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        lambda: {"key": "team", "operator": "In", "values": _pick(r, ("ml", "web", "batch"), 1, 2)},
        lambda: {
            "key": AWS + "instance-cpu",
            "operator": "Gt",
            "values": ["1"],
            "minValues": r.choice((2, 3)),
        },
    ]
    for make in r.sample(extras, r.randint(1, 3)):
        reqs.append(make())
    return reqs


def _expr(r: random.Random, pools: list[dict[str, Any]], zones: list[str]) -> dict[str, Any]:
    kind = r.randrange(15)
    if kind == 13:
        return {
            "key": "beta.kubernetes.io/instance-type",
            "operator": r.choice(("In", "NotIn")),
            "values": _pick(r, TYPES, 1, 4),
        }
    if kind == 14:
        return {
            "key": "failure-domain.beta.kubernetes.io/zone",
            "operator": "In",
            "values": _pick(r, zones, 1, 2),
        }
    if kind == 0:
        return {"key": "topology.kubernetes.io/zone", "operator": "In", "values": _pick(r, zones, 1, 2)}
    if kind == 1:
        return {
            "key": "karpenter.sh/capacity-type",
            "operator": r.choice(("In", "NotIn")),
            "values": [r.choice(("spot", "on-demand"))],
        }
    if kind == 2:
        return {"key": AWS + "instance-category", "operator": "In", "values": _pick(r, CATEGORIES, 1, 3)}
    if kind == 3:
        return {"key": AWS + "instance-family", "operator": "NotIn", "values": _pick(r, FAMILIES, 1, 4)}
    if kind == 4:
        return {
            "key": AWS + "instance-cpu",
            "operator": r.choice(("Gt", "Lt")),
            "values": [str(r.choice((3, 7, 15, 31, 63)))],
        }
    if kind == 5:
        return {
            "key": AWS + "instance-generation",
            "operator": r.choice(("Gt", "Lt")),
            "values": [str(r.choice((4, 5, 6)))],
        }
    if kind == 6:
        return {"key": AWS + "instance-gpu-name", "operator": r.choice(("Exists", "DoesNotExist"))}
    if kind == 7:
        return {"key": AWS + "instance-gpu-name", "operator": "In", "values": _pick(r, GPU_NAMES, 1, 2)}
    if kind == 8:
        return {"key": "kubernetes.io/arch", "operator": "In", "values": [r.choice(("amd64", "arm64"))]}
    if kind == 9:
        return {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": _pick(r, TYPES, 1, 4)}
    if kind == 10:
        op = r.choice(("In", "Exists", "DoesNotExist", "NotIn"))
        expr: dict[str, Any] = {"key": "team", "operator": op}
        if op in ("In", "NotIn"):
            expr["values"] = [r.choice(("ml", "web", "batch"))]
        return expr
    if kind == 11:
        return {"key": "karpenter.sh/nodepool", "operator": "In", "values": [r.choice(pools)["name"]]}
    return {"key": "example.com/rack", "operator": "In", "values": ["r1"]}


def _pod_class(
    r: random.Random,
    c: int,
    pools: list[dict[str, Any]],
    zones: list[str],
    daemon_ports: list[int],
    s: random.Random,
) -> tuple[dict[str, Any], int]:
    gpus = r.choice((0, 0, 0, 1, 1, 2, 4, 8)) if r.random() < 0.5 else 0
    cpu_m = r.choice((100, 250, 500, 1000, 1500, 2000, 3500, 4000, 7000, 10000, 16000, 30000))
    mem_mi = r.choice((128, 512, 1024, 2048, 4096, 8192, 16384, 30000, 65536, 200000))
    requests: dict[str, str] = {"cpu": f"{cpu_m}m", "memory": f"{mem_mi}Mi"}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    app = f"app-{c}"
    container: dict[str, Any] = {"name": "main", "image": "busybox", "resources": {"requests": requests}}
    if gpus:
        container["resources"]["limits"] = {"nvidia.com/gpu": str(gpus)}
    replicas = r.choice((1, 1, 2, 3, 5, 8))
    if r.random() < 0.12:
        # One pod per host port: Karpenter v1.8.0 shares one host-port table between the NodeClaims of a
        # NodePool (fixed upstream by kubernetes-sigs/karpenter#3022), so a second pod with the same port
        # fails there even on another node. A DaemonSet's port on the same node is the behaviour under test.
        port = r.choice([8080 + c, *daemon_ports])
        container["ports"] = [{"containerPort": port, "hostPort": port}]
        replicas = 1
    spec: dict[str, Any] = {"containers": [container]}
    if r.random() < 0.35:
        expr = _expr(r, pools, zones)
        if expr["operator"] == "In":
            spec["nodeSelector"] = {expr["key"]: expr["values"][0]}
    if r.random() < 0.45:
        terms = []
        for _ in range(1 if r.random() < 0.8 else 2):
            terms.append({"matchExpressions": [_expr(r, pools, zones) for _ in range(r.randint(1, 2))]})
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        }
    tolerations = []
    if gpus or r.random() < 0.3:
        tolerations.append({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
    if r.random() < 0.2:
        tolerations.append(
            {
                "key": "dedicated",
                "operator": "Equal",
                "value": r.choice(("ml", "web")),
                "effect": "NoSchedule",
            }
        )
    if r.random() < 0.1:
        tolerations.append({"operator": "Exists"})
    if tolerations:
        spec["tolerations"] = tolerations
    if r.random() < 0.15:
        # the variations come from their own stream ``s``, so the rest of the scenario stays what it was
        selector = {"matchLabels": {"app": app}}
        zone: dict[str, Any] = {
            "maxSkew": s.choice((1, 1, 2)),
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": selector,
        }
        if s.random() < 0.15:
            zone["minDomains"] = s.randint(2, 4)
        host = {
            "maxSkew": s.choice((1, 2)),
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": selector,
        }
        shape = s.random()
        spec["topologySpreadConstraints"] = (
            [zone] if shape < 0.5 else [host] if shape < 0.75 else [zone, host]
        )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": app, "namespace": "default", "labels": {"app": app}},
        "spec": spec,
    }
    return pod, replicas


def _preferences(p: random.Random, spec: dict[str, Any], pools: list[dict[str, Any]], zones: list[str]) -> None:
    """Preferences, from their own stream ``p``: a third of the spread constraints become ScheduleAnyway, and
    a quarter of the pod classes get preferred node affinity (one to three terms of one or two expressions,
    weights that may tie: Karpenter keeps equal weights in order)."""
    for c in spec.get("topologySpreadConstraints", []):
        if p.random() < 0.35:
            c["whenUnsatisfiable"] = "ScheduleAnyway"
            c.pop("minDomains", None)  # only allowed with DoNotSchedule
    if p.random() >= 0.25:
        return
    preferred = [
        {
            "weight": p.choice((1, 10, 50, 50, 100)),
            "preference": {"matchExpressions": [_expr(p, pools, zones) for _ in range(p.randint(1, 2))]},
        }
        for _ in range(p.randint(1, 3))
    ]
    spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})[
        "preferredDuringSchedulingIgnoredDuringExecution"
    ] = preferred


def _daemonset(r: random.Random, i: int) -> tuple[dict[str, Any], int | None]:
    requests = {
        "cpu": f"{r.choice((50, 100, 200, 500, 1000))}m",
        "memory": f"{r.choice((64, 128, 256, 1024))}Mi",
    }
    container: dict[str, Any] = {"name": "agent", "image": "busybox", "resources": {"requests": requests}}
    port = None
    if r.random() < 0.25:
        port = 9400 + i
        container["ports"] = [{"containerPort": port, "hostPort": port}]
    spec: dict[str, Any] = {"containers": [container]}
    if r.random() < 0.5:
        spec["tolerations"] = [{"operator": "Exists"}]
    if r.random() < 0.25:
        spec["nodeSelector"] = {"team": r.choice(("ml", "web", "batch"))}
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": f"agent-{i}", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"ds": f"agent-{i}"}},
            "template": {"metadata": {"labels": {"ds": f"agent-{i}"}}, "spec": spec},
        },
    }
    return ds, port


FUSE = "smarter-devices/fuse"


def _init_and_capacity_type(i: random.Random, spec: dict[str, Any]) -> None:
    """From their own stream ``i``: a fifth of the pod classes get init containers (a plain one, a sidecar
    with ``restartPolicy: Always``, or both: kube-scheduler and Karpenter take the larger of the init
    peak and the sidecars plus the main containers), and a fifth a ``karpenter.sh/capacity-type`` node
    selector (spot or on-demand: the claim's offerings, and the price it launches at)."""
    if i.random() < 0.2:
        inits = []
        shape = i.random()
        if shape < 0.7:  # a plain init container, often asking more than the main one
            inits.append(
                {
                    "name": "init",
                    "image": "busybox",
                    "resources": {"requests": {
                        "cpu": f"{i.choice((100, 1000, 4000, 12000))}m",
                        "memory": f"{i.choice((64, 2048, 16384))}Mi",
                    }},
                }
            )
        if shape >= 0.4:  # a sidecar: runs beside the main containers
            inits.append(
                {
                    "name": "sidecar",
                    "image": "busybox",
                    "restartPolicy": "Always",
                    "resources": {"requests": {
                        "cpu": f"{i.choice((50, 500, 2000))}m",
                        "memory": f"{i.choice((64, 1024, 8192))}Mi",
                    }},
                }
            )
        spec["initContainers"] = inits
    if i.random() < 0.2:
        spec.setdefault("nodeSelector", {})["karpenter.sh/capacity-type"] = i.choice(("spot", "on-demand"))


def _sharing(o: random.Random, pools: list[dict[str, Any]]) -> None:
    """From the overlay stream ``o``: some GPU pools share their GPUs (time-slicing, 2 or 4 replicas), with
    the NodeOverlay kgpu renders (``nodeOverlay``) or without it."""
    for pool in pools:
        gpu_taint = any(t["key"] == "nvidia.com/gpu" for t in pool.get("taints", ()))
        if (gpu_taint or o.random() < 0.3) and o.random() < 0.45:
            pool["sharing"] = {
                "timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": o.choice((2, 4))}]},
                "nodeOverlay": o.random() < 0.6,
            }


def _overlay_requirement(o: random.Random, pools: list[dict[str, Any]], zones: list[str]) -> dict[str, Any]:
    kind = o.randrange(8)
    if kind == 0:
        return {"key": AWS + "instance-family", "operator": "In", "values": _pick(o, FAMILIES, 1, 4)}
    if kind == 1:
        return {"key": AWS + "instance-gpu-name", "operator": o.choice(("Exists", "DoesNotExist"))}
    if kind == 2:
        return {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [o.choice(("spot", "on-demand"))]}
    if kind == 3:
        return {"key": "topology.kubernetes.io/zone", "operator": "In", "values": _pick(o, zones, 1, 2)}
    if kind == 4:
        return {"key": "karpenter.sh/nodepool", "operator": "In", "values": [o.choice(pools)["name"]]}
    if kind == 5:
        return {"key": AWS + "instance-category", "operator": "In", "values": _pick(o, CATEGORIES, 1, 3)}
    if kind == 6:
        return {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": _pick(o, TYPES, 2, 6)}
    return {"key": AWS + "instance-gpu-count", "operator": "In", "values": ["1"]}


def _overlays(o: random.Random, pools: list[dict[str, Any]], zones: list[str]) -> list[dict[str, Any]]:
    """NodeOverlays (karpenter.sh/v1alpha1): one to three, each with one or two requirements and a price,
    a price adjustment or capacity (an extended resource, or nvidia.com/gpu on 1-GPU types of a
    time-sliced pool that has no overlay of its own), weights that may tie (equal weights on one offering
    or resource conflict)."""
    out = []
    for i in range(o.randint(1, 3)):
        spec: dict[str, Any] = {
            "requirements": [_overlay_requirement(o, pools, zones) for _ in range(o.randint(1, 2))]
        }
        what = o.random()
        if what < 0.3:
            spec["price"] = o.choice(("0.01", "0.05", "0.2", "1.5", "40"))
        elif what < 0.6:
            spec["priceAdjustment"] = o.choice(("+50%", "-30%", "-90%", "+0.5", "-0.05", "-100"))
        else:
            shared = [p for p in pools if p.get("sharing") and not p["sharing"]["nodeOverlay"]]
            if shared and o.random() < 0.6:
                pool = o.choice(shared)
                replicas = pool["sharing"]["timeSlicing"]["resources"][0]["replicas"]
                spec["requirements"] = [
                    {"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool["name"]]},
                    {"key": AWS + "instance-gpu-count", "operator": "In", "values": ["1"]},
                ]
                spec["capacity"] = {"nvidia.com/gpu": str(replicas)}
            else:
                spec["capacity"] = {FUSE: str(o.choice((1, 2, 4)))}
        weight = o.choice((None, 1, 10, 10, 50))
        if weight is not None:
            spec["weight"] = weight
        out.append(
            {
                "apiVersion": "karpenter.sh/v1alpha1",
                "kind": "NodeOverlay",
                "metadata": {"name": f"overlay-{i}"},
                "spec": spec,
            }
        )
    return out


def scenario(seed: int) -> Scenario:
    r = random.Random(seed)
    zones = _pick(r, ZONES, 2, 4)
    pools = [_pool(r, i, zones) for i in range(r.randint(1, 3))]
    profile = {
        "apiVersion": "kgpu.dev/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": f"case-{seed}"},
        "provider": "eks",
        "autoscaler": "karpenter",
        "cluster": {"region": REGION, "zones": zones},
        "monitoring": {"enabled": False},
        "pools": pools,
    }
    daemonsets: list[dict[str, Any]] = []
    ports: list[int] = []
    for i in range(r.choice((0, 0, 1, 2))):
        ds, port = _daemonset(r, i)
        daemonsets.append(ds)
        if port:
            ports.append(port)
    pods: list[dict[str, Any]] = []
    spread = random.Random(f"spread-{seed}")
    prefs = random.Random(f"preferences-{seed}")
    # NodeOverlays and shared GPUs in a third of the scenarios, from their own stream: the rest of the
    # scenario stays what it was
    o = random.Random(f"overlays-{seed}")
    init = random.Random(f"init-{seed}")
    overlays: list[dict[str, Any]] = []
    fuse = False
    if o.random() < 0.35:
        _sharing(o, pools)
        overlays = _overlays(o, pools, zones)
        fuse = any(FUSE in ov["spec"].get("capacity", {}) for ov in overlays)
        # hugepages, from a stream of their own (the other draws stay what they were): Karpenter reserves
        # them from the type's allocatable memory
        pages = random.Random(f"hugepages-{seed}")
        if pages.random() < 0.4:
            overlays.append({
                "apiVersion": "karpenter.sh/v1alpha1",
                "kind": "NodeOverlay",
                "metadata": {"name": "overlay-hugepages"},
                "spec": {"requirements": [_overlay_requirement(pages, pools, zones)],
                         "capacity": {pages.choice(("hugepages-2Mi", "hugepages-1Gi")): pages.choice(("1Gi", "4Gi", "16Gi", "64Gi"))}},
            })
    for c in range(r.randint(1, 6)):
        template, replicas = _pod_class(r, c, pools, zones, ports, spread)
        _preferences(prefs, template["spec"], pools, zones)
        _init_and_capacity_type(init, template["spec"])
        if fuse and o.random() < 0.4:
            resources = template["spec"]["containers"][0]["resources"]
            resources["requests"][FUSE] = "1"
            resources.setdefault("limits", {})[FUSE] = "1"  # an extended resource's limit is its request
        for k in range(replicas):
            pod = {
                **template,
                "metadata": {**template["metadata"], "name": f"{template['metadata']['name']}-{k}"},
            }
            pods.append(pod)
    keys = random.Random(f"custom-keys-{seed}")
    if keys.random() < 0.25:
        _custom_keys(keys, pools, pods)
    return Scenario(seed, profile, daemonsets, pods, overlays)


def _custom_keys(k: random.Random, pools: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
    """A custom key no pool labels (``tier``, numeric values): NotIn, Exists or Gt on native pools, which
    Karpenter holds per claim, and pods selecting it or excluding it, which join claims that hold it."""
    for pool in pools:
        if isinstance(pool["requirements"], list) and k.random() < 0.5:
            op = k.choice(("NotIn", "Exists", "Gt"))
            req: dict[str, Any] = {"key": "tier", "operator": op}
            if op != "Exists":
                req["values"] = [str(k.randint(1, 3))]
            pool["requirements"].append(req)
    specs = list({id(p["spec"]): p["spec"] for p in pods}.values())
    for spec in specs:
        if k.random() >= 0.5:
            continue
        op = k.choice(("select", "NotIn", "DoesNotExist", "Gt", "In"))
        if op == "select":
            spec.setdefault("nodeSelector", {})["tier"] = str(k.randint(1, 4))
            continue
        expr: dict[str, Any] = {"key": "tier", "operator": op}
        if op != "DoesNotExist":
            expr["values"] = [str(k.randint(1, 4))]
        affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        required = affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": [{}]})
        for term in required["nodeSelectorTerms"]:
            term.setdefault("matchExpressions", []).append(dict(expr))
