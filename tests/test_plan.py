"""kgpu plan: the library and the CLI (table, json, exit codes, --compare)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from kgpu.cli.main import cli
from kgpu.model.examples import example_workloads
from kgpu.model.profile import builtin_profile
from kgpu.sim.plan import compare, plan, profile_warnings


def test_default_profile_places_every_example_workload() -> None:
    """The built-in profile carries both GPU labels the seeds' workloads select (node-type=gpu from the
    Karpenter guide, nvidia.com/gpu=true from the eksctl guide), so every example lands on a new node.
    (Planned without workloads it places its own guide's examples: tests/test_template_examples.py.)"""
    result = plan(builtin_profile(), example_workloads())
    data = result.as_dict()
    phases = {p["name"]: p["phase"] for p in data["pods"]}
    assert set(phases.values()) == {"Provisioned"}, phases
    assert {"pytorch-training-0", "cuda-vector-add-9", "gpu-pod", "raycluster-gpu-head-0"} <= set(phases)
    gpu_pods = [p for p in data["pods"] if p["name"] != "raycluster-gpu-head-0"]
    assert all(p["pool"] == "gpu" for p in gpu_pods)
    assert data["cost"]["total"] > 0 and data["cost"]["all_on_demand"] >= data["cost"]["total"]
    assert not any("cannot run anywhere" in w for w in data.get("warnings", []))


def test_a_workload_no_pool_can_take_is_warned_with_the_reason(tmp_path: Path) -> None:
    doc = Path("examples/workloads/000-pytorch-training.yaml").read_text()
    work = tmp_path / "job.yaml"
    work.write_text(doc.replace("node-type: gpu", "node-type: tpu"))
    res = CliRunner().invoke(cli, ["plan", "-w", str(work)])
    assert res.exit_code == 1, res.output
    assert "Warnings" in res.output and "cannot run anywhere" in res.output
    assert 'label "node-type" does not have known values' in res.output


def test_gpu_pool_without_taint_is_warned() -> None:
    warnings = profile_warnings(builtin_profile("onprem"))
    assert any("GPU pool without a taint" in w for w in warnings)


def test_compare_covers_every_template() -> None:
    rows = compare()
    assert [r["template"] for r in rows] == [
        "eks-karpenter",
        "eks-eksctl",
        "onprem",
        "tke-supernode",
        "kuberay",
        "kueue-two-teams",
    ]
    eksctl = next(r for r in rows if r["template"] == "eks-eksctl")
    assert eksctl["new_nodes"] >= 10 and eksctl["hourly_cost"] > 0


def test_cli_default_plan_table_exits_zero() -> None:
    res = CliRunner().invoke(cli, ["plan"])
    assert res.exit_code == 0, res.output
    for section in ("Placements", "Nodes by pool", "Cost"):
        assert section in res.output
    assert "g4dn" in res.output or "g5" in res.output


def test_cli_json_and_exit_zero(tmp_path: Path) -> None:
    work = tmp_path / "job.yaml"
    work.write_text(Path("examples/workloads/000-pytorch-training.yaml").read_text())
    res = CliRunner().invoke(cli, ["plan", "-w", str(work), "-o", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["pods"][0]["phase"] == "Provisioned"
    assert data["new_nodes"][0]["pool"] == "gpu"
    assert data["summary"]["hourly_cost"] == data["cost"]["total"]


def test_cli_bad_profile_exits_two_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "kgpu.yaml"
    bad.write_text(
        "metadata: {name: x}\nprovider: eks\nautoscaler: karpenter\n"
        "pools: [{name: gpu, kind: karpenter, requirements: {gpuNames: [a10]}}]\n"
    )
    res = CliRunner().invoke(cli, ["plan", "-f", str(bad)])
    assert res.exit_code == 2
    assert "pools[0].requirements.gpuNames[0]" in res.output and "a10g" in res.output


def test_cli_compare_exits_0_when_some_template_runs_every_pod() -> None:
    """The examples need GPUs the on-prem and TKE templates lack, but eks-karpenter runs them all: the
    comparison has an answer, exit 0 (1 only when no template runs every pod)."""
    res = CliRunner().invoke(cli, ["plan", "--compare"])
    assert res.exit_code == 0, res.output
    assert "eks-eksctl" in res.output and "tke-supernode" in res.output


def test_cli_compare_exits_0_when_every_template_runs_everything(monkeypatch) -> None:
    from kgpu.sim import plan as planner

    rows = [{"template": "eks-karpenter", "scheduled": 1, "unschedulable": 0, "new_nodes": 1, "hourly_cost": 0.1,
             "baseline_cost": 0.0, "all_on_demand": 0.2, "unpriced_nodes": 0}]
    monkeypatch.setattr(planner, "compare", lambda work, names: [r for r in rows if r["template"] in names])
    res = CliRunner().invoke(cli, ["plan", "--compare", "-o", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)["compare"]
    assert [{k: r[k] for k in rows[0]} for r in out] == rows
    assert out[0]["status"] == "ok" and out[0]["comparable_cost"] == 0.1 == out[0]["total_cost"]
    assert out[0]["total_cost_monthly"] == 73.0


def test_cli_compare_statuses_and_order(monkeypatch) -> None:
    """A template that cannot run every pod, or has nodes without a price, is not comparable: it sorts after
    those that are, whatever its (smaller) figure, and has no comparable_cost."""
    from kgpu.sim import plan as planner

    def row(name: str, cost: float, unschedulable: int = 0, unpriced: int = 0) -> dict:
        return {"template": name, "scheduled": 3, "unschedulable": unschedulable, "new_nodes": 1,
                "hourly_cost": cost, "baseline_cost": 0.0, "all_on_demand": cost, "unpriced_nodes": unpriced}

    rows = [row("eks-eksctl", 0.0, unschedulable=2), row("onprem", 0.0, unpriced=1), row("kuberay", 3.0),
            row("eks-karpenter", 1.0), {"template": "tke-supernode", "skipped": "x: broken"}]
    monkeypatch.setattr(planner, "compare", lambda work, names: [r for r in rows if r["template"] in names])
    out = json.loads(CliRunner().invoke(cli, ["plan", "--compare", "-o", "json"]).output)["compare"]
    assert [(r["template"], r["status"]) for r in out] == [
        ("eks-karpenter", "ok"), ("kuberay", "ok"), ("onprem", "unpriced"), ("eks-eksctl", "cannot-run"),
        ("tke-supernode", "skipped"),
    ]
    assert [r["comparable_cost"] for r in out] == [1.0, 3.0, None, None, None]
    table = CliRunner().invoke(cli, ["plan", "--compare", "--color", "never"]).stdout
    assert "onprem         no bar: 3 node(s) without a price" in table  # and the built-in onprem's own two
    assert "eks-eksctl     no bar: cannot run 2 pod(s)" in table
