"""The live commands against a real kube-apiserver, kube-scheduler and kwok GPU nodes (conformance/tests/cluster.py).

Run as a user would: the installed ``kgpu`` command, a kubeconfig with a client certificate over TLS.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cluster import LocalCluster, start_cluster, unscheduled_message

from conftest import binary

KGPU = [sys.executable, "-m", "kgpu.cli.main"]
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}


def kwok_node(name: str, *, gpus: int = 0, product: str = "", taint: bool = True, zone: str = "us-west-2a") -> dict[str, Any]:
    alloc = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok",
              "topology.kubernetes.io/zone": zone}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
        labels |= {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product,
                   "nvidia.com/gpu.count": str(gpus), "nvidia.com/cuda.driver.major": "535",
                   "nvidia.com/cuda.driver.minor": "104", "nvidia.com/cuda.driver.rev": "05",
                   "node.kubernetes.io/instance-type": "g5.12xlarge"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "spec": {"taints": [GPU_TAINT] if gpus and taint else []},
            "status": {"allocatable": alloc, "capacity": alloc}}


def gpu_pod(name: str, gpus: int, *, ns: str = "ml", tolerate: bool = True, image: str = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "train", "image": image,
                                            "env": [{"name": "WANDB_API_KEY", "value": "wandb-secret-123"}],
                                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if tolerate:
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    bin_dir = binary("kube", "kube-apiserver").parent.parent
    c = start_cluster(bin_dir, tmp_path_factory.mktemp("cluster"))
    try:
        c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
        for n in [kwok_node("cpu-1"), kwok_node("gpu-a10g-1", gpus=4, product="NVIDIA-A10G"),
                  kwok_node("gpu-a10g-2", gpus=4, product="NVIDIA-A10G", zone="us-west-2b")]:
            c.create(n)
        c.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "training"}, "value": 100})
        for p in [gpu_pod("train-0", 2), gpu_pod("train-1", 2), gpu_pod("needs-16", 16),
                  gpu_pod("forgot-toleration", 1, tolerate=False)]:
            c.create(p)
        c.wait_for("the scheduler to bind train-0 and train-1", lambda: all(
            c.get(f"/api/v1/namespaces/ml/pods/{n}")["spec"].get("nodeName") for n in ("train-0", "train-1")))
        c.wait_for("FailedScheduling on needs-16 and forgot-toleration", lambda: all(
            unscheduled_message(c.get(f"/api/v1/namespaces/ml/pods/{n}")) for n in ("needs-16", "forgot-toleration")))
        yield c
    finally:
        c.stop()


def kgpu(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": "", "NO_COLOR": "1"}
    return subprocess.run([*KGPU, *args], capture_output=True, text=True, timeout=timeout, env=env, check=False)


def test_snapshot_round_trips_through_a_client_certificate_kubeconfig(cluster: LocalCluster, tmp_path: Path) -> None:
    out = tmp_path / "snap.json"
    res = kgpu("snapshot", "--kubeconfig", str(cluster.admin), "-o", str(out))
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    counts = doc["metadata"]["counts"]
    api_pods = cluster.get("/api/v1/pods")["items"]
    assert counts["Node"] == len(cluster.get("/api/v1/nodes")["items"]) == 3
    assert counts["Pod"] == len(api_pods) and counts["PriorityClass"] >= 3  # ours + the two system classes
    assert counts["Event"] >= 2  # FailedScheduling for the two pods that cannot run
    assert "karpenter.sh/v1 NodePool" in doc["metadata"]["absent"] and "ray.io/v1 RayCluster" in doc["metadata"]["absent"]
    assert doc["metadata"]["server"] == cluster.server
    assert "wandb-secret-123" not in out.read_text() and "managedFields" not in out.read_text()


def test_simulate_on_a_snapshot_says_what_the_real_scheduler_said(cluster: LocalCluster, tmp_path: Path) -> None:
    out = tmp_path / "snap.json"
    assert kgpu("snapshot", "--kubeconfig", str(cluster.admin), "-o", str(out)).returncode == 0
    res = kgpu("simulate", "--cluster", str(out), "-o", "json")
    assert res.returncode == 1, res.stderr
    ours = {p["name"]: p for p in json.loads(res.stdout)["pods"]}
    assert set(ours) == {"needs-16", "forgot-toleration"}  # bound pods are the cluster, not the queue
    for name in ours:
        real = unscheduled_message(cluster.get(f"/api/v1/namespaces/ml/pods/{name}"))
        # kgpu says what the event says, PostFilter's words (DynamicResources, DefaultPreemption) included.
        assert real == ours[name]["reason"], (name, ours[name]["reason"], real)


def test_rbac_render_grants_what_snapshot_needs(cluster: LocalCluster, tmp_path: Path) -> None:
    res = kgpu("snapshot", "--kubeconfig", str(cluster.viewer))
    assert res.returncode == 2
    assert "403 Forbidden: cannot list nodes" in res.stderr and "kgpu render --target rbac" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    profile = tmp_path / "kgpu.yaml"
    assert kgpu("init", "--file", str(profile)).returncode == 0
    rendered = kgpu("render", "-f", str(profile), "--target", "rbac")
    assert rendered.returncode == 0, rendered.stderr
    docs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    for d in docs:
        if d["kind"] in ("Namespace", "ServiceAccount", "ClusterRole"):
            cluster.create(d)
    # Bind the rendered read-only role to the viewer's certificate user, as an admin would for a person.
    cluster.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": {"name": "kgpu-doctor-viewer"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kgpu-doctor"},
                    "subjects": [{"kind": "User", "name": "kgpu-viewer", "apiGroup": "rbac.authorization.k8s.io"}]})
    res = cluster.wait_for("the binding to take effect", lambda: (
        r if (r := kgpu("snapshot", "--kubeconfig", str(cluster.viewer))).returncode == 0 else None), timeout=30)
    assert json.loads(res.stdout)["metadata"]["counts"]["Node"] == 3


def test_run_passes_on_a_gpu_node_and_cleans_up(cluster: LocalCluster) -> None:
    res = kgpu("run", "--kubeconfig", str(cluster.admin), "-n", "ml", "--test", "nvidia-smi", "--timeout", "90")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Running" in res.stdout and "Succeeded (exit code 0" in res.stdout and "1/1 passed" in res.stdout
    cluster.wait_for("the test pod to be deleted", lambda: not [
        p for p in cluster.get("/api/v1/namespaces/ml/pods")["items"] if p["metadata"]["name"].startswith("kgpu-")])


def test_run_fails_on_exit_code(cluster: LocalCluster) -> None:
    res = kgpu("run", "--kubeconfig", str(cluster.admin), "-n", "ml", "--image", "busybox:1.36", "--timeout", "90",
               "-o", "json", "--", "false")
    assert res.returncode == 1, res.stdout + res.stderr
    data = json.loads(res.stdout)
    assert data["failed"] == 1 and data["pods"][0]["exit_code"] == 1 and data["pods"][0]["phase"] == "Failed"


def test_run_that_cannot_schedule_says_why_and_times_out(cluster: LocalCluster) -> None:
    res = kgpu("run", "--kubeconfig", str(cluster.admin), "-n", "ml", "--gpus", "8", "--timeout", "8")
    assert res.returncode == 1
    assert "Unschedulable: 0/3 nodes are available:" in res.stdout and "Insufficient nvidia.com/gpu" in res.stdout
    assert "timed out after 8s" in res.stdout


def _findings(res: subprocess.CompletedProcess[str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for f in json.loads(res.stdout)["findings"]:
        out.setdefault(f["check"], set()).add(f["object"])
    return out


def test_doctor_finds_what_was_broken_on_purpose(cluster: LocalCluster) -> None:
    res = kgpu("doctor", "--kubeconfig", str(cluster.admin), "-o", "json")
    assert res.returncode == 1, res.stderr
    found = _findings(res)
    assert "device-plugin-missing" in found
    assert "Pod/ml/needs-16" in found.get("gpu-request-too-large", set()) | found.get("pending-gpu-pod", set())
    assert "Pod/ml/forgot-toleration" in found["pending-gpu-pod"]
    assert found["gpu-exporter-missing"]  # no GPU exporter anywhere
    # A device plugin that is old and tolerates none of the GPU nodes' taints.
    cluster.create({"apiVersion": "apps/v1", "kind": "DaemonSet",
                    "metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "kube-system"},
                    "spec": {"selector": {"matchLabels": {"name": "nvidia-device-plugin-ds"}},
                             "template": {"metadata": {"labels": {"name": "nvidia-device-plugin-ds"}},
                                          "spec": {"containers": [{"name": "nvidia-device-plugin-ctr",
                                                                   "image": "nvcr.io/nvidia/k8s-device-plugin:v0.9.0"}]}}}})
    found = _findings(kgpu("doctor", "--kubeconfig", str(cluster.admin), "-o", "json"))
    assert "device-plugin-missing" not in found
    assert "device-plugin-untolerated-taint" in found and "device-plugin-outdated" in found, sorted(found)
