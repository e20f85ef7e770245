"""`kgpu doctor` as a user runs it: exit codes, the JSON contract, the table, and bad input in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kgpu.cli.doctor_cmd import run_doctor
from kgpu.cli.main import cli

SNAPSHOTS = Path(__file__).parent / "fixtures" / "snapshots"


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_healthy_exits_0_json_contract():
    res = invoke("doctor", "--snapshot", str(SNAPSHOTS / "healthy.json"), "-o", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert set(data) == {"findings", "groups", "summary"}
    assert data["findings"] == [] and data["groups"] == []
    assert data["summary"]["errors"] == 0 and data["summary"]["gpu_nodes"] == 2


def test_error_finding_exits_1_with_finding_shape():
    res = invoke("doctor", "--snapshot", str(SNAPSHOTS / "pending-untolerated-taint.json"), "-o", "json")
    assert res.exit_code == 1
    data = json.loads(res.output)
    for f in data["findings"]:
        assert set(f) == {"check", "severity", "object", "message", "fix"}
        assert f["severity"] in ("error", "warning", "info")
    pending = [f for f in data["findings"] if f["check"] == "pending-gpu-pod"]
    assert pending[0]["object"] == "Pod/ml/train-c-p8q7r"
    assert data["summary"]["errors"] == 1 and data["summary"]["checks"]["pending-gpu-pod"] == 1


def test_warnings_only_exit_0():
    res = invoke("doctor", "--snapshot", str(SNAPSHOTS / "gpu-node-waste.json"), "-o", "json")
    assert res.exit_code == 0
    assert json.loads(res.output)["summary"]["warnings"] == 3


def test_table_groups_errors_first_then_warnings():
    res = invoke("doctor", "--snapshot", str(SNAPSHOTS / "device-plugin-untolerated.json"))
    assert res.exit_code == 1
    out = res.output
    assert out.index("Errors (3, in ") < out.index("Warnings (1, in 1 group)")
    assert "[device-plugin-untolerated-taint] Node/ip-192-168-20-11.us-west-2.compute.internal" in out
    assert "      - key: ray.io/node-type" in out  # the fix, indented under the finding
    assert out.rstrip().splitlines()[-1].startswith("3 errors, 1 warnings, 0 info")


def test_v1_list_is_accepted():
    res = invoke("doctor", "--snapshot", str(SNAPSHOTS / "onprem-list.json"), "-o", "json")
    assert res.exit_code == 0
    assert json.loads(res.output)["summary"]["gpu_nodes"] == 1


def test_profile_pools_explain_pending_pod(tmp_path):
    """--profile: the profile's Karpenter pool would launch a node for the pending pod."""
    res = invoke("doctor", "--snapshot", str(SNAPSHOTS / "pending-insufficient.json"), "-o", "json")
    without = next(f for f in json.loads(res.output)["findings"] if f["check"] == "pending-gpu-pod")
    assert "nothing will add a node" in without["message"]
    init = invoke("init", "--template", "eks-karpenter", "-f", str(tmp_path / "kgpu.yaml"))
    assert init.exit_code == 0, init.output
    res = invoke(
        "doctor",
        "--snapshot",
        str(SNAPSHOTS / "pending-insufficient.json"),
        "--profile",
        str(tmp_path / "kgpu.yaml"),
        "-o",
        "json",
    )
    assert res.exit_code == 1
    with_profile = next(f for f in json.loads(res.output)["findings"] if f["check"] == "pending-gpu-pod")
    assert "The --profile pools" in with_profile["message"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"{not json", "error: {path}: invalid JSON: "),
        (b"[1, 2]", "error: {path}: expected a ClusterSnapshot or a v1 List (a JSON object), got list"),
        (
            b'{"kind": "Pod", "metadata": {"name": "x"}}',
            "error: {path}: items: kind Pod is not a ClusterSnapshot or a List: no items",
        ),
        (
            b'{"kind": "List", "items": [{"metadata": {}}]}',
            "error: {path}: items[0].kind: required field missing",
        ),
        (
            b'{"kind": "List", "items": [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},'
            b' "status": {"allocatable": {"cpu": "4 cores"}}}]}',
            "error: {path}: Node n1: status.allocatable.cpu: invalid quantity '4 cores'",
        ),
    ],
)
def test_bad_input_one_line_exit_2(tmp_path, content, expected):
    path = tmp_path / "snap.json"
    path.write_bytes(content)
    res = CliRunner().invoke(cli, ["doctor", "--snapshot", str(path)])
    assert res.exit_code == 2
    lines = [line for line in res.output.splitlines() if line]
    assert len(lines) == 1
    assert lines[0].startswith(expected.format(path=path)), lines[0]


def test_missing_file_exit_2(tmp_path):
    res = CliRunner().invoke(cli, ["doctor", "--snapshot", str(tmp_path / "nope.json")])
    assert res.exit_code == 2
    assert res.output.strip() == f"error: {tmp_path / 'nope.json'}: no such file or directory"


def test_run_doctor_is_the_shared_entry_point(capsys):
    """The live path calls run_doctor with a fetched document: same report, exit code returned."""
    doc = json.loads((SNAPSHOTS / "device-plugin-missing.json").read_text())
    assert run_doctor(doc, "cluster my-context", "json", None) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["findings"][0]["check"] == "device-plugin-missing"
    with pytest.raises(SystemExit) as exc:
        run_doctor({"kind": "List"}, "cluster my-context", "json", None)
    assert exc.value.code == 2
    assert (
        capsys.readouterr().err.strip()
        == "error: cluster my-context: items: kind List is not a ClusterSnapshot or a List: no items"
    )


def test_installed_entry_point_no_traceback(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"kind": "List", "items": [7]}')
    proc = subprocess.run(
        [sys.executable, "-m", "kgpu.cli.main", "doctor", "--snapshot", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {path}: items[0]: expected an object, got int"
    assert "Traceback" not in proc.stderr


def test_profile_node_groups_explain_pending_pod_in_cluster_autoscaler_words(tmp_path):
    """--profile with eksctl node groups: cluster-autoscaler's own reason, and where to look when it could scale."""
    init = invoke("init", "--template", "eks-eksctl", "-f", str(tmp_path / "kgpu.yaml"))
    assert init.exit_code == 0, init.output
    res = invoke(
        "doctor",
        "--snapshot",
        str(SNAPSHOTS / "pending-selector.json"),
        "-f",
        str(tmp_path / "kgpu.yaml"),
        "-o",
        "json",
    )
    assert res.exit_code == 1
    [f] = [f for f in json.loads(res.output)["findings"] if f["check"] == "pending-gpu-pod"]
    assert "The --profile pools: cluster-autoscaler: pod didn't trigger scale-up" in f["message"]
    res = invoke(
        "doctor",
        "--snapshot",
        str(SNAPSHOTS / "pending-insufficient.json"),
        "-f",
        str(tmp_path / "kgpu.yaml"),
        "-o",
        "json",
    )
    [f] = [f for f in json.loads(res.output)["findings"] if f["check"] == "pending-gpu-pod"]
    assert 'pool "gpu-spot-ng" can launch a p3.2xlarge spot node' in f["message"]
    assert "logs deploy/cluster-autoscaler" in f["fix"] and "node-template" in f["fix"]
