"""Seeded benchmark: `kgpu doctor` on a 5,000-node / 50,000-pod cluster snapshot.

Generates one ``ClusterSnapshot`` as ``kgpu snapshot`` writes it: CPU and GPU nodes (GFD labels, taints,
Karpenter labels), DaemonSet pods on every node (kube-proxy, aws-node, the device plugin and the exporter on
GPU nodes), workload pods bound to nodes, pending pods of several shapes (GPU pods without a toleration,
with a selector no node has, asking too many GPUs; CPU pods), their FailedScheduling events and three
NodePools. Then, in fresh processes, best of three:

- doctor's path: read the file, decode, build the state, run every check (pending pods through kgpu.sim),
  encode the report as JSON;
- stdlib ``json.load`` of the same file, the yardstick;

and prints both times and the ratio (the target is doctor <= 3x json.load). Then, as a user runs them on the
same file, the whole verbs with their table output: ``kgpu top -f`` (per-pool and per-node GPU view, 160
columns) and ``kgpu doctor --snapshot`` (grouped findings), each as a ratio to json.load, with how many lines
it printed. It never asserts.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

SEED = 20261123
NODES = 5000
PODS = 50000
PENDING = 1000
T = "2026-11-22T08:00:00Z"

NODE_SHAPES = [  # (instance type, weight, cpu m, memory Ki, pods, gpus, product)
    ("m5.2xlarge", 35, "7910m", "31389640Ki", 58, 0, ""),
    ("c5.4xlarge", 25, "15890m", "30600000Ki", 234, 0, ""),
    ("g4dn.xlarge", 15, "3920m", "15146852Ki", 29, 1, "Tesla-T4"),
    ("g5.12xlarge", 15, "47810m", "188195312Ki", 234, 4, "NVIDIA-A10G"),
    ("p4d.24xlarge", 10, "95690m", "1135000000Ki", 737, 8, "NVIDIA-A100-SXM4-40GB"),
]
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
GPU_TOL = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
DEFAULT_TOLS = [
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
]
DAEMONSETS = [  # (name, namespace, image, gpu nodes only, tolerations)
    (
        "kube-proxy",
        "kube-system",
        "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/kube-proxy:v1.31.2",
        False,
        [{"operator": "Exists"}],
    ),
    (
        "aws-node",
        "kube-system",
        "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni:v1.18.5",
        False,
        [{"operator": "Exists"}],
    ),
    (
        "nvidia-device-plugin-daemonset",
        "kube-system",
        "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
        True,
        [GPU_TOL],
    ),
    ("kgpu-exporter", "kgpu-system", "ghcr.io/kgpu/kgpu:0.1.0", True, [GPU_TOL]),
]
WORKLOADS = [  # (owner, weight, image, requests, gpus)
    ("web", 30, "registry.example.com/web:2.4.1", {"cpu": "250m", "memory": "512Mi"}, 0),
    ("api", 25, "registry.example.com/api:1.9.0", {"cpu": "500m", "memory": "1Gi"}, 0),
    ("batch", 10, "registry.example.com/batch:3.2", {"cpu": "1", "memory": "2Gi"}, 0),
    ("train", 15, "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime", {"cpu": "2", "memory": "8Gi"}, 1),
    ("infer", 15, "nvcr.io/nvidia/tritonserver:24.05-py3", {"cpu": "1", "memory": "4Gi"}, 1),
    ("tf", 5, "tensorflow/tensorflow:2.15.0-gpu", {"cpu": "2", "memory": "8Gi"}, 1),
]
PENDING_SHAPES = [  # (owner, weight, gpus, tolerations, node selector)
    ("train-big", 20, 4, [GPU_TOL], {}),
    ("notebook", 20, 1, [], {}),  # forgot the toleration
    ("infer-l4", 15, 1, [GPU_TOL], {"karpenter.k8s.aws/instance-gpu-name": "l4"}),
    ("train-huge", 5, 16, [GPU_TOL], {}),
    ("web-pending", 40, 0, [], {"node-type": "cpu-large"}),
]


def _container(name: str, image: str, requests: dict[str, str], gpus: int) -> dict:
    req = dict(requests)
    lim = {"memory": requests["memory"]}
    if gpus:
        lim["nvidia.com/gpu"] = str(gpus)
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "env": [
            {"name": "LOG_LEVEL", "value": "<redacted>"},
            {
                "name": "POD_NAME",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
            },
        ],
        "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
        "resources": {"requests": req, "limits": lim},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "volumeMounts": [
            {
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "name": "kube-api-access-x7k2p",
                "readOnly": True,
            }
        ],
    }


def _pod(
    name: str,
    ns: str,
    owner: tuple[str, str],
    container: dict,
    node: str | None,
    tolerations: list[dict],
    selector: dict[str, str],
    labels: dict[str, str],
) -> dict:
    spec: dict = {
        "containers": [container],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccount": "default",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": tolerations + DEFAULT_TOLS,
        "volumes": [
            {
                "name": "kube-api-access-x7k2p",
                "projected": {
                    "defaultMode": 420,
                    "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}],
                },
            }
        ],
    }
    if selector:
        spec["nodeSelector"] = selector
    meta = {
        "creationTimestamp": T,
        "generateName": name.rsplit("-", 1)[0] + "-",
        "labels": labels,
        "name": name,
        "namespace": ns,
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": owner[0],
                "name": owner[1],
                "uid": "5f1c2d3e-0000-4000-8000-000000000001",
            }
        ],
        "resourceVersion": "123456789",
        "uid": f"{hash(name) & 0xFFFFFFFF:08x}-0000-4000-8000-000000000000",
    }
    if node:
        spec["nodeName"] = node
        status = {
            "conditions": [
                {"lastProbeTime": None, "lastTransitionTime": T, "status": "True", "type": t}
                for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "containerStatuses": [
                {
                    "containerID": "containerd://" + "ab" * 32,
                    "image": container["image"],
                    "imageID": container["image"].split(":")[0] + "@sha256:" + "0" * 64,
                    "lastState": {},
                    "name": container["name"],
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": T}},
                }
            ],
            "hostIP": "10.0.0.1",
            "phase": "Running",
            "podIP": "10.1.0.1",
            "qosClass": "Burstable",
            "startTime": T,
        }
    else:
        status = {
            "conditions": [
                {
                    "lastProbeTime": None,
                    "lastTransitionTime": T,
                    "message": "0/5000 nodes are available",
                    "reason": "Unschedulable",
                    "status": "False",
                    "type": "PodScheduled",
                }
            ],
            "phase": "Pending",
            "qosClass": "Burstable",
        }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def generate(path: Path) -> dict[str, int]:
    rng = random.Random(SEED)
    items: list[dict] = []
    nodes: list[tuple[str, int]] = []
    shapes = [s for s in NODE_SHAPES for _ in range(s[1])]
    for i in range(NODES):
        itype, _, cpu, mem, pods, gpus, product = rng.choice(shapes)
        zone = "us-west-2" + "abc"[i % 3]
        name = f"ip-10-{i // 250}-{i % 250}-{i % 7}.us-west-2.compute.internal"
        labels = {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/instance-type": itype,
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": itype,
            "topology.kubernetes.io/region": "us-west-2",
            "topology.kubernetes.io/zone": zone,
            "karpenter.sh/capacity-type": rng.choice(["spot", "on-demand"]),
            "karpenter.sh/nodepool": "gpu" if gpus else "default",
        }
        alloc = {
            "cpu": cpu,
            "ephemeral-storage": "95551679124",
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
            "memory": mem,
            "pods": str(pods),
        }
        taints = []
        if gpus:
            labels.update(
                {
                    "nvidia.com/gpu.present": "true",
                    "nvidia.com/gpu.count": str(gpus),
                    "nvidia.com/gpu.product": product,
                    "nvidia.com/cuda.driver.major": "550",
                    "nvidia.com/cuda.driver.minor": "127",
                    "nvidia.com/cuda.driver.rev": "05",
                }
            )
            alloc["nvidia.com/gpu"] = str(gpus)
            taints.append(GPU_TAINT)
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "creationTimestamp": T,
                    "labels": labels,
                    "name": name,
                    "resourceVersion": "1",
                    "uid": f"{i:08x}-0000-4000-8000-000000000000",
                    "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
                },
                "spec": {"providerID": f"aws:///{zone}/i-{i:017x}", "taints": taints},
                "status": {
                    "addresses": [{"address": f"10.0.{i // 250}.{i % 250}", "type": "InternalIP"}],
                    "allocatable": alloc,
                    "capacity": alloc,
                    "conditions": [
                        {
                            "lastHeartbeatTime": T,
                            "lastTransitionTime": T,
                            "message": "kubelet is posting ready status",
                            "reason": "KubeletReady",
                            "status": "True",
                            "type": "Ready",
                        }
                    ],
                    "nodeInfo": {
                        "architecture": "amd64",
                        "containerRuntimeVersion": "containerd://1.7.22",
                        "kernelVersion": "6.1.112-122.189.amzn2023.x86_64",
                        "kubeletVersion": "v1.31.2-eks-94953ac",
                        "operatingSystem": "linux",
                        "osImage": "Amazon Linux 2023.6.20241010",
                    },
                },
            }
        )
        nodes.append((name, gpus))
    count = 0
    for ds_name, ns, image, gpu_only, tols in DAEMONSETS:
        targets = [n for n, g in nodes if g or not gpu_only]
        items.append(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": ds_name, "namespace": ns, "uid": f"{hash(ds_name) & 0xFFFFFFFF:08x}-ds"},
                "spec": {
                    "selector": {"matchLabels": {"name": ds_name}},
                    "template": {
                        "metadata": {"labels": {"name": ds_name}},
                        "spec": {
                            "containers": [
                                {"name": "main", "image": image, "resources": {"requests": {"cpu": "10m"}}}
                            ],
                            "tolerations": tols,
                            **({"nodeSelector": {"nvidia.com/gpu.present": "true"}} if gpu_only else {}),
                        },
                    },
                },
                "status": {
                    "desiredNumberScheduled": len(targets),
                    "numberReady": len(targets),
                    "currentNumberScheduled": len(targets),
                    "numberMisscheduled": 0,
                },
            }
        )
        for n in targets:
            c = _container("main", image, {"cpu": "10m", "memory": "32Mi"}, 0)
            items.append(
                _pod(f"{ds_name}-{count:05x}", ns, ("DaemonSet", ds_name), c, n, tols, {}, {"name": ds_name})
            )
            count += 1
    gpu_free = {n: g for n, g in nodes if g}
    cpu_nodes = [n for n, g in nodes if not g]
    wshapes = [s for s in WORKLOADS for _ in range(s[1])]
    bound = PODS - PENDING - count
    for i in range(bound):
        owner, _, image, req, gpus = rng.choice(wshapes)
        node = None
        if gpus:
            free = list(gpu_free)
            node = next((n for n in rng.sample(free, min(8, len(free))) if gpu_free[n] >= gpus), None)
            if node is not None:
                gpu_free[node] -= gpus
                if not gpu_free[node]:
                    del gpu_free[node]
        if node is None:
            owner, image, req, gpus = (
                "web",
                "registry.example.com/web:2.4.1",
                {"cpu": "250m", "memory": "512Mi"},
                0,
            )
            node = rng.choice(cpu_nodes)
        tols = [GPU_TOL] if gpus else []
        c = _container(owner, image, req, gpus)
        items.append(
            _pod(
                f"{owner}-7d9f8c6b5-{i:05x}",
                "apps",
                ("ReplicaSet", f"{owner}-7d9f8c6b5"),
                c,
                node,
                tols,
                {},
                {"app": owner},
            )
        )
    pshapes = [s for s in PENDING_SHAPES for _ in range(s[1])]
    for i in range(PENDING):
        owner, _, gpus, tols, sel = rng.choice(pshapes)
        c = _container(
            owner,
            "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime" if gpus else "registry.example.com/web:2.4.1",
            {"cpu": "1", "memory": "2Gi"},
            gpus,
        )
        p = _pod(
            f"{owner}-6c5d4b3a2-{i:05x}",
            "ml",
            ("ReplicaSet", f"{owner}-6c5d4b3a2"),
            c,
            None,
            tols,
            sel,
            {"app": owner},
        )
        items.append(p)
        if i % 2 == 0:
            items.append(
                {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "count": 3,
                    "firstTimestamp": T,
                    "lastTimestamp": T,
                    "involvedObject": {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": p["metadata"]["name"],
                        "namespace": "ml",
                    },
                    "message": "0/5000 nodes are available: 5000 Insufficient nvidia.com/gpu.",
                    "metadata": {"name": p["metadata"]["name"] + ".1879f3a2", "namespace": "ml"},
                    "reason": "FailedScheduling",
                    "type": "Warning",
                    "source": {"component": "default-scheduler"},
                }
            )
    for name, families, limit in (
        ("default", ["m5", "c5"], "20000"),
        ("gpu", ["g4dn", "g5", "p4d"], "4000"),
        ("gpu-spot", ["g6"], "500"),
    ):
        items.append(
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": name},
                "spec": {
                    "limits": {"cpu": limit},
                    "template": {
                        "metadata": {"labels": {}},
                        "spec": {
                            "nodeClassRef": {
                                "group": "karpenter.k8s.aws",
                                "kind": "EC2NodeClass",
                                "name": "default",
                            },
                            "requirements": [
                                {
                                    "key": "karpenter.k8s.aws/instance-family",
                                    "operator": "In",
                                    "values": families,
                                }
                            ],
                            **({"taints": [GPU_TAINT]} if name != "default" else {}),
                        },
                    },
                },
            }
        )
    kinds: dict[str, int] = {}
    for it in items:
        kinds[it["kind"]] = kinds.get(it["kind"], 0) + 1
    doc = {
        "apiVersion": "kgpu.dev/v1alpha1",
        "kind": "ClusterSnapshot",
        "metadata": {
            "createdAt": T,
            "context": "bench",
            "server": "https://127.0.0.1:6443",
            "kgpuVersion": "0.1.0",
            "counts": kinds,
            "absent": ["ray.io/v1 RayCluster"],
        },
        "items": items,
    }
    path.write_text(json.dumps(doc))
    return kinds


DOCTOR = """
import json, sys, time
t0 = time.perf_counter()
from kgpu.cli.doctor_cmd import paused_gc, read_snapshot
from kgpu.doctor.reading import cluster_state
from kgpu.doctor import run_checks
t1 = time.perf_counter()
doc, label = read_snapshot(sys.argv[1])  # what `kgpu doctor --snapshot` does, step by step
t2 = time.perf_counter()
with paused_gc():
    state = cluster_state(doc, label)
    t3 = time.perf_counter()
    report = run_checks(state)
    text = json.dumps(report.as_dict())
