"""plan and simulate print Karpenter's consolidated steady state as a second, labelled view beside the
nodes Karpenter launches, with the figures of their JSON's ``karpenter_consolidated``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def _kgpu(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kgpu.cli.main", *args], capture_output=True, text=True, timeout=120
    )


def test_plan_prints_the_consolidated_view_it_puts_in_json() -> None:
    data = json.loads(_kgpu("plan", "-o", "json").stdout)
    view = data["karpenter_consolidated"]
    assert view["saving"] > 0 and view["hourly_cost"] < view["launch_hourly_cost"]
    assert round(view["launch_hourly_cost"] - view["hourly_cost"], 4) == round(view["saving"], 4)
    text = _kgpu("plan").stdout
    assert "After consolidation" in text
    assert f"steady state     ${view['hourly_cost']:,.4f}/h" in text
    assert f"saves            ${view['saving']:,.4f}/h" in text
    assert f"against the launch's ${view['launch_hourly_cost']:,.4f}/h" in text
    # the second view comes after the launch's cost, never instead of it
    assert text.index("new nodes        $") < text.index("After consolidation")


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
    assert "After consolidation" not in proc.stdout
