"""Documented JSON (docs/json.md): the real `-o json` output of plan, plan --compare, catalog, node-check and
tke match, validated against the JSON Schemas packaged in kgpu/cli/schemas/ (jsonschema, draft 2020-12,
formats checked). The inputs cover each verb's shapes: new nodes and consolidation, unpriced nodes, skipped
and failing templates, both catalog providers, a failing host, a match error and a list of matches."""

from __future__ import annotations

import copy
import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from fakes.fake_nvml import FakeGpu, FakeNvml
from kgpu.cli.main import cli
from kgpu.exporter import nodecheck
from kgpu.exporter.nvml import Nvml
from test_sharing import gpu_pod, karpenter_pool, profile_dict, time_slicing

ROOT = Path(__file__).resolve().parent.parent
WORK = str(ROOT / "tests" / "fixtures" / "plan" / "vector-add-and-web.yaml")
HOSTS = ROOT / "tests" / "fixtures" / "nodecheck"
SCHEMAS = ("plan", "plan-compare", "catalog", "node-check", "tke-match", "profile-validate", "queue", "doctor", "run")


def schema(name: str) -> dict[str, Any]:
    text = resources.files("kgpu.cli").joinpath("schemas", f"{name}.schema.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def validate(name: str, instance: Any) -> None:
    jsonschema.Draft202012Validator(
        schema(name), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    ).validate(instance)


def kgpu_json(*args: str, codes: tuple[int, ...] = (0, 1)) -> Any:
    res = CliRunner().invoke(cli, list(args))
    assert res.exit_code in codes, res.output
    return json.loads(res.stdout)


@pytest.mark.parametrize("name", SCHEMAS)
def test_schemas_are_valid_and_documented(name: str):
    jsonschema.Draft202012Validator.check_schema(schema(name))
    assert f"`{name}.schema.json`" in (ROOT / "docs" / "json.md").read_text()


def test_plan(tmp_path: Path):
    for args in (("plan",), ("plan", "-w", WORK)):
        data = kgpu_json(*args, "-o", "json")
        validate("plan", data)
        assert data["new_nodes"] and data["cost"]["prices"]["as_of"]
    prof = tmp_path / "kgpu.yaml"
    assert CliRunner().invoke(cli, ["init", "-t", "onprem", "-f", str(prof)]).exit_code == 0
    data = kgpu_json("plan", "-f", str(prof), "-w", WORK, "-o", "json")
    validate("plan", data)
    assert data["cost"]["unpriced_baseline_nodes"] == 2 and data["summary"]["unschedulable"] > 0


def test_plan_shared_gpus(tmp_path: Path):
    """Time-sliced, renamed and MIG pools: the cost split validates; a wrong shape does not."""
    prof = profile_dict(
        karpenter_pool("infer", ["g5.xlarge"], time_slicing(4)),
        karpenter_pool("notebooks", ["g5.xlarge"], time_slicing(10, renameByDefault=True)),
        karpenter_pool("mig", ["p4d.24xlarge"], {"mig": {"strategy": "mixed", "config": "all-balanced"}}),
    )
    pods = [gpu_pod("chat-0"), gpu_pod("nb-0", "nvidia.com/gpu.shared"), gpu_pod("embed-0", "nvidia.com/mig-1g.5gb")]
    (tmp_path / "kgpu.yaml").write_text(yaml.safe_dump(prof))
    (tmp_path / "pods.yaml").write_text(yaml.safe_dump_all(pods))
    data = kgpu_json("plan", "-f", str(tmp_path / "kgpu.yaml"), "-w", str(tmp_path / "pods.yaml"), "-o", "json")
    validate("plan", data)
    assert {e["config"] for e in data["shared_gpus"]} == {"infer", "notebooks", "mig"}
    entry = data["shared_gpus"][0]
    for broken in (
        {k: v for k, v in entry.items() if k != "pods"},  # a price without the split
        {**entry, "devices": {"cpu": {"used": 1, "advertised": 2}}},
        {**entry, "idle": -0.5},
        {**entry, "node_price": 1.0},
    ):
        bad = copy.deepcopy(data)
        bad["shared_gpus"][0] = broken
        with pytest.raises(jsonschema.ValidationError):
            validate("plan", bad)


def test_plan_compare(monkeypatch):
    data = kgpu_json("plan", "-w", WORK, "--compare", "-o", "json")
    validate("plan-compare", data)
    assert {r["status"] for r in data["compare"]} == {"ok", "cannot-run"}
    from kgpu.sim import plan as planner

    real = planner.compare

    def with_a_broken_template(work: Any, names: tuple[str, ...]) -> list[dict[str, Any]]:
        if names == ("kuberay",):
            return [{"template": "kuberay", "skipped": "kuberay: pools[0]: broken"}]
        return real(work, names)

    monkeypatch.setattr(planner, "compare", with_a_broken_template)
    data = kgpu_json("plan", "--compare", "-o", "json")
    validate("plan-compare", data)
    assert data["compare"][-1] == {"template": "kuberay", "skipped": "kuberay: pools[0]: broken",
                                   "status": "skipped", "comparable_cost": None}
    bad = dict(data["compare"][0], status="cheap")
    with pytest.raises(jsonschema.ValidationError):
        validate("plan-compare", {"compare": [bad]})


@pytest.mark.parametrize(
    "args",
    [
        ("catalog",),
        ("catalog", "--region", "eu-west-1", "--gpu", "A10G"),
        ("catalog", "--region", "us-west-2", "--min-gpus", "8"),
        ("catalog", "--provider", "tke"),
        ("catalog", "--provider", "tke", "--gpu", "T4"),
    ],
)
def test_catalog(args: tuple[str, ...]):
    rows = kgpu_json(*args, "-o", "json")
    assert rows
    validate("catalog", rows)


def test_catalog_schema_rejects_a_row_without_its_price_date():
    rows = kgpu_json("catalog", "--gpu", "T4", "-o", "json")
    del rows[0]["prices_as_of"]
    with pytest.raises(jsonschema.ValidationError):
        validate("catalog", rows)


@pytest.mark.parametrize("host", ["good-containerd", "good-docker", "broken-runc-default", "broken-docker"])
@pytest.mark.parametrize("with_gpu", [True, False])
def test_node_check(monkeypatch, host: str, with_gpu: bool):
    """With the fake NVML (an H100) and without one (NVML cannot start, as on this machine)."""
    if with_gpu:
        monkeypatch.setattr(nodecheck, "Nvml", lambda: Nvml(FakeNvml([FakeGpu()])))  # type: ignore[arg-type]
    data = kgpu_json("node-check", "--root", str(HOSTS / host), "-o", "json")
    validate("node-check", data)
    assert data["ok"] is (with_gpu and host.startswith("good"))


def test_tke_match(tmp_path: Path):
    validate("tke-match", kgpu_json("tke", "match", "--gpu-type", "T4,V100", "--gpus", "1", "--cpu", "6",
                                    "--memory", "32Gi", "-o", "json"))
    validate("tke-match", kgpu_json("tke", "match", "--gpu-type", "V100", "--gpus", "1", "--cpu", "8",
                                    "--memory", "40Gi", "--explicit", "-o", "json"))
    failed = kgpu_json("tke", "match", "--gpu-type", "T4", "--gpus", "9", "--cpu", "6", "--memory", "32Gi", "-o", "json")
    validate("tke-match", failed)
    assert failed["error"]["code"] == "no_matching_spec"
    pods = tmp_path / "pods.yaml"
    pods.write_text(
        "\n---\n".join(
            f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations: {{eks.tke.cloud.tencent.com/gpu-type: {gpu}}}
spec:
  containers:
  - name: main
    image: nvidia/cuda:11.4.3-base-ubuntu20.04
    resources: {{limits: {{nvidia.com/gpu: {n}}}, requests: {{cpu: "4", memory: 16Gi}}}}"""
            for name, gpu, n in (("one", "T4", 1), ("too-many", "T4", 9))
        )
    )
    many = kgpu_json("tke", "match", "-f", str(pods), "-o", "json")
    validate("tke-match", many)
    assert [("error" in r, r["object"]) for r in many] == [(False, "Pod default/one"), (True, "Pod default/too-many")]
    with pytest.raises(jsonschema.ValidationError):
        validate("tke-match", {"gpu_type": "T4", "error": {"code": "x", "message": "y"}})


def test_profile_validate(tmp_path: Path):
    good = tmp_path / "kgpu.yaml"
    assert CliRunner().invoke(cli, ["init", "-t", "eks-eksctl", "-f", str(good)]).exit_code == 0
    data = kgpu_json("profile", "validate", "-f", str(good), "-o", "json", codes=(0,))
    validate("profile-validate", data)
    assert data["valid"] and data["profile"] and data["gpu_pools"] >= 1
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace("kind: nodegroup", "kind: bogus", 1))
    res = CliRunner().invoke(cli, ["profile", "validate", "-f", str(bad), "-o", "json"])
    assert res.exit_code == 2 and res.stderr.startswith(f"error: {bad}: pools[")
    data = json.loads(res.stdout)
    validate("profile-validate", data)
    assert not data["valid"] and any("'bogus' is not one of" in e for e in data["errors"])


@pytest.mark.parametrize("snapshot", ["device-plugin-untolerated.json", "cuda-driver.json"])
def test_doctor(snapshot: str):
    """Every finding, group and summary field of doctor's JSON, on two snapshots; a check kgpu does not have,
    a group without objects and a summary without its counts are refused."""
    from kgpu.doctor import CHECK_IDS

    path = str(ROOT / "tests" / "fixtures" / "snapshots" / snapshot)
    data = kgpu_json("doctor", "--snapshot", path, "-o", "json")
    validate("doctor", data)
    assert data["findings"] and data["groups"]
    assert set(schema("doctor")["$defs"]["check"]["enum"]) == {c for v in CHECK_IDS.values() for c in v}
    selected = kgpu_json("doctor", "--snapshot", path, "-o", "json", "--severity", "error")
    validate("doctor", selected)
    for broken in (
        {**data, "findings": [{**data["findings"][0], "check": "gpu-node-sad"}]},
        {**data, "groups": [{**data["groups"][0], "objects": []}]},
        {**data, "summary": {k: v for k, v in data["summary"].items() if k != "pods"}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            validate("doctor", broken)
