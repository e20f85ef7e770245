"""``kgpu init``: commented, loadable profiles; never overwrites without --force."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kgpu.cli.main import cli
from kgpu.model.profile import TEMPLATES, load_profile_text, template_text


@pytest.mark.parametrize("template", TEMPLATES)
def test_init_writes_a_commented_loadable_profile(tmp_path: Path, template: str) -> None:
    out = tmp_path / "kgpu.yaml"
    result = CliRunner().invoke(cli, ["init", "--template", template, "-f", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert text == template_text(template)
    assert text.startswith("# kgpu cluster profile")
    assert load_profile_text(text).metadata.name == template


def test_init_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    out = tmp_path / "kgpu.yaml"
    out.write_text("mine\n")
    result = CliRunner().invoke(cli, ["init", "-t", "onprem", "-f", str(out)])
    assert result.exit_code == 2
    assert "--force" in result.output
    assert out.read_text() == "mine\n"
    result = CliRunner().invoke(cli, ["init", "-t", "onprem", "-f", str(out), "--force"])
    assert result.exit_code == 0
    assert out.read_text() == template_text("onprem")


def test_init_unknown_template_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["init", "-t", "eks-karpentr", "-f", str(tmp_path / "x.yaml")])
    assert result.exit_code == 2
    assert not (tmp_path / "x.yaml").exists()


def test_init_to_stdout() -> None:
    result = CliRunner().invoke(cli, ["init", "-t", "tke-supernode", "-o", "yaml"])
    assert result.exit_code == 0
    assert "gpuTypes: [T4, V100]" in result.output


def test_seed_facts_in_templates() -> None:
    """The templates reproduce the seeds' clusters."""
    from kgpu.model.profile import builtin_profile

    eksctl = builtin_profile("eks-eksctl")
    assert (eksctl.cluster.name, eksctl.cluster.region, len(eksctl.cluster.zones)) == (
        "gaia-kube",
        "us-west-2",
        3,
    )
    gpu = eksctl.pool("gpu-spot-ng")
    assert (gpu.min_size, gpu.max_size, gpu.per_zone, [str(c) for c in gpu.capacity_types]) == (
        0,
        10,
        True,
        ["spot"],
    )
    assert (eksctl.pool("spot-ng").min_size, eksctl.pool("spot-ng").max_size) == (2, 20)
    ray = builtin_profile("kuberay")
    assert ray.pool("cpu-node-group").instance_types == ["m5.xlarge"]
    ray_gpu = ray.pool("gpu-node-group")
    assert (ray_gpu.instance_types, ray_gpu.ami_family, ray_gpu.max_size) == (
        ["g5.xlarge"],
        "BottlerocketNvidia",
        1,
    )
    assert [t.model_dump() for t in ray_gpu.taints] == [
        {"key": "ray.io/node-type", "value": "worker", "effect": "NoSchedule"}
    ]
