"""Seed 001's quick start runs ten t3.micro nodes, a type kgpu's catalog does not carry. A catalog override
file (the columns of `kgpu catalog --file`) makes it known to render, plan and simulate alike, from the
command line (`--catalog FILE`) or the profile (`catalog.file`, `catalog.instanceTypes`); bad rows exit 2
naming the file, row and column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from kgpu.cli.main import cli

# Seed 001, "使用配置文件自定义您的集群" (its line breaks restored: "kind: ClusterConfigmetadata:" in the text).
GUIDE_CLUSTER = """apiVersion: eksctl.io/v1alpha5
kind: ClusterConfig
metadata:
  name: test-cluster
  region: us-west-2
nodeGroups:
  - name: ng
    instanceType: t3.micro
    desiredCapacity: 10
"""
# t3.micro: 2 vCPUs, 1 GiB (EC2 instance types), 4 pods (AWS's eni-max-pods.txt), on-demand in us-west-2's
# zones (zone IDs, as kgpu's catalog lists them).
T3_CSV = """instance_type,region,vcpus,memory_gib,gpu_count,ondemand_usd_per_hour,max_pods,zones
t3.micro,us-west-2,2,1,0,0.0104,4,usw2-az1;usw2-az2;usw2-az3;usw2-az4
"""
WEB = """apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  nodeSelector: {alpha.eksctl.io/nodegroup-name: ng}
  containers:
  - name: nginx
    image: nginx:1.27
    resources: {requests: {cpu: 250m, memory: 128Mi}}
"""


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _profile(tmp_path: Path, **catalog: Any) -> Path:
    """The eks-eksctl template plus the guide's node group: ng, t3.micro, 10 nodes."""
    path = tmp_path / "kgpu.yaml"
    assert _invoke("init", "-t", "eks-eksctl", "-f", str(path), "--force").exit_code == 0
    data = yaml.safe_load(path.read_text())
    guide = yaml.safe_load(GUIDE_CLUSTER)["nodeGroups"][0]
    data["pools"].insert(
        0,
        {
            "name": guide["name"],
            "kind": "nodegroup",
            "instanceTypes": [guide["instanceType"]],
            "capacityTypes": ["on-demand"],
            "minSize": guide["desiredCapacity"],
            "maxSize": guide["desiredCapacity"],
            "desiredSize": guide["desiredCapacity"],
        },
    )
    if catalog:
        data["catalog"] = catalog
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_without_the_catalog_t3_micro_is_an_input_error(tmp_path: Path) -> None:
    """Today's behaviour stays for a type nobody describes: exit 2, the field named."""
    res = _invoke("render", "-f", str(_profile(tmp_path)), "--target", "eksctl")
    assert res.exit_code == 2
    assert "pools[0].instanceTypes[0]: unknown instance type 't3.micro'" in res.output
    assert "add it under the profile's catalog: or with --catalog FILE" in res.output


