"""A burst of pending pods, as a cluster's Deployments scale up at once: one Karpenter ``Solve`` over 1,000 to
10,000 pods from about 120 specs and two NodePools (general purpose, and GPU with the GPU taint), and how
kgpu's launch compares with the oracle's claim by claim.

The specs are drawn like production Deployments: CPU services (some on memory-optimised types, some pinned
to a zone or to on-demand) and GPU pods with 1, 2, 4 or 8 GPUs (some selecting a GPU product or a zone),
with replica counts drawn by weight; each Deployment's pods are created together (contiguous in the input,
as Karpenter's queue orders equal pods by creation time, then UID).
"""

from __future__ import annotations

import collections
import random
from dataclasses import dataclass
from typing import Any

from karpenter_diff import KgpuResult, launch_choice
from karpenter_gen import GPU_TAINT, REGION, Scenario

ZONES = ["us-west-2a", "us-west-2b", "us-west-2c"]
GPU_FAMILIES = ["g4dn", "g5", "g6", "g6e"]
GPU_NAMES = ["t4", "a10g", "l4", "l40s"]


def _pools() -> list[dict[str, Any]]:
    return [
        {
            "name": "general",
            "kind": "karpenter",
            "requirements": {"categories": ["c", "m", "r"], "generation": {"min": 5}},
            "capacityTypes": ["spot", "on-demand"],
            "devicePlugin": "none",
            "weight": 10,
        },
        {
            "name": "gpu",
            "kind": "karpenter",
            "requirements": {"families": GPU_FAMILIES},
            "capacityTypes": ["spot", "on-demand"],
            "devicePlugin": "none",
            "labels": {"node-type": "gpu"},
            "taints": [dict(GPU_TAINT)],
        },
    ]


def _spec(r: random.Random) -> dict[str, Any]:
    selector: dict[str, str] = {}
    tolerations: list[dict[str, Any]] = []
    if r.random() < 0.35:
        gpus = r.choice((1, 1, 1, 2, 4, 8))
        cpu = r.choice((1000, 2000, 3000, 4000, 6000, 8000))
        mem = r.choice((4096, 8192, 12288, 16384, 24576, 32768))
        selector["node-type"] = "gpu"
        kind = r.random()
        if kind < 0.3:
            selector["karpenter.k8s.aws/instance-gpu-name"] = r.choice(GPU_NAMES)
        elif kind < 0.5:
            selector["topology.kubernetes.io/zone"] = r.choice(ZONES)
        tolerations.append({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
        requests = {"cpu": f"{cpu}m", "memory": f"{mem}Mi", "nvidia.com/gpu": str(gpus)}
        limits = {"nvidia.com/gpu": str(gpus)}
    else:
        cpu = r.choice((100, 250, 500, 750, 1000, 1500, 2000, 4000))
        mem = r.choice((256, 512, 1024, 2048, 3072, 4096, 8192))
        kind = r.random()
        if kind < 0.15:
            selector["karpenter.k8s.aws/instance-category"] = "r"
            mem *= 4
        elif kind < 0.3:
            selector["topology.kubernetes.io/zone"] = r.choice(ZONES)
        elif kind < 0.4:
            selector["karpenter.sh/capacity-type"] = "on-demand"
        requests = {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}
        limits = {}
    container: dict[str, Any] = {
        "name": "main",
        "image": "registry.example.com/app:1.0",
        "resources": {"requests": requests},
    }
    if limits:
        container["resources"]["limits"] = limits
    spec: dict[str, Any] = {"containers": [container]}
    if selector:
        spec["nodeSelector"] = selector
    if tolerations:
        spec["tolerations"] = tolerations
    return spec


def burst(seed: int, pods: int, kinds: int = 120) -> Scenario:
    """``pods`` pending pods from ``kinds`` Deployments over the two pools, drawn from ``seed``."""
    r = random.Random(f"burst-{seed}")
    specs = [_spec(r) for _ in range(kinds)]
    weights = [r.uniform(0.2, 3.0) for _ in specs]
    counts = collections.Counter(r.choices(range(kinds), weights, k=pods))
    out: list[dict[str, Any]] = []
    for c in range(kinds):
        for k in range(counts[c]):
            app = f"app-{c}"
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"{app}-{k}", "namespace": "default", "labels": {"app": app}},
                    "spec": specs[c],
                }
            )
    profile = {
        "apiVersion": "kgpu.dev/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": f"burst-{seed}"},
        "provider": "eks",
        "autoscaler": "karpenter",
        "cluster": {"region": REGION, "zones": ZONES},
        "monitoring": {"enabled": False},
        "pools": _pools(),
    }
    return Scenario(seed, profile, [], out, [])


