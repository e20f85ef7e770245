"""Seeded benchmark: a production cluster in trouble, as ``kubectl get ... -A -o json`` prints it.

Two shapes, generated from a seed (deterministic: the same bytes on every run):

- ``trouble``: a full cluster. Nodes of twelve instance types named as kgpu's catalog names them (m7i,
  m6i, c7i; g5, g6, g6e, p4d, p5 tainted ``nvidia.com/gpu``, p4d/p5 also ``dedicated=training``) over three
  zones, as many as make the running pods, DaemonSets and batch fillers take 97 % of the CPU nodes' CPU
  (``KGPU_TROUBLE_FILL``; ``KGPU_TROUBLE_NODES`` sets the count), 1 % cordoned, 0.5 % NotReady.
  About 600 workloads shaped like Helm charts' (``app.kubernetes.io/*`` and ``helm.sh/chart`` labels):
  Deployments with their ReplicaSets, StatefulSets with ``volumeClaimTemplates`` (their
  PersistentVolumeClaims, the PersistentVolumes of the bound ones with EBS zone affinity, two
  StorageClasses with ``WaitForFirstConsumer``), Jobs; init containers (and istio's ``istio-init``),
  sidecars (istio-proxy, fluent-bit); zone and hostname ``topologySpreadConstraints``, required and
  preferred pod anti-affinity (the presets of prod_bench); PriorityClasses (a global default, two higher,
  two lower) with low-priority batch pods running on most nodes; seven DaemonSets with a pod per node each,
  pinned by ``matchFields`` ``metadata.name`` as the DaemonSet controller writes it; FailedScheduling and
  kubelet events. Of the workload pods (10k, 50k, 150k) about 15 % are pending (most of those that can
  run only by preempting batch pods) and about 6 %
  unschedulable (more CPU or GPUs than any node has, a selector on a label no node has, an untolerated
  taint). Each size in two renderings of the same objects: ``compact`` (``json.dumps(...,
  separators=(',', ':'))``) and ``verbose`` (``indent=4``, every field ``kubectl get -o json`` shows:
  status conditions, container statuses, node images, the projected service-account volume ...;
  ``KGPU_TROUBLE_MANAGED_FIELDS=1`` adds ``metadata.managedFields``, which kubectl hides by default).
- ``backlog``: 5,000 nodes, 12.5k running pods, 50k pending pods from about 400 workloads, of which about
  11k cannot be placed anywhere; compact JSON only.

Each file is the one input of three verbs, run in fresh processes through the ``kgpu`` command line with
``-o json`` (the whole verb: read, decode, place or check, encode), as prod_bench runs them: ``simulate -c
FILE``; ``plan``, i.e. ``simulate -c FILE -f PROFILE`` with the profile ``kgpu init -t eks-karpenter``
writes (its Karpenter pools provision for what does not fit: ``kgpu plan`` itself takes no cluster
file); ``doctor --snapshot FILE``. Each against stdlib ``json.load`` of the same file in the same run (best
of ``KGPU_TROUBLE_REPEAT``, default 1, in alternation). Times are CPU seconds (user + system) of whole
processes, start-up and imports included (kgpu's from bytecode compiled beforehand), as prod_bench.
Prints time, the ratio, peak RSS of each child (``resource.getrusage``), and over sizes the growth
exponent ``log(t2/t1)/log(n2/n1)`` between consecutive sizes, for kgpu and for json.load. It never asserts.

    .venv/bin/python benchmarks/trouble_bench.py                       # 10k and 50k, both shapes (make bench)
    KGPU_TROUBLE_SIZES=10k,50k,150k .venv/bin/python benchmarks/trouble_bench.py   # with 150k
    .venv/bin/python benchmarks/trouble_bench.py 10k compact trouble   # one size, rendering, shape
    .venv/bin/python benchmarks/trouble_bench.py cprofile              # cProfile of simulate and doctor
                                                                       # (50k compact and backlog)

Files go to ``$KGPU_BENCH_DIR/trouble`` (default ``.bench/trouble``) and are reused while the generator
and its parameters are unchanged (a stamp holds this file's hash).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import pstats
import random
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).parent))
import prod_bench as pb  # VERB, JSON_LOAD, the bytecode step, uids, Helm labels, constraint presets

SEED = 20261128
SIZES = {"10k": 10_000, "50k": 50_000, "150k": 150_000}
WORKLOADS = 600
FILL = 0.97  # the share of the CPU nodes' CPU that running pods, DaemonSets and batch fillers take
T0 = "2026-11-27T06:00:00Z"
T = "2026-11-28T08:00:00Z"
REGION = "us-east-1"
ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
EBS_ZONE = "topology.ebs.csi.aws.com/zone"
GIB = 1024 ** 3
MIB = 1024 ** 2

# (instance type, weight, vCPUs, allocatable cpu m, allocatable memory KiB, max pods, GPUs, GFD product, pool)
NODE_TYPES = [
    ("m7i.2xlarge", 14, 8, 7910, 31_389_640, 58, 0, "", "general"),
    ("m7i.4xlarge", 16, 16, 15890, 63_193_056, 234, 0, "", "general"),
    ("m6i.4xlarge", 9, 16, 15890, 63_193_056, 234, 0, "", "general"),
    ("c7i.2xlarge", 9, 8, 7910, 15_100_000, 58, 0, "", "compute"),
    ("c7i.4xlarge", 12, 16, 15890, 30_600_000, 234, 0, "", "compute"),
    ("m7i.xlarge", 10, 4, 3920, 15_146_852, 58, 0, "", "general"),
    ("g5.2xlarge", 4, 8, 7910, 31_389_640, 58, 1, "NVIDIA-A10G", "gpu"),
    ("g5.12xlarge", 3, 48, 47810, 188_195_312, 234, 4, "NVIDIA-A10G", "gpu"),
    ("g6.4xlarge", 4, 16, 15890, 63_193_056, 234, 1, "NVIDIA-L4", "gpu"),
    ("g6.12xlarge", 2, 48, 47810, 188_195_312, 234, 4, "NVIDIA-L4", "gpu"),
    ("g6e.2xlarge", 2, 8, 7910, 63_177_264, 58, 1, "NVIDIA-L40S", "gpu"),
    ("p4d.24xlarge", 1, 96, 95690, 1_135_000_000, 737, 8, "NVIDIA-A100-SXM4-40GB", "training"),
    ("p5.48xlarge", 1, 192, 191450, 2_020_000_000, 737, 8, "NVIDIA-H100-80GB-HBM3", "training"),
]
GPU_TAINT = {"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "true"}
TRAINING_TAINT = {"effect": "NoSchedule", "key": "dedicated", "value": "training"}
GPU_TOL = {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}
TRAINING_TOL = {"effect": "NoSchedule", "key": "dedicated", "operator": "Equal", "value": "training"}
DEFAULT_TOLS = [
    {"effect": "NoExecute", "key": k, "operator": "Exists", "tolerationSeconds": 300}
    for k in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
]
# (name, value, globalDefault, preemptionPolicy)
PRIORITY_CLASSES = [
    ("platform-critical", 1_000_000, False, "PreemptLowerPriority"),
    ("business-high", 10_000, False, "PreemptLowerPriority"),
    ("default-priority", 1_000, True, "PreemptLowerPriority"),
    ("batch-low", 100, False, "PreemptLowerPriority"),
    ("batch-preemptible", -10, False, "Never"),
]
PRIORITY = {n: v for n, v, _, _ in PRIORITY_CLASSES} | {"system-node-critical": 2_000_001_000}
DAEMONSETS = [  # (name, namespace, image, GPU nodes only, cpu, memory)
    ("kube-proxy", "kube-system", "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/kube-proxy:v1.33.0-eksbuild.2", False, "100m", "64Mi"),
    ("aws-node", "kube-system", "602401143452.dkr.ecr.us-east-1.amazonaws.com/amazon-k8s-cni:v1.19.2-eksbuild.1", False, "25m", "64Mi"),
    ("ebs-csi-node", "kube-system", "public.ecr.aws/ebs-csi-driver/aws-ebs-csi-driver:v1.41.0", False, "10m", "40Mi"),
    ("prometheus-node-exporter", "monitoring", "quay.io/prometheus/node-exporter:v1.9.1", False, "50m", "64Mi"),
    ("fluent-bit", "logging", "cr.fluentbit.io/fluent/fluent-bit:3.2.8", False, "100m", "128Mi"),
    ("nvidia-device-plugin-daemonset", "gpu-operator", "nvcr.io/nvidia/k8s-device-plugin:v0.17.1", True, "50m", "64Mi"),
    ("nvidia-dcgm-exporter", "gpu-operator", "nvcr.io/nvidia/k8s/dcgm-exporter:4.1.1-4.0.4-ubuntu22.04", True, "100m", "128Mi"),
]
NAMESPACES = ["payments", "checkout", "search", "catalog", "identity", "ml-serving", "ml-training", "data", "platform",
              "observability", "batch", "web"]
CHARTS = [  # (chart, image, cpu choices, memory choices, ports)
    ("api", "registry.example.com/{app}:3.14.2", ["50m", "100m", "100m", "250m"], ["128Mi", "256Mi", "512Mi"], 8080),
    ("worker", "registry.example.com/{app}:3.14.2", ["100m", "250m", "500m"], ["256Mi", "512Mi", "1Gi"], 9090),
    ("redis", "docker.io/bitnami/redis:7.4.2-debian-12-r6", ["100m", "250m"], ["128Mi", "512Mi"], 6379),
    ("nginx", "registry.k8s.io/ingress-nginx/controller:v1.12.1", ["100m"], ["90Mi", "256Mi"], 80),
    ("postgresql", "docker.io/bitnami/postgresql:17.4.0-debian-12-r11", ["250m", "500m"], ["512Mi", "1Gi", "2Gi"], 5432),
    ("kafka", "docker.io/bitnami/kafka:3.9.0-debian-12-r12", ["500m", "1"], ["1Gi", "2Gi"], 9092),
    ("elasticsearch", "docker.elastic.co/elasticsearch/elasticsearch:8.17.2", ["1", "2"], ["2Gi", "4Gi"], 9200),
]
STATEFUL_CHARTS = {"redis", "postgresql", "kafka", "elasticsearch"}
GPU_IMAGES = ["nvcr.io/nvidia/tritonserver:25.01-py3", "vllm/vllm-openai:v0.8.2",
              "pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime"]
CONSTRAINTS = [  # prod_bench's presets, (kind, weight): about half of the workloads carry one
    ("", 45), ("zone-hard", 10), ("zone-soft", 6), ("zone-host", 8), ("host-soft", 6),
    ("anti-soft", 12), ("anti-hard", 6), ("anti-zone-soft", 4),
]
# Why an unschedulable workload fits nowhere (each names a real cause kube-scheduler reports).
BROKEN = [
    "cpu",          # asks 256 CPUs: more than any node has (p5.48xlarge holds 191)
    "gpus",         # asks 16 GPUs: nodes have at most 8
    "instance",     # nodeSelector on r7i.8xlarge: no node of that type
    "pool",         # nodeSelector karpenter.sh/nodepool=memory-optimized: no such pool
    "no-toleration",  # a GPU pod without the nvidia.com/gpu toleration: every GPU node is tainted
    "training",     # H100 selected, nvidia.com/gpu tolerated, dedicated=training not
]
MANAGED_FIELDS = os.environ.get("KGPU_TROUBLE_MANAGED_FIELDS", "") not in ("", "0")


def _uid(name: str) -> str:
    return pb._uid(name)


def _q_milli(cpu: str) -> int:
    return int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)


def _q_bytes(mem: str) -> int:
    for suffix, mult in (("Ki", 1024), ("Mi", MIB), ("Gi", GIB), ("Ti", 1024 * GIB)):
        if mem.endswith(suffix):
            return int(mem[: -len(suffix)]) * mult
    return int(mem)


# --- nodes ---------------------------------------------------------------------------------------------


def _node(i: int, shape: tuple, rng: random.Random, state: str) -> dict:
    itype, _, vcpus, cpu_m, mem_ki, maxpods, gpus, product, pool = shape
    zone = ZONES[i % 3]
    ip = f"10.{20 + i // 60000}.{(i // 250) % 240}.{i % 250 + 2}"
    name = f"ip-{ip.replace('.', '-')}.ec2.internal"
    family = itype.split(".")[0]
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": itype,
        "beta.kubernetes.io/os": "linux",
        "failure-domain.beta.kubernetes.io/region": REGION,
        "failure-domain.beta.kubernetes.io/zone": zone,
        "k8s.io/cloud-provider-aws": "2b5c7d9e1f3a4b6c8d0e2f4a6b8c0d2e",
        "karpenter.k8s.aws/instance-category": family[0],
        "karpenter.k8s.aws/instance-cpu": str(vcpus),
        "karpenter.k8s.aws/instance-family": family,
        "karpenter.k8s.aws/instance-generation": "".join(c for c in family if c.isdigit()),
        "karpenter.k8s.aws/instance-size": itype.split(".")[1],
        "karpenter.sh/capacity-type": "spot" if rng.random() < 0.4 and pool != "training" else "on-demand",
        "karpenter.sh/initialized": "true",
        "karpenter.sh/nodepool": pool,
        "karpenter.sh/registered": "true",
        "kubernetes.io/arch": "amd64",
        HOST: name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": itype,
        EBS_ZONE: zone,
        "topology.k8s.aws/zone-id": f"use1-az{ZONES.index(zone) + 1}",
        "topology.kubernetes.io/region": REGION,
        ZONE: zone,
    }
    capacity = {"cpu": str(vcpus), "ephemeral-storage": "104845292Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
                "memory": f"{mem_ki + 700_000}Ki", "pods": str(maxpods)}
    alloc = {"cpu": f"{cpu_m}m", "ephemeral-storage": "95551679124", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
             "memory": f"{mem_ki}Ki", "pods": str(maxpods)}
    taints: list[dict] = []
    if gpus:
        labels.update({"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": str(gpus),
                       "nvidia.com/gpu.product": product, "nvidia.com/gpu.family": "ampere" if "A" in product[7:9] else "hopper",
                       "nvidia.com/cuda.driver.major": "570", "nvidia.com/mig.capable": str(product.startswith("NVIDIA-A100") or product.startswith("NVIDIA-H100")).lower()})
        capacity["nvidia.com/gpu"] = alloc["nvidia.com/gpu"] = str(gpus)
        taints.append(GPU_TAINT)
    if pool == "training":
        taints.append(TRAINING_TAINT)
    spec: dict = {"providerID": f"aws:///{zone}/i-0{i:016x}"}
    ready = {"lastHeartbeatTime": T, "lastTransitionTime": T0, "message": "kubelet is posting ready status",
             "reason": "KubeletReady", "status": "True", "type": "Ready"}
    if state == "cordoned":
        spec["unschedulable"] = True
        taints.append({"effect": "NoSchedule", "key": "node.kubernetes.io/unschedulable", "timeAdded": T})
    elif state == "notready":
        taints += [{"effect": "NoSchedule", "key": "node.kubernetes.io/unreachable", "timeAdded": T},
                   {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "timeAdded": T}]
        ready = {"lastHeartbeatTime": T0, "lastTransitionTime": T, "message": "Kubelet stopped posting node status.",
                 "reason": "NodeStatusUnknown", "status": "Unknown", "type": "Ready"}
    if taints:
        spec["taints"] = taints
    cond = [
        {"lastHeartbeatTime": T, "lastTransitionTime": T0, "message": f"kubelet has {m}", "reason": r, "status": "False", "type": t}
        for t, r, m in (("MemoryPressure", "KubeletHasSufficientMemory", "sufficient memory available"),
                        ("DiskPressure", "KubeletHasNoDiskPressure", "no disk pressure"),
                        ("PIDPressure", "KubeletHasSufficientPID", "sufficient PID available"))
    ] + [ready]
    images = [{"names": [f"{img}@sha256:{zlib.crc32(img.encode()):08x}{'0' * 56}", img], "sizeBytes": 40_000_000 + k * 7_654_321}
              for k, (_, _, img, gpu_only, _, _) in enumerate(DAEMONSETS) if gpus or not gpu_only]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": ip,
                "csi.volume.kubernetes.io/nodeid": json.dumps({"ebs.csi.aws.com": f"i-0{i:016x}"}, separators=(",", ":")),
                "karpenter.k8s.aws/ec2nodeclass-hash": "12061832557935612381",
                "karpenter.sh/nodepool-hash": "4012513481623584108",
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "creationTimestamp": T0,
            "finalizers": ["karpenter.sh/termination"],
            "labels": labels,
            "name": name,
            "ownerReferences": [{"apiVersion": "karpenter.sh/v1", "blockOwnerDeletion": True, "kind": "NodeClaim",
                                 "name": f"{pool}-{i:05x}", "uid": _uid(f"nodeclaim-{i}")}],
            "resourceVersion": str(1_000_000 + i),
            "uid": _uid(f"node-{i}"),
        },
        "spec": spec,
        "status": {
            "addresses": [{"address": ip, "type": "InternalIP"}, {"address": name, "type": "InternalDNS"},
                          {"address": name, "type": "Hostname"}],
            "allocatable": alloc,
            "capacity": capacity,
            "conditions": cond,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": images,
            "nodeInfo": {
                "architecture": "amd64", "bootID": _uid(f"boot-{i}"), "containerRuntimeVersion": "containerd://1.7.27",
                "kernelVersion": "6.1.132-147.221.amzn2023.x86_64", "kubeProxyVersion": "", "kubeletVersion": "v1.33.1-eks-b9b0d4c",
                "machineID": f"ec2{i:029x}", "operatingSystem": "linux", "osImage": "Amazon Linux 2023.7.20250414",
                "systemUUID": f"ec2{i:05x}-0000-0000-0000-000000000000",
            },
        },
    }


# --- pod templates -------------------------------------------------------------------------------------


def _container(name: str, image: str, req: dict, lim: dict, port: int | None, main: bool = True) -> dict:
    c: dict = {
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "name": name,
        "resources": {"limits": lim, "requests": req} if lim else {"requests": req},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "name": "kube-api-access",
                          "readOnly": True}],
    }
    if main:
        c["env"] = [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}},
            {"name": "LOG_LEVEL", "value": "info"},
        ]
        c["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                "readOnlyRootFilesystem": True, "runAsNonRoot": True, "runAsUser": 1001}
    if port:
        c["ports"] = [{"containerPort": port, "name": "http" if port in (80, 8080) else "tcp", "protocol": "TCP"}]
        c["readinessProbe"] = {"failureThreshold": 3, "periodSeconds": 10, "successThreshold": 1,
                               "tcpSocket": {"port": port}, "timeoutSeconds": 1}
        c["livenessProbe"] = {"failureThreshold": 6, "initialDelaySeconds": 30, "periodSeconds": 10,
                              "successThreshold": 1, "tcpSocket": {"port": port}, "timeoutSeconds": 5}
    return c


def _volumes(extra: list[dict] | None = None) -> list[dict]:
    return [
        *(extra or []),
        {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
            {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}, "path": "namespace"}]}},
        ]}},
    ]


def workloads(rng: random.Random, pods: int, count: int, unsched_share: float, nodes_n: int, fillers: bool) -> list[dict]:
    """``count`` workload descriptions whose pods add up to ``pods``; a set of them (about ``unsched_share``
    of the pods) fits nowhere. With ``fillers``, low-priority batch workloads hold a pod on most nodes."""
    kinds = [k for k, w in CONSTRAINTS for _ in range(w)]
    out: list[dict] = []
    filler_pods = int(nodes_n * 0.9) if fillers else 0
    n_fill = 20 if fillers else 0
    for f in range(n_fill):
        n = filler_pods // n_fill + (1 if f < filler_pods % n_fill else 0)
        app = f"batch-filler-{f:02d}"
        out.append({
            "kind": "Job" if f % 2 else "Deployment", "app": app, "chart": "worker", "release": f"{app}-main",
            "ns": "batch", "replicas": max(1, n), "gpu": 0, "product": "", "constraint": "",
            "priority": "batch-preemptible" if f % 3 == 0 else "batch-low", "filler": True,
            "req": {"cpu": rng.choice(["1", "1500m", "2"]), "memory": rng.choice(["2Gi", "3Gi", "4Gi"])},
            "init": False, "istio": False, "fluent": False, "broken": "", "claims": 0,
        })
    rest = count - n_fill
    # data stores run few replicas: a fifth of the weight of stateless services
    weights = [rng.lognormvariate(0, 1.1) * (0.2 if CHARTS[i % len(CHARTS)][0] in STATEFUL_CHARTS else 1.0)
               for i in range(rest)]
    gpu_of = [rng.random() < 0.08 for _ in range(rest)]
    stateful = [False] * rest
    budget = pods - sum(w["replicas"] for w in out)
    # GPU workloads share about a pod per four nodes (what the GPU pool's GPUs hold), StatefulSets stay
    # small (charts' 1-7 replicas), the rest of the pods go to Deployments and Jobs
    gpu_budget = nodes_n // 4
    w_gpu = sum(w for w, g in zip(weights, gpu_of, strict=True) if g) or 1.0
    w_cpu = sum(w for w, g in zip(weights, gpu_of, strict=True) if not g) or 1.0
    replicas = [max(1, round(w * (gpu_budget if g else budget - gpu_budget) / (w_gpu if g else w_cpu)))
                for w, g in zip(weights, gpu_of, strict=True)]
    for i in range(rest):
        chart = CHARTS[i % len(CHARTS)]
        if not gpu_of[i] and chart[0] in STATEFUL_CHARTS and rng.random() < 0.6:
            stateful[i] = True
            replicas[i] = rng.choice([1, 2, 3, 3, 3, 5, 7])
    # the count is exact: the difference goes to the largest Deployment
    big = max((i for i in range(rest) if not stateful[i] and not gpu_of[i] and CHARTS[i % len(CHARTS)][0] == "api"),
              key=lambda i: replicas[i])
    replicas[big] += budget - sum(replicas)
    broken_left = pods * unsched_share
    order = list(range(rest))
    rng.shuffle(order)
    broken: dict[int, str] = {}
    for i in order:
        if broken_left <= 0:
            break
        if i != big and replicas[i] <= broken_left + 5 and not stateful[i]:
            broken[i] = BROKEN[len(broken) % len(BROKEN)]
            broken_left -= replicas[i]
    for i in range(rest):
        chart, image, cpus, mems, port = CHARTS[i % len(CHARTS)]
        gpu = rng.choice([1, 1, 1, 2, 4]) if gpu_of[i] else 0
        why = broken.get(i, "")
        if why in ("gpus", "no-toleration", "training") and not gpu:
            gpu = 1
        product = ""
        if gpu and rng.random() < 0.5:
            product = rng.choice(["NVIDIA-A10G", "NVIDIA-L4"] + (["NVIDIA-L40S"] if gpu == 1 else []))
        app = f"{'infer' if gpu else chart}-{i:03d}"
        kind = "StatefulSet" if stateful[i] else ("Job" if rng.random() < 0.12 else "Deployment")
        constraint = rng.choice(kinds)
        if constraint in ("anti-hard",) and (replicas[i] > nodes_n // 4 or gpu):
            constraint = "anti-soft"
        if kind == "Job" and constraint in ("anti-hard", "zone-hard"):
            constraint = ""
        out.append({
            "kind": kind, "app": app, "chart": chart, "release": f"{app}-{rng.choice(['prod', 'live', 'main'])}",
            "ns": NAMESPACES[i % len(NAMESPACES)], "replicas": replicas[i], "gpu": gpu, "product": product,
            "constraint": constraint, "filler": False,
            "priority": rng.choice(["platform-critical", "business-high", "business-high"] + [""] * 6),
            "req": {"cpu": rng.choice(["1", "2", "4"] if gpu else cpus), "memory": rng.choice(["8Gi", "16Gi", "32Gi"] if gpu else mems)},
            "image": rng.choice(GPU_IMAGES) if gpu else image.format(app=app),
            "init": rng.random() < 0.4, "istio": rng.random() < 0.3, "fluent": rng.random() < 0.15,
            "broken": why, "claims": (1 + (rng.random() < 0.3)) if stateful[i] else 0, "port": port,
        })
    return out


def _template_spec(w: dict) -> dict:
    """The pod spec of one workload, as the API server returns it (defaults filled in)."""
    req = dict(w["req"])
    lim = {"memory": req["memory"]}
    spec_extra = pb._constraints(w["constraint"], w["app"], w["release"]) if w["constraint"] else {}
    tolerations: list[dict] = []
    node_selector: dict = {}
    if w["gpu"]:
        lim["nvidia.com/gpu"] = str(w["gpu"])
        req["nvidia.com/gpu"] = str(w["gpu"])
        tolerations.append(GPU_TOL)
        if w["product"]:
            node_selector["nvidia.com/gpu.product"] = w["product"]
    why = w["broken"]
    if why == "cpu":
        req["cpu"] = "256"
    elif why == "gpus":
        req["nvidia.com/gpu"] = lim["nvidia.com/gpu"] = "16"
    elif why == "instance":
        node_selector = {"node.kubernetes.io/instance-type": "r7i.8xlarge"}
    elif why == "pool":
        node_selector = {"karpenter.sh/nodepool": "memory-optimized"}
    elif why == "no-toleration":
        tolerations = []
    elif why == "training":
        node_selector = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    if w["filler"]:
        tolerations = [{"operator": "Exists", "effect": "NoSchedule", "key": "nvidia.com/gpu"}]
    containers = [_container(w["chart"], w.get("image") or f"registry.example.com/{w['app']}:1.0.0", req, lim, w.get("port"))]
    init: list[dict] = []
    volumes_extra = [{"configMap": {"defaultMode": 420, "name": f"{w['release']}-config"}, "name": "config"}]
    if w["init"]:
        init.append(_container("wait-for-deps", "docker.io/library/busybox:1.37", {"cpu": "10m", "memory": "16Mi"},
                               {"memory": "16Mi"}, None, main=False))
    if w["istio"]:
        init.append(_container("istio-init", "docker.io/istio/proxyv2:1.25.1", {"cpu": "10m", "memory": "40Mi"},
                               {"cpu": "2", "memory": "1Gi"}, None, main=False))
        containers.append(_container("istio-proxy", "docker.io/istio/proxyv2:1.25.1", {"cpu": "100m", "memory": "128Mi"},
                                     {"cpu": "2", "memory": "1Gi"}, 15090, main=False))
    if w["fluent"]:
        containers.append(_container("fluent-bit", "cr.fluentbit.io/fluent/fluent-bit:3.2.8", {"cpu": "20m", "memory": "32Mi"},
                                     {"memory": "64Mi"}, None, main=False))
    spec: dict = {
        "containers": containers,
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "Never" if w["priority"] == "batch-preemptible" else "PreemptLowerPriority",
        "priority": PRIORITY[w["priority"] or "default-priority"],
        "priorityClassName": w["priority"] or "default-priority",
        "restartPolicy": "Never" if w["kind"] == "Job" else "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {"fsGroup": 1001, "runAsNonRoot": True},
        "serviceAccount": w["release"],
        "serviceAccountName": w["release"],
        "terminationGracePeriodSeconds": 30,
        "tolerations": [*tolerations, *DEFAULT_TOLS],
        "volumes": _volumes(volumes_extra),
        **spec_extra,
    }
    if init:
        spec["initContainers"] = init
    if node_selector:
        spec["nodeSelector"] = node_selector
    return spec


# --- the generator -------------------------------------------------------------------------------------


class Cluster:
    """Nodes with what is left on them, for binding the running pods as a scheduler would have."""

    def __init__(self, nodes: list[dict]) -> None:
        self.nodes = nodes
        self.names = [n["metadata"]["name"] for n in nodes]
        self.cpu = [_q_milli(n["status"]["allocatable"]["cpu"]) for n in nodes]
        self.mem = [_q_bytes(n["status"]["allocatable"]["memory"]) for n in nodes]
        self.gpu = [int(n["status"]["allocatable"].get("nvidia.com/gpu", 0)) for n in nodes]
        self.pods = [int(n["status"]["allocatable"]["pods"]) for n in nodes]
        self.pool: dict[tuple[str, str], list[int]] = {}
        for i, n in enumerate(nodes):
            lab = n["metadata"]["labels"]
            pool = lab["karpenter.sh/nodepool"]
            key = lab.get("nvidia.com/gpu.product", pool)
            for k in (key, "cpu" if "nvidia.com/gpu.product" not in lab else pool, "*"):
                self.pool.setdefault((k, lab[ZONE]), []).append(i)
                self.pool.setdefault((k, ""), []).append(i)

    def take(self, i: int, cpu: int, mem: int, gpu: int) -> bool:
        if self.cpu[i] < cpu or self.mem[i] < mem or self.gpu[i] < gpu or self.pods[i] < 1:
            return False
        self.cpu[i] -= cpu
        self.mem[i] -= mem
        self.gpu[i] -= gpu
        self.pods[i] -= 1
        return True

    def bind(self, rng: random.Random, pool: str, zone: str, cpu: int, mem: int, gpu: int, avoid: set[int]) -> int | None:
        cands = self.pool.get((pool, zone)) or []
        for _ in range(40):
            if not cands:
                return None
            i = cands[rng.randrange(len(cands))]
            if i not in avoid and self.take(i, cpu, mem, gpu):
                return i
        return None


def _requests(spec: dict) -> tuple[int, int, int]:
    cpu = mem = gpu = 0
    for c in spec["containers"]:
        r = c["resources"].get("requests", {})
        cpu += _q_milli(r.get("cpu", "0"))
        mem += _q_bytes(r.get("memory", "0"))
        gpu += int(r.get("nvidia.com/gpu", 0))
    for c in spec.get("initContainers", []):
        r = c["resources"].get("requests", {})
        cpu, mem = max(cpu, _q_milli(r.get("cpu", "0"))), max(mem, _q_bytes(r.get("memory", "0")))
    return cpu, mem, gpu


def _status_running(spec: dict, name: str, host_ip: str, pod_ip: str) -> dict:
    def cstat(c: dict, init: bool) -> dict:
        cid = f"containerd://{zlib.crc32((name + c['name']).encode()):08x}{'a' * 56}"
        state = ({"terminated": {"containerID": cid, "exitCode": 0, "finishedAt": T0, "reason": "Completed", "startedAt": T0}}
                 if init else {"running": {"startedAt": T0}})
        return {"containerID": cid, "image": c["image"], "imageID": f"{c['image'].split(':')[0]}@sha256:{'b' * 64}",
                "lastState": {}, "name": c["name"], "ready": not init, "restartCount": 0, "started": not init,
                "state": state, "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                                                  "name": "kube-api-access", "readOnly": True, "recursiveReadOnly": "Disabled"}]}
    st: dict = {
        "conditions": [{"lastProbeTime": None, "lastTransitionTime": T0, "status": "True", "type": t}
                       for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")],
        "containerStatuses": [cstat(c, False) for c in spec["containers"]],
        "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
        "phase": "Running", "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
        "qosClass": "Burstable", "startTime": T0,
    }
    if spec.get("initContainers"):
        st["initContainerStatuses"] = [cstat(c, True) for c in spec["initContainers"]]
    return st


def _status_pending(message: str) -> dict:
    return {"conditions": [{"lastProbeTime": None, "lastTransitionTime": T, "message": message, "reason": "Unschedulable",
                            "status": "False", "type": "PodScheduled"}], "phase": "Pending", "qosClass": "Burstable"}


def _managed(manager: str) -> list[dict]:
    return [{"apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}}},
             "f:spec": {"f:containers": {}, "f:dnsPolicy": {}}}, "manager": manager, "operation": "Update", "time": T0}]


def _event(kind: str, ns: str, name: str, reason: str, typ: str, message: str, component: str, n: int) -> dict:
    ev = f"{name}.{zlib.crc32((name + reason).encode()):016x}"[:63]
    return {
        "apiVersion": "v1", "count": n, "eventTime": None, "firstTimestamp": T0,
        "involvedObject": {"apiVersion": "v1", "kind": kind, "name": name, "namespace": ns, "uid": _uid(f"{ns}/{name}")},
        "kind": "Event", "lastTimestamp": T, "message": message,
        "metadata": {"creationTimestamp": T0, "name": ev, "namespace": ns, "resourceVersion": "1", "uid": _uid(ev)},
        "reason": reason, "reportingComponent": component, "reportingInstance": "",
        "source": {"component": component}, "type": typ,
    }


def cpu_nodes_for(wls: list[dict], pods: int, pending_share: float, fill: float) -> int:
    """Nodes for which the running pods of ``wls`` (the CPU-only ones, at the rate that leaves
    ``pending_share`` pending), the DaemonSets and the batch fillers take ``fill`` of the CPU nodes' CPU."""
    broken = sum(w["replicas"] for w in wls if w["broken"])
    healthy = sum(w["replicas"] for w in wls if not w["broken"] and not w["filler"])
    running = 1 - max(0.0, pods * pending_share - broken) / max(1, healthy)
    demand = sum(_requests(_template_spec(w))[0] * w["replicas"] * running
                 for w in wls if not w["broken"] and not w["filler"] and not w["gpu"])
    shapes = [s for s in NODE_TYPES for _ in range(s[1])]
    cpu_shapes = [s for s in shapes if not s[6]]
    cpu_share = len(cpu_shapes) / len(shapes)
    cpu_alloc = sum(s[3] for s in cpu_shapes) / len(cpu_shapes)
    daemons = sum(_q_milli(d[4]) for d in DAEMONSETS if not d[3])
    fillers = sum(_requests(_template_spec(w))[0] * w["replicas"] for w in wls if w["filler"])
    return max(60, round((demand + fillers * cpu_share) / (cpu_share * (cpu_alloc * fill - daemons))))


