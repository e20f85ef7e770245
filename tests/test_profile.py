"""``kgpu profile schema|validate`` and ``kgpu render`` on bad input: field paths, exit codes, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from kgpu.cli.main import cli
from kgpu.model.profile import template_text

BAD = """\
apiVersion: kgpu.dev/v1alpha1
kind: ClusterProfile
metadata: {name: bad}
provider: eks
autoscaler: karpenter
pools:
  - name: gpu
    kind: karpenter
    taints: [{key: nvidia.com/gpu, effect: NoSchedul}]
    volumeSize: 100
"""


def test_schema_is_json_schema_of_the_profile() -> None:
    result = CliRunner().invoke(cli, ["profile", "schema"])
    assert result.exit_code == 0
    schema = json.loads(result.output)
    assert schema["title"] == "kgpu cluster profile"
    assert {"pools", "provider", "autoscaler", "kuberay"} <= set(schema["properties"])


def test_validate_prints_every_error_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "kgpu.yaml"
    path.write_text(BAD)
    result = CliRunner().invoke(cli, ["profile", "validate", "-f", str(path)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert (
        f"error: {path}: pools[0].taints[0].effect: 'NoSchedul' is not one of NoSchedule, PreferNoSchedule, NoExecute"
        in lines
    )
    assert f"error: {path}: pools[0].volumeSize: unknown field" in lines


def test_validate_ok(tmp_path: Path) -> None:
    path = tmp_path / "kgpu.yaml"
    path.write_text(template_text("eks-eksctl"))
    result = CliRunner().invoke(cli, ["profile", "validate", "-f", str(path)])
    assert result.exit_code == 0
    assert "profile eks-eksctl, 2 pools (1 GPU)" in result.output


def test_validate_missing_file_is_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["profile", "validate", "-f", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert "no such file" in result.output


def test_render_bad_profile_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "kgpu.yaml"
    path.write_text(BAD)
    out = tmp_path / "manifests"
    result = CliRunner().invoke(cli, ["render", "-f", str(path), "--output-dir", str(out)])
    assert result.exit_code == 2
    assert "pools[0].taints[0].effect" in result.output
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kgpu.yaml"]  # no temp dir left behind


def test_render_inconsistent_profile_exits_1_listing_every_problem(tmp_path: Path) -> None:
    text = template_text("eks-eksctl").replace(
        "    volumeSizeGiB: 100\n    amiFamily: AL2023             #",
        "    asgTags: {k8s.io/cluster-autoscaler/node-template/label/nvidia.com/gpu: 'false'}\n"
        "    volumeSizeGiB: 100\n    amiFamily: AL2023             #",
    )
    assert "asgTags" in text
    path = tmp_path / "kgpu.yaml"
    path.write_text(text)
    out = tmp_path / "manifests"
    out.mkdir()
    result = CliRunner().invoke(cli, ["render", "-f", str(path), "--output-dir", str(out)])
    assert result.exit_code == 1
    for zone in "abc":
        assert f"error: node group gpu-spot-ng-{zone}: tags: missing" in result.output
    assert list(out.iterdir()) == []


def test_render_writes_every_target_file_validated(tmp_path: Path) -> None:
    out = tmp_path / "manifests"
    result = CliRunner().invoke(cli, ["render", "--template", "onprem", "--output-dir", str(out), "--validate"])
    assert result.exit_code == 0, result.output
    names = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert {"device-plugin.yaml", "workloads.yaml", "onprem.yaml", "rbac.yaml"} <= names
    assert "onprem-files/etc/containerd/conf.d/99-nvidia.toml" in names


def test_render_to_stdout_and_target_subset(tmp_path: Path) -> None:
    path = tmp_path / "kgpu.yaml"
    path.write_text(template_text("eks-karpenter"))
    result = CliRunner().invoke(cli, ["render", "-f", str(path), "--target", "karpenter"])
    assert result.exit_code == 0
    assert "kind: NodePool" in result.output
    assert "kind: DaemonSet" not in result.output
    result = CliRunner().invoke(cli, ["render", "-f", str(path), "--target", "eksctl"])
    assert result.exit_code == 2
    assert "does not apply" in result.output


def test_a_misspelt_required_field_is_named_with_the_field_it_stands_for(tmp_path: Path) -> None:
    """`nmae` for `name`: the error names the typo and the field, not only 'name: required field missing'."""
    path = tmp_path / "kgpu.yaml"
    path.write_text(BAD.replace("  - name: gpu", "  - nmae: gpu").replace("volumeSize: 100\n", "").replace(
        "NoSchedul", "NoSchedule"))
    result = CliRunner().invoke(cli, ["profile", "validate", "-f", str(path)])
    assert result.exit_code == 2
    assert "pools[0].nmae: unknown field; did you mean name?" in result.output
