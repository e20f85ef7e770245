"""Seeded benchmark: the production shape at Kubernetes' own limits (5,000 nodes; 10k, 50k and 150k pods).

A cluster as ``kubectl get -o json`` and ``kgpu snapshot`` print it: 5,000 nodes in a CPU pool (m5, c5, r5)
and a GPU pool (g5, p4d, g6e, tainted ``nvidia.com/gpu``) over three zones; six DaemonSets (kube-proxy,
aws-node, ebs-csi-node, node-exporter everywhere; the NVIDIA device plugin and dcgm-exporter on GPU nodes)
with their pods bound to every node; events. The workload is hundreds of Deployments (their ReplicaSets'
pods, Helm chart labels), of which about half carry what the ecosystem's charts ship: zone or hostname
``topologySpreadConstraints`` (DoNotSchedule and ScheduleAnyway), required or preferred pod anti-affinity on
the hostname (Bitnami's hard and soft presets), zone anti-affinity. A fifth of the Deployments ask for GPUs.

Variants, per size (pods: 10k, 50k, 150k):

- ``prod``: every pod schedulable, the files indented as ``kubectl get -o json`` prints them;
- ``prod-pending``: compact JSON, a fifth of the pods unschedulable (a GPU product no node has, a missing
  toleration, a selector on a pool that does not exist, more CPU than any node holds).

Measured in fresh processes, each through the ``kgpu`` command line with ``-o json`` (the whole verb: read,
decode, place or check, encode): ``simulate --cluster --workload``; ``simulate`` with ``--profile`` (the
built-in eks-karpenter profile: Karpenter pools provision for what does not fit, "plan with provisioning");
``doctor --snapshot`` on a ClusterSnapshot of the same cluster with 95 % of the pods bound and the rest
pending with their FailedScheduling events. Each against stdlib ``json.load`` of the same files in the same
run (best of N, in alternation). Times are CPU seconds (user + system: the machine may be shared), of
whole processes: the verb's and json.load's include their start-up and imports (kgpu's from bytecode
compiled beforehand, as an installed wheel has it). Prints time, the ratio, peak RSS, the 10k/50k/150k series and the growth
exponent fitted over it (log time against log pods). It never asserts.

    .venv/bin/python benchmarks/prod_bench.py            # 10k and 50k (the quick path)
    .venv/bin/python benchmarks/prod_bench.py 150k       # 10k, 50k and 150k (make bench)
    .venv/bin/python benchmarks/prod_bench.py 10k        # one size
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import time
import zlib
from pathlib import Path

import msgspec

SEED = 20261125
NODES = 5000
DEPLOYMENTS = 400
GPU_PODS = 1000  # the GPU pool holds about 3,900 GPUs
SIZES = {"10k": 10_000, "50k": 50_000, "150k": 150_000}
T = "2026-11-24T08:00:00Z"
ZONES = ["us-west-2a", "us-west-2b", "us-west-2c"]
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"

NODE_SHAPES = [  # (instance type, weight, cpu, memory, max pods, gpus, GFD product, nodepool)
    ("m5.4xlarge", 30, "15890m", "63193056Ki", 110, 0, "", "general"),
    ("m5.8xlarge", 15, "31850m", "128024428Ki", 110, 0, "", "general"),
    ("c5.9xlarge", 20, "35840m", "70734424Ki", 110, 0, "", "general"),
    ("r5.4xlarge", 15, "15890m", "127560524Ki", 110, 0, "", "general"),
    ("g5.12xlarge", 8, "47810m", "188195312Ki", 110, 4, "NVIDIA-A10G", "gpu"),
    ("g6e.2xlarge", 7, "7910m", "63177264Ki", 58, 1, "NVIDIA-L40S", "gpu"),
    ("p4d.24xlarge", 5, "95690m", "1135000000Ki", 110, 8, "NVIDIA-A100-SXM4-40GB", "gpu"),
]
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GPU_TOL = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
DEFAULT_TOLS = [
    {"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    for k in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
]
DAEMONSETS = [  # (name, namespace, image, GPU nodes only, cpu, memory)
    ("kube-proxy", "kube-system", "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/kube-proxy:v1.33.0", False, "100m", "64Mi"),
    ("aws-node", "kube-system", "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni:v1.19.2", False, "25m", "64Mi"),
    ("ebs-csi-node", "kube-system", "public.ecr.aws/ebs-csi-driver/aws-ebs-csi-driver:v1.41.0", False, "10m", "40Mi"),
    ("prometheus-node-exporter", "monitoring", "quay.io/prometheus/node-exporter:v1.9.1", False, "50m", "64Mi"),
    ("nvidia-device-plugin-daemonset", "kube-system", "nvcr.io/nvidia/k8s-device-plugin:v0.17.1", True, "50m", "64Mi"),
    ("nvidia-dcgm-exporter", "gpu-operator", "nvcr.io/nvidia/k8s/dcgm-exporter:4.1.1-4.0.4-ubuntu22.04", True, "100m", "128Mi"),
]
NAMESPACES = ["payments", "checkout", "search", "catalog", "identity", "ml-serving", "ml-training", "data", "platform"]
CPU_IMAGES = [
    "registry.example.com/{}:2.4.1",
    "docker.io/bitnami/redis:7.4.2",
    "registry.k8s.io/ingress-nginx/controller:v1.12.1",
    "quay.io/prometheus/prometheus:v3.2.1",
    "docker.io/bitnami/postgresql:17.4.0",
]
GPU_IMAGES = ["nvcr.io/nvidia/tritonserver:25.01-py3", "vllm/vllm-openai:v0.8.2", "pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime"]


def _labels(app: str, release: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": app,
        "app.kubernetes.io/instance": release,
        "app.kubernetes.io/component": "server",
        "app.kubernetes.io/managed-by": "Helm",
        "helm.sh/chart": f"{app}-1.4.2",
    }


def _selector(app: str, release: str) -> dict:
    return {"matchLabels": {"app.kubernetes.io/name": app, "app.kubernetes.io/instance": release}}


def _constraints(kind: str, app: str, release: str) -> dict:
    """Scheduling constraints as the ecosystem's charts write them."""
    sel = _selector(app, release)

    def spread(key: str, when: str) -> dict:
        return {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": when, "labelSelector": sel}

    if kind == "zone-hard":  # ingress-nginx, karpenter, many in-house charts
        return {"topologySpreadConstraints": [spread(ZONE, "DoNotSchedule")]}
    if kind == "zone-soft":
        return {"topologySpreadConstraints": [spread(ZONE, "ScheduleAnyway")]}
    if kind == "zone-host":  # the pair Kubernetes' docs show: zones hard, hosts soft
        return {"topologySpreadConstraints": [spread(ZONE, "DoNotSchedule"), spread(HOST, "ScheduleAnyway")]}
    if kind == "host-soft":
        return {"topologySpreadConstraints": [spread(HOST, "ScheduleAnyway")]}
    if kind == "anti-soft":  # Bitnami's podAntiAffinityPreset: soft (the default)
        return {
            "affinity": {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "podAffinityTerm": {"labelSelector": sel, "topologyKey": HOST}}
                    ]
                }
            }
        }
    if kind == "anti-hard":  # Bitnami's podAntiAffinityPreset: hard
        return {
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": sel, "topologyKey": HOST}]
                }
            }
        }
    if kind == "anti-zone-soft":
        return {
            "affinity": {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 100, "podAffinityTerm": {"labelSelector": sel, "topologyKey": ZONE}}
                    ]
                }
            }
        }
    return {}


