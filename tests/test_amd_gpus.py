"""AMD GPUs (``amd.com/gpu``, AMD's device plugin, on g4ad nodes) in the one GPU inventory: the inventory and
``is_gpu`` count them, the cost split charges the pod that holds one, and doctor checks an AMD node with AMD's
device plugin in mind (readiness, what it advertises against its instance type), never NVIDIA's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from kgpu.model.gpus import AMD_GPU, WHOLE, is_gpu, node_gpus

FIXTURE = Path(__file__).parent / "fixtures" / "amd" / "g4ad-cluster.json"
NODE = "ip-10-0-1-5.us-west-2.compute.internal"


def kgpu(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kgpu.cli.main", *args], capture_output=True, text=True, timeout=120
    )


def test_is_gpu_is_the_one_list() -> None:
    for name in ("nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb", AMD_GPU):
        assert is_gpu(name), name
    for name in ("cpu", "memory", "aws.amazon.com/neuron", "amd.com/gpu-foo"):
        assert not is_gpu(name), name


def test_inventory_counts_amd_gpus_as_whole_devices() -> None:
    labels = {"amd.com/gpu.product-name": "Radeon_Pro_V520", "amd.com/gpu.family": "NV"}
    inv = node_gpus(labels, {"cpu": 4000, AMD_GPU: 1}, {AMD_GPU: 1})
    assert [(r.name, r.kind, r.allocatable) for r in inv.resources] == [(AMD_GPU, WHOLE, 1)]
    assert inv.units == 1 and inv.whole_equivalent() == 1 and inv.registered
    assert inv.product == "Radeon_Pro_V520"
    assert inv.resources[0].label == AMD_GPU


def test_the_pod_holding_the_amd_gpu_pays_for_the_node() -> None:
    proc = kgpu("simulate", "-c", str(FIXTURE), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    rows = {w["name"]: w for w in json.loads(proc.stdout)["workload_cost"]["workloads"]}
    assert rows["infer-0"]["gpus"] == 1.0
    assert rows["infer-0"]["hourly"] > 0
    assert rows["amdgpu-device-plugin-daemonset"]["hourly"] == 0.0


def test_doctor_on_a_healthy_amd_node_says_nothing_and_nothing_of_nvidia() -> None:
    """The node advertises its instance type's one GPU and AMD's device plugin runs there: no finding (no
    NVIDIA check looks at it)."""
    proc = kgpu("doctor", "--snapshot", str(FIXTURE), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["findings"] == []


def _doctor(tmp_path: Path, change: Any) -> list[dict[str, Any]]:
    data = json.loads(FIXTURE.read_text())
    change(data)
    snapshot = tmp_path / "cluster.json"
    snapshot.write_text(json.dumps(data))
    proc = kgpu("doctor", "--snapshot", str(snapshot), "-o", "json")
    assert proc.returncode in (0, 1), proc.stderr
    return [f for f in json.loads(proc.stdout)["findings"] if f["object"] == f"Node/{NODE}"]


def _node(data: dict[str, Any]) -> dict[str, Any]:
    return next(o for o in data["items"] if o["kind"] == "Node")


def _without_plugin(data: dict[str, Any]) -> None:
    data["items"] = [o for o in data["items"] if not o["metadata"]["name"].startswith("amdgpu-device-plugin")]
    for key in ("capacity", "allocatable"):
        del _node(data)["status"][key][AMD_GPU]


def test_an_amd_node_without_the_device_plugin_is_told_to_install_amds(tmp_path: Path) -> None:
    found = _doctor(tmp_path, _without_plugin)
    assert [(f["check"], f["severity"]) for f in found] == [("gpu-node-no-gpus", "error")]
    assert found[0]["message"].startswith(f"AMD GPU node has no {AMD_GPU} in its allocatable and no AMD device plugin pod")
    assert "instance type g4ad.xlarge has 1 AMD GPU(s)" in found[0]["message"]
    assert "k8s-ds-amdgpu-dp.yaml" in found[0]["fix"] and "nvidia" not in found[0]["fix"].lower()


def test_an_amd_gpu_the_plugin_finds_unhealthy_is_said(tmp_path: Path) -> None:
    def unhealthy(data: dict[str, Any]) -> None:
        _node(data)["status"]["allocatable"][AMD_GPU] = "0"

    found = _doctor(tmp_path, unhealthy)
    assert [(f["check"], f["severity"]) for f in found] == [("gpu-node-no-gpus", "error")]
    assert "1 amd.com/gpu of capacity but 0 allocatable" in found[0]["message"]
    assert found[0]["fix"].startswith("kubectl -n kube-system logs amdgpu-device-plugin-daemonset-x7k2p")


def test_an_amd_node_not_ready_is_a_warning(tmp_path: Path) -> None:
    def not_ready(data: dict[str, Any]) -> None:
        for c in _node(data)["status"]["conditions"]:
            if c["type"] == "Ready":
                c["status"] = "False"

    found = _doctor(tmp_path, not_ready)
    assert [(f["check"], f["severity"]) for f in found] == [("gpu-node-not-ready", "warning")]


def test_a_pending_pod_asking_an_amd_gpu_is_explained(tmp_path: Path) -> None:
    data = json.loads(FIXTURE.read_text())
    running = next(o for o in data["items"] if o["kind"] == "Pod" and o["metadata"]["name"] == "infer-0")
    pending = json.loads(json.dumps(running))
    pending["metadata"]["name"] = "infer-1"
    del pending["spec"]["nodeName"]
    pending["status"] = {"phase": "Pending"}
    data["items"].append(pending)
    snapshot = tmp_path / "cluster.json"
    snapshot.write_text(json.dumps(data))
    proc = kgpu("doctor", "--snapshot", str(snapshot), "-o", "json")
    assert proc.returncode == 1, proc.stderr  # the pending pod is an error-level finding
    found = [f for f in json.loads(proc.stdout)["findings"] if f["check"] == "pending-gpu-pod"]
    assert [f["object"] for f in found] == ["Pod/default/infer-1"]
    assert found[0]["message"].startswith("0/1 nodes are available: 1 Insufficient amd.com/gpu.")
