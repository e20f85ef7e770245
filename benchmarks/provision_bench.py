"""Provisioning benchmark: 10,000 pending pods against 3 Karpenter pools over >= 300 instance types.

Three seeded variants: homogeneous (8 pod specs), diverse (120 specs: requests, GPU counts, GPU product,
zone and capacity-type selectors, ``Gt`` affinity on the GPU count), and backlog (diverse plus 4,000 pods in
80 specs that no pool can take, which Karpenter's queue retries). Prints pods/s of one ``simulate``
with the profile's provisioner (the launch, and where Karpenter's consolidation takes it when the launch is
within the size that view is computed for), the number of classes, peak RSS, the launch's hourly cost, and
that cost divided by a lower bound on any feasible solution (the LP relaxation in ``kgpu.sim.cost``, taken
only when HiGHS reports it Optimal) measured on the same run. Prints, never asserts. Target: <= 1 s.

    .venv/bin/python benchmarks/provision_bench.py
"""

from __future__ import annotations

import random
import resource
import sys
import time
from dataclasses import replace

from kgpu.catalog import Catalog, InstanceType, RegionPricing
from kgpu.catalog.instance import parse_instance_name
from kgpu.model.inputs import Objects
from kgpu.model.objects import NodeSelector, Pod, PodSpecInfo, Requirement, Term, Toleration, resources
from kgpu.model.profile import parse_profile
from kgpu.sim.cost import Demand, lower_bound
from kgpu.sim.provisioners.karpenter.solve import Karpenter, bound_inputs
from kgpu.sim.provisioners.provision import provisioner_for
from kgpu.sim.simulate import simulate

SEED = 20240601
REGION = "us-west-2"
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")
GIB = 1024**3
SIZES = {
    "large": 2,
    "xlarge": 4,
    "2xlarge": 8,
    "4xlarge": 16,
    "8xlarge": 32,
    "12xlarge": 48,
    "16xlarge": 64,
    "24xlarge": 96,
}


def catalog(rng: random.Random) -> Catalog:
    types: dict[str, InstanceType] = {}
    pricing: dict[tuple[str, str], RegionPricing] = {}

    def add(name: str, vcpus: int, mem_gib: int, gpus: int = 0, gpu: str = "") -> None:
        parts = parse_instance_name(name)
        assert parts is not None
        types[name] = InstanceType(
            name=name,
            family=parts.family,
            category=parts.category,
            generation=parts.generation,
            size=parts.size,
            arch="amd64",
            vcpus=vcpus,
            memory_mib=mem_gib * 1024,
            gpu_name=gpu,
            gpu_manufacturer="nvidia" if gpus else "",
            gpu_count=gpus,
            gpu_memory_mib=24576 if gpus else 0,
            gpu_display_name=gpu.upper(),
            max_pods=min(737, 29 + vcpus * 8),
        )
        od = (0.034 * vcpus + 0.0045 * mem_gib + 0.55 * gpus) * rng.uniform(0.9, 1.15)
        spot = od * rng.uniform(0.3, 0.45)
        pricing[(name, REGION)] = RegionPricing(
            name,
            REGION,
            round(od, 4),
            round(spot, 4),
            round(spot * 0.9, 4),
            ZONES,
            ("usw2-az1", "usw2-az2", "usw2-az3"),
        )

    for cat, ratio in (("c", 2), ("m", 4), ("r", 8)):
        for gen in (5, 6, 7):
            for suffix in ("", "a", "i", "d", "n", "in", "id", "ad", "zn")[: 6 if gen < 7 else 7]:
                family = f"{cat}{gen}{suffix}"
                for size, vcpus in SIZES.items():
                    add(f"{family}.{size}", vcpus, vcpus * ratio)
    for family, gpu in (("g4dn", "t4"), ("g5", "a10g"), ("g6", "l4"), ("g6e", "l40s")):
        for size, vcpus, gpus in (
            ("xlarge", 4, 1),
            ("2xlarge", 8, 1),
            ("4xlarge", 16, 1),
            ("8xlarge", 32, 1),
            ("12xlarge", 48, 4),
            ("16xlarge", 64, 1),
            ("24xlarge", 96, 4),
            ("48xlarge", 192, 8),
        ):
            add(f"{family}.{size}", vcpus, vcpus * 4, gpus, gpu)
    return Catalog(types, pricing, REGION)