def test_a_pools_field_at_the_top_says_where_it_belongs(tmp_path: Path) -> None:
    path = _profile(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["iamPolicyARNs"] = ["arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"]
    path.write_text(yaml.safe_dump(data))
    res = _invoke("profile", "validate", "-f", str(path))
    assert res.exit_code == 2
    assert "iamPolicyARNs: unknown field here; it belongs under a pool: pools[].iamPolicyARNs" in res.output


def test_render_plan_and_simulate_read_the_catalog_file(tmp_path: Path) -> None:
    """With --catalog t3.csv: render writes the guide's node group; plan prices its ten nodes at the file's
    $0.0104/h; simulate places a pod on one, its allocatable from the file's vCPUs, memory and max pods."""
    profile = _profile(tmp_path)
    catalog = tmp_path / "t3.csv"
    catalog.write_text(T3_CSV)

    rendered = _invoke("render", "-f", str(profile), "--target", "eksctl", "--catalog", str(catalog))
    assert rendered.exit_code == 0, rendered.output
    [ng] = [g for g in yaml.safe_load(rendered.stdout)["nodeGroups"] if g["name"] == "ng"]
    assert ng["instanceType"] == "t3.micro" and ng["desiredCapacity"] == 10

    plan = _invoke("plan", "-f", str(profile), "--catalog", str(catalog), "-o", "json")
    assert plan.exit_code == 0, plan.output
    baseline = yaml.safe_load(plan.stdout)["cost"]["baseline"]
    template = _invoke("plan", "-f", str(_template(tmp_path)), "-o", "json")
    assert template.exit_code == 0, template.output
    assert baseline - yaml.safe_load(template.stdout)["cost"]["baseline"] == pytest.approx(10 * 0.0104)

    pod = tmp_path / "web.yaml"
    pod.write_text(WEB)
    sim = _invoke("simulate", "--profile", str(profile), "--catalog", str(catalog), "-w", str(pod), "-o", "json")
    assert sim.exit_code == 0, sim.output
    [placed] = yaml.safe_load(sim.stdout)["pods"]
    assert placed["phase"] == "Scheduled" and placed["node"].startswith("ng-")
    table = _invoke("simulate", "--profile", str(profile), "--catalog", str(catalog), "-w", str(pod))
    assert "t3.micro" in table.output and "$0.010" in table.output


def _template(tmp_path: Path) -> Path:
    path = tmp_path / "template.yaml"
    assert _invoke("init", "-t", "eks-eksctl", "-f", str(path), "--force").exit_code == 0
    return path


def test_the_profile_names_the_file_or_carries_the_rows(tmp_path: Path) -> None:
    """catalog.file is relative to the profile; catalog.instanceTypes carries rows inline: either makes
    render work without --catalog."""
    (tmp_path / "catalogs").mkdir()
    (tmp_path / "catalogs" / "t3.csv").write_text(T3_CSV)
    by_file = _invoke("render", "-f", str(_profile(tmp_path, file="catalogs/t3.csv")), "--target", "eksctl")
    assert by_file.exit_code == 0, by_file.output
    row = {"instance_type": "t3.micro", "region": "us-west-2", "vcpus": 2, "memory_gib": 1, "max_pods": 4}
    inline = _invoke("render", "-f", str(_profile(tmp_path, instanceTypes=[row])), "--target", "eksctl")
    assert inline.exit_code == 0, inline.output
    assert "instanceType: t3.micro" in inline.stdout


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("instance_type,region,vcpus,memory_gib\nt3.micro,us-west-2,two,1\n",
         "row 1: vcpus: expected a whole number"),
        ("instance_type,region,vcpus,memory_gib,cores\nt3.micro,us-west-2,2,1,2\n", "row 1"),
        ("instance_type,vcpus,memory_gib\nt3.micro,2,1\n", "row 1 (t3.micro)"),
    ],
    ids=["not-a-number", "unknown-column", "new-type-without-region"],
)
def test_bad_rows_exit_2_naming_the_file_row_and_field(tmp_path: Path, text: str, message: str) -> None:
    catalog = tmp_path / "bad.csv"
    catalog.write_text(text)
    for verb in (["render", "-f"], ["plan", "-f"], ["simulate", "--profile"]):
        res = _invoke(*verb, str(_profile(tmp_path)), "--catalog", str(catalog))
        assert res.exit_code == 2, (verb, res.output)
        [line] = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
        assert line.startswith(f"error: {catalog}: ") and message in line


def test_bad_inline_row_names_the_profile_field(tmp_path: Path) -> None:
    row = {"instance_type": "t3.micro", "region": "us-west-2", "vcpus": -2, "memory_gib": 1}
    res = _invoke("render", "-f", str(_profile(tmp_path, instanceTypes=[row])))
    assert res.exit_code == 2
    assert "kgpu.yaml: catalog.instanceTypes: row 1: vcpus:" in res.output


def test_a_yaml_catalog_goes_through_the_bounded_reader(tmp_path: Path) -> None:
    """YAML catalogs are read within the named limits: an alias bomb is one error line, exit 2."""
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(8)
    )
    catalog = tmp_path / "bomb.yaml"
    catalog.write_text(bomb)
    res = _invoke("plan", "-f", str(_profile(tmp_path)), "--catalog", str(catalog))
    assert res.exit_code == 2
    assert res.output.count("\n") == 1 and str(catalog) in res.output
    assert "alias expansion limit" in res.output
