"""Seeded Kueue set-ups and workload arrivals for the differential against the real Kueue (``kueue_rig``).

A scenario (``scenario(n)``, all names prefixed ``s<n>-`` so that many scenarios share one Kueue without
touching each other):

- 1-4 ResourceFlavors for GPU types and capacity types (``nvidia.com/gpu.product``,
  ``karpenter.sh/capacity-type`` node labels; spot flavors sometimes tainted, sometimes with tolerations),
  and sometimes a CPU flavor;
- sharing trees: standalone ClusterQueues, a flat cohort (``spec.cohortName`` with no Cohort object), or a
  hierarchy of Cohort objects (``spec.parentName``, sometimes with quota of their own);
- per ClusterQueue: one resource group over cpu, memory and nvidia.com/gpu on the GPU flavors, or two (cpu
  and memory on the CPU flavor, nvidia.com/gpu on the GPU flavors); nominal quotas, borrowing and lending
  limits (only in a cohort), BestEffortFIFO or StrictFIFO, the three preemption policies (with
  borrowWithinCohort and its threshold), flavor fungibility and its preference, sometimes a namespace
  selector that one team's namespace does not match; a namespace and a LocalQueue per ClusterQueue;
- WorkloadPriorityClasses (3-5 values) and Workloads shaped as Kueue's Job, JobSet and RayJob integrations
  create them (name, owner reference, ``kueue.x-k8s.io/job-uid`` label, pod sets ``main``; ``launcher`` +
  ``workers``; ``head`` + worker groups) with 1-3 pod sets of 1-4 pods, GPU requests, sometimes a node
  selector on the GPU product or a toleration of the spot taint;
- 3-6 steps. In each step each sharing tree gets one event: new Workloads (1-4) all in one of its
  ClusterQueues, or one of its admitted Workloads finishes (chosen at run time among those the real Kueue
  admitted, with the scenario's own random stream), or nothing.

Timing, and why the events are shaped so: Kueue's scheduler runs a cycle as soon as a queue has a head,
so Workloads created one after another reach it one at a time; its orderings break ties between equal
priorities by ``creationTimestamp`` (1 s resolution) and then at random (heap order, Go map order). So:
- the Workloads of one step have distinct priorities and are created highest first, all in one
  ClusterQueue of the tree: Kueue pops one head per ClusterQueue per cycle in priority order, so meeting
  them one at a time or all at once gives the same cycles;
- a finish is the only event of its tree in that step (a finish requeues the whole tree at once);
- a step starts only after the previous one settled (at least 1 s without a change), so Workloads of
  different steps never share a creation second, and equal priorities are ordered by creation.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from dataclasses import dataclass, field
from typing import Any

API = "kueue.x-k8s.io/v1beta2"
GPUS = (
    ("a100", "NVIDIA-A100-SXM4-80GB"),
    ("h100", "NVIDIA-H100-80GB-HBM3"),
    ("l40s", "NVIDIA-L40S"),
    ("a10g", "NVIDIA-A10G"),
)
TEAMS = ("research", "prod", "vision", "nlp", "infra", "speech")
SPOT_TAINT = {"key": "kgpu.dev/spot", "value": "true", "effect": "NoSchedule"}
GPU = "nvidia.com/gpu"
STEPS = (3, 6)


@dataclass
class Queue:
    name: str  # ClusterQueue
    namespace: str
    local_queue: str
    tree: str  # the root of its sharing tree (cohort root, or the ClusterQueue when standalone)
    strategy: str


@dataclass
class Scenario:
    n: int
    infra: list[dict[str, Any]]  # in creation order
    queues: list[Queue]
    priorities: list[tuple[str | None, int]]  # (WorkloadPriorityClass or None, value)
    rng: random.Random
    steps: int
    serial: int = 0
    created: list[str] = field(default_factory=list)

    def queue_of(self, ns: str, lq: str) -> Queue | None:
        return next((q for q in self.queues if q.namespace == ns and q.local_queue == lq), None)

    def trees(self) -> list[str]:
        return sorted({q.tree for q in self.queues})


def _meta(name: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, **kw}


def _flavors(r: random.Random, n: int) -> tuple[list[dict[str, Any]], list[str], str | None]:
    out: list[dict[str, Any]] = []
    names: list[str] = []
    for gpu, product in r.sample(GPUS, r.randint(1, 2)):
        for cap in r.sample(("on-demand", "spot"), r.randint(1, 2)):
            name = f"s{n}-{gpu}-{'od' if cap == 'on-demand' else 'spot'}"
            spec: dict[str, Any] = {
                "nodeLabels": {"nvidia.com/gpu.product": product, "karpenter.sh/capacity-type": cap}
            }
            if cap == "spot" and r.random() < 0.35:
                spec["nodeTaints"] = [SPOT_TAINT]
                if r.random() < 0.3:
                    spec["tolerations"] = [
                        {"key": SPOT_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}
                    ]
            out.append({"apiVersion": API, "kind": "ResourceFlavor", "metadata": _meta(name), "spec": spec})
            names.append(name)
    del out[4:], names[4:]
    cpu = None
    if r.random() < 0.5:
        cpu = f"s{n}-cpu"
        out.append(
            {
                "apiVersion": API,
                "kind": "ResourceFlavor",
                "metadata": _meta(cpu),
                "spec": {"nodeLabels": {"kgpu.dev/pool": "general"}},
            }
        )
    return out, names, cpu


def _quota(r: random.Random, res: str, cohort: bool, scale: float = 1.0) -> dict[str, Any]:
    if res == GPU:
        nominal = int(r.choice((0, 2, 4, 4, 8, 8, 16)) * scale)
        unit = ""
    elif res == "cpu":
        nominal = int(r.choice((16, 32, 64, 64, 96, 128)) * scale)
        unit = ""
    else:
        nominal = int(r.choice((64, 128, 256, 256, 512, 1024)) * scale)
        unit = "Gi"
    q: dict[str, Any] = {"name": res, "nominalQuota": f"{nominal}{unit}"}
    if cohort and r.random() < 0.3:
        q["borrowingLimit"] = f"{r.choice((0, 1, 2, 4, 8)) * (1 if res == GPU else 4)}{unit}"
    if cohort and r.random() < 0.25:
        q["lendingLimit"] = f"{r.randint(0, nominal)}{unit}"
    return q


def _groups(
    r: random.Random, gpu_flavors: list[str], cpu: str | None, cohort: bool, scale: float = 1.0
) -> list[dict[str, Any]]:
    flavors = r.sample(gpu_flavors, r.randint(1, len(gpu_flavors)))
    if cpu is not None and r.random() < 0.7:
        return [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {"name": cpu, "resources": [_quota(r, x, cohort, scale) for x in ("cpu", "memory")]}
                ],
            },
            {
                "coveredResources": [GPU],
                "flavors": [{"name": f, "resources": [_quota(r, GPU, cohort, scale)]} for f in flavors],
            },
        ]
    return [
        {
            "coveredResources": ["cpu", "memory", GPU],
            "flavors": [
                {"name": f, "resources": [_quota(r, x, cohort, scale) for x in ("cpu", "memory", GPU)]}
                for f in flavors
            ],
        }
    ]


def _cluster_queue(
    r: random.Random,
    name: str,
    cohort: str | None,
    gpu_flavors: list[str],
    cpu: str | None,
    selector_team: str | None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceGroups": _groups(r, gpu_flavors, cpu, cohort is not None),
        "namespaceSelector": {},
    }
    if cohort:
        spec["cohortName"] = cohort
    if r.random() < 0.25:
        spec["queueingStrategy"] = "StrictFIFO"
    pre: dict[str, Any] = {
        "withinClusterQueue": r.choice(("Never", "LowerPriority", "LowerOrNewerEqualPriority"))
    }
    if cohort:
        pre["reclaimWithinCohort"] = r.choice(("Never", "LowerPriority", "Any"))
        if pre["reclaimWithinCohort"] != "Never" and r.random() < 0.4:
            bwc: dict[str, Any] = {"policy": "LowerPriority"}
            if r.random() < 0.5:
                bwc["maxPriorityThreshold"] = r.choice((100, 500, 1000))
            pre["borrowWithinCohort"] = bwc
    spec["preemption"] = pre
    if r.random() < 0.4:
        fung = {
            "whenCanBorrow": r.choice(("MayStopSearch", "TryNextFlavor")),
            "whenCanPreempt": r.choice(("MayStopSearch", "TryNextFlavor")),
        }
        if fung["whenCanBorrow"] == fung["whenCanPreempt"] == "TryNextFlavor" and r.random() < 0.5:
            fung["preference"] = r.choice(("BorrowingOverPreemption", "PreemptionOverBorrowing"))
        spec["flavorFungibility"] = fung
    if selector_team:
        spec["namespaceSelector"] = {"matchLabels": {"kgpu.dev/team": selector_team}}
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": _meta(name), "spec": spec}


def scenario(n: int) -> Scenario:
    r = random.Random(n)
    flavors, gpu_flavors, cpu = _flavors(r, n)
    infra: list[dict[str, Any]] = list(flavors)
    values = sorted(r.sample((0, 10, 50, 100, 200, 500, 1000, 5000), r.randint(3, 5)))
    priorities: list[tuple[str | None, int]] = []
    for v in values:
        if v == 0:
            priorities.append((None, 0))
            continue
        name = f"s{n}-p{v}"
        priorities.append((name, v))
        infra.append(
            {
                "apiVersion": API,
                "kind": "WorkloadPriorityClass",
                "metadata": _meta(name),
                "value": v,
                "description": f"priority {v}",
            }
        )
    teams = r.sample(TEAMS, r.randint(1, 4))
    layout = r.choice(("standalone", "flat", "flat", "tree", "tree"))
    cohorts: list[str | None]
    if layout == "standalone" or len(teams) == 1:
        cohorts = [None for _ in teams]
    elif layout == "flat":
        cohorts = [f"s{n}-pool" if r.random() < 0.85 else None for _ in teams]
    else:
        root = f"s{n}-org"
        kids = [f"s{n}-{x}" for x in r.sample(("train", "serve", "batch"), r.randint(1, 2))]
        for c in [root, *kids]:
            spec: dict[str, Any] = {} if c == root else {"parentName": root}
            if r.random() < 0.35:
                spec["resourceGroups"] = _groups(r, gpu_flavors, cpu, c != root, scale=0.5)
            infra.append({"apiVersion": API, "kind": "Cohort", "metadata": _meta(c), "spec": spec})
        cohorts = [r.choice([root, *kids, *kids]) for _ in teams]
    roots = {c: (f"s{n}-org" if layout == "tree" else c) for c in cohorts if c}
    queues: list[Queue] = []
    for team, cohort in zip(teams, cohorts, strict=True):
        cq = f"s{n}-{team}"
        labels = {"kgpu.dev/team": team}
        selector = None
        if r.random() < 0.1:
            selector = team if r.random() < 0.5 else r.choice([t for t in TEAMS if t != team])
        infra.append({"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(cq, labels=labels)})
        obj = _cluster_queue(r, cq, cohort, gpu_flavors, cpu, selector)
        infra.append(obj)
        infra.append(
            {
                "apiVersion": API,
                "kind": "LocalQueue",
                "metadata": _meta("team-queue", namespace=cq),
                "spec": {"clusterQueue": cq},
            }
        )
        queues.append(
            Queue(
                cq,
                cq,
                "team-queue",
                roots[cohort] if cohort else cq,
                obj["spec"].get("queueingStrategy", "BestEffortFIFO"),
            )
        )
    return Scenario(n, infra, queues, priorities, r, r.randint(*STEPS))


# --- Workloads -------------------------------------------------------------------------------------------


def _container(r: random.Random, name: str, gpus: int) -> dict[str, Any]:
    req = {
        "cpu": r.choice(("500m", "1", "2", "4", "4", "8")),
        "memory": r.choice(("2Gi", "4Gi", "8Gi", "16Gi", "16Gi", "32Gi")),
    }
    if gpus:
        req[GPU] = str(gpus)
    c: dict[str, Any] = {
        "name": name,
        "image": "nvcr.io/nvidia/pytorch:24.07-py3",
        "resources": {"requests": req},
    }
    if gpus:
        c["resources"]["limits"] = {GPU: str(gpus)}
    return c


def _template(r: random.Random, name: str, gpus: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [_container(r, name, gpus)]}
    if gpus and r.random() < 0.2:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": r.choice(GPUS)[1]}
    if gpus and r.random() < 0.3:
        spec["tolerations"] = [
            {"key": SPOT_TAINT["key"], "operator": "Equal", "value": "true", "effect": "NoSchedule"}
        ]
    return {"spec": spec}


def _pod_sets(r: random.Random) -> tuple[str, str, list[dict[str, Any]]]:
    """(kind, apiVersion, pod sets) as the Job, JobSet or RayJob integration builds them."""

    def gpus() -> int:
        return r.choice((1, 1, 2, 4, 8))

    kind = r.choice(("Job", "Job", "JobSet", "RayJob"))
    if kind == "Job":
        count = r.choice((1, 1, 2, 4))
        return kind, "batch/v1", [{"name": "main", "count": count, "template": _template(r, "train", gpus())}]
    if kind == "JobSet":
        return (
            kind,
            "jobset.x-k8s.io/v1alpha2",
            [
                {"name": "launcher", "count": 1, "template": _template(r, "launcher", 0)},
                {"name": "workers", "count": r.randint(1, 4), "template": _template(r, "worker", gpus())},
            ],
        )
    sets = [{"name": "head", "count": 1, "template": _template(r, "ray-head", 0)}]
    for g in r.sample(("gpu-group", "small-group"), r.randint(1, 2)):
        sets.append({"name": g, "count": r.randint(1, 3), "template": _template(r, "ray-worker", gpus())})
    return kind, "ray.io/v1", sets


def workload(scn: Scenario, queue: Queue, priority: tuple[str | None, int]) -> dict[str, Any]:
    r = scn.rng
    kind, api, pod_sets = _pod_sets(r)
    scn.serial += 1
    job = f"{r.choice(('train', 'finetune', 'eval', 'sweep', 'pretrain'))}-{scn.serial}"
    uid = str(uuid.UUID(int=r.getrandbits(128), version=4))
    digest = hashlib.sha256(f"{kind}/{job}/{uid}".encode()).hexdigest()[:5]
    name = f"{kind.lower()}-{job}-{digest}"
    spec: dict[str, Any] = {"queueName": queue.local_queue, "podSets": pod_sets, "active": True}
    pc, value = priority
    if pc is not None:
        spec["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": pc}
        spec["priority"] = value
    meta = _meta(
        name,
        namespace=queue.namespace,
        labels={"kueue.x-k8s.io/job-uid": uid},
        ownerReferences=[
            {
                "apiVersion": api,
                "kind": kind,
                "name": job,
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    )
    scn.created.append(name)
    return {"apiVersion": API, "kind": "Workload", "metadata": meta, "spec": spec}


@dataclass
class Event:
    tree: str
    arrivals: list[dict[str, Any]] = field(default_factory=list)  # in creation order (highest priority first)
    finish: tuple[str, str] | None = None


def events(scn: Scenario, admitted: dict[str, list[tuple[str, str]]]) -> list[Event]:
    """This step's events, one per sharing tree; ``admitted``: per tree, the Workloads the real Kueue holds
    admitted now (sorted), among which a finish picks."""
    r = scn.rng
    out = []
    for tree in scn.trees():
        roll = r.random()
        if roll < 0.3 and admitted.get(tree):
            out.append(Event(tree, finish=r.choice(admitted[tree])))
        elif roll < 0.85:
            queue = r.choice([q for q in scn.queues if q.tree == tree])
            chosen = r.sample(scn.priorities, r.randint(1, min(4, len(scn.priorities))))
            chosen.sort(key=lambda p: -p[1])
            out.append(Event(tree, arrivals=[workload(scn, queue, p) for p in chosen]))
    return out