def generate(pods: int, nodes_n: int | None, count: int, pending_share: float, unsched_share: float, seed: int,
             fillers: bool = True, fill: float = FILL) -> tuple[dict, dict]:
    """The List (nodes, pods, controllers, storage, PriorityClasses, events) and counts of what it holds.
    Without ``nodes_n``, as many nodes as make the running pods take ``fill`` of the CPU nodes' CPU."""
    if nodes_n is None:
        guess = pods // 35
        for _ in range(2):  # the fillers (0.9 a node) and the anti-affinity cap depend on the node count
            guess = cpu_nodes_for(workloads(random.Random(seed + 7), pods, count, unsched_share, guess, fillers),
                                  pods, pending_share, fill)
        nodes_n = guess
    rng = random.Random(seed)
    shapes = [s for s in NODE_TYPES for _ in range(s[1])]
    states = ["cordoned"] * 10 + ["notready"] * 5 + ["ok"] * 985
    nodes = [_node(i, rng.choice(shapes), rng, rng.choice(states)) for i in range(nodes_n)]
    cluster = Cluster(nodes)
    # DaemonSets first: their pods are on every eligible node
    daemonsets: list[dict] = []
    ds_pods: list[dict] = []
    for ds, ns, image, gpu_only, cpu, mem in DAEMONSETS:
        labels = {"app.kubernetes.io/name": ds, "app.kubernetes.io/instance": ds, "controller-revision-hash": "6b8f9c7d5",
                  "pod-template-generation": "3"}
        tols = [{"operator": "Exists"}]
        c = _container(ds, image, {"cpu": cpu, "memory": mem}, {"memory": mem}, None, main=False)
        tspec = {"containers": [c], "dnsPolicy": "ClusterFirst", "hostNetwork": ds != "fluent-bit", "priorityClassName": "system-node-critical",
                 "restartPolicy": "Always", "schedulerName": "default-scheduler", "securityContext": {},
                 "serviceAccountName": ds, "terminationGracePeriodSeconds": 30, "tolerations": tols,
                 "volumes": _volumes()}
        if gpu_only:
            tspec["nodeSelector"] = {"nvidia.com/gpu.present": "true"}
        targets = [i for i, n in enumerate(nodes) if not gpu_only or "nvidia.com/gpu" in n["status"]["allocatable"]]
        uid = _uid(f"ds-{ds}")
        daemonsets.append({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"annotations": {"deprecated.daemonset.template.generation": "3", "meta.helm.sh/release-name": ds,
                                         "meta.helm.sh/release-namespace": ns},
                         "creationTimestamp": T0, "generation": 3, "labels": {**labels, "app.kubernetes.io/managed-by": "Helm"},
                         "name": ds, "namespace": ns, "resourceVersion": "77", "uid": uid},
            "spec": {"revisionHistoryLimit": 10, "selector": {"matchLabels": {"app.kubernetes.io/name": ds}},
                     "template": {"metadata": {"labels": labels}, "spec": tspec},
                     "updateStrategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "10%"}, "type": "RollingUpdate"}},
            "status": {"currentNumberScheduled": len(targets), "desiredNumberScheduled": len(targets), "numberAvailable": len(targets),
                       "numberMisscheduled": 0, "numberReady": len(targets), "observedGeneration": 3, "updatedNumberScheduled": len(targets)},
        })
        creq = _requests(tspec)
        for i in targets:
            node = cluster.names[i]
            name = f"{ds}-{i:05x}"
            spec = {**tspec, "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}},
                    "enableServiceLinks": True, "nodeName": node, "preemptionPolicy": "PreemptLowerPriority",
                    "priority": PRIORITY["system-node-critical"], "serviceAccount": ds,
                    "tolerations": [{"operator": "Exists"}, *(
                        {"effect": e, "key": f"node.kubernetes.io/{k}", "operator": "Exists"}
                        for k, e in (("not-ready", "NoExecute"), ("unreachable", "NoExecute"), ("disk-pressure", "NoSchedule"),
                                     ("memory-pressure", "NoSchedule"), ("pid-pressure", "NoSchedule"), ("unschedulable", "NoSchedule")))]}
            cluster.take(i, *creq)
            host_ip = nodes[i]["status"]["addresses"][0]["address"]
            ds_pods.append(_pod(name, ns, labels, ("apps/v1", "DaemonSet", ds, uid), spec,
                                _status_running(spec, name, host_ip, host_ip)))
    # the workloads, their controllers, their pods bound or pending
    controllers: list[dict] = []
    replicasets: list[dict] = []
    claims: list[dict] = []
    volumes: list[dict] = []
    work_pods: list[dict] = []
    events: list[dict] = []
    counts = {"pending": 0, "unschedulable": 0, "no-room": 0}
    wls = workloads(random.Random(seed + 7), pods, count, unsched_share, nodes_n, fillers)
    # the pods of workloads that are not broken are pending at the rate that brings the whole to
    # ``pending_share``, those the binder found no room for included
    broken_pods = sum(w["replicas"] for w in wls if w["broken"])
    pending_left = pods * pending_share - broken_pods
    healthy_left = pods - broken_pods - sum(w["replicas"] for w in wls if w["filler"])
    fill_order = list(range(nodes_n))
    rng.shuffle(fill_order)
    fill_next = 0
    for w in wls:
        labels = {**pb._labels(w["app"], w["release"])}
        labels["app.kubernetes.io/component"] = "primary" if w["kind"] == "StatefulSet" else w["chart"]
        labels["app.kubernetes.io/version"] = "3.14.2"
        tspec = _template_spec(w)
        creq = _requests(tspec)
        ns, app, rel, n = w["ns"], w["app"], w["release"], w["replicas"]
        hash_ = f"{zlib.crc32(rel.encode()) % 16**10:010x}"[:10]
        ctl_uid = _uid(f"{w['kind']}-{ns}-{rel}")
        annotations = {"meta.helm.sh/release-name": rel, "meta.helm.sh/release-namespace": ns}
        tmeta: dict = {"annotations": {"checksum/config": f"{zlib.crc32(app.encode()):08x}" * 8,
                                       "prometheus.io/scrape": "true", "prometheus.io/port": str(w.get("port") or 9090)},
                       "labels": labels}
        if w["istio"]:
            tmeta["annotations"]["sidecar.istio.io/status"] = '{"initContainers":["istio-init"],"containers":["istio-proxy"]}'
        cmeta = {"annotations": annotations, "creationTimestamp": T0, "generation": 4,
                 "labels": {k: v for k, v in labels.items() if k != "pod-template-hash"}, "name": rel, "namespace": ns,
                 "resourceVersion": str(zlib.crc32(rel.encode()) % 10**7), "uid": ctl_uid}
        selector = {"matchLabels": {"app.kubernetes.io/instance": rel, "app.kubernetes.io/name": app}}
        template_spec = {k: v for k, v in tspec.items() if k not in ("priority", "serviceAccount", "enableServiceLinks", "preemptionPolicy")}
        owner: tuple[str, str, str, str]
        if w["kind"] == "Deployment":
            rs = f"{rel}-{hash_}"
            rs_uid = _uid(f"rs-{ns}-{rs}")
            plabels = {**labels, "pod-template-hash": hash_}
            controllers.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": cmeta,
                                "spec": {"progressDeadlineSeconds": 600, "replicas": n, "revisionHistoryLimit": 10, "selector": selector,
                                         "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"},
                                         "template": {"metadata": tmeta, "spec": template_spec}},
                                "status": {"observedGeneration": 4, "replicas": n, "updatedReplicas": n}})
            replicasets.append({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                "metadata": {"annotations": {"deployment.kubernetes.io/desired-replicas": str(n),
                                                             "deployment.kubernetes.io/max-replicas": str(n + (n + 3) // 4),
                                                             "deployment.kubernetes.io/revision": "4", **annotations},
                                             "creationTimestamp": T0, "generation": 1, "labels": plabels, "name": rs, "namespace": ns,
                                             "ownerReferences": [{"apiVersion": "apps/v1", "blockOwnerDeletion": True, "controller": True,
                                                                  "kind": "Deployment", "name": rel, "uid": ctl_uid}],
                                             "resourceVersion": "1", "uid": rs_uid},
                                "spec": {"replicas": n, "selector": {"matchLabels": {**selector["matchLabels"], "pod-template-hash": hash_}},
                                         "template": {"metadata": {**tmeta, "labels": plabels}, "spec": template_spec}},
                                "status": {"fullyLabeledReplicas": n, "observedGeneration": 1, "replicas": n}})
            owner = ("apps/v1", "ReplicaSet", rs, rs_uid)
            prefix = rs
        elif w["kind"] == "StatefulSet":
            plabels = {**labels, "controller-revision-hash": f"{rel}-{hash_[:8]}"}
            vct = [{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": f"data{k or ''}"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": f"{8 << k}Gi"}},
                             "storageClassName": "gp3" if k == 0 else "io2", "volumeMode": "Filesystem"},
                    "status": {"phase": "Pending"}} for k in range(w["claims"])]
            controllers.append({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": cmeta,
                                "spec": {"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
                                         "podManagementPolicy": "OrderedReady", "replicas": n, "revisionHistoryLimit": 10,
                                         "selector": selector, "serviceName": f"{rel}-headless",
                                         "template": {"metadata": tmeta, "spec": template_spec},
                                         "updateStrategy": {"rollingUpdate": {"partition": 0}, "type": "RollingUpdate"},
                                         "volumeClaimTemplates": vct},
                                "status": {"availableReplicas": n, "currentReplicas": n, "observedGeneration": 4, "replicas": n}})
            owner = ("apps/v1", "StatefulSet", rel, ctl_uid)
            prefix = rel
        else:
            plabels = {**labels, "batch.kubernetes.io/controller-uid": ctl_uid, "batch.kubernetes.io/job-name": rel,
                       "controller-uid": ctl_uid, "job-name": rel}
            controllers.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": cmeta,
                                "spec": {"backoffLimit": 6, "completionMode": "NonIndexed", "completions": n, "manualSelector": False,
                                         "parallelism": n, "podReplacementPolicy": "TerminatingOrFailed",
                                         "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": ctl_uid}},
                                         "suspend": False,
                                         "template": {"metadata": {**tmeta, "labels": plabels}, "spec": template_spec}},
                                "status": {"active": n, "ready": n, "startTime": T0, "terminating": 0, "uncountedTerminatedPods": {}}})
            owner = ("batch/v1", "Job", rel, ctl_uid)
            prefix = rel
        gpu_pool = bool(w["gpu"]) and not w["broken"]
        pool = (w["product"] or "gpu") if gpu_pool else "cpu"
        avoid: set[int] = set()
        spread_zone = w["constraint"] in ("zone-hard", "zone-host", "zone-soft")
        distinct = w["constraint"] == "anti-hard"
        for r in range(n):
            name = f"{prefix}-{r}" if w["kind"] == "StatefulSet" else f"{prefix}-{zlib.crc32(f'{prefix}{r}'.encode()) % 36**5:05x}{r:x}"
            spec = dict(tspec)
            if w["kind"] == "StatefulSet":
                spec["hostname"] = name
                spec["subdomain"] = f"{rel}-headless"
                spec["volumes"] = [{"name": f"data{k or ''}", "persistentVolumeClaim": {"claimName": f"data{k or ''}-{name}"}}
                                   for k in range(w["claims"])] + spec["volumes"]
            node: int | None = None
            pending = bool(w["broken"])
            if not pending and w["filler"]:
                while fill_next < nodes_n and node is None:
                    i = fill_order[fill_next]
                    fill_next += 1
                    if nodes[i]["metadata"]["labels"]["karpenter.sh/nodepool"] != "training" and cluster.take(i, *creq):
                        node = i
            elif not pending:
                healthy_left -= 1
                if rng.random() >= pending_left / max(1, healthy_left + 1):
                    zone = ZONES[r % 3] if spread_zone else ""
                    node = cluster.bind(rng, pool, zone, *creq, avoid if distinct else set())
                    counts["no-room"] += node is None
                pending_left -= node is None
            if node is not None:
                avoid.add(node)
                nd = nodes[node]
                spec["nodeName"] = cluster.names[node]
                host_ip = nd["status"]["addresses"][0]["address"]
                status = _status_running(spec, name, host_ip, f"10.100.{(len(work_pods) >> 8) & 255}.{len(work_pods) & 255}")
            else:
                counts["pending"] += 1
                counts["unschedulable"] += bool(w["broken"])
                msg = (f"0/{nodes_n} nodes are available: {nodes_n} node(s) didn't match Pod's node affinity/selector. "
                       "preemption: 0/{0} nodes are available: {0} Preemption is not helpful for scheduling.".format(nodes_n)
                       if w["broken"] else f"0/{nodes_n} nodes are available: {nodes_n} Insufficient cpu.")
                status = _status_pending(msg)
                events.append(_event("Pod", ns, name, "FailedScheduling", "Warning", msg, "default-scheduler", 1 + r % 40))
            work_pods.append(_pod(name, ns, plabels, owner, spec, status))
            for k in range(w["claims"]):
                cname = f"data{k or ''}-{name}"
                cls = "gp3" if k == 0 else "io2"
                size = f"{8 << k}Gi"
                cmeta2: dict = {"annotations": {"volume.beta.kubernetes.io/storage-provisioner": "ebs.csi.aws.com",
                                                "volume.kubernetes.io/storage-provisioner": "ebs.csi.aws.com"},
                                "creationTimestamp": T0, "finalizers": ["kubernetes.io/pvc-protection"],
                                "labels": {"app.kubernetes.io/instance": rel, "app.kubernetes.io/name": app},
                                "name": cname, "namespace": ns, "resourceVersion": "1", "uid": _uid(f"pvc-{ns}-{cname}")}
                cspec: dict = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}},
                               "storageClassName": cls, "volumeMode": "Filesystem"}
                if node is not None:
                    pv = f"pvc-{_uid(f'pvc-{ns}-{cname}')}"
                    zone = nodes[node]["metadata"]["labels"][ZONE]
                    cmeta2["annotations"].update({"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes",
                                                  "volume.kubernetes.io/selected-node": cluster.names[node]})
                    cspec["volumeName"] = pv
                    claims.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": cmeta2, "spec": cspec,
                                   "status": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": size}, "phase": "Bound"}})
                    volumes.append({"apiVersion": "v1", "kind": "PersistentVolume",
                                    "metadata": {"annotations": {"pv.kubernetes.io/provisioned-by": "ebs.csi.aws.com",
                                                                 "volume.kubernetes.io/provisioner-deletion-secret-name": "",
                                                                 "volume.kubernetes.io/provisioner-deletion-secret-namespace": ""},
                                                 "creationTimestamp": T0, "finalizers": ["external-provisioner.volume.kubernetes.io/finalizer",
                                                                                         "kubernetes.io/pv-protection"],
                                                 "name": pv, "resourceVersion": "1", "uid": _uid(pv)},
                                    "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": size},
                                             "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": cname,
                                                          "namespace": ns, "resourceVersion": "1", "uid": _uid(f"pvc-{ns}-{cname}")},
                                             "csi": {"driver": "ebs.csi.aws.com", "fsType": "ext4",
                                                     "volumeAttributes": {"storage.kubernetes.io/csiProvisionerIdentity": "1732694400000-8081-ebs.csi.aws.com"},
                                                     "volumeHandle": f"vol-0{zlib.crc32(pv.encode()):016x}"},
                                             "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                                                 {"key": EBS_ZONE, "operator": "In", "values": [zone]}]}]}},
                                             "persistentVolumeReclaimPolicy": "Delete", "storageClassName": cls,
                                             "volumeMode": "Filesystem"},
                                    "status": {"lastPhaseTransitionTime": T0, "phase": "Bound"}})
                else:
                    claims.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": cmeta2, "spec": cspec,
                                   "status": {"phase": "Pending"}})
                    events.append(_event("PersistentVolumeClaim", ns, cname, "WaitForFirstConsumer", "Normal",
                                         "waiting for first consumer to be created before binding", "persistentvolume-controller", 3))
    for p in work_pods[:: 20]:  # the kubelet's events of the last hour, for one pod in 20
        if p["spec"].get("nodeName"):
            meta = p["metadata"]
            for reason, msg in (("Pulled", "Container image already present on machine"), ("Started", "Started container")):
                events.append(_event("Pod", meta["namespace"], meta["name"], reason, "Normal", msg, "kubelet", 1))
    classes = [{"apiVersion": "scheduling.k8s.io/v1", "description": f"{name} workloads", "kind": "PriorityClass",
                "metadata": {"creationTimestamp": T0, "name": name, "resourceVersion": "1", "uid": _uid(f"pc-{name}")},
                "preemptionPolicy": policy, "value": value, **({"globalDefault": True} if default else {})}
               for name, value, default, policy in PRIORITY_CLASSES]
    storage_classes = [{"allowVolumeExpansion": True, "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                        "metadata": {"annotations": {"storageclass.kubernetes.io/is-default-class": "true"} if sc == "gp3" else {},
                                     "creationTimestamp": T0, "name": sc, "resourceVersion": "1", "uid": _uid(f"sc-{sc}")},
                        "parameters": {"encrypted": "true", "type": sc}, "provisioner": "ebs.csi.aws.com",
                        "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"}
                       for sc in ("gp3", "io2")]
    if MANAGED_FIELDS:
        for obj in (*nodes, *ds_pods, *work_pods):
            obj["metadata"]["managedFields"] = _managed("kubelet" if obj["kind"] == "Node" else "kube-controller-manager")
    items = [*classes, *storage_classes, *nodes, *volumes, *claims, *daemonsets, *(c for c in controllers if c["kind"] == "Deployment"),
             *replicasets, *(c for c in controllers if c["kind"] == "StatefulSet"), *(c for c in controllers if c["kind"] == "Job"),
             *ds_pods, *work_pods, *events]
    counts.update({"nodes": nodes_n, "workloads": len(wls), "workload_pods": len(work_pods), "daemon_pods": len(ds_pods),
                   "claims": len(claims), "volumes": len(volumes), "events": len(events), "broken_workloads": sum(bool(w["broken"]) for w in wls)})
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}, counts


