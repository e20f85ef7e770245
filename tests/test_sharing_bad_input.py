"""Bad sharing input through ``kgpu plan``: a one-line error naming the file and field (exit 2), or a warning
that names the resource to ask for (the pod stays pending, exit 1); never a whole-GPU answer in silence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kgpu.cli.main import cli
from test_sharing import gpu_pod, karpenter_pool, profile_dict, time_slicing

H100_MIG = {"mig": {"strategy": "mixed", "config": "all-1g.10gb"}}


def run(tmp_path: Path, pool: dict[str, Any], *pods: dict[str, Any]) -> Any:
    prof = pool if pool.get("kind") == "ClusterProfile" else profile_dict(pool)
    (tmp_path / "kgpu.yaml").write_text(yaml.safe_dump(prof))
    (tmp_path / "pods.yaml").write_text(yaml.safe_dump_all(list(pods) or [gpu_pod("ok")]))
    return CliRunner().invoke(cli, ["plan", "-f", str(tmp_path / "kgpu.yaml"), "-w", str(tmp_path / "pods.yaml"),
                                    "--color", "never"])


def one_line_error(res: Any) -> str:
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.output, res.output
    return str(lines[0])


@pytest.mark.parametrize("replicas", [1, 0, -3])
def test_replicas_below_two(tmp_path: Path, replicas: int) -> None:
    line = one_line_error(run(tmp_path, karpenter_pool("infer", ["g5.xlarge"], time_slicing(replicas))))
    assert "kgpu.yaml: pools[0].sharing.timeSlicing.resources[0].replicas" in line
    assert "number of replicas must be >= 2" in line


def test_mig_profile_the_gpu_does_not_have(tmp_path: Path) -> None:
    """all-1g.5gb is the A100-40GB's; p5.48xlarge has H100s: the error names profile, GPU, its profiles and type."""
    pool = karpenter_pool("mig", ["p5.48xlarge"], {"mig": {"strategy": "mixed", "config": "all-1g.5gb"}})
    line = one_line_error(run(tmp_path, pool))
    assert "pools[0].sharing.mig.config" in line
    assert "1g.5gb" in line and "H100" in line and "1g.10gb" in line and "p5.48xlarge" in line


def test_mig_config_name_typo(tmp_path: Path) -> None:
    pool = karpenter_pool("mig", ["p5.48xlarge"], {"mig": {"strategy": "mixed", "config": "all-1g.10gbb"}})
    line = one_line_error(run(tmp_path, pool))
    assert "pools[0].sharing.mig.config" in line and "did you mean all-1g.10gb" in line


def test_mixed_strategy_replicated_resource_typo(tmp_path: Path) -> None:
    """Time-slicing a MIG resource under ``mixed`` with the profile misspelt."""
    sharing = {**H100_MIG, "timeSlicing": {"resources": [{"name": "nvidia.com/mig-1g.10gbb", "replicas": 2}]}}
    line = one_line_error(run(tmp_path, karpenter_pool("mig", ["p5.48xlarge"], sharing)))
    assert "pools[0].sharing.timeSlicing.resources[0].name" in line and "nvidia.com/mig-1g.10gbb" in line


def test_mixed_strategy_replicated_profile_of_another_gpu(tmp_path: Path) -> None:
    """A well-formed MIG resource the pool's config does not make on its GPU: named with what it makes."""
    sharing = {**H100_MIG, "timeSlicing": {"resources": [{"name": "nvidia.com/mig-1g.5gb", "replicas": 2}]}}
    line = one_line_error(run(tmp_path, karpenter_pool("mig", ["p5.48xlarge"], sharing)))
    assert "pools[0].sharing.timeSlicing.resources[0].name" in line
    assert "nvidia.com/mig-1g.5gb" in line and "nvidia.com/mig-1g.10gb" in line and "H100" in line


def test_static_mig_node_without_its_gpu_model(tmp_path: Path) -> None:
    """Without gpuName the MIG layout is unknown: an error, not a node that silently has no GPUs."""
    prof = {
        "apiVersion": "kgpu.dev/v1alpha1", "kind": "ClusterProfile", "metadata": {"name": "onprem"},
        "provider": "generic", "autoscaler": "none", "monitoring": {"enabled": False},
        "pools": [{"name": "lab", "kind": "static",
                   "nodes": [{"name": "dgx-1", "cpu": "64", "memory": "512Gi", "gpus": 2}],
                   "sharing": {"mig": {"strategy": "single", "config": "all-1g.10gb"}}}],
    }
    line = one_line_error(run(tmp_path, prof))
    assert "pools[0].nodes[0].gpuName" in line and "dgx-1" in line and "all-1g.10gb" in line


def warnings(res: Any) -> list[str]:
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert "Unschedulable" in res.output
    return [ln for ln in res.output.splitlines() if ln.startswith("- ")]


def test_pod_asking_a_misspelt_mig_profile(tmp_path: Path) -> None:
    lines = warnings(run(tmp_path, karpenter_pool("mig", ["p5.48xlarge"], H100_MIG),
                         gpu_pod("embed", "nvidia.com/mig-1g.10gbb")))
    assert any("default/embed asks nvidia.com/mig-1g.10gbb" in ln and "did you mean nvidia.com/mig-1g.10gb?" in ln
               for ln in lines), lines


def test_pod_asking_the_old_name_of_a_renamed_resource(tmp_path: Path) -> None:
    lines = warnings(run(tmp_path, karpenter_pool("infer", ["g5.xlarge"], time_slicing(4, renameByDefault=True)),
                         gpu_pod("chat")))
    assert any("default/chat asks nvidia.com/gpu" in ln and "nvidia.com/gpu.shared" in ln for ln in lines), lines


def test_pod_asking_a_mig_resource_of_a_single_strategy_pool(tmp_path: Path) -> None:
    pool = karpenter_pool("mig", ["p5.48xlarge"], {"mig": {"strategy": "single", "config": "all-1g.10gb"}})
    lines = warnings(run(tmp_path, pool, gpu_pod("embed", "nvidia.com/mig-1g.10gb")))
    assert any("default/embed asks nvidia.com/mig-1g.10gb" in ln and "single MIG strategy" in ln
               and "ask for nvidia.com/gpu" in ln for ln in lines), lines


def test_pod_asking_whole_gpus_of_a_mixed_strategy_pool(tmp_path: Path) -> None:
    pool = karpenter_pool("mig", ["p5.48xlarge"], {"mig": {"strategy": "mixed", "config": "all-balanced"}})
    lines = warnings(run(tmp_path, pool, gpu_pod("train")))
    assert any("default/train asks nvidia.com/gpu" in ln and "mixed MIG strategy" in ln
               and "nvidia.com/mig-3g.40gb" in ln for ln in lines), lines


def test_more_than_one_shared_gpu_on_mps_is_a_warning_not_a_silent_placement(tmp_path: Path) -> None:
    res = run(tmp_path, karpenter_pool("infer", ["g5.12xlarge"], {"mps": time_slicing(4)["timeSlicing"]}),
              gpu_pod("two", count=2))
    assert res.exit_code == 0 and "shared-gpu-admission" in res.output
    assert "UnexpectedAdmissionError" in res.output and "failRequestsGreaterThanOne" in res.output
