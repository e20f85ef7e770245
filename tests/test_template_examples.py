"""`kgpu init -t T` then `kgpu plan`: each template plans its own guide's example workloads, and all run.

The pod names below are the guide's own (seed 000's Job and Deployment, seed 001's 10-replica
cuda-vector-add, seed 002's gpu-pod, seed 003's examples, seed 004's RayCluster); a template that planned
another guide's workloads, or left one of its own pending, fails here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kgpu.cli.main import cli
from kgpu.model.examples import SEEDS, seed_of
from kgpu.model.profile import TEMPLATES, builtin_profile

GUIDE_PODS = {
    # seed 000: "PyTorch 训练任务" (Job pytorch-training) and "TensorFlow Serving" (Deployment, replicas: 2)
    "eks-karpenter": {"pytorch-training-0", "tensorflow-serving-0", "tensorflow-serving-1"},
    # seed 001: Deployment cuda-vector-add, replicas: 10, nodeSelector nvidia.com/gpu: "true"
    "eks-eksctl": {f"cuda-vector-add-{i}" for i in range(10)},
    # seed 002: the verification pod `kubectl logs gpu-pod`
    "onprem": {"gpu-pod"},
    # seed 003: examples 1, 2 (x3), 2b (x2), 4, 5 (x2), 7, 8, the image-cache pods, the inference service (x3)
    "tke-supernode": {
        "tensorflow-training-v100",
        *(f"inference-service-t4-mini-{i}" for i in range(3)),
        *(f"inference-service-t4-half-{i}" for i in range(2)),
        "multi-gpu-priority",
        *(f"gpu-workload-affinity-{i}" for i in range(2)),
        "multi-gpu-training-a10-0",
        "flexible-v100-pod",
        "gpu-inference-fast",
        "gpu-training-multi",
        "gpu-inference-cached",
        *(f"gpu-inference-service-{i}" for i in range(3)),
    },
    # seed 004: a RayCluster with a CPU head and one GPU worker
    "kuberay": {"raycluster-gpu-head-0", "raycluster-gpu-gpu-group-worker-0"},
    # Karpenter pools as in eks-karpenter: seed 000's examples
    "kueue-two-teams": {"pytorch-training-0", "tensorflow-serving-0", "tensorflow-serving-1"},
}


def _init_then_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, template: str) -> dict[str, Any]:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    made = runner.invoke(cli, ["init", "--template", template])
    assert made.exit_code == 0, made.output
    assert (tmp_path / "kgpu.yaml").is_file()
    res = runner.invoke(cli, ["plan", "-o", "json"])
    assert res.exit_code == 0, res.output
    data: dict[str, Any] = json.loads(res.stdout)
    return data


@pytest.mark.parametrize("template", TEMPLATES)
def test_init_then_plan_places_the_templates_own_guide_examples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, template: str
) -> None:
    """Every pod of the template's own guide runs (scheduled on the baseline or provisioned), and no pod
    of another guide is planned."""
    data = _init_then_plan(tmp_path, monkeypatch, template)
    phases = {p["name"]: p["phase"] for p in data["pods"]}
    assert set(phases) == GUIDE_PODS[template]
    assert set(phases.values()) <= {"Scheduled", "Provisioned"}, phases
    assert data["summary"]["unschedulable"] == 0


def test_eksctl_template_runs_the_guides_vector_add_on_gpu_spot_nodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seed 001: "3 new GPU-powered nodes, across 3 AZs": the 10 replicas land on the spot GPU groups in
    every zone, each pod on a node labelled nvidia.com/gpu=true by its node group."""
    data = _init_then_plan(tmp_path, monkeypatch, "eks-eksctl")
    pods = data["pods"]
    assert {p["pool"] for p in pods} == {"gpu-spot-ng"}
    assert {p["capacity_type"] for p in pods} == {"spot"}
    assert {p["zone"] for p in pods} == {"us-west-2a", "us-west-2b", "us-west-2c"}


def test_kuberay_template_puts_head_on_cpu_group_and_worker_on_gpu_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seed 004: the Ray head on the CPU node group, the GPU worker on the GPU node group (desired 1 each)."""
    data = _init_then_plan(tmp_path, monkeypatch, "kuberay")
    nodes = {p["name"]: p["node"] for p in data["pods"]}
    assert nodes["raycluster-gpu-head-0"].startswith("cpu-node-group")
    assert nodes["raycluster-gpu-gpu-group-worker-0"].startswith("gpu-node-group")


def test_a_renamed_profile_keeps_its_guides_examples() -> None:
    """The guide is read from the profile's shape, not its name: a renamed TKE profile still plans seed 003."""
    for template, seed in SEEDS.items():
        prof = builtin_profile(template)
        renamed = prof.model_copy(update={"metadata": prof.metadata.model_copy(update={"name": "my-cluster"})})
        assert renamed.metadata.name == "my-cluster"
        assert seed_of(renamed) == seed


def test_workloads_given_on_the_command_line_replace_the_examples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """-w wins over the template's examples: the on-prem template planning seed 001's Deployment says why
    its pods cannot run there (no node carries nvidia.com/gpu=true), exit 1."""
    from kgpu.model.examples import example_files

    work = tmp_path / "vector-add-dpl.yaml"
    work.write_bytes(dict(example_files(seed="001"))["001-cuda-vector-add.yaml"])
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(cli, ["init", "-t", "onprem"]).exit_code == 0
    res = runner.invoke(cli, ["plan", "-w", str(work), "-o", "json"])
    assert res.exit_code == 1, res.output
    pods = json.loads(res.stdout)["pods"]
    assert {p["name"] for p in pods} == {f"cuda-vector-add-{i}" for i in range(10)}
    assert "didn't match Pod's node affinity/selector" in pods[0]["reason"]