def _pod(name: str, ns: str, labels: dict, owner: tuple[str, str, str, str], spec: dict, status: dict) -> dict:
    api, kind, oname, ouid = owner
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"creationTimestamp": T0, "generateName": name.rsplit("-", 1)[0] + "-", "labels": labels, "name": name,
                     "namespace": ns, "ownerReferences": [{"apiVersion": api, "blockOwnerDeletion": True, "controller": True,
                                                           "kind": kind, "name": oname, "uid": ouid}],
                     "resourceVersion": str(zlib.crc32(name.encode()) % 10**8), "uid": _uid(f"{ns}/{name}")},
        "spec": spec, "status": status,
    }


# --- files ---------------------------------------------------------------------------------------------


def _stamp(params: str) -> str:
    return hashlib.sha256(Path(__file__).read_bytes() + params.encode()).hexdigest()[:16]


def write(directory: Path, tag: str, params: dict, renderings: list[str]) -> tuple[dict[str, Path], dict, float]:
    """The files of one shape and size (reused when the generator and its parameters are unchanged)."""
    paths = {r: directory / f"{tag}-{r}.json" for r in renderings}
    meta = directory / f"{tag}.meta.json"
    stamp = _stamp(json.dumps(params, sort_keys=True) + str(MANAGED_FIELDS))
    if meta.exists() and all(p.exists() for p in paths.values()):
        info = json.loads(meta.read_text())
        if info.get("stamp") == stamp and all(r in info.get("renderings", []) for r in renderings):
            return paths, info["counts"], 0.0
    t = time.perf_counter()
    doc, counts = generate(**params)
    data = msgspec.json.encode(doc)  # byte for byte json.dumps(doc, separators=(",", ":")) (ASCII input)
    del doc
    done = []
    for r in ("compact", "verbose"):
        path = directory / f"{tag}-{r}.json"
        if r in renderings or path.exists():
            path.write_bytes(data if r == "compact" else msgspec.json.format(data, indent=4))  # == json.dumps(indent=4)
            done.append(r)
    meta.write_text(json.dumps({"stamp": stamp, "counts": counts, "renderings": done}))
    return paths, counts, time.perf_counter() - t


