"""AMD GPUs (``amd.com/gpu``, AMD's device plugin, on g4ad nodes) in the one GPU inventory: the inventory and
``is_gpu`` count them, the cost split charges the pod that holds one, and doctor names an AMD node as such
instead of guessing (its checks are NVIDIA's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


def test_doctor_names_an_amd_node_and_raises_no_nvidia_error() -> None:
    proc = kgpu("doctor", "--snapshot", str(FIXTURE), "-o", "json")
    assert proc.returncode == 0, proc.stderr  # no error-level finding
    findings = json.loads(proc.stdout)["findings"]
    assert [f["check"] for f in findings] == ["gpu-node-unrecognised"]
    assert findings[0]["object"] == f"Node/{NODE}"
    assert findings[0]["message"].startswith(f"AMD GPU node ({AMD_GPU}: 1 allocatable, Radeon_Pro_V520)")
    assert "nvidia" not in findings[0]["fix"].lower()


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
