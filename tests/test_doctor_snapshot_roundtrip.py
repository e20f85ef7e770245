"""`kgpu snapshot` of a served cluster, then `kgpu doctor --snapshot` of that file: the findings are the same
as for the fixture the cluster was served from (the snapshot contract between writer and reader)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from fake_apiserver import CORE, FakeApiServer
from kgpu.cli.main import cli
from test_doctor_fixtures import EXPECTED

SNAPSHOTS = Path(__file__).parent / "fixtures" / "snapshots"


@pytest.mark.parametrize(
    "name", ["healthy", "device-plugin-untolerated", "pending-nodepool-limits", "cuda-driver"]
)
def test_snapshot_then_doctor_gives_the_fixtures_findings(tmp_path, name):
    items = copy.deepcopy(json.loads((SNAPSHOTS / f"{name}.json").read_text())["items"])
    server = FakeApiServer(items, served=(*CORE, "nodepools", "nodeclaims"))
    with server.running():
        kc = tmp_path / "kc"
        kc.write_text(yaml.safe_dump(server.kubeconfig()))
        env = {"KUBECONFIG": "", "HOME": "/nonexistent"}
        snap = tmp_path / "snap.json"
        res = CliRunner().invoke(cli, ["snapshot", "--kubeconfig", str(kc), "-o", str(snap)], env=env)
        assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["doctor", "--snapshot", str(snap), "-o", "json"])
    assert res.exit_code == (1 if any(s == "error" for _, s, _ in EXPECTED[name]) else 0), res.output
    got = {(f["check"], f["severity"], f["object"]) for f in json.loads(res.stdout)["findings"]}
    assert got == EXPECTED[name]