def shape_params(shape: str, size: str) -> dict:
    if shape == "backlog":
        return {"pods": 62_500, "nodes_n": 5000, "count": 400, "pending_share": 0.8, "unsched_share": 0.176,
                "seed": SEED + 1, "fillers": False}
    pods = SIZES[size]
    nodes_n = int(os.environ["KGPU_TROUBLE_NODES"]) if os.environ.get("KGPU_TROUBLE_NODES") else None
    return {"pods": pods, "nodes_n": nodes_n, "fill": float(os.environ.get("KGPU_TROUBLE_FILL") or FILL), "count": WORKLOADS, "pending_share": 0.15, "unsched_share": 0.06,
            "seed": SEED + pods, "fillers": True}


# --- measuring -----------------------------------------------------------------------------------------


def verbs(path: Path, profile: Path) -> dict[str, list[str]]:
    return {
        "simulate": pb._kgpu("simulate", "-c", str(path), "-o", "json"),
        "plan": pb._kgpu("simulate", "-c", str(path), "-f", str(profile), "-o", "json"),
        "doctor": pb._kgpu("doctor", "--snapshot", str(path), "-o", "json"),
    }


def measure(path: Path, profile: Path, repeat: int) -> tuple[dict, dict[str, dict]]:
    """json.load of the file and each verb on it, best of ``repeat``, in alternation."""
    base: dict = {}
    out: dict[str, dict] = {}
    for _ in range(repeat):
        b = pb._run(pb.VERB, sys.executable, "-c", pb.JSON_LOAD, str(path))
        if not base or b["s"] < base["s"]:
            base = b
        for verb, argv in verbs(path, profile).items():
            r = pb._run(pb.VERB, *argv)
            if verb not in out or r["s"] < out[verb]["s"]:
                out[verb] = r
    return base, out