CONSTRAINTS = [  # (kind, weight): about half of the Deployments carry one
    ("", 50), ("zone-hard", 10), ("zone-soft", 6), ("zone-host", 8), ("host-soft", 6),
    ("anti-soft", 12), ("anti-hard", 4), ("anti-zone-soft", 4),
]
UNSCHEDULABLE = [  # why a Deployment of the pending variant cannot run anywhere
    {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "tolerations": [GPU_TOL]},
    {"nodeSelector": {"karpenter.sh/nodepool": "memory-optimized"}},
    {},  # the GPU toleration forgotten (a GPU Deployment)
    {"cpu": "128"},  # more CPU than any node has
]


def deployments(rng: random.Random, pods: int, pending_share: float) -> list[dict]:
    """Deployment templates whose replicas add up to ``pods``; with ``pending_share``, about that share of
    the pods belongs to Deployments that fit nowhere."""
    kinds = [k for k, w in CONSTRAINTS for _ in range(w)]
    gpu_of = [rng.random() < 0.2 for _ in range(DEPLOYMENTS)]
    weights = [rng.lognormvariate(0, 1.0) for _ in range(DEPLOYMENTS)]
    # GPU Deployments share GPU_PODS pods (the GPU pool's size does not grow with the pod count), the CPU
    # Deployments the rest
    gpu_pods = min(GPU_PODS, pods // 5)
    scale = {True: gpu_pods / sum(w for w, g in zip(weights, gpu_of, strict=True) if g)}
    scale[False] = (pods - gpu_pods) / sum(w for w, g in zip(weights, gpu_of, strict=True) if not g)
    replicas = [max(1, int(w * scale[g])) for w, g in zip(weights, gpu_of, strict=True)]
    first_cpu = gpu_of.index(False)
    replicas[first_cpu] += pods - sum(replicas)
    out = []
    bad_left = pods * pending_share
    for i, n in enumerate(replicas):
        gpu = gpu_of[i]
        app = f"{'infer' if gpu else 'svc'}-{i:03d}"
        release = f"{app}-{rng.choice(['prod', 'live', 'main'])}"
        kind = rng.choice(kinds)
        if kind == "anti-hard" and (gpu or n > 600):
            kind = "anti-soft"
        extra = _constraints(kind, app, release)
        if gpu:
            gpus = rng.choice([1, 1, 1, 2, 4])
            req = {"cpu": rng.choice(["1", "2", "4"]), "memory": rng.choice(["8Gi", "16Gi", "32Gi"])}
            lim = {"memory": req["memory"], "nvidia.com/gpu": str(gpus)}
            extra["tolerations"] = [GPU_TOL]
            if rng.random() < 0.5:
                products = ["NVIDIA-A10G", "NVIDIA-A100-SXM4-40GB"] + (["NVIDIA-L40S"] if gpus == 1 else [])
                extra["nodeSelector"] = {"nvidia.com/gpu.product": rng.choice(products)}
            image = rng.choice(GPU_IMAGES)
        else:
            req = {
                "cpu": rng.choice(["50m", "100m", "100m", "250m", "250m", "500m", "1"]),
                "memory": rng.choice(["64Mi", "128Mi", "256Mi", "512Mi", "1Gi", "2Gi"]),
            }
            lim = {"memory": req["memory"]}
            image = rng.choice(CPU_IMAGES).format(app)
        if bad_left > 0 and i % 3 == 1:
            why = UNSCHEDULABLE[(i // 3) % len(UNSCHEDULABLE)]
            if "cpu" in why:
                req["cpu"] = why["cpu"]
            elif why:
                extra.update(json.loads(json.dumps(why)))
            else:
                lim["nvidia.com/gpu"] = "1"
                extra.pop("tolerations", None)
            bad_left -= n
        out.append(
            {
                "app": app, "release": release, "ns": NAMESPACES[i % len(NAMESPACES)], "replicas": n,
                "req": req, "lim": lim, "extra": extra, "image": image, "hash": f"{rng.getrandbits(40):010x}"[:10],
            }
        )
    return out


def _container(name: str, image: str, req: dict, lim: dict) -> dict:
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": ["--port=8080", "--log-level=info"],
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}},
        ],
        "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"}, "periodSeconds": 10},
        "resources": {"requests": req, "limits": lim},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "volumeMounts": [
            {"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "name": "kube-api-access", "readOnly": True}
        ],
    }


