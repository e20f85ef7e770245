"""Seeded benchmark: Kueue's queue in front of a 5,000-node GPU cluster, settled and replayed ("when will it start").

A snapshot file as ``kgpu snapshot`` writes it (one ``v1`` List): 5,000 nodes of trouble_bench's twelve
instance types (the GPU nodes tainted ``nvidia.com/gpu``, p4d/p5 also ``dedicated=training``), and Kueue's
objects (kueue.x-k8s.io/v1beta2): five ResourceFlavors, one per GPU product (node labels
``nvidia.com/gpu.product``, tolerations for the GPU taints); a root Cohort ``company`` over five team Cohorts
(one with its own quota to lend); 30 ClusterQueues, six per team Cohort, each a resource group over cpu,
memory and ``nvidia.com/gpu`` with two flavors (the team's GPU type first, another after it), nominal quotas
of 8 to 64 GPUs, borrowing and lending limits on some, BestEffortFIFO (one in six StrictFIFO), preemption
``withinClusterQueue: LowerPriority``, ``reclaimWithinCohort`` Any or LowerPriority, ``borrowWithinCohort``
on some, ``whenCanBorrow`` MayStopSearch or TryNextFlavor; LocalQueues and Namespaces per team;
WorkloadPriorityClasses production (1000), default (100) and preemptible (10). Workloads shaped as Kueue's
batch/v1 Job integration creates them (owner reference to the Job, ``kueue.x-k8s.io/job-uid``, PodSet
``main`` with ``topologyRequest.podIndexLabel``), from four job templates per team (GPUs per pod, pods,
priority class, runtime), created over the six hours before the snapshot; about a third admitted and running
(``status.admission`` in the first flavor while its nominal quota lasts, QuotaReserved and Admitted), one in
six created after it (the submissions to come: the replay's arrivals), the rest pending. Each Workload
declares its runtime as Kueue's ``spec.maximumExecutionTimeSeconds`` (10 minutes to 4 hours), so the replay is
exact. Some templates use ``minCount`` (partial admission).

Measured in this process, CPU seconds (user + system: the machine may be shared), per size (2k, 4k and 8k
Workloads): stdlib ``json.load`` of the file (the yardstick); ``settle`` of the loaded objects (read the
Kueue objects, build the quota tree, Kueue's scheduling cycles until nothing changes); ``replay`` from the
snapshot's time until every pending and arriving Workload has started (read once, then an event per Workload
end and creation). Prints each, its ratio to json.load, the events and admissions, and over sizes the growth
exponent ``log(t2/t1)/log(n2/n1)`` of each. It never asserts.

    .venv/bin/python benchmarks/queue_bench.py          # 2k, 4k and 8k Workloads (make bench)
    .venv/bin/python benchmarks/queue_bench.py 2k       # one size

Files go to ``$KGPU_BENCH_DIR/queue`` (default ``.bench/queue``) and are rewritten on every run.
"""

from __future__ import annotations

import gc
import itertools
import json
import math
import os
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import trouble_bench as tb  # the node shapes and _node

from kgpu.sim.queue.admission import settle
from kgpu.sim.queue.replay import replay

SEED = 20261128
SIZES = {"2k": 2_000, "4k": 4_000, "8k": 8_000}
NODES = 5_000
NOW = datetime(2026, 11, 28, 8, 0, tzinfo=UTC)
GPU = "nvidia.com/gpu"
GROUP = "kueue.x-k8s.io"
API = f"{GROUP}/v1beta2"
# flavor -> (GFD product, trained only on the dedicated=training nodes)
FLAVORS = {
    "a10g": ("NVIDIA-A10G", False),
    "l4": ("NVIDIA-L4", False),
    "l40s": ("NVIDIA-L40S", False),
    "a100": ("NVIDIA-A100-SXM4-40GB", True),
    "h100": ("NVIDIA-H100-80GB-HBM3", True),
}
TEAMS = ["research", "nlp", "vision", "platform", "recsys"]
PRIORITY = {"production": 1000, "default": 100, "preemptible": 10}


