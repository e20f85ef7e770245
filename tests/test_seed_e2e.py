"""Each guide end to end, as a user follows it: ``kgpu init`` -> the guide's settings -> ``kgpu render
--validate`` -> ``kgpu plan`` on the guide's own workloads -> the outcome the guide expects."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from kgpu.cli.main import cli
from kgpu.model.examples import example_files


def kgpu(*args: str, expect: int = 0) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == expect, f"kgpu {' '.join(args)} -> {result.exit_code}\n{result.output}"
    return result.output


def follow_guide(
    tmp_path: Path, template: str, settings: Callable[[dict[str, Any]], None] | None = None
) -> tuple[Path, Path]:
    """init, apply the guide's settings to the profile, render --validate into manifests/."""
    profile = tmp_path / "kgpu.yaml"
    kgpu("init", "--template", template, "-f", str(profile))
    if settings is not None:
        data = yaml.safe_load(profile.read_text())
        settings(data)
        profile.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "manifests"
    kgpu("render", "-f", str(profile), "--validate", "-d", str(out))
    return profile, out


def plan(profile: Path, *workloads: Path, expect: int = 0) -> dict[str, Any]:
    args = ["plan", "-f", str(profile), "-o", "json"]
    for w in workloads:
        args += ["-w", str(w)]
    data: dict[str, Any] = json.loads(kgpu(*args, expect=expect))
    return data


def pods(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in result["pods"]}


def write_example(tmp_path: Path, name: str, provider: str | None = None) -> Path:
    path = tmp_path / name.replace("/", "_")
    path.write_bytes(dict(example_files(provider))[name])
    return path


# --- seed 003: TKE super nodes ---------------------------------------------------------------------------


def test_seed_003_every_example_gets_the_spec_the_guide_lists(tmp_path: Path) -> None:
    """The guide's examples run on super nodes with or without the guide's own toleration (TKE places pods
    that fit nowhere else itself), each with the spec the guide writes next to it. The two examples that
    contradict the guide's spec tables stay Pending with TKE's wording (docs/tke.md)."""
    profile, out = follow_guide(tmp_path, "tke-supernode")
    rendered = yaml.safe_load_all((out / "workloads.yaml").read_text())
    tolerations = [
        t for d in rendered if d and d["kind"] == "Job" for t in d["spec"]["template"]["spec"]["tolerations"]
    ]
    assert {
        "key": "eks.tke.cloud.tencent.com/eklet",
        "operator": "Exists",
        "effect": "NoSchedule",
    } in tolerations
    workloads = write_example(tmp_path, "003-supernode-gpu-pods.yaml", "tke")
    planned = plan(profile, workloads, expect=1)
    result = pods(planned)
    notes = {n["pods"][0]: n["note"] for n in planned["new_nodes"]}
    assert (
        "no cpu and memory request: the smallest cpu and memory" in notes["default/gpu-workload-affinity-0"]
    )
    assert "request" not in notes["default/multi-gpu-priority"]
    specs = {name: p.get("instance_type") for name, p in result.items() if p["phase"] == "Provisioned"}
    assert specs == {
        "tensorflow-training-v100": "V100 1x 8C 40Gi",  # 最终分配: V100 1卡, 8核/40GiB
        **{f"inference-service-t4-mini-{i}": "1/4*T4 1x 4C 16Gi" for i in range(3)},  # 1/4 T4, 4核/16GiB
        **{f"inference-service-t4-half-{i}": "1/2*T4 1x 8C 32Gi" for i in range(2)},  # 1/2 T4, 8核/32GiB
        "multi-gpu-priority": "T4 1x 8C 32Gi",  # 优先尝试 T4
        **{f"gpu-workload-affinity-{i}": "A10*GNV4 1x 2C 2Gi" for i in range(2)},
        "multi-gpu-training-a10-0": "A10*PNV4 4x 112C 466Gi",  # A10 PNV4 4卡, 112核/466GiB
        "flexible-v100-pod": "V100 1x 2C 2Gi",  # V100 1卡, 2核/2GiB
        "gpu-inference-fast": "T4 1x 2C 2Gi",
        "gpu-training-multi": "V100 1x 2C 2Gi",
        "gpu-inference-cached": "T4 1x 2C 2Gi",
        **{f"gpu-inference-service-{i}": "T4 1x 8C 32Gi" for i in range(3)},
    }
    pending = {name: p["reason"] for name, p in result.items() if p["phase"] != "Provisioned"}
    assert set(pending) == {"pytorch-training-job-0", "large-model-inference-pnv5b"}
    assert "No matching instance type: T4 has no 2-GPU spec" in pending["pytorch-training-job-0"]
    assert "did you mean 'L20'" in pending["large-model-inference-pnv5b"]


def test_seed_003_without_auto_scheduling_only_tolerating_pods_run(tmp_path: Path) -> None:
    """With TKE's AUTO_SCALE_EKS off (autoSchedule: false), the super-node taint keeps out every pod that
    does not tolerate eks.tke.cloud.tencent.com/eklet: the guide's examples then all need a toleration."""

    def no_auto(data: dict[str, Any]) -> None:
        data["pools"][0]["autoSchedule"] = False

    profile, _ = follow_guide(tmp_path, "tke-supernode", no_auto)
    workloads = write_example(tmp_path, "003-supernode-gpu-pods.yaml", "tke")
    result = pods(plan(profile, workloads, expect=1))
    assert result["tensorflow-training-v100"]["phase"] == "Unschedulable"
    assert "untolerated taint" in result["tensorflow-training-v100"]["reason"]
    assert result["gpu-inference-fast"]["phase"] == "Unschedulable"  # tolerates serverless, not eklet