def _kind(pod: str) -> str:
    return pod.rsplit("-", 1)[0]


@dataclass
class BurstOutcome:
    """kgpu's launch against the oracle's on one burst."""

    pods: int
    kgpu_nodes: int
    claims: int  # the oracle's claims its AWS provider launches
    same_pods: int  # kgpu nodes whose pods are exactly a claim's
    same_kinds: int  # kgpu nodes whose Deployments (with counts) are a claim's
    kgpu_cost: float
    oracle_cost: float
    errors_only_kgpu: set[str]
    errors_only_oracle: set[str]
    same_type: int  # of the nodes with a claim's pods: kgpu's type at the price the provider launches
    by_pool: dict[str, tuple[collections.Counter[float], collections.Counter[float]]]  # launches by price

    def lines(self) -> list[str]:
        out = [
            f"{self.pods} pods: kgpu {self.kgpu_nodes} nodes, Karpenter {self.claims} claims; the same pods on "
            f"{self.same_pods} ({self.same_pods / max(1, self.claims):.1%} of the claims), the same Deployments "
            f"on {self.same_kinds} ({self.same_kinds / max(1, self.claims):.1%}); type and price agree on "
            f"{self.same_type}/{self.same_pods}; cost kgpu ${self.kgpu_cost:,.2f}/h, Karpenter "
            f"${self.oracle_cost:,.2f}/h ({(self.kgpu_cost / self.oracle_cost - 1) if self.oracle_cost else 0:+.2%}); "
            f"pods without a node: only kgpu {len(self.errors_only_kgpu)}, only Karpenter {len(self.errors_only_oracle)}"
        ]
        for pool, (ours, theirs) in sorted(self.by_pool.items()):
            out.append(
                f"  pool {pool}: kgpu {sum(ours.values())} nodes ${sum(p * n for p, n in ours.items()):,.2f}/h, "
                f"Karpenter {sum(theirs.values())} claims ${sum(p * n for p, n in theirs.items()):,.2f}/h"
            )
        return out


def compare_burst(scn: Scenario, kg: KgpuResult, orc: dict[str, Any]) -> BurstOutcome:
    choices = [(c, launch_choice(c)) for c in orc["nodeClaims"]]
    launched = [(c, ch) for c, ch in choices if ch is not None]
    unlaunched = {p for c, ch in choices if ch is None for p in c["pods"]}
    by_pods = {frozenset(c["pods"]): (c, ch) for c, ch in launched}
    kinds = collections.Counter(
        frozenset(collections.Counter(_kind(p) for p in c["pods"]).items()) for c, _ in launched
    )
    same_pods = same_kinds = same_type = 0
    by_pool: dict[str, tuple[collections.Counter[float], collections.Counter[float]]] = (
        collections.defaultdict(lambda: (collections.Counter(), collections.Counter()))
    )
    for node in kg.nodes:
        by_pool[node.pool][0][node.price] += 1
        key = frozenset(collections.Counter(_kind(p) for p in node.pods).items())
        if kinds[key] > 0:
            kinds[key] -= 1
            same_kinds += 1
        hit = by_pods.get(node.pods)
        if hit is None:
            continue
        same_pods += 1
        _, (captype, best, _cheapest) = hit
        if node.capacity_type == captype and abs(node.price - best) < 1e-6:
            same_type += 1
    for c, (_captype, best, _cheapest) in launched:
        by_pool[c["nodePool"]][1][best] += 1
    oerr = set(orc["podErrors"]) | unlaunched
    kerr = set(kg.errors)
    return BurstOutcome(
        pods=len(scn.pods),
        kgpu_nodes=len(kg.nodes),
        claims=len(launched),
        same_pods=same_pods,
        same_kinds=same_kinds,
        kgpu_cost=sum(n.price for n in kg.nodes),
        oracle_cost=sum(ch[1] for _, ch in launched),
        errors_only_kgpu=kerr - oerr,
        errors_only_oracle=oerr - kerr,
        same_type=same_type,
        by_pool=dict(by_pool),
    )
