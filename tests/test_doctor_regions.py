"""doctor on a cluster in a real region that kgpu's price catalog lacks: prices are missing, not the cluster."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent / "fixtures" / "snapshots" / "pending-nodepool-limits.json"


@pytest.mark.parametrize("region", ["eu-central-1", "ap-guangzhou"])
def test_unpriced_region_is_a_note_not_an_input_error(region: str, tmp_path: Path) -> None:
    snapshot = tmp_path / "s.json"
    snapshot.write_text(FIXTURE.read_text().replace("us-west-2", region))
    proc = subprocess.run(
        [sys.executable, "-m", "kgpu.cli.main", "doctor", "--snapshot", str(snapshot), "-o", "json"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    text = json.dumps(report)
    assert f"region '{region}'" in text and "not in kgpu's price catalog" in text
    # the pending pod is still explained against the nodes the cluster has
    assert any(f.get("check", "").startswith("pending") for f in report["findings"]), report["findings"]