PROFILE = {
    "metadata": {"name": "bench"},
    "provider": "eks",
    "autoscaler": "karpenter",
    "cluster": {"region": REGION, "zones": list(ZONES)},
    "monitoring": {"enabled": True},
    "pools": [
        {
            "name": "general",
            "kind": "karpenter",
            "requirements": {"categories": ["c", "m"]},
            "capacityTypes": ["spot", "on-demand"],
            "weight": 10,
        },
        {
            "name": "memory",
            "kind": "karpenter",
            "requirements": {"categories": ["r"]},
            "capacityTypes": ["spot", "on-demand"],
            "labels": {"workload": "memory"},
            "weight": 20,
            "taints": [{"key": "workload", "value": "memory", "effect": "NoSchedule"}],
        },
        {
            "name": "gpu",
            "kind": "karpenter",
            "requirements": {"families": ["g4dn", "g5", "g6", "g6e"]},
            "capacityTypes": ["spot", "on-demand"],
            "labels": {"node-type": "gpu"},
            "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
            "weight": 50,
        },
    ],
}


def spec(cpu: int, mem_gib: float, gpus: int = 0, selector: dict[str, str] | None = None) -> PodSpecInfo:
    req = {"cpu": cpu, "memory": int(mem_gib * GIB), "nvidia.com/gpu": gpus}
    tol = (Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),) if gpus else ()
    if selector and "workload" in selector:
        tol = (Toleration("workload", "Equal", "memory", "NoSchedule"),)
    return PodSpecInfo(
        resources(req), cpu, int(mem_gib * GIB), tuple(sorted((selector or {}).items())), tolerations=tol
    )


def pods(rng: random.Random, n: int = 10_000) -> list[Pod]:
    shapes = [
        (spec(250, 0.5), 30),
        (spec(1000, 2), 25),
        (spec(2000, 4), 15),
        (spec(500, 1), 10),
        (spec(2000, 16, selector={"workload": "memory"}), 8),
        (spec(4000, 16, 1, {"node-type": "gpu"}), 7),
        (spec(8000, 48, 4, {"node-type": "gpu"}), 3),
        (spec(3000, 12, 1), 2),
    ]
    weights = [w for _, w in shapes]
    out = []
    for i in range(n):
        s = rng.choices(shapes, weights)[0][0]
        out.append(Pod("bench", f"p-{i}", s))
    return out


def diverse_pods(rng: random.Random, n: int = 10_000, kinds: int = 120) -> list[Pod]:
    """``kinds`` distinct specs, like a cluster's Deployments: CPU services (some on memory nodes, some
    pinned to a zone or capacity type) and GPU pods with 1, 2 or 4 GPUs that select a GPU product, a
    zone, or a minimum GPU count (``Gt`` on karpenter.k8s.aws/instance-gpu-count)."""
    specs: dict[PodSpecInfo, None] = {}
    while len(specs) < kinds:
        if rng.random() < 0.35:
            gpus = rng.choice([1, 1, 1, 2, 4])
            cpu = rng.choice([1000, 2000, 3000, 4000, 6000])
            mem = rng.choice([4, 8, 12, 16, 24])
            selector: dict[str, str] = {"node-type": "gpu"}
            affinity = None
            kind = rng.random()
            if kind < 0.3:
                selector["karpenter.k8s.aws/instance-gpu-name"] = rng.choice(["t4", "a10g", "l4", "l40s"])
            elif kind < 0.5:
                selector["topology.kubernetes.io/zone"] = rng.choice(ZONES)
            elif kind < 0.75:
                req = Requirement("karpenter.k8s.aws/instance-gpu-count", "Gt", (str(gpus - 1),))
                affinity = NodeSelector((Term((req,)),))
            base = spec(cpu, mem, gpus, selector)
        else:
            cpu = rng.choice([100, 250, 500, 750, 1000, 1500, 2000, 4000])
            mem = rng.choice([0.25, 0.5, 1, 2, 3, 4, 8])
            selector = {}
            affinity = None
            kind = rng.random()
            if kind < 0.15:
                selector = {"workload": "memory"}
                mem *= 4
            elif kind < 0.3:
                selector = {"topology.kubernetes.io/zone": rng.choice(ZONES)}
            elif kind < 0.4:
                selector = {"karpenter.sh/capacity-type": "on-demand"}
            base = spec(cpu, mem, 0, selector)
        if affinity is not None:
            base = replace(base, affinity=affinity)
        specs[base] = None
    chosen = list(specs)
    weights = [rng.uniform(0.2, 3.0) for _ in chosen]
    return [Pod("bench", f"d-{i}", s) for i, s in enumerate(rng.choices(chosen, weights, k=n))]


