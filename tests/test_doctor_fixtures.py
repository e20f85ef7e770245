"""Every snapshot fixture gives exactly the findings of its failure mode; the healthy cluster gives none."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from kgpu.doctor import CHECK_IDS, doctor_report

HERE = Path(__file__).parent / "fixtures" / "snapshots"
A = "Node/ip-192-168-20-11.us-west-2.compute.internal"
B = "Node/ip-192-168-21-12.us-west-2.compute.internal"
C = "Node/ip-192-168-22-13.us-west-2.compute.internal"
PLUGIN = "DaemonSet/kube-system/nvidia-device-plugin-daemonset"

# fixture -> the exact (check, severity, object) set doctor must report
EXPECTED: dict[str, set[tuple[str, str, str]]] = {
    "healthy": set(),
    # a missing thing is reported on an object that exists: the first GPU node without it
    "device-plugin-missing": {
        ("device-plugin-missing", "error", A),
        ("gpu-node-no-gpus", "error", A),
        ("gpu-node-no-gpus", "error", B),
    },
    "device-plugin-untolerated": {
        ("device-plugin-untolerated-taint", "error", A),
        ("gpu-node-no-gpus", "error", A),
        ("pending-gpu-pod", "error", "Pod/default/raycluster-gpu-worker-gpu-group-5kx2d"),
        ("gpu-exporter-missing", "warning", A),
    },
    "device-plugin-not-ready": {
        ("device-plugin-not-ready", "error", PLUGIN),
        ("device-plugin-not-ready", "error", "Pod/kube-system/nvidia-device-plugin-daemonset-8b243"),
        ("gpu-node-no-gpus", "error", B),
    },
    "device-plugin-duplicate": {("device-plugin-duplicate", "error", A)},
    "device-plugin-outdated": {("device-plugin-outdated", "warning", PLUGIN)},
    "gpu-node-no-gpus": {
        ("gpu-node-no-gpus", "error", A),
        ("gpu-node-missing-gpus", "warning", B),
    },
    "gpu-node-waste": {
        ("gpu-node-untainted", "warning", A),
        ("gpu-node-no-gpu-pods", "warning", A),
        ("gpu-node-idle", "warning", B),
    },
    "pending-untolerated-taint": {
        ("pending-gpu-pod", "error", "Pod/ml/train-c-p8q7r"),
        ("gpu-node-idle", "warning", A),
    },
    "pending-selector": {
        ("pending-gpu-pod", "error", "Pod/ml/train-d-z5t6u"),
        ("gpu-node-idle", "warning", A),
    },
    "pending-nodepool-limits": {("pending-gpu-pod", "error", "Pod/ml/train-e-q1w2e")},
    "pending-insufficient": {("pending-gpu-pod", "error", "Pod/ml/train-f-r4t5y")},
    "workload-gpu-resources": {
        ("gpu-fractional", "error", "RayCluster/default/raycluster-gpu"),
        ("gpu-request-limit-mismatch", "error", "DaemonSet/ops/gpu-burn-check"),
        ("gpu-request-rejected", "error", "ReplicaSet/ml/infer-6f9c8d7b5"),
    },
    "tke-annotations": {
        ("tke-annotation-no-spec", "error", "Pod/default/infer-t4-7d8f9"),
        ("tke-annotation-no-spec", "error", "Pod/default/train-v100-3k4j5"),
        ("pending-gpu-pod", "error", "Pod/default/infer-t4-7d8f9"),
        ("pending-gpu-pod", "error", "Pod/default/train-v100-3k4j5"),
    },
    "gpu-request-too-large": {
        ("gpu-request-too-large", "error", "Pod/ml/train-big-a1s2d"),
        ("pending-gpu-pod", "error", "Pod/ml/train-big-a1s2d"),
        ("gpu-node-idle", "warning", A),
        ("gpu-node-idle", "warning", B),
    },
    "cuda-driver": {
        ("cuda-driver-insufficient", "error", "Pod/ml/train-torch-k9j8h"),
        ("cuda-driver-insufficient", "error", "Pod/ml/cuda-base-m7n6b"),
        ("cuda-driver-insufficient", "warning", "Pod/ml/tf-serve-v5c4x"),
        ("cuda-driver-insufficient", "warning", "Pod/ml/ngc-z3x2c"),
    },
    "monitoring": {
        ("gpu-exporter-missing", "warning", C),
        ("gpu-exporter-not-ready", "warning", "Pod/kgpu-system/kgpu-exporter-d2503"),
    },
    "visible-devices": {
        ("cuda-visible-devices-conflict", "error", "Pod/ml/train-one-r5t4y"),
        ("cuda-visible-devices-conflict", "warning", "Pod/ml/train-four-q8w7e"),
        ("cuda-visible-devices-conflict", "info", "Pod/ml/redacted-d3f4g"),
        ("nvidia-visible-devices-in-spec", "warning", "Pod/ml/sidecar-all-p1a2s"),
    },
    "tke-running": {
        ("tke-cuda-driver", "error", "Pod/default/inference-t4-mini-6f9c8-m2n3b"),
        ("tke-cuda-driver", "warning", "Pod/default/multi-gpu-training-a10-7xk2p"),
    },
    "onprem-list": {
        ("device-plugin-outdated", "warning", PLUGIN),
        ("gpu-exporter-missing", "warning", "Node/k8s-node05"),
        ("gpu-node-untainted", "warning", "Node/k8s-node05"),
    },
}


def load(name: str) -> dict:
    return json.loads((HERE / f"{name}.json").read_text(encoding="utf-8"))


def _generator():
    spec = importlib.util.spec_from_file_location("snapshot_fixture_generator", HERE / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_fixture_file_is_listed_and_up_to_date():
    """The JSON files are what generate.py writes (no hand edits drift from the builders)."""
    gen = _generator()
    files = {p.stem for p in HERE.glob("*.json")}
    assert files == set(gen.FIXTURES) == set(EXPECTED)
    for name in gen.FIXTURES:
        assert (HERE / f"{name}.json").read_text(encoding="utf-8") == gen.render(name), name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_findings_exactly(name):
    report = doctor_report(load(name), source=f"{name}.json")
    got = {(f.check, f.severity, f.object) for f in report.findings}
    assert got == EXPECTED[name]
    for f in report.findings:
        assert f.message and f.fix, f


def test_healthy_cluster_has_no_finding_of_any_check():
    report = doctor_report(load("healthy"))
    assert report.findings == []
    s = report.summary()
    assert (s["errors"], s["warnings"], s["info"]) == (0, 0, 0)
    assert (s["nodes"], s["gpu_nodes"], s["pending_gpu_pods"]) == (3, 2, 0)


def test_every_check_id_fires_on_some_fixture():
    """Each documented check id has a fixture that makes it fire (or is covered in test_doctor_checks)."""
    fired = {check for expected in EXPECTED.values() for check, _, _ in expected}
    unit_tested = {
        "device-plugin-node-selector",
        "gpu-node-not-ready",
        "gpu-request-without-limit",
        "cuda-driver-unknown",
        # shared GPUs: tests/test_sharing_doctor.py
        "sharing-config-missing",
        "mig-config-state",
        "mig-strategy-labels",
        "shared-request-gt-one",
        "nodepool-overlay",
        "shared-memory-isolation",
        # GPU architecture vs the image's CUDA, GPU hosts not labelled yet: tests/test_guide_002_onprem.py
        "cuda-arch-unsupported",
        "gpu-node-unrecognised",
        # TKE image cache: tests/test_guide_003_image_cache.py
        "tke-image-cache-not-ready",
        "tke-image-cache-not-used",
        "tke-image-cache-missing",
        "tke-image-cache-unknown",
        # DRA: tests/test_dra_doctor.py
        "dra-claim-pending",
        "dra-unknown-class",
        "dra-driver-missing",
        "dra-double-advertised",
        "dra-karpenter",
        # Kueue: tests/test_doctor_kueue.py
        "kueue-unreadable",
        "kueue-clusterqueue-inactive",
        "kueue-localqueue-no-clusterqueue",
        "kueue-queue-name-unknown",
        "kueue-flavor-no-nodes",
        "kueue-quota-beyond-capacity",
        "kueue-pending-on-quota",
        "kueue-pending-on-nodes",
        "kueue-preemption-loop",
    }
    all_ids = {c for ids in CHECK_IDS.values() for c in ids}
    assert all_ids - fired == unit_tested


def test_errors_sort_first():
    report = doctor_report(load("device-plugin-untolerated"))
    sev = [f.severity for f in report.findings]
    assert sev == sorted(sev, key=["error", "warning", "info"].index)