def _uid(name: str) -> str:
    return f"{zlib.crc32(name.encode()):08x}-0000-4000-8000-{zlib.crc32(name[::-1].encode()):012x}"


def _pod(name: str, ns: str, labels: dict, owner: tuple[str, str], container: dict, extra: dict, node: str | None) -> dict:
    spec: dict = {
        "containers": [container],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "volumes": [
            {
                "name": "kube-api-access",
                "projected": {"defaultMode": 420, "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]},
            }
        ],
        **extra,
    }
    spec["tolerations"] = [*extra.get("tolerations", []), *DEFAULT_TOLS]
    if node:
        spec["nodeName"] = node
        status = {
            "phase": "Running",
            "qosClass": "Burstable",
            "conditions": [{"status": "True", "type": t, "lastTransitionTime": T} for t in ("Initialized", "Ready", "PodScheduled")],
            "hostIP": "10.0.0.1",
            "podIP": "10.1.0.1",
            "startTime": T,
        }
    else:
        status = {"phase": "Pending", "qosClass": "Burstable"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "generateName": name.rsplit("-", 1)[0] + "-",
            "labels": labels,
            "creationTimestamp": T,
            "resourceVersion": "1",
            "uid": _uid(name),
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": owner[0], "name": owner[1], "uid": _uid(owner[1]),
                 "controller": True, "blockOwnerDeletion": True}
            ],
        },
        "spec": spec,
        "status": status,
    }


