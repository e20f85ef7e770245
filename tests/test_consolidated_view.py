"""plan and simulate print where Karpenter's disruption controller takes the nodes it launched as a second,
labelled view beside the launch, with the figures of their JSON's ``karpenter_consolidated``: the commands
it runs and the steady state, or that it keeps the launch and why. Never a saving Karpenter does not make."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kgpu.cli.nodeview import consolidated
from test_karpenter_disruption import ON_DEMAND, disrupt
from test_provision_karpenter import make_pod


def _kgpu(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kgpu.cli.main", *args], capture_output=True, text=True, timeout=120
    )


def test_plan_on_the_built_in_profile_promises_no_saving_karpenter_does_not_make() -> None:
    """The built-in profile launches spot nodes in a WhenEmpty GPU pool and a general pool: Karpenter replaces
    no spot node without the SpotToSpotConsolidation gate, and WhenEmpty removes empty nodes only, so the
    steady state is the launch, and the text says so with the JSON's reasons."""
    data = json.loads(_kgpu("plan", "-o", "json").stdout)
    view = data["karpenter_consolidated"]
    assert view["steps"] == [] and view["saving"] == 0
    assert view["hourly_cost"] == view["launch_hourly_cost"] == data["cost"]["total"]
    assert "nodepool gpu: consolidationPolicy WhenEmpty removes empty nodes only" in view["kept"]
    text = _kgpu("plan").stdout
    assert "After consolidation" not in text and "saves" not in text.split("Consolidation:", 1)[1]
    lines = text.splitlines()
    at = lines.index("Consolidation: Karpenter keeps the nodes above")
    assert lines[at + 1 : at + 1 + len(view["kept"])] == [f"  {why}" for why in view["kept"]]
    # the second view comes after the launch's cost, never instead of it
    assert text.index("new nodes        $") < text.index("Consolidation:")


def test_the_commands_and_the_steady_state_are_printed_as_the_json_has_them() -> None:
    pods = [make_pod(f"p-{i}", cpu=3000, mem_gib=2) for i in range(3)]
    _, view = disrupt(ON_DEMAND, pods, lambda p: p.name == "p-0")
    lines = consolidated(view)
    assert lines[1].startswith("After consolidation (Karpenter's disruption controller, one command at a time")
    assert "consolidateAfter 30s" in lines[1]
    step = view["steps"][0]
    assert lines[2] == (
        f"  1. single-node consolidation: replace general-1 m5.4xlarge on-demand $0.7680/h with "
        f"{step['replacement']['name']} m5.xlarge on-demand $0.1920/h (saves $0.5760/h)"
    )
    assert lines[3].startswith("  steady state     $0.1920/h") and lines[3].endswith(": m5.xlarge on-demand")
    assert lines[4].startswith("  saves            $0.5760/h") and "against the launch's $0.7680/h" in lines[4]


def test_no_consolidated_view_when_nothing_is_provisioned(tmp_path: Path) -> None:
    cluster = tmp_path / "c.json"
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [{
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    }]}))
    work = tmp_path / "w.yaml"
    work.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        "  - {name: c, image: busybox, resources: {requests: {cpu: 100m}}}\n"
    )
    proc = _kgpu("simulate", "-c", str(cluster), "-w", str(work))
    assert proc.returncode == 0, proc.stderr
    assert "Consolidation" not in proc.stdout and "After consolidation" not in proc.stdout
