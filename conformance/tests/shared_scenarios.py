"""Shared and MIG GPUs in the seeded scenarios: extra nodes and pod classes drawn from their own random stream.

A scenario of ``scenarios.generate`` is drawn unchanged; ``add_shared`` then adds, from a random stream of
its own (``shared-gpus/<seed>``), nodes whose GPUs the NVIDIA device plugin shares or partitions and pod
classes that ask for them. To kube-scheduler these are plain extended resources: ``nvidia.com/gpu`` times
the replicas (time-slicing or MPS), ``nvidia.com/gpu.shared`` when renamed, ``nvidia.com/mig-<profile>``
under the mixed MIG strategy (``.shared`` when the MIG devices are time-sliced too), ``nvidia.com/gpu`` per
MIG device under the single one. Each node's allocatable and GPU Feature Discovery labels are what the
plugin and GFD make of its GPUs (``kgpu.model.sharing``, whose rules follow the plugin's code and tests;
the MIG layouts are mig-parted's, ``kgpu.catalog.mig``); its MIG config is mostly applied
(``nvidia.com/mig.config.state: success``), sometimes still ``pending``/``rebooting`` or ``failed`` with the
devices still advertised (kube-scheduler reads no label).

Pods ask 1 device mostly, sometimes 2 (kube-scheduler places those; the kubelet may refuse them later, which
is no part of this comparison), sometimes a resource no node advertises (a typo, the other GPU's profile),
and select nodes by GFD's labels (``-SHARED`` and ``-MIG-<profile>`` products, replicas, sharing strategy).
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

from scenarios import CPU_REQ, MEM_REQ, TAINTS, ZONES, Scenario

from kgpu.model.nvidia import LABEL_MIG_STATE
from kgpu.model.sharing import DeviceConfig

GPU = "nvidia.com/gpu"
# instance type, cpu, memory, pods, GPUs, GPU model (kgpu's catalog name)
SHAPES = [
    ("g5.2xlarge", "7910m", "30513552Ki", "58", 1, "A10G"),
    ("g4dn.12xlarge", "47810m", "186676576Ki", "234", 4, "T4"),
    ("p4d.24xlarge", "95690m", "1117028368Ki", "737", 8, "A100"),
    ("p5.48xlarge", "191450m", "2002639068Ki", "100", 8, "H100"),
]
MIG_CONFIGS = {
    "A100": ["all-1g.5gb", "all-balanced", "all-3g.20gb", "all-2g.10gb"],
    "H100": ["all-1g.10gb", "all-balanced", "all-3g.40gb"],
}
# names pods ask that no config here makes: the other GPU's profile, a typo
STRAY = ["nvidia.com/mig-1g.10gb.me", "nvidia.com/mig-1g.5gbb", "nvidia.com/gpu.shard"]


def _config(rng: random.Random, gpu: str) -> DeviceConfig:
    """A device-plugin config for a node of ``gpu``: time-slicing or MPS on any GPU; MIG (mixed or single,
    alone or with its devices time-sliced) on MIG GPUs."""
    if gpu in MIG_CONFIGS and rng.random() < 0.75:
        config = rng.choice(MIG_CONFIGS[gpu])
        single = config != "all-balanced" and rng.random() < 0.3
        cfg = DeviceConfig(name=f"mig-{config}", mig_strategy="single" if single else "mixed", mig_config=config)
        if rng.random() < 0.35:  # MIG devices time-sliced as well
            name = next(iter(cfg.advertised(gpu, 1)))
            return DeviceConfig(name=cfg.name + "-ts", strategy="time-slicing", replicas={name: rng.choice([2, 3])},
                                rename=rng.random() < 0.5, mig_strategy=cfg.mig_strategy, mig_config=config)
        return cfg
    strategy = "mps" if rng.random() < 0.3 else "time-slicing"
    replicas = rng.choice([2, 4, 4, 10])
    return DeviceConfig(name=f"{strategy}-{replicas}", strategy=strategy, replicas={GPU: replicas},
                        rename=rng.random() < 0.4, fail_gt_one=strategy == "mps")


def _node(rng: random.Random, i: int) -> dict[str, Any]:
    itype, cpu, mem, pods, gpus, gpu = rng.choice(SHAPES)
    cfg = _config(rng, gpu)
    name = f"shared-{i:02d}-{itype.replace('.', '-')}"
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "node.kubernetes.io/instance-type": itype, "topology.kubernetes.io/zone": rng.choice(ZONES),
              "pool": rng.choice(["gpu", "batch"]), "nvidia.com/device-plugin.config": cfg.name,
              **cfg.gfd_labels(gpu, gpus)}
    if cfg.mig_config is not None:
        labels["nvidia.com/mig.config"] = cfg.mig_config
        # mostly applied; sometimes the MIG manager is still at it (or failed) while the node keeps advertising:
        # kube-scheduler places by allocatable whatever the label says
        labels[LABEL_MIG_STATE] = "success" if rng.random() < 0.85 else rng.choice(["pending", "rebooting", "failed"])
    alloc: dict[str, str] = {"cpu": cpu, "memory": mem, "pods": pods, "ephemeral-storage": "95551679124"}
    alloc.update({k: str(v) for k, v in cfg.advertised(gpu, gpus).items()})
    spec: dict[str, Any] = {}
    if rng.random() < 0.7:
        spec["taints"] = [rng.choice(TAINTS[:2])]
    if rng.random() < 0.03:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": spec, "status": {"allocatable": alloc, "capacity": dict(alloc)}}


def _gpu_resources(nodes: list[dict[str, Any]]) -> list[str]:
    names = {k for n in nodes for k in n["status"]["allocatable"] if k.startswith("nvidia.com/")}
    return sorted(names)


def _pod_spec(rng: random.Random, nodes: list[dict[str, Any]]) -> dict[str, Any]:
    r = rng.random()
    resource = rng.choice(STRAY) if r < 0.08 else rng.choice(_gpu_resources(nodes))
    count = rng.choice([1, 1, 1, 1, 1, 2, 3])
    requests: dict[str, str] = {}
    if rng.random() < 0.9:
        requests["cpu"] = rng.choice(CPU_REQ[:6])
    if rng.random() < 0.8:
        requests["memory"] = rng.choice(MEM_REQ[:5])
    resources: dict[str, Any] = {"limits": {resource: str(count)}}
    if requests:
        resources["requests"] = requests
    spec: dict[str, Any] = {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.6.0",
                                            "resources": resources}]}
    if rng.random() < 0.35:
        labels = rng.choice(nodes)["metadata"]["labels"]
        keys = sorted(k for k in labels if k.startswith("nvidia.com/") and k.endswith(
            (".product", ".replicas", ".sharing-strategy", "mig.strategy")))
        if keys:
            key = rng.choice(keys)
            spec["nodeSelector"] = {key: labels[key]}
    elif rng.random() < 0.2:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "nvidia.com/gpu.replicas", "operator": "Gt",
                                   "values": [str(rng.choice([1, 2, 4]))]}]}]}}}
    if rng.random() < 0.8:
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    if rng.random() < 0.2:
        spec["priorityClassName"] = rng.choice(["low", "high-never"])
    return spec


def add_shared(s: Scenario) -> Scenario:
    """``s`` with shared and MIG nodes and pod classes added after its own (a fresh copy; ``s`` unchanged)."""
    rng = random.Random(f"shared-gpus/{s.seed}")
    shared = copy.deepcopy(s)
    shared.features.add("shared-gpus")
    extra = [_node(rng, i) for i in range(rng.randint(1, 4))]
    shared.nodes.extend(extra)
    for c in range(rng.randint(1, 4)):
        spec = _pod_spec(rng, extra)
        ns = rng.choice(["default", "ml"])
        labels = {"app": f"infer{c}", "rev": "1"}
        for r in range(rng.randint(1, 6)):
            shared.pending.append({"apiVersion": "v1", "kind": "Pod",
                                   "metadata": {"name": f"shared{c}-{r}", "namespace": ns, "labels": dict(labels)},
                                   "spec": json.loads(json.dumps(spec))})
    return shared