def _node(i: int, shape: tuple, rng: random.Random) -> dict:
    itype, _, cpu, mem, maxpods, gpus, product, pool = shape
    zone = ZONES[i % 3]
    name = f"ip-10-{i // 250}-{i % 250}-{i % 7}.us-west-2.compute.internal"
    labels = {
        "kubernetes.io/arch": "amd64",
        HOST: name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": itype,
        "topology.kubernetes.io/region": "us-west-2",
        ZONE: zone,
        "karpenter.sh/capacity-type": rng.choice(["spot", "on-demand"]),
        "karpenter.sh/nodepool": pool,
        "karpenter.k8s.aws/instance-family": itype.split(".")[0],
    }
    alloc = {"cpu": cpu, "ephemeral-storage": "95551679124", "hugepages-2Mi": "0", "memory": mem, "pods": str(maxpods)}
    taints = []
    if gpus:
        labels.update({"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": str(gpus), "nvidia.com/gpu.product": product})
        alloc["nvidia.com/gpu"] = str(gpus)
        taints.append(GPU_TAINT)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "creationTimestamp": T, "uid": f"{i:08x}-0000-4000-8000-000000000000"},
        "spec": {"providerID": f"aws:///{zone}/i-{i:017x}", "taints": taints},
        "status": {
            "addresses": [{"address": f"10.0.{i // 250}.{i % 250}", "type": "InternalIP"}],
            "allocatable": alloc,
            "capacity": alloc,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": T}],
            "nodeInfo": {"kubeletVersion": "v1.33.1-eks-b9b0d4c", "containerRuntimeVersion": "containerd://1.7.27", "architecture": "amd64"},
        },
    }


def _event(pod: dict, reason: str, kind: str, message: str, component: str) -> dict:
    meta = pod["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{zlib.crc32(reason.encode()):08x}", "namespace": meta["namespace"]},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "namespace": meta["namespace"]},
        "reason": reason,
        "type": kind,
        "message": message,
        "count": 1,
        "firstTimestamp": T,
        "lastTimestamp": T,
        "source": {"component": component},
    }