def _pairs(series: list[tuple[int, float]]) -> str:
    return ", ".join(f"{n1 // 1000}k->{n2 // 1000}k {math.log(t2 / t1) / math.log(n2 / n1):.2f}"
                     for (n1, t1), (n2, t2) in itertools.pairwise(series))


def bench(directory: Path, profile: Path, shapes: list[str], sizes: list[str], renderings: list[str], repeat: int) -> None:
    for shape in shapes:
        rends = ["compact"] if shape == "backlog" else renderings
        shape_sizes = ["62k"] if shape == "backlog" else sizes
        series: dict[tuple[str, str], list[tuple[int, float]]] = {}
        for size in shape_sizes:
            params = shape_params(shape, size)
            paths, counts, gen = write(directory, f"{shape}-{size}", params, rends)
            print(f"{shape} {size}: {counts['nodes']} nodes, {counts['workloads']} workloads, {counts['workload_pods']} workload pods "
                  f"({counts['pending']} pending = {counts['pending'] / counts['workload_pods']:.1%}, of which "
                  f"{counts['unschedulable']} = {counts['unschedulable'] / counts['workload_pods']:.1%} unschedulable, "
                  f"{counts['broken_workloads']} workloads), {counts['daemon_pods']} DaemonSet pods, {counts['claims']} PVCs, "
                  f"{counts['volumes']} PVs, {counts['events']} events; seed {params['seed']}"
                  + (f"; generated in {gen:.0f}s" if gen else "; files reused"), flush=True)
            for r in rends:
                path = paths[r]
                base, res = measure(path, profile, repeat)
                mib = path.stat().st_size / 2**20
                print(f"  {r:8s} {mib:6.0f} MiB  json.load {base['s']:6.2f}s CPU, peak RSS {base['rss_kib'] / 1024:5.0f} MiB"
                      f"{'' if repeat == 1 else f' (best of {repeat})'}", flush=True)
                n = params["pods"]
                series.setdefault((r, "json.load"), []).append((n, base["s"]))
                for verb, v in res.items():
                    series.setdefault((r, verb), []).append((n, v["s"]))
                    rc = "" if v["rc"] in (0, 1) else f"  EXIT {v['rc']}"
                    print(f"    {verb:8s} {v['s']:7.2f}s CPU ({v['wall']:6.2f}s wall)  ratio {v['s'] / base['s']:5.2f}x  "
                          f"peak RSS {v['rss_kib'] / 1024:6.0f} MiB ({v['rss_kib'] / max(1, base['rss_kib']):.2f}x json.load's){rc}",
                          flush=True)
        if len(shape_sizes) > 1:
            for (r, name), pts in series.items():
                shown = ", ".join(f"{n // 1000}k {s:.2f}s" for n, s in pts)
                print(f"  growth {shape} {r} {name}: {shown}; exponent {_pairs(pts)} (fitted n^{pb._exponent(pts):.2f})")
        print(flush=True)


