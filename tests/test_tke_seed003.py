"""Seed 003's remaining rules: explicit annotations against the pod's own requests, the manual image-cache
id, and a vGPU spec's CUDA version against the image's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kgpu.cli.main import cli
from kgpu.errors import InputError
from kgpu.model.profile import parse_profile, template_text
from kgpu.render.stack import render_stack

CONTRADICTING = """
apiVersion: v1
kind: Pod
metadata:
  name: two-gpus-one-annotated
  annotations:
    eks.tke.cloud.tencent.com/gpu-type: V100
    eks.tke.cloud.tencent.com/gpu-count: '1'
    eks.tke.cloud.tencent.com/cpu: '8'
    eks.tke.cloud.tencent.com/mem: '40Gi'
spec:
  containers:
  - name: c
    image: nvidia/cuda:11.4.0-base-ubuntu20.04
    resources: {limits: {nvidia.com/gpu: 2, cpu: "16"}}
"""


def test_tke_match_rejects_explicit_annotations_below_the_requests(tmp_path: Path) -> None:
    """gpu-count 1 and cpu 8 while the container asks for 2 GPUs and 16 cores: the pod cannot fit its own
    spec; tke match says so (exit 1) in the same words simulate uses."""
    pod = tmp_path / "pod.yaml"
    pod.write_text(CONTRADICTING)
    result = CliRunner().invoke(cli, ["tke", "match", "-f", str(pod), "-o", "json"])
    assert result.exit_code == 1, result.output
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "invalid_annotation"
    assert "contradicts the pod's requests" in error["message"]
    assert "gpu-count '1' < the containers' nvidia.com/gpu 2" in error["message"]
    assert "cpu '8' < the containers' cpu request 16" in error["message"]

    profile = tmp_path / "kgpu.yaml"
    profile.write_text(template_text("tke-supernode"))
    plan = CliRunner().invoke(cli, ["plan", "-f", str(profile), "-w", str(pod), "-o", "json"])
    assert plan.exit_code == 1
    (placed,) = json.loads(plan.stdout)["pods"]
    assert placed["phase"] == "Unschedulable"
    assert error["message"] in placed["reason"]


def test_tke_match_warns_when_the_image_needs_a_newer_cuda(tmp_path: Path) -> None:
    """A 1/4*T4 vGPU runs CUDA 11.0 (driver 450): a CUDA 12 image fails with "CUDA driver version is
    insufficient"; the guide's CUDA 11.4 image on V100 draws no warning."""
    pod = tmp_path / "vgpu.yaml"
    pod.write_text(
        """
apiVersion: v1
kind: Pod
metadata:
  name: vgpu
  annotations: {eks.tke.cloud.tencent.com/gpu-type: '1/4*T4'}
spec:
  containers:
  - {name: c, image: "nvidia/cuda:12.4.1-base-ubuntu22.04", resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: v1
kind: Pod
metadata:
  name: v100
  annotations: {eks.tke.cloud.tencent.com/gpu-type: V100}
spec:
  containers:
  - {name: c, image: "nvidia/cuda:11.4.0-runtime-ubuntu20.04", resources: {limits: {nvidia.com/gpu: 1}}}
"""
    )
    result = CliRunner().invoke(cli, ["tke", "match", "-f", str(pod), "-o", "json"])
    assert result.exit_code == 0, result.output
    vgpu, v100 = json.loads(result.stdout)
    assert vgpu["gpu_type"] == "1/4*T4"
    assert vgpu["warning"].startswith(
        "CUDA driver version is insufficient: nvidia/cuda:12.4.1-base-ubuntu22.04"
    )
    assert "1/4*T4 runs CUDA 11.0" in vgpu["warning"]
    assert "warning" not in v100
    table = CliRunner().invoke(cli, ["tke", "match", "-f", str(pod)])
    assert "Pod default/vgpu: warning: CUDA driver version is insufficient" in table.stdout


def _tke(image_cache: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(template_text("tke-supernode"))
    data["pools"][0]["imageCache"] = image_cache
    return data


def test_manual_image_cache_id() -> None:
    """方式二: the rendered workloads name the console's imc- cache; no ImageCache resource, no disk size."""
    docs = render_stack(parse_profile(_tke("imc-abc123xyz")), ["workloads"])["workloads"]
    assert not [d for d in docs if d["kind"] == "ImageCache"]
    job = next(d for d in docs if d["kind"] == "Job")
    ann = job["spec"]["template"]["metadata"]["annotations"]
    assert ann["eks.tke.cloud.tencent.com/use-image-cache"] == "imc-abc123xyz"
    assert "eks.tke.cloud.tencent.com/pod-resource" not in ann
    none = render_stack(parse_profile(_tke("none")), ["workloads"])["workloads"]
    assert not any("use-image-cache" in json.dumps(d) for d in none)


@pytest.mark.parametrize("bad", ["imc_abc", "cache-1", "IMC-ABC"])
def test_bad_image_cache_value_is_a_profile_error(bad: str) -> None:
    with pytest.raises(InputError, match=r"pools\[0\]\.imageCache"):
        parse_profile(_tke(bad))