def generate(directory: Path, size: str, pending: bool) -> dict[str, Path]:
    """Write the cluster, the workload and the doctor snapshot of one size and variant."""
    pods = SIZES[size]
    rng = random.Random(SEED + pods + pending)
    shapes = [s for s in NODE_SHAPES for _ in range(s[1])]
    nodes = [_node(i, rng.choice(shapes), rng) for i in range(NODES)]
    gpu_nodes = [n["metadata"]["name"] for n in nodes if n["spec"]["taints"]]
    cpu_nodes = [n["metadata"]["name"] for n in nodes if not n["spec"]["taints"]]
    system: list[dict] = []
    for ds, ns, image, gpu_only, cpu, mem in DAEMONSETS:
        labels = {"app.kubernetes.io/name": ds, "controller-revision-hash": "6b8f9c7d5"}
        tols = [{"operator": "Exists"}] if not gpu_only else [GPU_TOL]
        targets = gpu_nodes if gpu_only else [n["metadata"]["name"] for n in nodes]
        system.append(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": ds, "namespace": ns, "uid": _uid(ds)},
                "spec": {
                    "selector": {"matchLabels": {"app.kubernetes.io/name": ds}},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            "containers": [_container(ds, image, {"cpu": cpu, "memory": mem}, {"memory": mem})],
                            "tolerations": tols,
                            "priorityClassName": "system-node-critical",
                            **({"nodeSelector": {"nvidia.com/gpu.present": "true"}} if gpu_only else {}),
                        },
                    },
                },
                "status": {"desiredNumberScheduled": len(targets), "currentNumberScheduled": len(targets),
                           "numberReady": len(targets), "numberMisscheduled": 0},
            }
        )
        for j, node in enumerate(targets):
            c = _container(ds, image, {"cpu": cpu, "memory": mem}, {"memory": mem})
            system.append(_pod(f"{ds}-{j:05x}", ns, labels, ("DaemonSet", ds), c, {"tolerations": tols}, node))
    work: list[dict] = []
    events: list[dict] = []
    bound: list[dict] = []
    for d in deployments(rng, pods, 0.2 if pending else 0.0):
        labels = {**_labels(d["app"], d["release"]), "pod-template-hash": d["hash"]}
        rs = f"{d['release']}-{d['hash']}"
        gpu = "nvidia.com/gpu" in d["lim"]
        fits = rng.random  # bound pods of the doctor snapshot: spread over their pool
        for r in range(d["replicas"]):
            c = _container(d["app"], d["image"], dict(d["req"]), dict(d["lim"]))
            name = f"{rs}-{r:05x}"
            extra = json.loads(json.dumps(d["extra"]))
            work.append(_pod(name, d["ns"], labels, ("ReplicaSet", rs), c, extra, None))
            pool = gpu_nodes if gpu else cpu_nodes
            if fits() < 0.95:
                bound.append(_pod(name, d["ns"], labels, ("ReplicaSet", rs), c, extra, pool[rng.randrange(len(pool))]))
            else:
                p = _pod(name, d["ns"], labels, ("ReplicaSet", rs), c, extra, None)
                bound.append(p)
                events.append(
                    _event(p, "FailedScheduling", "Warning",
                           f"0/{NODES} nodes are available: {NODES} Insufficient nvidia.com/gpu.", "default-scheduler")
                )
    for p in work[:: max(1, len(work) // (pods // 10))]:  # the normal events a live cluster keeps (1 h)
        for reason, msg in (("Pulled", "Container image already present on machine"), ("Started", "Started container")):
            events.append(_event(p, reason, "Normal", msg, "kubelet"))
    indent = 0 if pending else 4  # kubectl get -o json indents; the pending variant is compact
    tag = f"prod{'-pending' if pending else ''}-{size}"
    out = {
        "cluster": directory / f"{tag}-cluster.json",
        "work": directory / f"{tag}-workload.json",
        "snapshot": directory / f"{tag}-snapshot.json",
    }
    _dump(out["cluster"], {"apiVersion": "v1", "kind": "List", "items": nodes + system + events}, indent)
    _dump(out["work"], {"apiVersion": "v1", "kind": "List", "items": work}, indent)
    items = nodes + system + bound + events
    kinds: dict[str, int] = {}
    for it in items:
        kinds[it["kind"]] = kinds.get(it["kind"], 0) + 1
    snapshot = {
        "apiVersion": "kgpu.dev/v1alpha1",
        "kind": "ClusterSnapshot",
        "metadata": {"createdAt": T, "context": "prod", "server": "https://10.0.0.1:443", "kgpuVersion": "0.1.0",
                     "counts": kinds, "absent": []},
        "items": items,
    }
    _dump(out["snapshot"], snapshot, 0)  # kgpu snapshot writes compact JSON
    return out


def _dump(path: Path, doc: dict, indent: int) -> None:
    data = msgspec.json.encode(doc)
    path.write_bytes(msgspec.json.format(data, indent=indent) if indent else data)


# One verb through the command line, in a child of a fresh process: its wall time and peak RSS.
VERB = """
import json, resource, subprocess, sys, time
t = time.perf_counter()
with open("/dev/null", "w") as null:
    rc = subprocess.run(sys.argv[1:], stdout=null, stderr=subprocess.PIPE).returncode
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"s": ru.ru_utime + ru.ru_stime, "wall": wall, "rc": rc, "rss_kib": ru.ru_maxrss}))
"""

# The yardstick, run through VERB too (a process of its own, start-up included, as the verb's): the peak
# RSS a process reports of itself would include the generator's, which it forked from.
JSON_LOAD = """
import json, sys
for path in sys.argv[1:]:
    with open(path, "rb") as fh:
        json.load(fh)
"""


# The verbs import kgpu from byte-compiled modules, as an installed wheel has them (pip compiles at install):
# with PYTHONDONTWRITEBYTECODE set (as in some development shells) every run would compile kgpu's sources
# again, about a second of each verb's CPU. The bytecode goes to a folder of the bench's own.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _compile(directory: Path) -> None:
    ENV["PYTHONPYCACHEPREFIX"] = str((directory / "pycache").resolve())
    code = "import compileall, kgpu, pathlib; compileall.compile_dir(pathlib.Path(kgpu.__file__).parent, quiet=1)"
    subprocess.run([sys.executable, "-c", code], check=True, env=ENV)


def _run(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True, env=ENV)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _kgpu(*args: str) -> list[str]:
    return [sys.executable, "-c", "from kgpu.cli.main import main; main()", *args]


def _profile(directory: Path) -> Path:
    path = directory / "prod-profile.yaml"
    subprocess.run(_kgpu("init", "--force", "-f", str(path)), check=True, capture_output=True)
    return path


def measure(files: dict[str, Path], profile: Path, repeat: int) -> dict[str, dict]:
    """Best of ``repeat`` for each verb and for json.load of its input, in alternation."""
    verbs = {
        "simulate": (_kgpu("simulate", "-c", str(files["cluster"]), "-w", str(files["work"]), "-o", "json"),
                     [files["cluster"], files["work"]]),
        "plan": (_kgpu("simulate", "-c", str(files["cluster"]), "-w", str(files["work"]), "-f", str(profile), "-o", "json"),
                 [files["cluster"], files["work"]]),
        "doctor": (_kgpu("doctor", "--snapshot", str(files["snapshot"]), "-o", "json"), [files["snapshot"]]),
    }
    out: dict[str, dict] = {}
    for verb, (argv, inputs) in verbs.items():
        best: dict = {}
        base: dict = {}
        for _ in range(repeat):
            r = _run(VERB, *argv)
            b = _run(VERB, sys.executable, "-c", JSON_LOAD, *map(str, inputs))
            if not best or r["s"] < best["s"]:
                best = r
            if not base or b["s"] < base["s"]:
                base = b
        out[verb] = {**best, "json_load": base["s"], "json_rss_kib": base["rss_kib"],
                     "mib": sum(p.stat().st_size for p in inputs) / 2**20}
    return out


def _exponent(series: list[tuple[int, float]]) -> float:
    """Least-squares slope of log(time) over log(pods)."""
    xs = [math.log(n) for n, _ in series]
    ys = [math.log(t) for _, t in series]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else float("nan")


def main() -> None:
    directory = Path(os.environ.get("KGPU_BENCH_DIR", ".bench"))
    directory.mkdir(exist_ok=True)
    args = [a for a in sys.argv[1:] if a in SIZES or a in ("prod", "prod-pending")]
    sizes = [s for s in SIZES if s in args]
    if sizes == ["150k"]:  # `150k` asks for the whole series
        sizes = list(SIZES)
    elif not sizes:
        sizes = ["10k", "50k"]
    variants = [v for v in ("prod", "prod-pending") if v in args] or ["prod", "prod-pending"]
    _compile(directory)
    profile = _profile(directory)
    for variant in variants:
        pending = variant == "prod-pending"
        what = "compact JSON, a fifth of the pods unschedulable" if pending else "indented JSON, every pod schedulable"
        print(f"production shape, {variant} ({NODES} nodes, {DEPLOYMENTS} Deployments, {what}; seed {SEED}; "
              f"targets: <= {'2' if pending else '1.5'}x json.load, growth linear)", flush=True)
        series: dict[str, list[tuple[int, float]]] = {}
        for size in sizes:
            t = time.perf_counter()
            files = generate(directory, size, pending)
            gen = time.perf_counter() - t
            repeat = 1 if size == "150k" else 3 if size == "10k" else 2
            res = measure(files, profile, repeat)
            print(f"  {size} pods (generated in {gen:.0f}s; best of {repeat}):", flush=True)
            for verb, r in res.items():
                series.setdefault(verb, []).append((SIZES[size], r["s"]))
                series.setdefault(f"json.load ({verb})", []).append((SIZES[size], r["json_load"]))
                rc = "" if r["rc"] in (0, 1) else f"  EXIT {r['rc']}"
                print(
                    f"    {verb:8s} {r['s']:7.2f}s CPU ({r['wall']:.2f}s wall)  json.load of its {r['mib']:.0f} MiB {r['json_load']:6.2f}s  "
                    f"ratio {r['s'] / r['json_load']:5.2f}  peak RSS {r['rss_kib'] / 1024:6.0f} MiB "
                    f"(json.load {r['json_rss_kib'] / 1024:.0f} MiB){rc}",
                    flush=True,
                )
        if len(sizes) > 1:
            for name, pts in series.items():
                shown = ", ".join(f"{n // 1000}k {s:.2f}s" for n, s in pts)
                print(f"  growth {name}: {shown}; fitted exponent n^{_exponent(pts):.2f}")
        print(flush=True)


if __name__ == "__main__":
    main()