# the frames every verb runs under (the console script, click, kgpu.cli): left out of the cumulative list
WRAPPERS = r"^(?!.*(click/|/cli/|builtins.exec|bin/kgpu|method 'extend')).*"


def cprofile(directory: Path, profile: Path, top: int) -> None:
    """cProfile of simulate and doctor on the 50k compact ``trouble`` file and on ``backlog``."""
    kgpu = shutil.which("kgpu", path=str(Path(sys.executable).parent)) or "kgpu"
    for shape, size in (("trouble", "50k"), ("backlog", "62k")):
        paths, _, _ = write(directory, f"{shape}-{size}", shape_params(shape, size), ["compact"])
        path = paths["compact"]
        for verb, args in (("simulate", ["simulate", "-c", str(path), "-o", "json"]),
                           ("doctor", ["doctor", "--snapshot", str(path), "-o", "json"])):
            out = directory / f"{shape}-{size}-{verb}.prof"
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), kgpu, *args], stdout=subprocess.DEVNULL,
                           check=False, env=pb.ENV)
            print(f"== cProfile {verb} {shape} {size} compact ({time.perf_counter() - t:.0f}s wall under the profiler): {out}")
            for key in ("cumulative", "tottime"):
                print(f"-- top {top} by {key}" + (" (below the command line: click and kgpu.cli left out)" if key == "cumulative" else ""))
                stats = pstats.Stats(str(out))
                if key == "cumulative":
                    stats.sort_stats(key).print_stats(WRAPPERS, top)
                else:
                    stats.sort_stats(key).print_stats(top)
            sys.stdout.flush()


