"""Seeded benchmark: kube-scheduler placement at 5,000 nodes and 50,000 pending pods, four variants.

Generates a cluster snapshot (CPU and GPU node shapes with taints and labels, pods already running) and
50,000 pending pods (CPU and GPU shapes, tolerations, selectors, affinity) as the JSON ``v1 List`` that
``kubectl get -o json`` prints, then measures in fresh processes:

- ``kgpu simulate``'s library path: read the files, decode, place every pod;
- stdlib ``json.load`` of the same files, the yardstick;

and prints pods/s, peak RSS of the simulate process, and the ratio simulate/json.load. It never asserts.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

SEED = 20261121
NODES = 5000
PENDING = 50000

NODE_SHAPES = [  # (instance type, weight, cpu m, memory Ki, pods, gpus, gpu label)
    ("m5.2xlarge", 30, 7910, 31_500_000, 58, 0, None),
    ("c5.4xlarge", 20, 15890, 30_600_000, 234, 0, None),
    ("r5.2xlarge", 10, 7910, 63_300_000, 58, 0, None),
    ("g4dn.xlarge", 15, 3920, 15_146_852, 29, 1, "t4"),
    ("g5.12xlarge", 15, 47810, 187_181_336, 234, 4, "a10g"),
    ("p4d.24xlarge", 10, 95690, 1_135_000_000, 737, 8, "a100"),
]
ZONES = ["us-west-2a", "us-west-2b", "us-west-2c"]
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _container(name: str, image: str, requests: dict[str, str], limits: dict[str, str]) -> dict:
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "env": [
            {"name": "LOG_LEVEL", "value": "info"},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
        "resources": {"requests": requests, "limits": limits},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "volumeMounts": [
            {
                "name": "kube-api-access",
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "readOnly": True,
            }
        ],
    }


def _pod(
    name: str, ns: str, owner: str, spec_extra: dict, container: dict, node: str | None, phase: str
) -> dict:
    spec = {
        "containers": [container],
        "dnsPolicy": "ClusterFirst",
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "volumes": [
            {
                "name": "kube-api-access",
                "projected": {
                    "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]
                },
            }
        ],
        **spec_extra,
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"{abs(hash(name)) % 10**12:012d}-0000-4000-8000-000000000000",
            "labels": {"app": owner, "pod-template-hash": "5d78c9869d"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{owner}-5d78c9869d",
                    "uid": "0",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
        "status": {"phase": phase, "qosClass": "Burstable"},
    }


POD_SHAPES = [  # (owner, weight, requests, limits, spec_extra)
    ("web", 30, {"cpu": "250m", "memory": "512Mi"}, {"memory": "1Gi"}, {}),
    ("batch", 15, {"cpu": "2", "memory": "4Gi"}, {"cpu": "2", "memory": "4Gi"}, {}),
    (
        "cache",
        5,
        {"cpu": "500m", "memory": "8Gi"},
        {"memory": "8Gi"},
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "node.kubernetes.io/instance-type",
                                        "operator": "In",
                                        "values": ["r5.2xlarge", "m5.2xlarge"],
                                    }
                                ]
                            }
                        ]
                    }
                }
            }
        },
    ),
    (
        "infer-t4",
        20,
        {"cpu": "2", "memory": "8Gi"},
        {"nvidia.com/gpu": "1"},
        {"tolerations": [GPU_TOLERATION], "nodeSelector": {"karpenter.k8s.aws/instance-gpu-name": "t4"}},
    ),
    (
        "infer-any",
        15,
        {"cpu": "4", "memory": "16Gi"},
        {"nvidia.com/gpu": "1"},
        {"tolerations": [GPU_TOLERATION], "nodeSelector": {"node-type": "gpu"}},
    ),
    (
        "train",
        10,
        {"cpu": "16", "memory": "128Gi"},
        {"nvidia.com/gpu": "4"},
        {
            "tolerations": [GPU_TOLERATION],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "karpenter.k8s.aws/instance-gpu-count",
                                        "operator": "Gt",
                                        "values": ["3"],
                                    },
                                    {
                                        "key": "topology.kubernetes.io/zone",
                                        "operator": "In",
                                        "values": ZONES[:2],
                                    },
                                ]
                            }
                        ]
                    }
                }
            },
        },
    ),
    ("notebook", 5, {"cpu": "1", "memory": "2Gi"}, {"nvidia.com/gpu": "1"}, {}),  # forgot the toleration
]


def _node(i: int, shape: tuple, zone: str, rng: random.Random) -> dict:
    itype, _, cpu, mem, pods, gpus, gpu_name = shape
    name = f"ip-10-{i // 250}-{i % 250}-{i % 7}.us-west-2.compute.internal"
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": itype,
        "topology.kubernetes.io/zone": zone,
        "topology.kubernetes.io/region": "us-west-2",
        "karpenter.sh/capacity-type": rng.choice(["spot", "on-demand"]),
    }
    alloc = {
        "cpu": f"{cpu}m",
        "memory": f"{mem}Ki",
        "pods": str(pods),
        "ephemeral-storage": "95551679124",
        "hugepages-2Mi": "0",
    }
    taints = []
    if gpus:
        labels.update(
            {
                "node-type": "gpu",
                "karpenter.k8s.aws/instance-gpu-name": gpu_name,
                "karpenter.k8s.aws/instance-gpu-count": str(gpus),
                "nvidia.com/gpu.present": "true",
            }
        )
        alloc["nvidia.com/gpu"] = str(gpus)
        taints.append(GPU_TAINT)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints, "providerID": f"aws:///{zone}/i-{i:017x}"},
        "status": {
            "allocatable": alloc,
            "capacity": alloc,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {
                "kubeletVersion": "v1.33.1",
                "containerRuntimeVersion": "containerd://1.7.27",
            },
        },
    }


def _agent(i: int, j: int, node: str) -> dict:
    return _pod(
        f"node-agent-{i}-{j}",
        "kube-system",
        "node-agent",
        {"tolerations": [{"operator": "Exists"}]},
        _container("agent", "agent:1", {"cpu": "100m", "memory": "128Mi"}, {"memory": "256Mi"}),
        node,
        "Running",
    )


def _write(directory: Path, prefix: str, nodes: list, running: list, pending: list) -> tuple[Path, Path]:
    cluster = directory / f"{prefix}cluster.json"
    work = directory / f"{prefix}pending.json"
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes + running}))
    work.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pending}))
    return cluster, work


def generate(directory: Path) -> tuple[Path, Path]:
    """The homogeneous variant: 50,000 pods from 7 specs."""
    rng = random.Random(SEED)
    nodes, running = [], []
    shapes = [s for s in NODE_SHAPES for _ in range(s[1])]
    for i in range(NODES):
        shape = rng.choice(shapes)
        node = _node(i, shape, ZONES[i % 3], rng)
        nodes.append(node)
        for j in range(2 if not shape[5] else 1):  # system pods already running
            running.append(_agent(i, j, node["metadata"]["name"]))
    pending = []
    pshapes = [s for s in POD_SHAPES for _ in range(s[1])]
    for i in range(PENDING):
        owner, _, req, lim, extra = rng.choice(pshapes)
        pending.append(
            _pod(
                f"{owner}-5d78c9869d-{i:05d}",
                "apps",
                owner,
                json.loads(json.dumps(extra)),
                _container(owner, f"registry.example.com/{owner}:1.0", req, lim),
                None,
                "Pending",
            )
        )
    return _write(directory, "", nodes, running, pending)


# --- the diverse variant: what real clusters look like -------------------------------------------------

DIVERSE_SHAPES = [  # 8 shapes: (instance type, weight, cpu m, memory Ki, pods, gpus, gpu label)
    ("m5.2xlarge", 18, 7910, 31_500_000, 58, 0, None),
    ("m5.4xlarge", 12, 15890, 63_000_000, 234, 0, None),
    ("c5.4xlarge", 14, 15890, 30_600_000, 234, 0, None),
    ("r5.2xlarge", 8, 7910, 63_300_000, 58, 0, None),
    ("g4dn.xlarge", 14, 3920, 15_146_852, 29, 1, "t4"),
    ("g6.2xlarge", 12, 7910, 31_000_000, 58, 1, "l4"),
    ("g5.12xlarge", 12, 47810, 187_181_336, 234, 4, "a10g"),
    ("p4d.24xlarge", 10, 95690, 1_135_000_000, 737, 8, "a100"),
]
GPU_NAMES = ["t4", "l4", "a10g", "a100"]
DIVERSE_SPECS = 240


def _affinity(*exprs: dict) -> dict:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": list(exprs)}]
            }
        }
    }


def diverse_specs(rng: random.Random) -> list[tuple[str, dict, dict, dict]]:
    """Distinct pod templates (owner, requests, limits, spec extras): 35 % ask for 1, 2 or 4 GPUs."""
    out: list[tuple[str, dict, dict, dict]] = []
    seen: set[str] = set()
    while len(out) < DIVERSE_SPECS:
        extra: dict = {}
        if rng.random() < 0.35:
            gpus = rng.choice([1, 1, 1, 1, 2, 4])
            req = {
                "cpu": rng.choice(["500m", "1", "2", "3", "4"]),
                "memory": rng.choice(["2Gi", "4Gi", "8Gi", "12Gi", "16Gi"]),
            }
            lim = {"nvidia.com/gpu": str(gpus)}
            if rng.random() < 0.95:
                extra["tolerations"] = [GPU_TOLERATION]
            kind = rng.random()
            if kind < 0.3:
                extra["nodeSelector"] = {"karpenter.k8s.aws/instance-gpu-name": rng.choice(GPU_NAMES)}
            elif kind < 0.5:
                extra["nodeSelector"] = {"topology.kubernetes.io/zone": rng.choice(ZONES)}
            elif kind < 0.75:
                expr = {
                    "key": "karpenter.k8s.aws/instance-gpu-count",
                    "operator": "Gt",
                    "values": [str(gpus - 1)],
                }
                extra["affinity"] = _affinity(expr)
            kind_name = "gpu"
        else:
            req = {
                "cpu": rng.choice(["100m", "200m", "250m", "300m", "500m", "750m", "1", "1500m", "2"]),
                "memory": rng.choice(["128Mi", "256Mi", "384Mi", "512Mi", "1Gi", "1536Mi", "2Gi", "4Gi"]),
            }
            lim = {"memory": req["memory"]}
            kind = rng.random()
            if kind < 0.2:
                extra["nodeSelector"] = {"topology.kubernetes.io/zone": rng.choice(ZONES)}
            elif kind < 0.3:
                types = rng.sample(["m5.2xlarge", "m5.4xlarge", "c5.4xlarge", "r5.2xlarge"], 2)
                extra["affinity"] = _affinity(
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types}
                )
            elif kind < 0.4:
                extra["nodeSelector"] = {"karpenter.sh/capacity-type": rng.choice(["spot", "on-demand"])}
            kind_name = "svc"
        key = json.dumps([req, lim, extra], sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        out.append((f"{kind_name}-{len(out):03d}", req, lim, extra))
    return out


SPOT_TAINT = {"key": "karpenter.sh/capacity-type", "value": "spot", "effect": "PreferNoSchedule"}


def _soften(nodes: list, specs: list[tuple[str, dict, dict, dict]]) -> None:
    """The soft variant: spot nodes carry a PreferNoSchedule taint, and a third of the templates prefer a
    zone and/or on-demand capacity (preferred node affinity) or tolerate the spot taint, so their scores are
    normalised over the feasible nodes at every pod (the scheduler's exact scoring)."""
    rng = random.Random(SEED + 3)
    for node in nodes:
        if node["metadata"]["labels"]["karpenter.sh/capacity-type"] == "spot":
            node["spec"]["taints"].append(SPOT_TAINT)
    for _, _, _, extra in specs:
        kind = rng.random()
        if kind < 0.2:
            terms = [
                {
                    "weight": 50,
                    "preference": {
                        "matchExpressions": [
                            {
                                "key": "topology.kubernetes.io/zone",
                                "operator": "In",
                                "values": [rng.choice(ZONES)],
                            }
                        ]
                    },
                }
            ]
            if rng.random() < 0.5:
                terms.append(
                    {
                        "weight": 20,
                        "preference": {
                            "matchExpressions": [
                                {
                                    "key": "karpenter.sh/capacity-type",
                                    "operator": "In",
                                    "values": ["on-demand"],
                                }
                            ]
                        },
                    }
                )
            extra.setdefault("affinity", {}).setdefault("nodeAffinity", {})[
                "preferredDuringSchedulingIgnoredDuringExecution"
            ] = terms
        elif kind < 0.33:
            extra["tolerations"] = [
                *extra.get("tolerations", []),
                {"key": SPOT_TAINT["key"], "operator": "Exists"},
            ]


def generate_soft(directory: Path) -> tuple[Path, Path]:
    return generate_diverse(directory, soft=True)


def generate_diverse(directory: Path, spread: float = 0.0, soft: bool = False) -> tuple[Path, Path]:
    """5,000 nodes of 8 shapes, ~2.5 running pods each; 50,000 pods from 240 distinct templates. With
    ``spread``, that share of the templates also spreads its pods over zones (maxSkew 1, DoNotSchedule);
    with ``soft``, spot nodes and a third of the templates get soft constraints (``_soften``)."""
    rng = random.Random(SEED + 1)
    nodes, running = [], []
    shapes = [s for s in DIVERSE_SHAPES for _ in range(s[1])]
    for i in range(NODES):
        shape = rng.choice(shapes)
        node = _node(i, shape, ZONES[i % 3], rng)
        name = node["metadata"]["name"]
        nodes.append(node)
        for j in range(2):
            running.append(_agent(i, j, name))
        if rng.random() < 0.5:  # an application pod already running: ~2.5 pods per node
            running.append(
                _pod(
                    f"resident-{i}",
                    "apps",
                    "resident",
                    {},
                    _container("app", "app:1", {"cpu": "500m", "memory": "1Gi"}, {}),
                    name,
                    "Running",
                )
            )
    specs = diverse_specs(rng)
    if spread:
        picked = random.Random(SEED + 2).sample(range(len(specs)), round(spread * len(specs)))
        for n in picked:
            owner, req, lim, extra = specs[n]
            constraint = {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": owner}},
            }
            specs[n] = (owner, req, lim, {**extra, "topologySpreadConstraints": [constraint]})
    if soft:
        _soften(nodes, specs)
    gpu = [s for s in specs if "nvidia.com/gpu" in s[2]]
    cpu = [s for s in specs if "nvidia.com/gpu" not in s[2]]
    gpu_w = [rng.uniform(0.2, 3.0) for _ in gpu]  # Deployments of different sizes
    cpu_w = [rng.uniform(0.2, 3.0) for _ in cpu]
    chosen = [
        rng.choices(gpu, gpu_w)[0] if rng.random() < 0.35 else rng.choices(cpu, cpu_w)[0]
        for _ in range(PENDING)
    ]
    pending = []
    for i, (owner, req, lim, extra) in enumerate(chosen):
        pending.append(
            _pod(
                f"{owner}-7f9c4b8d6-{i:05d}",
                "apps",
                owner,
                json.loads(json.dumps(extra)),
                _container(owner, f"registry.example.com/{owner}:1.0", req, lim),
                None,
                "Pending",
            )
        )
    prefix = "diverse-spread-" if spread else "soft-" if soft else "diverse-"
    return _write(directory, prefix, nodes, running, pending)


def generate_diverse_spread(directory: Path) -> tuple[Path, Path]:
    return generate_diverse(directory, SPREAD_SHARE)


SPREAD_SHARE = 0.2


SIMULATE = """
import resource, sys, time, json
t0 = time.perf_counter()
from kgpu.model.load import parse_text
from kgpu.sim.simulate import simulate
t1 = time.perf_counter()
cluster = parse_text(open(sys.argv[1], 'rb').read(), sys.argv[1])
work = parse_text(open(sys.argv[2], 'rb').read(), sys.argv[2])
t2 = time.perf_counter()
result = simulate(cluster, work)
t3 = time.perf_counter()
s = result.summary()
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "place": t3 - t2, "total": t3 - t1,
                  "scheduled": s["scheduled"], "unschedulable": s["unschedulable"],
                  "classes": len({p.spec for p in work.pods}),
                  "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""

JSON_LOAD = """
import json, sys, time
t0 = time.perf_counter()
for path in sys.argv[1:]:
    with open(path) as fh:
        json.load(fh)
print(json.dumps({"json_load": time.perf_counter() - t0}))
"""


def _run(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(label: str, cluster: Path, work: Path, generated_s: float) -> None:
    size = (cluster.stat().st_size + work.stat().st_size) / 2**20
    print(f"{label}: input {size:.0f} MiB, generated in {generated_s:.1f}s")
    runs = []
    for _ in range(3):  # best of three for both, in alternation, so they share the machine's state
        runs.append((_run(SIMULATE, str(cluster), str(work)), _run(JSON_LOAD, str(cluster), str(work))))
    sim = min((r[0] for r in runs), key=lambda r: r["total"])
    base = min(r[1]["json_load"] for r in runs)
    print(f"  pod classes (distinct pending pod specs): {sim['classes']}")
    print(f"  placed: {sim['scheduled']} scheduled, {sim['unschedulable']} unschedulable")
    print(
        f"  simulate: {sim['total']:.3f}s (decode {sim['load']:.3f}s + place {sim['place']:.3f}s) = "
        f"{PENDING / sim['total']:,.0f} pods/s"
    )
    print(f"  json.load of the same input: {base:.3f}s")
    print(f"  ratio simulate / json.load: {sim['total'] / base:.2f}  (target <= 2)")
    print(f"  peak RSS of the simulate process: {sim['maxrss_kib'] / 1024:.0f} MiB  (target <= 2048)")


def main() -> None:
    directory = Path(os.environ.get("KGPU_BENCH_DIR", ".bench"))
    directory.mkdir(exist_ok=True)
    names = ("homogeneous", "diverse", "diverse-spread", "soft")
    only = [a for a in sys.argv[1:] if a in names]  # make bench passes bench names
    variants = [
        ("homogeneous", generate, f"{NODES} nodes, {PENDING} pending pods from {len(POD_SHAPES)} specs"),
        (
            "diverse",
            generate_diverse,
            f"{NODES} nodes of {len(DIVERSE_SHAPES)} shapes, {PENDING} pending pods "
            f"from {DIVERSE_SPECS} specs",
        ),
        (
            "diverse-spread",
            generate_diverse_spread,
            f"the diverse input, {SPREAD_SHARE:.0%} of its specs with a zone topology spread constraint",
        ),
        (
            "soft",
            generate_soft,
            f"the diverse variant with PreferNoSchedule spot taints and preferred node affinity in a third "
            f"of its {DIVERSE_SPECS} specs",
        ),
    ]
    for name, make, what in variants:
        if only and name not in only:
            continue
        t = time.perf_counter()
        cluster, work = make(directory)
        measure(f"simulate benchmark, {name} ({what}; seed {SEED})", cluster, work, time.perf_counter() - t)


if __name__ == "__main__":
    main()