def troubled_pods(rng: random.Random, n: int = 4_000, kinds: int = 80) -> list[Pod]:
    """A backlog that no pool can take, in ``kinds`` specs: more CPU or GPUs than any type has, a selector
    on a label no pool sets, or a GPU product no pool offers. Karpenter's queue tries each again after a
    later pod found a place, so these measure the failures and their retries."""
    specs: dict[PodSpecInfo, None] = {}
    while len(specs) < kinds:
        kind = rng.random()
        cpu = rng.choice([250, 500, 1000, 2000])
        if kind < 0.3:
            specs[spec(rng.choice([200_000, 300_000, 500_000]), 8, 0, {})] = None
        elif kind < 0.5:
            specs[spec(cpu, 4, rng.choice([16, 32]), {"node-type": "gpu"})] = None
        elif kind < 0.8:
            specs[spec(cpu, 2, 0, {"example.com/rack": f"r{rng.randrange(40)}"})] = None
        else:
            gpu = {"karpenter.k8s.aws/instance-gpu-name": rng.choice(["h100", "a100", "v100"]), "node-type": "gpu"}
            specs[spec(cpu, 8, 1, gpu)] = None
    chosen = list(specs)
    return [Pod("bench", f"t-{i}", s) for i, s in enumerate(rng.choices(chosen, k=n))]


def run(label: str, cat: Catalog, pending: list[Pod]) -> None:
    work = Objects()
    work.pods.extend(pending)
    profile = parse_profile(PROFILE, source="<bench>")
    prov = provisioner_for(profile, cat)
    start = time.perf_counter()
    result = simulate(Objects(), work, provisioner=prov)
    elapsed = time.perf_counter() - start
    cost = result.extra["cost"]["total"]
    karp = next(p for p in prov.parts if isinstance(p, Karpenter))
    t0 = time.perf_counter()
    raw, caps, prices = bound_inputs(karp.models, work.pods)
    bound = lower_bound([Demand(n, v, cols) for n, v, cols in raw], caps, prices)
    bound_s = time.perf_counter() - t0
    summary = result.summary()
    classes = len({p.spec for p in work.pods})
    print(
        f"provisioning benchmark, {label}: {len(work.pods)} pods from {classes} specs (classes), "
        f"{len(cat.types())} instance types, 3 pools (seed {SEED})"
    )
    print(
        f"  placed: {summary.get('provisioned', 0)} provisioned, {summary['unschedulable']} unschedulable, "
        f"{len(result.new_nodes)} new nodes"
    )
    print(f"  simulate + provision: {elapsed:.3f} s = {len(work.pods) / elapsed:,.0f} pods/s (target <= 1 s)")
    print(
        f"  peak RSS of this process so far: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )
    how = "LP, HiGHS: Optimal" if bound.method == "lp" else f"per-resource bound (LP: {bound.status})"
    view = result.extra.get("karpenter_consolidated") or {}
    steady = view.get("hourly_cost", cost)
    where = (
        f"after consolidation ${steady:.4f}/h ({len(view.get('steps', []))} commands)"
        if view.get("modelled")
        else "consolidation view not computed at this size"
    )
    print(
        f"  cost as Karpenter launches: ${cost:.4f}/h; {where}; lower bound "
        f"${bound.value:.4f}/h ({how}, {bound_s:.2f} s), launch / bound "
        f"{cost / bound.value if bound.value else float('nan'):.3f}"
    )
    if bound.dropped:
        print(
            f"  left out of the bound: {bound.dropped_pods} pods of {len(bound.dropped)} specs no offering can host"
        )


def main() -> None:
    only = [a for a in sys.argv[1:] if a in ("homogeneous", "diverse", "backlog")]  # make bench passes bench names
    if not only or "homogeneous" in only:
        rng = random.Random(SEED)
        cat = catalog(rng)
        run("homogeneous", cat, pods(rng))
    if not only or "diverse" in only:
        rng = random.Random(SEED)
        cat = catalog(rng)
        run("diverse", cat, diverse_pods(rng))
    if not only or "backlog" in only:
        rng = random.Random(SEED)
        cat = catalog(rng)
        run("backlog (diverse, and 4,000 pods no pool can take)", cat, diverse_pods(rng) + troubled_pods(rng))


if __name__ == "__main__":
    main()