def main() -> None:
    directory = Path(os.environ.get("KGPU_BENCH_DIR", ".bench")) / "trouble"
    directory.mkdir(parents=True, exist_ok=True)
    args = sys.argv[1:]
    env_sizes = [s.strip() for s in os.environ.get("KGPU_TROUBLE_SIZES", "").split(",") if s.strip()]
    sizes = [s for s in SIZES if s in args] or [s for s in SIZES if s in env_sizes] or ["10k", "50k"]
    shapes = [s for s in ("trouble", "backlog") if s in args] or ["trouble", "backlog"]
    renderings = [r for r in ("compact", "verbose") if r in args] or ["compact", "verbose"]
    repeat = int(os.environ.get("KGPU_TROUBLE_REPEAT", "1"))
    pb._compile(directory)
    profile = directory / "eks-karpenter.yaml"
    subprocess.run(pb._kgpu("init", "-t", "eks-karpenter", "--force", "-f", str(profile)), check=True, capture_output=True)
    if "cprofile" in args:
        cprofile(directory, profile, int(os.environ.get("KGPU_TROUBLE_TOP", "15")))
        return
    print(f"a cluster in trouble ({WORKLOADS} workloads, nodes for {FILL:.0%} of the CPU, 15 % pending, 6 % unschedulable) "
          f"and a backlog (5,000 nodes, 12.5k running, 50k pending, 400 workloads); seed {SEED}; CPU seconds of whole processes, "
          f"ratio to json.load of the same file; sizes {', '.join(sizes)} (KGPU_TROUBLE_SIZES)", flush=True)
    bench(directory, profile, shapes, sizes, renderings, repeat)


if __name__ == "__main__":
    main()