t4 = time.perf_counter()
s = report.summary()
print(json.dumps({"import": t1 - t0, "decode": t2 - t1, "state": t3 - t2, "checks": t4 - t3, "total": t4 - t1,
                  "errors": s["errors"], "warnings": s["warnings"], "pending": s["pending_gpu_pods"]}))
"""

JSON_LOAD = """
import json, sys, time
t0 = time.perf_counter()
with open(sys.argv[1]) as fh:
    json.load(fh)
print(json.dumps({"json_load": time.perf_counter() - t0}))
"""


VERBS = """
import json, sys, time
from click.testing import CliRunner
from kgpu.cli.main import cli
out = {}
for name, args in (("top", ["top", "-f", sys.argv[1]]), ("doctor", ["doctor", "--snapshot", sys.argv[1]])):
    t = time.perf_counter()
    res = CliRunner(env={"COLUMNS": "160"}).invoke(cli, args)
    out[name] = time.perf_counter() - t
    out[name + "_lines"] = res.output.count("\\n")
    out[name + "_code"] = res.exit_code
print(json.dumps(out))
"""


def _run(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    directory = Path(os.environ.get("KGPU_BENCH_DIR", ".bench"))
    directory.mkdir(exist_ok=True)
    path = directory / "doctor-snapshot.json"
    t = time.perf_counter()
    kinds = generate(path)
    print(
        f"doctor benchmark: {kinds.get('Node', 0)} nodes, {kinds.get('Pod', 0)} pods ({PENDING} pending), "
        f"{kinds.get('DaemonSet', 0)} DaemonSets, {kinds.get('Event', 0)} events (seed {SEED}); "
        f"snapshot {path.stat().st_size / 2**20:.0f} MiB, generated in {time.perf_counter() - t:.1f}s"
    )
    runs = []
    for _ in range(3):  # best of three for both, in alternation, so they share the machine's state
        runs.append((_run(DOCTOR, str(path)), _run(JSON_LOAD, str(path))))
    doc = min((r[0] for r in runs), key=lambda r: r["total"])
    base = min(r[1]["json_load"] for r in runs)
    print(
        f"  findings: {doc['errors']} errors, {doc['warnings']} warnings; {doc['pending']} pending GPU pods explained"
    )
    print(
        f"  doctor: {doc['total']:.3f}s (decode {doc['decode']:.3f}s + state {doc['state']:.3f}s + "
        f"checks and report {doc['checks']:.3f}s)"
    )
    print(f"  json.load of the same snapshot: {base:.3f}s")
    print(f"  ratio doctor / json.load: {doc['total'] / base:.2f}  (target <= 3)")
    verbs = min((_run(VERBS, str(path)) for _ in range(2)), key=lambda r: r["top"] + r["doctor"])
    for name in ("top", "doctor"):
        print(
            f"  kgpu {name} (the verb, table output): {verbs[name]:.3f}s, {verbs[name] / base:.2f}x json.load, "
            f"{verbs[name + '_lines']} lines (exit {verbs[name + '_code']})"
        )


if __name__ == "__main__":
    main()