def _meta(
    kind: str, name: str, namespace: str | None = None, created: str | None = None, **extra: Any
) -> dict[str, Any]:
    m: dict[str, Any] = {
        "name": name,
        "uid": tb._uid(f"{kind}/{namespace or ''}/{name}"),
        "resourceVersion": str(4000 + len(name)),
        "generation": 1,
        "creationTimestamp": created or "2026-11-01T00:00:00Z",
    }
    if namespace is not None:
        m["namespace"] = namespace
    m.update(extra)
    return m


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def kueue_objects(rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Flavors, Cohorts, ClusterQueues, LocalQueues, Namespaces, priority classes; per ClusterQueue what the
    generator needs (its flavors and nominal GPUs)."""
    objs: list[dict[str, Any]] = []
    for name, (product, training) in FLAVORS.items():
        tolerations = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
        if training:
            tolerations.append(
                {"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"}
            )
        objs.append(
            {
                "apiVersion": API,
                "kind": "ResourceFlavor",
                "metadata": _meta("ResourceFlavor", name, finalizers=["kueue.x-k8s.io/resource-in-use"]),
                "spec": {"nodeLabels": {"nvidia.com/gpu.product": product}, "tolerations": tolerations},
            }
        )
    for name, value in PRIORITY.items():
        objs.append(
            {
                "apiVersion": API,
                "kind": "WorkloadPriorityClass",
                "metadata": _meta("WorkloadPriorityClass", name),
                "value": value,
                "description": f"{name} jobs",
            }
        )
    objs.append({"apiVersion": API, "kind": "Cohort", "metadata": _meta("Cohort", "company"), "spec": {}})
    queues: dict[str, dict[str, Any]] = {}
    flavor_names = list(FLAVORS)
    for t, team in enumerate(TEAMS):
        spec: dict[str, Any] = {"parentName": "company"}
        if t == 0:  # a pool the research Cohort lends to its queues
            spec["resourceGroups"] = [
                {
                    "coveredResources": ["cpu", "memory", GPU],
                    "flavors": [
                        {
                            "name": "a100",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "384"},
                                {"name": "memory", "nominalQuota": "3Ti"},
                                {"name": GPU, "nominalQuota": 32},
                            ],
                        }
                    ],
                }
            ]
        objs.append({"apiVersion": API, "kind": "Cohort", "metadata": _meta("Cohort", team), "spec": spec})
        for q in range(6):
            name = f"{team}-{q}"
            first = flavor_names[(t + q) % len(flavor_names)]
            second = flavor_names[(t + q + 2) % len(flavor_names)]
            flavors = []
            nominal = {}
            for f in (first, second):
                gpus = rng.choice([8, 16, 16, 32, 64]) if f == first else rng.choice([0, 8, 16])
                nominal[f] = gpus
                gpu: dict[str, Any] = {"name": GPU, "nominalQuota": gpus}
                if rng.random() < 0.3:
                    gpu["borrowingLimit"] = rng.choice([0, 8, 32])
                if rng.random() < 0.3:
                    gpu["lendingLimit"] = gpus // 2
                flavors.append(
                    {
                        "name": f,
                        "resources": [
                            {"name": "cpu", "nominalQuota": str(12 * gpus)},
                            {"name": "memory", "nominalQuota": f"{96 * gpus}Gi"},
                            gpu,
                        ],
                    }
                )
            reclaim = rng.choice(["Any", "LowerPriority"])
            borrow = (
                {"policy": "LowerPriority", "maxPriorityThreshold": 100}
                if rng.random() < 0.3
                else {"policy": "Never"}
            )
            objs.append(
                {
                    "apiVersion": API,
                    "kind": "ClusterQueue",
                    "metadata": _meta("ClusterQueue", name, finalizers=["kueue.x-k8s.io/resource-in-use"]),
                    "spec": {
                        "cohortName": team,
                        "namespaceSelector": {"matchLabels": {"kueue.x-k8s.io/team": team}},
                        "queueingStrategy": "StrictFIFO" if q == 5 else "BestEffortFIFO",
                        "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": flavors}],
                        "flavorFungibility": {
                            "whenCanBorrow": rng.choice(["MayStopSearch", "TryNextFlavor"]),
                            "whenCanPreempt": "TryNextFlavor",
                        },
                        "preemption": {
                            "withinClusterQueue": "LowerPriority",
                            "reclaimWithinCohort": reclaim,
                            "borrowWithinCohort": borrow,
                        },
                        "stopPolicy": "None",
                    },
                }
            )
            objs.append(
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": _meta(
                        "Namespace",
                        name,
                        labels={"kubernetes.io/metadata.name": name, "kueue.x-k8s.io/team": team},
                    ),
                    "spec": {"finalizers": ["kubernetes"]},
                    "status": {"phase": "Active"},
                }
            )
            objs.append(
                {
                    "apiVersion": API,
                    "kind": "LocalQueue",
                    "metadata": _meta("LocalQueue", "jobs", name),
                    "spec": {"clusterQueue": name, "stopPolicy": "None"},
                }
            )
            templates = []
            for _ in range(4):
                gpus = rng.choice([1, 2, 4, 8])
                pods = rng.choice([1, 1, 2, 4])
                templates.append(
                    {
                        "gpus": gpus,
                        "pods": pods,
                        "min": rng.choice([None, None, 1]) if pods > 1 else None,
                        "class": rng.choice(["default", "default", "production", "preemptible"]),
                        "runtime": rng.choice([600, 1800, 3600, 7200, 14400]),
                    }
                )
            queues[name] = {"flavors": (first, second), "nominal": nominal, "templates": templates, "used": 0}
    return objs, queues


def workload(
    i: int, ns: str, q: dict[str, Any], created: datetime, rng: random.Random, running: bool
) -> dict[str, Any]:
    tpl = rng.choice(q["templates"])
    job = f"{tpl['class'][:4]}-{i:05d}"
    job_uid = tb._uid(f"Job/{ns}/{job}")
    gpus, pods = tpl["gpus"], tpl["pods"]
    cpu, mem = 10 * gpus, 80 * gpus
    podset: dict[str, Any] = {
        "name": "main",
        "count": pods,
        "template": {
            "metadata": {"labels": {"batch.kubernetes.io/job-name": job}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "train",
                        "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                        "resources": {
                            "requests": {"cpu": str(cpu), "memory": f"{mem}Gi"},
                            "limits": {GPU: str(gpus)},
                        },
                    }
                ],
            },
        },
        "topologyRequest": {"podIndexLabel": "batch.kubernetes.io/job-completion-index"},
    }
    if tpl["min"] is not None:
        podset["minCount"] = tpl["min"]
    runtime = tpl["runtime"] + rng.randrange(0, 600)
    doc: dict[str, Any] = {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": _meta(
            "Workload",
            f"job-{job}-{job_uid[:5]}",
            ns,
            _stamp(created),
            labels={"kueue.x-k8s.io/job-uid": job_uid},
            ownerReferences=[
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job,
                    "uid": job_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            finalizers=["kueue.x-k8s.io/resource-in-use"],
        ),
        "spec": {
            "active": True,
            "queueName": "jobs",
            "podSets": [podset],
            "priority": PRIORITY[tpl["class"]],
            "priorityClassRef": {"group": GROUP, "kind": "WorkloadPriorityClass", "name": tpl["class"]},
            "maximumExecutionTimeSeconds": runtime,
        },
    }
    first = q["flavors"][0]
    if running and q["used"] + gpus * pods <= q["nominal"][first]:
        q["used"] += gpus * pods
        at = _stamp(created + timedelta(seconds=rng.randrange(5, 120)))
        doc["status"] = {
            "admission": {
                "clusterQueue": ns,
                "podSetAssignments": [
                    {
                        "name": "main",
                        "count": pods,
                        "flavors": {"cpu": first, "memory": first, GPU: first},
                        "resourceUsage": {
                            "cpu": str(cpu * pods),
                            "memory": f"{mem * pods}Gi",
                            GPU: str(gpus * pods),
                        },
                    }
                ],
            },
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "reason": "QuotaReserved",
                    "message": f"Quota reserved in ClusterQueue {ns}",
                    "lastTransitionTime": at,
                    "observedGeneration": 1,
                },
                {
                    "type": "Admitted",
                    "status": "True",
                    "reason": "Admitted",
                    "message": "The workload is admitted",
                    "lastTransitionTime": at,
                    "observedGeneration": 1,
                },
            ],
        }
    return doc


def generate(workloads: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    nodes = []
    weights = [s[1] for s in tb.NODE_TYPES]
    for i in range(NODES):
        shape = rng.choices(tb.NODE_TYPES, weights)[0]
        nodes.append(tb._node(i, shape, rng, "ready"))
    objs, queues = kueue_objects(rng)
    names = sorted(queues)
    wls = []
    for i in range(workloads):
        ns = rng.choice(names)
        if rng.random() < 1 / 6:  # submitted after the snapshot: arrives during the replay
            created = NOW + timedelta(seconds=rng.uniform(0, 6 * 3600))
            running = False
        else:
            created = NOW - timedelta(seconds=rng.uniform(60, 6 * 3600))
            running = rng.random() < 0.4
        wls.append(workload(i, ns, queues[ns], created, rng, running))
    return [*nodes, *objs, *wls]


def _cpu() -> float:
    return time.process_time()


def measure(path: Path) -> dict[str, Any]:
    gc.collect()
    t = _cpu()
    with path.open() as f:
        doc = json.load(f)
    load = _cpu() - t
    items = doc["items"]
    t = _cpu()
    settled = settle(items, source=str(path))
    settle_s = _cpu() - t
    t = _cpu()
    r = replay(items, source=str(path), now=NOW)
    replay_s = _cpu() - t
    admitted = sum(o.admitted for o in settled.workloads.values())
    started = sum(s.earliest is not None and not s.running for s in r.starts.values())
    return {
        "load": load,
        "settle": settle_s,
        "replay": replay_s,
        "events": r.events,
        "settles": r.settles,
        "workloads": len(settled.workloads),
        "admitted": admitted,
        "started": started,
        "asked": len(r.starts),
        "cycles": settled.cycles,
        "limit": r.limit,
    }


def main() -> None:
    directory = Path(os.environ.get("KGPU_BENCH_DIR", ".bench")) / "queue"
    directory.mkdir(parents=True, exist_ok=True)
    sizes = [s for s in SIZES if s in sys.argv[1:]] or list(SIZES)
    print(
        f"Kueue: 30 ClusterQueues in 5 cohorts under one, 5 GPU flavors, {NODES:,} nodes; seed {SEED}; "
        "CPU seconds in this process, ratio to json.load of the same file",
        flush=True,
    )
    series: list[tuple[int, dict[str, Any]]] = []
    for size in sizes:
        n = SIZES[size]
        path = directory / f"queue-{size}.json"
        items = generate(n, SEED + n)
        path.write_text(
            json.dumps(
                {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items},
                separators=(",", ":"),
            )
        )
        del items
        m = measure(path)
        series.append((n, m))
        mib = path.stat().st_size / 2**20
        print(
            f"{size:>3}: {mib:5.1f} MiB, json.load {m['load']:.2f} s | settle {m['settle']:.2f} s "
            f"({m['settle'] / m['load']:.1f}x; {m['workloads']} Workloads, {m['admitted']} admitted, {m['cycles']} cycles) | "
            f"replay {m['replay']:.2f} s ({m['replay'] / m['load']:.1f}x; {m['events']} events, {m['settles']} settles, "
            f"{m['started']} of {m['asked']} started{', ' + m['limit'] if m['limit'] else ''})",
            flush=True,
        )
    for (n1, a), (n2, b) in itertools.pairwise(series):

        def growth(key: str, a: dict[str, Any] = a, b: dict[str, Any] = b, n1: int = n1, n2: int = n2) -> str:
            return (
                f"{math.log(b[key] / a[key]) / math.log(n2 / n1):.2f}" if a[key] > 0 and b[key] > 0 else "-"
            )

        print(
            f"growth {n1:,} -> {n2:,} Workloads: json.load {growth('load')}, settle {growth('settle')}, "
            f"replay {growth('replay')} (1.00: linear)"
        )


if __name__ == "__main__":
    main()
